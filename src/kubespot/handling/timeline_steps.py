"""The steps of the timeline around the drain, as a part of ``NodeHandler`` (docs/agent.md#the-timeline).

After the fence: the ``started`` notification, the pre-drain HTTP calls and, side by side with them,
the wait for the load-balancer deregistration record; after the drain: the post-drain calls and the
``finished`` or ``failed`` notification. None of them may raise into the handling: every failure is
an outcome, logged, counted and in the summary. Kept apart from ``node_handler``, which owns the
decisions (which event holds the node, fence, drain, undo); the wait's code is imported only by an
agent that waits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kubespot.config.drain import DrainSettings
from kubespot.config.http_calls import CallStage
from kubespot.config.loadbalancer import LoadBalancerWaitSettings
from kubespot.config.node import NodeActionSettings
from kubespot.kube import KubeClient, NodeView
from kubespot.model import Clock, InterruptionEvent
from kubespot.model.summary import ActionResult, ActionSummary, InterruptionSummary, Outcome, Stage
from kubespot.observability.metrics import Metrics
from kubespot.records.interruption import NodeState

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
    """The steps around the drain; ``NodeHandler`` provides the attributes declared here."""

    node: str
    _kube: KubeClient
    _actions: NodeActionSettings
    _drain_settings: DrainSettings
    _clock: Clock
    _metrics: Metrics
    _notifier: Notifier | None
    _http_calls: StageCalls | None
    _lb_wait: LoadBalancerWaitSettings | None
    _node_hint: Callable[[], NodeView | None]
    #: Per event handled by this process and not reported as ended yet: its timeline so far.
    _runs: dict[str, Run]

    def _node_event(self, reason: str, message: str, *, warning: bool = False) -> None:
        raise NotImplementedError  # NodeHandler's: events in the background

    async def _before_drain(
        self, event: InterruptionEvent, state: NodeState, run: Run | None
    ) -> DeregistrationWait | None:
        """The pre-drain actions, side by side with the wait for the deregistration record (the
        drain starts when both are over); the wait, to hold target pods during the drain."""
        gate = self._deregistration_wait(event, state, run)
        steps: list[Coroutine[Any, Any, None]] = []
        if run is not None and run.pre_drain:
            steps.append(self._pre_drain(event, run))
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

        now = self._clock.now()
        until = wait_bound(
            now=now,
            max_delay=settings.max_delay,
            deadline=event.deadline or state.deadline,
            safety_margin=self._drain_settings.safety_margin,
        )
        if until <= now:
            log.warning("event %s: no time left to wait for load-balancer deregistration", event.id)
            self._metrics.action("loadbalancer_wait", ActionResult.SKIPPED.value)
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
            return self._node_hint() or await self._kube.get_node(self.node)

        return DeregistrationWait(event_id=event.id, read=read, clock=self._clock, until=until)

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

    def _report_wait(self, event: InterruptionEvent, gate: DeregistrationWait, run: Run | None) -> None:
        action = gate.summary(now=self._clock.now())
        self._metrics.action(action.name, action.result.value)
        if run is not None:
            run.add([action])
        if action.result is ActionResult.SUCCESS:
            log.info("event %s: load-balancer wait: %s", event.id, action.detail)
            self._node_event(
                "LoadBalancerWait", f"Drain waited for load-balancer deregistration: {action.detail}"
            )
        else:
            log.warning("event %s: load-balancer wait cut short: %s", event.id, action.detail)
            self._node_event(
                "LoadBalancerWaitTimeout",
                f"Drain went ahead before load-balancer deregistration was complete: {action.detail}",
                warning=True,
            )

    async def _pre_drain(self, event: InterruptionEvent, run: Run) -> None:
        """The pre-drain HTTP calls, within ``pre_drain_budget`` (the drain waits for them)."""
        run.pre_drain = False
        if self._http_calls is None:
            return
        left = event.seconds_left(self._clock.now())
        budget = pre_drain_budget(left, window=float(self._drain_settings.node_termination_grace_period))
        summary = self._summary(event, run, Stage.STARTED)
        run.add(await self._stage_calls("pre-drain", event, summary, budget))

    async def _post_drain(self, event: InterruptionEvent, run: Run) -> None:
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
                stage, event, node_name=self.node, summary=summary, budget=budget
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
            self._node_event(reason, message, warning=warning)
        return done

    def _summary(
        self, event: InterruptionEvent, run: Run, stage: Stage, outcome: Outcome | None = None
    ) -> InterruptionSummary:
        return run.summary(
            event,
            node=self.node,
            stage=stage,
            now=self._clock.now(),
            outcome=outcome,
            dry_run=self._actions.dry_run,
        )

    def _notify(
        self, event: InterruptionEvent, run: Run, stage: Stage, outcome: Outcome | None = None
    ) -> None:
        if self._notifier is None:
            return
        try:
            summary = self._summary(event, run, stage, outcome)
            self._notifier.notify(event, node_name=self.node, stage=stage, summary=summary)
        except Exception as exc:  # a notifier must never raise; should one, the drain still goes on
            log.error("notification (%s) for %s failed: %s", stage.value, event.id, type(exc).__name__)

    def _finish(self, event: InterruptionEvent, run: Run) -> None:
        """Handling of ``event`` by this process ended: "finished", or "failed" with the error."""
        if self._runs.get(event.id) is run:
            del self._runs[event.id]
        self._notify(event, run, Stage.FAILED if run.error else Stage.FINISHED)

    def _failed(self, event: InterruptionEvent, error: str) -> None:
        run = self._runs.pop(event.id, None) or Run(started=self._clock.now())
        run.error = error
        self._notify(event, run, Stage.FAILED)

    def _report_end(self, event: InterruptionEvent, outcome: Outcome) -> None:
        """The event's handling was cut short (withdrawn, superseded): say so if it was announced."""
        run = self._runs.pop(event.id, None)
        if run is not None:
            self._notify(event, run, Stage.FINISHED, outcome)
