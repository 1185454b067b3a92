"""The steps of the timeline around the drain, a part ``NodeHandler`` holds (docs/agent.md#the-timeline).

After the fence: the ``started`` notification, the pre-drain HTTP calls and, side by side with them,
the wait for the load-balancer deregistration record; after the drain: the post-drain calls and the
``finished`` or ``failed`` notification. None of them may raise into the handling: every failure is
an outcome, logged, counted and in the summary. Kept apart from the parts that decide and write
(``intake``: which event holds the node; ``fence``; ``drain_run``); the wait's code is imported only
by an agent that waits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from kubespot.config.drain import DrainSettings
from kubespot.config.http_calls import CallStage
from kubespot.config.loadbalancer import LoadBalancerWaitSettings
from kubespot.config.node import NodeActionSettings
from kubespot.kube import NodeView
from kubespot.model import InterruptionEvent
from kubespot.model.summary import ActionResult, ActionSummary, InterruptionSummary, Outcome, Stage
from kubespot.records.interruption import NodeState

from .node_context import NodeContext
from .timeline import Run, pre_drain_budget, stage_event

if TYPE_CHECKING:
    from .deregistration import DeregistrationWait

log = logging.getLogger("kubespot.handling")


class Notifier(Protocol):
    """Where each stage of an event is announced (the webhook, named targets); must return at once
    and never raise (``kubespot.actions.notify.Notifier``)."""

    def notify(
        self,
        event: InterruptionEvent,
        *,
        node_name: str,
        extra: Mapping[str, Any] | None = None,
        stage: Stage | None = None,
        summary: InterruptionSummary | None = None,
    ) -> None: ...


class StageCalls(Protocol):
    """The outgoing HTTP calls of a stage (``kubespot.actions.http_call.HttpCalls``): bounded by the
    deadline and ``budget``, counted, and never raising but for cancellation."""

    async def run_stage(
        self,
        stage: CallStage,
        event: InterruptionEvent,
        *,
        node_name: str,
        summary: InterruptionSummary | None = None,
        extra: Mapping[str, Any] | None = None,
        budget: float | None = None,
    ) -> tuple[ActionSummary, ...]: ...


class TimelineSteps:
    """The steps around the drain of one node, and the run (timeline so far) of each event."""

    def __init__(
        self,
        ctx: NodeContext,
        *,
        actions: NodeActionSettings,
        drain: DrainSettings,
        notifier: Notifier | None,
        http_calls: StageCalls | None,
        loadbalancer_wait: LoadBalancerWaitSettings | None,
    ) -> None:
        self._ctx = ctx
        self._actions = actions
        self._drain_settings = drain
        self._notifier = notifier
        self._http_calls = http_calls
        self._lb_wait = loadbalancer_wait
        #: Per event handled by this process and not reported as ended yet: its timeline so far.
        self.runs: dict[str, Run] = {}

    async def before_drain(
        self, event: InterruptionEvent, state: NodeState, run: Run | None
    ) -> DeregistrationWait | None:
        """The pre-drain actions, side by side with the wait for the deregistration record (the
        drain starts when both are over); the wait, to hold target pods during the drain."""
        gate = self._deregistration_wait(event, state, run)
        steps: list[Coroutine[Any, Any, None]] = []
        if run is not None and run.pre_drain:
            steps.append(self.pre_drain(event, run))
        if gate is not None:
            steps.append(self._await_record(gate))
        if steps:
            await asyncio.gather(*steps)
        return gate

    def _deregistration_wait(
        self, event: InterruptionEvent, state: NodeState, run: Run | None
    ) -> DeregistrationWait | None:
        settings = self._lb_wait
        if settings is None or not settings.applies(event.kind):
            return None
        # Imported at the first wait only: most agents never wait (no controller deregisters).
        from .deregistration import DeregistrationWait, wait_bound

        now = self._ctx.clock.now()
        until = wait_bound(
            now=now,
            max_delay=settings.max_delay,
            deadline=event.deadline or state.deadline,
            safety_margin=self._drain_settings.safety_margin,
        )
        if until <= now:
            log.warning("event %s: no time left to wait for load-balancer deregistration", event.id)
            self._ctx.metrics.action("loadbalancer_wait", ActionResult.SKIPPED.value)
            if run is not None:
                run.add(
                    [
                        ActionSummary(
                            name="loadbalancer_wait",
                            result=ActionResult.SKIPPED,
                            started=now,
                            duration=0.0,
                            detail="no time left before the deadline: the drain went ahead",
                        )
                    ]
                )
            return None

        async def read() -> NodeView | None:
            # The controller's watched copy when there is one; the agent reads the node.
            return self._ctx.node_hint() or await self._ctx.kube.get_node(self._ctx.node)

        return DeregistrationWait(event_id=event.id, read=read, clock=self._ctx.clock, until=until)

    async def _await_record(self, gate: DeregistrationWait) -> None:
        seconds = (gate.until - gate.started).total_seconds()
        log.info("waiting up to %.1fs for the load-balancer deregistration record", seconds)
        try:
            found = await gate.wait_for_record()
        except Exception as exc:  # a bug here must cost the wait, never the drain
            log.error("waiting for the deregistration record failed: %r; draining without it", exc)
            return
        if found is None:
            log.warning(
                "no load-balancer deregistration record within %.1fs: draining without holding pods", seconds
            )
        else:
            log.info("deregistration record found: %s", found.state.value)

    def report_wait(self, event: InterruptionEvent, gate: DeregistrationWait, run: Run | None) -> None:
        action = gate.summary(now=self._ctx.clock.now())
        self._ctx.metrics.action(action.name, action.result.value)
        if run is not None:
            run.add([action])
        if action.result is ActionResult.SUCCESS:
            log.info("event %s: load-balancer wait: %s", event.id, action.detail)
            self._ctx.node_event(
                "LoadBalancerWait", f"Drain waited for load-balancer deregistration: {action.detail}"
            )
        else:
            log.warning("event %s: load-balancer wait cut short: %s", event.id, action.detail)
            self._ctx.node_event(
                "LoadBalancerWaitTimeout",
                f"Drain went ahead before load-balancer deregistration was complete: {action.detail}",
                warning=True,
            )

    async def pre_drain(self, event: InterruptionEvent, run: Run) -> None:
        """The pre-drain HTTP calls, within ``pre_drain_budget`` (the drain waits for them)."""
        run.pre_drain = False
        if self._http_calls is None:
            return
        left = event.seconds_left(self._ctx.clock.now())
        budget = pre_drain_budget(left, window=float(self._drain_settings.node_termination_grace_period))
        summary = self._summary(event, run, Stage.STARTED)
        run.add(await self._stage_calls("pre-drain", event, summary, budget))

    async def post_drain(self, event: InterruptionEvent, run: Run) -> None:
        """The post-drain HTTP calls, within the time left before the deadline."""
        if self._http_calls is None:
            return
        summary = self._summary(event, run, Stage.FAILED if run.error else Stage.FINISHED)
        run.add(await self._stage_calls("post-drain", event, summary, None))

    async def _stage_calls(
        self, stage: CallStage, event: InterruptionEvent, summary: InterruptionSummary, budget: float | None
    ) -> tuple[ActionSummary, ...]:
        assert self._http_calls is not None
        try:
            done = await self._http_calls.run_stage(
                stage, event, node_name=self._ctx.node, summary=summary, budget=budget
            )
        except Exception as exc:  # run_stage never raises; a bug must not stop the timeline either
            # The class only: an HTTP library's message can carry the URL, a secret.
            log.error("%s calls failed: %s", stage, type(exc).__name__)
            return ()
        reported = stage_event(stage, done)
        if reported is not None:
            reason, message, warning = reported
            if all(a.result is ActionResult.DRY_RUN for a in done):
                reason, message = "DryRun", f"Dry run: {message}"
            self._ctx.node_event(reason, message, warning=warning)
        return done

    def _summary(
        self, event: InterruptionEvent, run: Run, stage: Stage, outcome: Outcome | None = None
    ) -> InterruptionSummary:
        return run.summary(
            event,
            node=self._ctx.node,
            stage=stage,
            now=self._ctx.clock.now(),
            outcome=outcome,
            dry_run=self._actions.dry_run,
        )

    def notify(
        self, event: InterruptionEvent, run: Run, stage: Stage, outcome: Outcome | None = None
    ) -> None:
        if self._notifier is None:
            return
        try:
            summary = self._summary(event, run, stage, outcome)
            self._notifier.notify(event, node_name=self._ctx.node, stage=stage, summary=summary)
        except Exception as exc:  # a notifier must never raise; should one, the drain still goes on
            log.error("notification (%s) for %s failed: %s", stage.value, event.id, type(exc).__name__)

    def start(self, event: InterruptionEvent, at: datetime) -> None:
        """This process fenced the node for ``event`` at ``at``: its run begins with "started"."""
        run = self.runs[event.id] = Run(started=at)
        self.notify(event, run, Stage.STARTED)

    def finish(self, event: InterruptionEvent, run: Run) -> None:
        """Handling of ``event`` by this process ended: "finished", or "failed" with the error."""
        if self.runs.get(event.id) is run:
            del self.runs[event.id]
        self.notify(event, run, Stage.FAILED if run.error else Stage.FINISHED)

    def failed(self, event: InterruptionEvent, error: str) -> None:
        run = self.runs.pop(event.id, None) or Run(started=self._ctx.clock.now())
        run.error = error
        self.notify(event, run, Stage.FAILED)

    def report_end(self, event: InterruptionEvent, outcome: Outcome) -> None:
        """The event's handling was cut short (withdrawn, superseded): say so if it was announced."""
        run = self.runs.pop(event.id, None)
        if run is not None:
            self.notify(event, run, Stage.FINISHED, outcome)
