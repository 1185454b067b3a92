"""Publishing an interruption's summary to SNS and EventBridge (a controller response action).

The message is ``InterruptionSummary.to_dict()`` (schema_version 1, the notifications' record). SNS
gets it with a subject such as ``kubespot: spot-itn on node ip-10-0-1-15 done`` and the message
attributes ``kind``, ``source``, ``node`` and ``outcome`` for subscription filters; EventBridge as
the detail of one event. Each target is tried on its own: one failing does not stop the other, and
no AWS error reaches the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from kubespot.aws import AwsError, PublishError
from kubespot.model import Clock
from kubespot.model.summary import ActionResult, ActionSummary, InterruptionSummary

log = logging.getLogger("kubespot.actions.publish")

SNS = "sns"
EVENTBRIDGE = "eventbridge"


class SnsTarget(Protocol):
    """``kubespot.aws.SnsPublisher`` as this action uses it."""

    async def publish(
        self,
        message: Mapping[str, Any],
        *,
        subject: str,
        kind: str,
        attributes: Mapping[str, str] | None = None,
    ) -> str: ...


class EventTarget(Protocol):
    """``kubespot.aws.EventBridgePublisher`` as this action uses it."""

    async def put(
        self,
        detail: Mapping[str, Any],
        *,
        detail_type: str | None = None,
        resources: Iterable[str] = (),
        time: datetime | None = None,
    ) -> str: ...


@dataclass(frozen=True, slots=True)
class Published:
    """One target's outcome: ``message_id`` when it was accepted, else ``error``."""

    target: str
    summary: ActionSummary
    message_id: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.message_id) and not self.error

    @property
    def recorded(self) -> str:
        """What the record keeps for the target: the message id, or ``error: ...``."""
        return self.message_id if self.ok else f"error: {self.error}"


def subject(summary: InterruptionSummary) -> str:
    """``kubespot: spot-itn on node ip-10-0-1-15 done`` (the SNS publisher cleans it to SNS's rules)."""
    return f"kubespot: {summary.kind.value} on node {summary.node} {summary.outcome.value}"


class SummaryPublisher:
    """Sends summaries to the targets set (either may be None)."""

    def __init__(self, sns: SnsTarget | None, events: EventTarget | None, *, clock: Clock) -> None:
        self._sns = sns
        self._events = events
        self._clock = clock

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(
            name for name, target in ((SNS, self._sns), (EVENTBRIDGE, self._events)) if target is not None
        )

    async def publish(self, summary: InterruptionSummary, *, skip: Collection[str] = ()) -> list[Published]:
        """Publish to every target not in ``skip`` (those already done), one after the other."""
        message = summary.to_dict()
        out: list[Published] = []
        if self._sns is not None and SNS not in skip:
            sns = self._sns
            out.append(
                await self._one(
                    SNS,
                    lambda: sns.publish(
                        message,
                        subject=subject(summary),
                        kind=summary.kind.value,
                        attributes={"node": summary.node, "outcome": summary.outcome.value},
                    ),
                )
            )
        if self._events is not None and EVENTBRIDGE not in skip:
            events = self._events
            out.append(await self._one(EVENTBRIDGE, lambda: events.put(message)))
        return out

    async def _one(self, target: str, send: Callable[[], Awaitable[str]]) -> Published:
        begun = self._clock.now()
        mono = self._clock.monotonic()
        try:
            message_id = str(await send())
        except (AwsError, PublishError) as err:
            log.warning("cannot publish the summary to %s: %s", target, err)
            summary = ActionSummary(
                name=f"publish_{target}",
                result=ActionResult.FAILURE,
                started=begun,
                duration=self._clock.monotonic() - mono,
                detail=str(err),
            )
            return Published(target, summary, error=str(err) or type(err).__name__)
        summary = ActionSummary(
            name=f"publish_{target}",
            result=ActionResult.SUCCESS,
            started=begun,
            duration=self._clock.monotonic() - mono,
            detail=f"message {message_id}",
        )
        return Published(target, summary, message_id=message_id or "accepted")
