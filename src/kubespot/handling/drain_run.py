"""The drain of ``NodeHandler``'s node for the event holding it: the timeline's pre-drain steps, the
drain itself under the holder's renewals, its result recorded on the node and reported; or, when
another live process holds the node, following it; or, under dry run, what would be done.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from kubespot.actions.drain import DrainResult, drain_node
from kubespot.config.drain import DrainSettings
from kubespot.kube import KubeError
from kubespot.model import InterruptionEvent
from kubespot.model.summary import Stage
from kubespot.records.interruption import NodeState, Phase

from .fence import Fence
from .intake import Settled
from .node_context import NodeContext
from .node_patches import HOLD_STALE, state_of
from .policy import Plan, voluntary_drain
from .timeline import Run, counts_extra, drain_error, drain_summary, pod_counts
from .timeline_steps import TimelineSteps

if TYPE_CHECKING:
    from .deregistration import DeregistrationWait

log = logging.getLogger("kubespot.handling")

#: How often a follower looks whether the process holding the node is done (or gone).
FOLLOW_POLL = 2.0


class DrainRun:
    """Drains (or follows, or dry-runs) one node; ``last_drain``: the last drain's result."""

    def __init__(
        self,
        ctx: NodeContext,
        *,
        fence: Fence,
        timeline: TimelineSteps,
        drain: DrainSettings,
        own_pod: tuple[str, str] | None,
        keep_last_drain: bool,
    ) -> None:
        self._ctx = ctx
        self._fence = fence
        self._timeline = timeline
        self._settings = drain
        self._own_pod = own_pod
        self._keep_last_drain = keep_last_drain
        #: The last drain's result (for logs, tests and the sandbox).
        self.last_drain: DrainResult | None = None

    async def drain(
        self, event: InterruptionEvent, plan: Plan, state: NodeState, run: Run | None = None
    ) -> NodeState:
        ctx = self._ctx
        if state.phase is not Phase.DRAINING:  # the fence normally wrote it already (fence_patch)
            state = await self._fence.write_state(state.advance(Phase.DRAINING, ctx.clock.now()))
        ctx.set_phase(Phase.DRAINING.value)
        gate: DeregistrationWait | None = None
        settings, deadline = voluntary_drain(
            plan, self._settings, event.deadline or state.deadline, ctx.clock.now()
        )

        async def attempt() -> DrainResult:
            return await drain_node(
                ctx.node,
                kube=ctx.kube,
                settings=settings,
                deadline=deadline,
                clock=ctx.clock,
                own_pod=self._own_pod,
                recorder=ctx.recorder,
                hold=gate.hold if gate is not None and gate.holds_any else None,
            )

        renewer = asyncio.create_task(self._fence.renew(state))
        started = ctx.clock.now()
        try:
            gate = await self._timeline.before_drain(event, state, run)
            started = ctx.clock.now()
            result = await ctx.persist("drain", attempt, deadline=event.deadline, kind=event.kind)
        finally:
            renewer.cancel()
            await asyncio.wait({renewer})
        if gate is not None:
            self._timeline.report_wait(event, gate, run)
        if run is not None:
            run.add([drain_summary(result, started=started, now=ctx.clock.now())])
            run.error = run.error or drain_error(result)
            if result is not None:
                run.pods = pod_counts(result)
        if result is None:
            return await self._fence.write_state(state.advance(Phase.DRAIN_FAILED, ctx.clock.now()))
        if self._keep_last_drain:
            self.last_drain = result
        self._report(event, result)
        # The counts ride on the write that records DRAINED (DRAIN_FAILED when pods were refused or
        # left): the controller's action runner puts them in the summary it publishes (it acts when
        # the state says drained).
        # DRAIN_FAILED: refused, or pods left (a budget to the end, a failed delete); pods still in
        # their grace period at the deadline were sent away and count as drained.
        drained = state.advance(Phase.DRAINED if result.sent_away else Phase.DRAIN_FAILED, ctx.clock.now())
        drained = replace(drained, extra={**drained.extra, "pods": counts_extra(pod_counts(result))})
        state = await self._fence.write_state(drained, durable=True)
        ctx.set_phase(state.phase.value)
        if plan.out_of_service_after_drain and result.emptied:
            await self._fence.out_of_service(event)
        return state

    async def follow(self, event: InterruptionEvent) -> Settled | None:
        """Another process is fencing or draining the node: wait for it to finish instead of
        draining a second time. Returns how ``event`` ends then, or None if that process stopped
        renewing its mark (it died) and this one must take over."""
        ctx = self._ctx
        log.info("event %s: node %s is being handled by another process; following", event.id, ctx.node)
        ctx.set_phase("following")
        while True:
            await ctx.clock.sleep(FOLLOW_POLL)
            # The controller's watch has the node already: no GET per follower every FOLLOW_POLL.
            node = ctx.node_hint()
            if node is None:
                try:
                    node = await ctx.kube.get_node(ctx.node)
                except KubeError as err:
                    log.warning("following node %s: %s", ctx.node, err)
                    continue
            state = state_of(node)
            if state is None or state.phase in (Phase.DRAINED, Phase.DRAIN_FAILED):
                log.info("event %s: the other process finished with node %s", event.id, ctx.node)
                ctx.set_phase(state.phase.value if state else "none")
                failed = state is not None and state.phase is Phase.DRAIN_FAILED
                return Settled.FAILED if failed else Settled.DONE
            if not state.held_by_other(ctx.identity, ctx.clock.now(), HOLD_STALE):
                log.warning(
                    "event %s: %s stopped renewing its hold on %s; taking over",
                    event.id,
                    state.holder,
                    ctx.node,
                )
                return None

    async def dry_run(self, event: InterruptionEvent, plan: Plan) -> None:
        ctx = self._ctx
        taints = ", ".join(t.key for t in plan.taints)
        what = "taint (" + taints + "), cordon" + (" and drain" if plan.drain else "")
        log.info("dry run: would %s node %s", what, ctx.node)
        ctx.metrics.action("cordon", "dry_run")
        ctx.node_event("DryRun", f"Dry run: would {what} for {event.id}")
        # Under dry run the notifier only says what it would send, and the calls what they would do.
        run = Run(started=ctx.clock.now())
        self._timeline.notify(event, run, Stage.STARTED)
        await self._timeline.pre_drain(event, run)
        if plan.drain:
            result = await drain_node(
                ctx.node,
                kube=ctx.kube,
                settings=self._settings,
                deadline=event.deadline,
                clock=ctx.clock,
                dry_run=True,
                own_pod=self._own_pod,
                recorder=ctx.recorder,
            )
            self.last_drain = result
            ctx.metrics.action("drain", "dry_run")
            run.add([drain_summary(result, started=result.started_at, now=ctx.clock.now())])
            run.pods = pod_counts(result)
        await self._timeline.post_drain(event, run)
        self._timeline.notify(event, run, Stage.FINISHED)

    def _report(self, event: InterruptionEvent, result: DrainResult) -> None:
        ctx = self._ctx
        end = result.finished_at or ctx.clock.now()
        seconds = (end - result.started_at).total_seconds()
        verdict = "refused" if result.refused else ("emptied" if result.emptied else "incomplete")
        ctx.metrics.drain_finished(seconds, verdict)
        ctx.metrics.action("drain", "success" if result.emptied else "failure")
        for outcome, count in result.counts().items():
            ctx.metrics.eviction(outcome, count)
        if not result.emptied:
            if event.deadline is not None and not result.refused:
                ctx.metrics.deadline_miss(event.kind.value)
            log.error("event %s: drain %s: %s", event.id, verdict, result.counts())
        else:
            log.info("event %s: drained in %.1fs: %s", event.id, seconds, result.counts())
