"""The summary step (post-drain): the event's summary to SNS and EventBridge, each target once.

Runs after isolation, with the lines of the steps before it, also for a withdrawn event. A target
already in the record is skipped; one published but not yet recorded when its runner died is
published again by the next (at least once: SNS FIFO topics deduplicate it).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from kubespot.aws import AwsClients, EventBridgePublisher, SnsPublisher
from kubespot.config.publish import PublishSettings
from kubespot.controllers.response.publish import Published, SummaryPublisher
from kubespot.controllers.response.step import LOGGER, PostDrain, StepBase
from kubespot.controllers.response.summary import interruption_summary
from kubespot.kube import NodeView
from kubespot.model import Clock, Kind
from kubespot.model.summary import ActionSummary
from kubespot.records.actions import ActionsRecord

log = logging.getLogger(LOGGER)


def publisher(settings: PublishSettings, *, aws: AwsClients, clock: Clock) -> SummaryPublisher | None:
    """The action ``settings`` ask for, on the AWS adapters; None when it is off."""
    if not settings.enabled:
        return None
    sns = SnsPublisher(aws, settings.sns_topic_arn) if settings.sns_topic_arn else None
    events = (
        EventBridgePublisher(
            aws, settings.event_bus, source=settings.source, detail_type=settings.detail_type
        )
        if settings.event_bus
        else None
    )
    return SummaryPublisher(sns, events, clock=clock)


class Publish(StepBase[SummaryPublisher]):
    """Publishes the summary of events of ``kinds`` (none without an adapter)."""

    name = "summary"

    def _title(self, adapter: SummaryPublisher) -> str:
        return f"summary to {', '.join(adapter.targets)}"

    def summary(self, record: ActionsRecord) -> ActionSummary | None:
        return None  # the summary itself: no line of its own in it

    async def rehearse(self, node: NodeView, instance: str) -> list[tuple[str, str]]:
        return [(f"publish_{t}", f"would publish the summary to {t}") for t in self._required().targets]

    def due(self, kind: Kind, record: ActionsRecord) -> bool:
        # Every time: the targets already recorded are skipped one by one.
        return kind in self.kinds

    async def run(
        self, ctx: PostDrain, record: ActionsRecord, done: Sequence[ActionSummary]
    ) -> ActionsRecord:
        published = dict(record.published)
        summary = interruption_summary(
            ctx.name, record, ctx.state, ctx.why, done, ctx.instance, self._clock.now()
        )
        for outcome in await self._required().publish(summary, skip=set(published)):
            published[outcome.target] = outcome.recorded
            self._report(ctx.node, ctx.name, outcome)
        return replace(record, published=tuple(sorted(published.items())))

    def _report(self, node: NodeView | None, name: str, outcome: Published) -> None:
        self._metrics.action(outcome.summary.name, outcome.summary.result.value)
        if outcome.ok:
            log.info("summary of node %s published to %s: %s", name, outcome.target, outcome.message_id)
            if node is not None:
                self._events.emit(
                    node, "SummaryPublished", f"Summary published to {outcome.target}: {outcome.message_id}"
                )
        elif node is not None:
            self._events.emit(
                node,
                "SummaryPublishError",
                f"Publishing the summary to {outcome.target} failed: {outcome.error}",
                warning=True,
            )
