"""What kubespot did about one interruption: the record notifications carry (and SNS/EventBridge will).

Pure data, no I/O. ``InterruptionSummary.to_dict()`` is the wire form and a contract with whoever
consumes it (chat receivers, automation, later SNS and EventBridge subscribers):

* field names are stable: a field may be added, but none is renamed, retyped or removed without
  raising ``SCHEMA_VERSION`` (sent as ``schema_version``);
* times are RFC 3339 strings in UTC with a ``Z`` suffix (``2026-11-20T17:04:13Z``), or null;
* durations are seconds as numbers, rounded to the millisecond, or null;
* enumerations are sent by value (``"spot-itn"``, ``"finished"``, ``"success"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from .events import InterruptionEvent, Kind, Source

#: Raised when a field of ``to_dict()`` changes meaning or goes away (adding one does not).
SCHEMA_VERSION = 1


class Stage(StrEnum):
    """Where in the handling of an interruption a message is sent."""

    STARTED = "started"  # the node is fenced (tainted, cordoned); the drain is about to start
    FINISHED = "finished"  # handling ended: drained (or nothing to drain), withdrawn or superseded
    FAILED = "failed"  # handling gave up (deadline passed, unexpected error)


class Outcome(StrEnum):
    """How the handling of an interruption ended, as far as it is known at a stage."""

    IN_PROGRESS = "in_progress"  # the "started" stage: nothing has ended yet
    DONE = "done"  # fenced, and drained if the plan drains
    WITHDRAWN = "withdrawn"  # canceled or completed before or while it was handled
    SUPERSEDED = "superseded"  # a stronger event took the node over
    IGNORED = "ignored"  # its kind is switched off
    FAILED = "failed"  # gave up (the deadline passed) or an unexpected error


class ActionResult(StrEnum):
    """How one action ended (the values of the ``result`` label of ``kubespot_actions_total``)."""

    SUCCESS = "success"
    FAILURE = "failure"
    TIMEOUT = "timeout"  # no answer within its own timeout or the time left before the deadline
    SKIPPED = "skipped"  # not attempted (no time left, not configured for this event)
    DRY_RUN = "dry_run"  # would have run


def rfc3339(value: datetime | None) -> str | None:
    """``value`` as RFC 3339 in UTC (``2026-11-20T17:04:13Z``, ``...13.250Z``); naive times are UTC."""
    if value is None:
        return None
    utc = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    # Milliseconds at most: finer is noise for a timeline measured in seconds.
    return utc.isoformat(timespec="milliseconds" if utc.microsecond else "seconds").replace("+00:00", "Z")


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionSummary:
    """One action of the timeline (drain, an HTTP call, a deregistration...) and how it went.

    ``name`` is the action as the metrics name it (``drain``, ``http:datadog-mute``); ``started`` is
    when it began; ``duration`` its length in seconds; ``detail`` a short human reason (``HTTP 503
    after 2 attempts``) that never holds a secret; ``status`` the last HTTP status, for HTTP actions.
    """

    name: str
    result: ActionResult
    started: datetime | None = None
    duration: float | None = None
    detail: str = ""
    status: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "result": self.result.value,
            "started": rfc3339(self.started),
            "duration": _seconds(self.duration),
            "detail": self.detail,
            "status": self.status,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PodCounts:
    """How the drain dealt with the node's pods, by outcome (each pod counted once)."""

    evicted: int = 0  # evicted through the Eviction API (PodDisruptionBudgets honoured)
    deleted: int = 0  # deleted because no controller would recreate them (bare pods)
    deleted_at_deadline: int = 0  # deleted when the deadline left no time for their eviction
    gone: int = 0  # went away without our eviction (already terminating, deleted by someone else)
    skipped: int = 0  # left alone by the settings (DaemonSet pods, mirror pods, the agent itself)
    still_running: int = 0  # still on the node when the drain ended

    #: The drain's per-pod outcome values (``kubespot.actions.drain.Outcome``) and the field each
    #: counts in; kept here as strings because the model imports no other kubespot code.
    FROM_OUTCOMES = {
        "evicted": "evicted",
        "deleted-bare": "deleted",
        "deleted-at-deadline": "deleted_at_deadline",
        "gone": "gone",
        "skipped": "skipped",
        "refused": "still_running",
        "still-running": "still_running",
    }

    @classmethod
    def from_outcomes(cls, counts: Mapping[str, int]) -> PodCounts:
        """From ``DrainResult.counts()`` (outcome value -> pods); unknown outcomes are ignored."""
        fields: dict[str, int] = {}
        for outcome, n in counts.items():
            name = cls.FROM_OUTCOMES.get(outcome)
            if name is not None:
                fields[name] = fields.get(name, 0) + n
        return cls(**fields)

    @property
    def moved(self) -> int:
        """Pods that left the node because of the drain (evicted or deleted)."""
        return self.evicted + self.deleted + self.deleted_at_deadline

    def to_dict(self) -> dict[str, int]:
        return {
            "evicted": self.evicted,
            "deleted": self.deleted,
            "deleted_at_deadline": self.deleted_at_deadline,
            "gone": self.gone,
            "skipped": self.skipped,
            "still_running": self.still_running,
            "moved": self.moved,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptionSummary:
    """The handling of one interruption on one node, at one stage.

    ``started`` is when handling began (the fence), ``finished`` when it ended (None at the
    "started" stage). ``pods`` is None until a drain has run. ``failures`` are short, secret-free
    lines about what went wrong along the way (a pod still running, an action that failed) and
    ``error`` why handling as a whole failed (the "failed" stage).
    """

    event_id: str
    kind: Kind
    node: str
    instance_id: str
    source: Source
    stage: Stage
    outcome: Outcome
    description: str = ""
    notice_time: datetime | None = None
    deadline: datetime | None = None
    started: datetime | None = None
    finished: datetime | None = None
    actions: tuple[ActionSummary, ...] = ()
    pods: PodCounts | None = None
    failures: tuple[str, ...] = ()
    error: str | None = None
    dry_run: bool = False

    @classmethod
    def for_event(
        cls,
        event: InterruptionEvent,
        *,
        node: str,
        stage: Stage = Stage.STARTED,
        outcome: Outcome | None = None,
        **fields: Any,
    ) -> InterruptionSummary:
        """A summary of ``event`` on ``node``; ``outcome`` defaults to what ``stage`` implies.

        ``fields`` set the rest (``started``, ``actions``...) and may override what the event gives.
        """
        default = {Stage.STARTED: Outcome.IN_PROGRESS, Stage.FAILED: Outcome.FAILED}.get(stage, Outcome.DONE)
        from_event: dict[str, Any] = {
            "description": event.description,
            "notice_time": event.notice_time,
            "deadline": event.deadline,
        }
        return cls(
            event_id=event.id,
            kind=event.kind,
            node=node,
            instance_id=event.instance_id,
            source=event.source,
            stage=stage,
            outcome=outcome or default,
            **{**from_event, **fields},
        )

    @property
    def duration(self) -> float | None:
        """Seconds from the start of handling to its end; None until both are known."""
        if self.started is None or self.finished is None:
            return None
        return (self.finished - self.started).total_seconds()

    @property
    def margin(self) -> float | None:
        """Seconds to spare before the deadline when handling ended (negative: it ended late)."""
        if self.deadline is None or self.finished is None:
            return None
        return (self.deadline - self.finished).total_seconds()

    def to_dict(self) -> dict[str, Any]:
        """The wire form (see the module docstring for the rules its fields follow)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "event_id": self.event_id,
            "kind": self.kind.value,
            "node": self.node,
            "instance_id": self.instance_id,
            "source": self.source.value,
            "description": self.description,
            "stage": self.stage.value,
            "outcome": self.outcome.value,
            "dry_run": self.dry_run,
            "notice_time": rfc3339(self.notice_time),
            "deadline": rfc3339(self.deadline),
            "started": rfc3339(self.started),
            "finished": rfc3339(self.finished),
            "duration": _seconds(self.duration),
            "margin": _seconds(self.margin),
            "actions": [a.to_dict() for a in self.actions],
            "pods": None if self.pods is None else self.pods.to_dict(),
            "failures": list(self.failures),
            "error": self.error,
        }
