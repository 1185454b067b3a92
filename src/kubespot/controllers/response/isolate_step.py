"""The isolation step (post-drain): the instance's interfaces onto the quarantine group, once.

Runs when the state says drained, the deadline passed or the node was deleted, and only if the
record holds no isolation yet (a resumed runner never isolates twice; AWS would not change anything
the second time anyway). A withdrawn event is never isolated: the node stays in service. The
instance is the Node's providerID's; a node without one is skipped, and the adapter
(``isolate``) further requires the managed tag on the instance.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from kubespot.aws import AwsClients, InstanceDirectory, NetworkIsolation
from kubespot.config.isolation import IsolationSettings
from kubespot.config.queue import QueueSettings
from kubespot.controllers.response.isolate import ACTION, InstanceIsolation
from kubespot.controllers.response.step import LOGGER, PostDrain, StepBase, Why
from kubespot.kube import NodeView
from kubespot.model import Clock, Kind
from kubespot.model.summary import ActionResult, ActionSummary
from kubespot.records.actions import ActionsRecord, IsolationStep, StepState, isolation_step

log = logging.getLogger(LOGGER)


def isolation(
    settings: IsolationSettings, queue: QueueSettings, *, aws: AwsClients, clock: Clock
) -> InstanceIsolation | None:
    """The action ``settings`` ask for, on the AWS adapters (the instance's tags come from the
    queue's cached DescribeInstances); None when it is off."""
    if not settings.enabled:
        return None
    return InstanceIsolation(
        NetworkIsolation(aws, clock=clock),
        settings.quarantine_group,
        clock=clock,
        instances=InstanceDirectory(aws, cache_ttl=queue.describe_cache_ttl, clock=clock),
        managed_tag=queue.managed_tag,
    )


class Isolate(StepBase[InstanceIsolation]):
    """Isolates the instance of events of ``kinds`` (none without an adapter)."""

    name = "isolation"

    def _title(self, adapter: InstanceIsolation) -> str:
        return f"isolation onto {adapter.quarantine_group}"

    async def check(self) -> str | None:
        """A quarantine group that exists nowhere stops the start."""
        if self._adapter is None:
            return None
        why = await self._adapter.check()
        return None if why is None else f"isolation.quarantine_group: {why}"

    def summary(self, record: ActionsRecord) -> ActionSummary | None:
        return None if record.isolation is None else _summary(record.isolation)

    async def rehearse(self, node: NodeView, instance: str) -> list[tuple[str, str]]:
        return [(ACTION, f"would isolate {instance} onto {self._required().quarantine_group}")]

    def due(self, kind: Kind, record: ActionsRecord) -> bool:
        return record.isolation is None and kind in self.kinds

    async def run(
        self, ctx: PostDrain, record: ActionsRecord, done: Sequence[ActionSummary]
    ) -> ActionsRecord:
        return replace(record, isolation=await self._isolate(ctx))

    async def _isolate(self, ctx: PostDrain) -> IsolationStep:
        isolation = self._required()
        node, instance = ctx.node, ctx.instance
        now = self._clock.now()
        if ctx.why is Why.WITHDRAWN:
            self._metrics.action(ACTION, ActionResult.SKIPPED.value)
            return isolation_step(StepState.SKIPPED, now, error="withdrawn: the node stays in service")
        if not instance:
            self._metrics.action(ACTION, ActionResult.SKIPPED.value)
            return isolation_step(StepState.SKIPPED, now, error="the node has no AWS providerID")
        result = await isolation.isolate(instance)
        self._metrics.action(ACTION, result.summary.result.value)
        if result.skipped:
            if node is not None:
                self._events.emit(
                    node, "IsolationSkipped", f"Not isolated: {result.summary.detail}", warning=True
                )
            return isolation_step(StepState.SKIPPED, self._clock.now(), error=result.error)
        if result.ok:
            log.info("instance %s isolated: %s", instance, result.summary.detail)
            if node is not None:
                self._events.emit(node, "Isolated", f"Instance {instance} isolated: {result.summary.detail}")
            return isolation_step(StepState.DONE, self._clock.now(), replaced=result.replaced)
        if node is not None:
            self._events.emit(
                node,
                "IsolationError",
                f"Isolating instance {instance} failed: {result.summary.detail}",
                warning=True,
            )
        return isolation_step(
            StepState.FAILED, self._clock.now(), replaced=result.replaced, error=result.error
        )


def _summary(step: IsolationStep) -> ActionSummary:
    result = {
        StepState.DONE: ActionResult.SUCCESS,
        StepState.FAILED: ActionResult.FAILURE,
        StepState.SKIPPED: ActionResult.SKIPPED,
    }.get(step.state, ActionResult.FAILURE)
    changed = len(step.replaced) + step.more_interfaces
    detail = (
        f"{changed} interfaces moved to the quarantine group" if step.state is StepState.DONE else step.error
    )
    return ActionSummary(name=ACTION, result=result, started=step.at, detail=detail)
