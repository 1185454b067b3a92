"""The agent's response to interruption events on its own node.

One event is handled at a time per node; a new event either is a repeat (ignored), supersedes the
current one (its work is cancelled and the new event's starts), or withdraws it (undo). The work for
an event is: wait until it is due (scheduled maintenance acts at NotBefore minus the lead time),
fence (taints, labels, cordon and the state annotation in one compare-and-set write), drain, and for
a rebalance recommendation undo the fence if nothing followed.

What was done lives in the node's ``kubespot.io/interruption`` annotation (``handling.state``), so
``resume()`` at start-up continues an interrupted drain, re-arms an auto-undo, or cleans up after a
reboot; and undo removes exactly what kubespot added, never a taint or cordon someone else set.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from kubespot.actions.drain import DrainResult, drain_node
from kubespot.config.drain import DrainSettings
from kubespot.config.imds import MonitorSettings
from kubespot.config.node import NodeActionSettings
from kubespot.kube import EventRecorder, KubeClient, KubeError, NodeView, Taint
from kubespot.model import Clock, InterruptionEvent, Kind, Source
from kubespot.observability.logs import log_context
from kubespot.observability.metrics import Metrics

from .policy import OUT_OF_SERVICE, Plan, plan_for, supersedes
from .state import STATE_ANNOTATION, UNDONE_ANNOTATION, NodeState, Phase, StateError, decode

log = logging.getLogger("kubespot.handling")

T = TypeVar("T")

#: Kubernetes event reasons on receipt of a notice: the reference handler's, so alerts keep matching.
NOTICE_REASONS = {
    Kind.SPOT_INTERRUPTION: "SpotInterruption",
    Kind.REBALANCE_RECOMMENDATION: "RebalanceRecommendation",
    Kind.SCHEDULED_MAINTENANCE: "ScheduledEvent",
    Kind.ASG_LIFECYCLE: "ASGLifecycle",
    Kind.STATE_CHANGE: "StateChange",
}
#: A node state is cleared when the instance booted this long after the node was fenced: the boot
#: time is computed from uptime and the wall clock, which can disagree by a little.
BOOT_SLACK = timedelta(seconds=5)


class Notifier(Protocol):
    """Where a notice is announced (the webhook); must return at once and never raise."""

    def notify(
        self, event: InterruptionEvent, *, node_name: str, extra: Mapping[str, Any] | None = None
    ) -> None: ...


class NodeHandler:
    """Handles the events of one node. ``run(queue)`` until cancelled; ``resume()`` once at start-up."""

    def __init__(
        self,
        *,
        node_name: str,
        kube: KubeClient,
        actions: NodeActionSettings,
        monitors: MonitorSettings,
        drain: DrainSettings,
        clock: Clock,
        metrics: Metrics,
        recorder: EventRecorder | None = None,
        notifier: Notifier | None = None,
        own_pod: tuple[str, str] | None = None,
        boot_time: Callable[[], datetime | None] = lambda: None,
        retry_cap: float = 10.0,
    ) -> None:
        self.node = node_name
        self._kube = kube
        self._actions = actions
        self._monitors = monitors
        self._drain_settings = drain
        self._clock = clock
        self._metrics = metrics
        self._recorder = recorder
        self._notifier = notifier
        self._own_pod = own_pod
        self._boot_time = boot_time
        self._retry_cap = retry_cap
        self._current: InterruptionEvent | None = None
        #: The event last undone (from the node at start-up): its notice may still be in IMDS.
        self._undone: str | None = None
        self._work: asyncio.Task[None] | None = None
        self._side: set[asyncio.Task[None]] = set()
        self.phase = "none"
        #: The last drain's result (for logs, tests and the sandbox).
        self.last_drain: DrainResult | None = None
        metrics.set_node_phase(self.phase)

    # --- intake ------------------------------------------------------------------------------------

    @property
    def current(self) -> InterruptionEvent | None:
        return self._current

    @property
    def busy(self) -> bool:
        return self._work is not None and not self._work.done()

    async def run(self, events: asyncio.Queue[InterruptionEvent]) -> None:
        """Handle events from ``events`` until cancelled; a failure handling one never stops the loop."""
        while True:
            event = await events.get()
            try:
                await self.handle(event)
            except Exception:
                log.exception("event %s: handling failed", event.id, extra={"event_id": event.id})

    async def handle(self, event: InterruptionEvent) -> None:
        """Take ``event`` in: returns once its work is started (not finished)."""
        with log_context(
            event_id=event.id, kind=event.kind.value, node=self.node, instance_id=event.instance_id
        ):
            if not supersedes(event, self._current):
                log.debug("event %s: already being handled", event.id)
                return
            if event.id == self._undone and not event.cancelled:
                log.info("event %s: already handled and undone; ignored", event.id)
                return
            plan = plan_for(event, actions=self._actions, monitors=self._monitors)
            if not plan.acts:
                log.info("event %s: %s is switched off; ignored", event.id, event.kind.value)
                return
            if plan.undo:
                if self._current is None or self._current.id != event.id:
                    return  # withdrawn before kubespot did anything for it
                log.info("event %s withdrawn (%s): undoing", event.id, event.description)
                await self._replace_work(self._undo(event.id, "the event was canceled or completed", plan))
                self._current = None
                return
            self._metrics.interruption(event.kind.value, event.source.value)
            log.info(
                "event %s: %s (deadline %s)",
                event.id,
                event.description,
                event.deadline.isoformat() if event.deadline else "none",
            )
            self._node_event(NOTICE_REASONS[event.kind], event.description or event.kind.value)
            self._current = event
            await self._replace_work(self._execute(event, plan))

    async def resume(self) -> None:
        """Continue from the state on the node (after a restart). Raises ``KubeError`` if unreadable."""
        node = await self._kube.get_node(self.node)
        if node is None:
            log.error("node %s not found: nothing to resume, and nothing can be fenced", self.node)
            return
        self._undone = node.annotations.get(UNDONE_ANNOTATION)
        try:
            state = decode(node.annotations.get(STATE_ANNOTATION))
        except StateError as exc:
            log.warning("ignoring the node's state: %s", exc)
            return
        if state is None:
            return
        event = _event_from_state(state, node_name=self.node)
        with log_context(event_id=event.id, kind=event.kind.value, node=self.node):
            self._current = event
            boot = self._boot_time()
            if boot is not None and boot > state.since + BOOT_SLACK:
                log.info(
                    "the instance restarted (boot %s) after it was fenced: cleaning up", boot.isoformat()
                )
                plan = Plan(acts=True, undo=True, dry_run=self._actions.dry_run, reason="reboot")
                await self._replace_work(self._undo(state.event_id, "the instance rebooted", plan))
                self._current = None
                return
            plan = plan_for(event, actions=self._actions, monitors=self._monitors)
            if not plan.acts:
                log.warning("state for %s found, but that kind is switched off: left as it is", event.kind)
                return
            log.info("resuming %s from phase %s", event.id, state.phase.value)
            await self._replace_work(self._execute(event, plan, resumed=state))

    async def aclose(self) -> None:
        """Stop the work in progress (its state stays on the node, for the next start to resume)."""
        await self._replace_work(None)
        for task in list(self._side):
            task.cancel()
        if self._side:
            await asyncio.wait(self._side)

    async def _replace_work(self, coro: Coroutine[Any, Any, None] | None) -> None:
        old = self._work
        if old is not None and not old.done():
            old.cancel()
            await asyncio.wait({old})
        # The task copies the log context, so every line it logs names the event.
        self._work = asyncio.create_task(coro) if coro is not None else None

    # --- the work for one event ------------------------------------------------------------------

    async def _execute(
        self, event: InterruptionEvent, plan: Plan, *, resumed: NodeState | None = None
    ) -> None:
        try:
            if event.act_at > self._clock.now():
                self._set_phase("pending")
                log.info("event %s: acting at %s", event.id, event.act_at.isoformat())
                await self._sleep_until(event.act_at)
            if plan.dry_run:
                await self._dry_run(event, plan)
                return
            state = await self._fence(event, plan)
            if state is None:
                return
            if plan.drain and state.phase is not Phase.DRAINED:
                state = await self._drain(event, plan, state)
            if state.undo_at is not None:
                log.info("event %s: undoing at %s unless an interruption follows", event.id, state.undo_at)
                await self._sleep_until(state.undo_at)
                await self._undo(event.id, "no interruption followed the recommendation", plan)
                self._current = None
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("event %s: handling failed", event.id)
            self._metrics.action("handle", "failure")

    async def _fence(self, event: InterruptionEvent, plan: Plan) -> NodeState | None:
        """Taints, labels, cordon and state in one compare-and-set write; retried until the deadline."""
        due = max(event.notice_time, event.act_at)

        def change(node: NodeView) -> Mapping[str, Any] | None:
            return _fence_patch(node, event, plan, now=self._clock.now(), undo_after=plan.undo_after)

        node = await self._persist("fence", event, lambda: self._kube.update_node(self.node, change))
        if node is None:
            return None
        fenced = self._clock.now()
        state = decode(node.annotations.get(STATE_ANNOTATION))
        if state is None or state.event_id != event.id:  # pragma: no cover - our own write, just made
            log.error("event %s: the state annotation did not stick", event.id)
            return None
        self._metrics.notice_to_cordon(max(0.0, (fenced - due).total_seconds()), event.kind.value)
        self._metrics.action("cordon", "success")
        self._set_phase(state.phase.value)
        what = "Cordoned and tainted" if plan.drain else "Cordoned and tainted (no drain)"
        self._node_event("CordonAndDrain" if plan.drain else "Cordon", f"{what} by kubespot for {event.id}")
        log.info(
            "event %s: tainted and cordoned %.3fs after the notice", event.id, (fenced - due).total_seconds()
        )
        if self._notifier is not None:
            self._notifier.notify(event, node_name=self.node)
        return state

    async def _drain(self, event: InterruptionEvent, plan: Plan, state: NodeState) -> NodeState:
        if state.phase is not Phase.DRAINING:
            state = await self._write_state(state.advance(Phase.DRAINING, self._clock.now()))
        self._set_phase(Phase.DRAINING.value)

        async def attempt() -> DrainResult:
            return await drain_node(
                self.node,
                kube=self._kube,
                settings=self._drain_settings,
                deadline=event.deadline or state.deadline,
                clock=self._clock,
                own_pod=self._own_pod,
                recorder=self._recorder,
            )

        result = await self._persist("drain", event, attempt)
        if result is None:
            return state
        self.last_drain = result
        self._report_drain(event, result)
        state = await self._write_state(state.advance(Phase.DRAINED, self._clock.now()))
        self._set_phase(Phase.DRAINED.value)
        if plan.out_of_service_after_drain and result.emptied:
            key, value, effect = OUT_OF_SERVICE
            await self._persist(
                "out_of_service", event, lambda: self._kube.add_taint(self.node, Taint(key, effect, value))
            )
        return state

    def _report_drain(self, event: InterruptionEvent, result: DrainResult) -> None:
        end = result.finished_at or self._clock.now()
        seconds = (end - result.started_at).total_seconds()
        verdict = "refused" if result.refused else ("emptied" if result.emptied else "incomplete")
        self._metrics.drain_finished(seconds, verdict)
        self._metrics.action("drain", "success" if result.emptied else "failure")
        for outcome, count in result.counts().items():
            self._metrics.eviction(outcome, count)
        if not result.emptied:
            self._metrics.deadline_miss(event.kind.value)
            log.error("event %s: drain %s: %s", event.id, verdict, result.counts())
        else:
            log.info("event %s: drained in %.1fs: %s", event.id, seconds, result.counts())

    async def _undo(self, event_id: str, why: str, plan: Plan) -> None:
        """Remove what kubespot added for ``event_id`` (taints, labels, its cordon, the state)."""
        if plan.dry_run:
            log.info("dry run: would uncordon and remove the taints of %s (%s)", event_id, why)
            self._node_event("DryRun", f"Dry run: would uncordon ({why})")
            self._set_phase("none")
            return

        def change(node: NodeView) -> Mapping[str, Any] | None:
            return _undo_patch(node, event_id)

        try:
            await self._kube.update_node(self.node, change)
        except KubeError as err:
            log.error("could not undo %s: %s", event_id, err)
            self._metrics.action("undo", "failure")
            self._node_event("UncordonError", f"Could not undo the fence for {event_id}: {err}", warning=True)
            return
        self._undone = event_id
        self._metrics.action("undo", "success")
        self._set_phase("none")
        self._node_event("Uncordon", f"Uncordoned by kubespot: {why}")
        log.info("undone: %s", why)

    async def _dry_run(self, event: InterruptionEvent, plan: Plan) -> None:
        taints = ", ".join(t.key for t in plan.taints)
        what = "taint (" + taints + "), cordon" + (" and drain" if plan.drain else "")
        log.info("dry run: would %s node %s", what, self.node)
        self._metrics.action("cordon", "dry_run")
        self._node_event("DryRun", f"Dry run: would {what} for {event.id}")
        if self._notifier is not None:  # under dry run this one only says what it would send
            self._notifier.notify(event, node_name=self.node)
        if plan.drain:
            result = await drain_node(
                self.node,
                kube=self._kube,
                settings=self._drain_settings,
                deadline=event.deadline,
                clock=self._clock,
                dry_run=True,
                own_pod=self._own_pod,
                recorder=self._recorder,
            )
            self.last_drain = result
            self._metrics.action("drain", "dry_run")

    # --- helpers ---------------------------------------------------------------------------------

    async def _persist(
        self, action: str, event: InterruptionEvent, call: Callable[[], Coroutine[Any, Any, T]]
    ) -> T | None:
        """Run ``call`` until it succeeds, backing off, for as long as the instance is expected to live.

        The Kubernetes client already retries transient failures; this outer loop is for outages
        longer than that (an API server restart): an interruption is never dropped while there is
        time to act on it.
        """
        delay = 0.5
        while True:
            try:
                return await call()
            except KubeError as err:
                self._metrics.action(action, "failure")
                left = event.seconds_left(self._clock.now())
                if left is not None and left <= 0:
                    log.error("event %s: %s failed and the deadline has passed: %s", event.id, action, err)
                    self._metrics.deadline_miss(event.kind.value)
                    return None
                log.warning("event %s: %s failed (%s); retrying in %.1fs", event.id, action, err, delay)
                await self._clock.sleep(delay if left is None else min(delay, left))
                delay = min(self._retry_cap, delay * 2)

    async def _write_state(self, state: NodeState) -> NodeState:
        try:
            await self._kube.set_annotations(self.node, {STATE_ANNOTATION: state.encode()})
        except KubeError as err:
            # Only the resume point is lost (a restart would redo this step): not worth stopping for.
            log.warning("could not record phase %s on the node: %s", state.phase.value, err)
        return state

    async def _sleep_until(self, when: datetime) -> None:
        # Re-checked after each sleep: a long sleep may end early or late on a loaded host.
        while (left := (when - self._clock.now()).total_seconds()) > 0:
            await self._clock.sleep(min(left, 60.0))

    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        self._metrics.set_node_phase(phase)

    def _node_event(self, reason: str, message: str, *, warning: bool = False) -> None:
        """Record a node event in the background: events must never delay fencing or draining."""
        if self._recorder is None:
            return
        task = asyncio.create_task(self._recorder.node(self.node, reason, message, warning=warning))
        self._side.add(task)
        task.add_done_callback(self._side.discard)


def _event_from_state(state: NodeState, *, node_name: str) -> InterruptionEvent:
    """The event a state was written for, as far as handling needs it (kind, id, deadline)."""
    try:
        source = Source(state.extra.get("source", Source.IMDS.value))
    except ValueError:
        source = Source.IMDS
    return InterruptionEvent(
        id=state.event_id,
        kind=Kind(state.kind),
        instance_id=str(state.extra.get("instance_id", "")),
        source=source,
        notice_time=state.since,
        act_at=state.since,
        deadline=state.deadline,
        node_name=node_name,
        description=f"resumed {state.kind} from the node's state",
    )


def _fence_patch(
    node: NodeView, event: InterruptionEvent, plan: Plan, *, now: datetime, undo_after: float | None
) -> Mapping[str, Any] | None:
    """The merge patch that fences ``node`` for ``event``, or None when it already is."""
    try:
        old = decode(node.annotations.get(STATE_ANNOTATION))
    except StateError:
        old = None  # hand-edited: overwritten with what is true from now on
    same = old is not None and old.event_id == event.id
    wanted = [Taint(t.key, t.effect, t.value) for t in plan.taints]
    keys = {(t.key, t.effect) for t in wanted}
    taints = [t for t in node.taints if (t.key, t.effect) not in keys] + wanted
    new_labels = {k: v for k, v in plan.labels if node.labels.get(k) != v}
    state = NodeState(
        event_id=event.id,
        kind=event.kind.value,
        phase=old.phase if same and old is not None else Phase.FENCED,
        since=old.since if same and old is not None else now,
        deadline=event.deadline,
        cordoned_by_us=(old.cordoned_by_us if old is not None else False)
        or (plan.cordon and not node.unschedulable),
        # Carried over from an earlier event (a rebalance before this spot notice), so one undo
        # removes everything kubespot added.
        taints=tuple(sorted({*(old.taints if old else ()), *(t.key for t in wanted)})),
        labels=tuple(sorted({*(old.labels if old else ()), *new_labels})),
        undo_at=(old.undo_at if same and old is not None else None)
        or (now + timedelta(seconds=undo_after) if undo_after else None),
        extra=_extra(event, old if same else None),
    )
    encoded = state.encode()
    if (
        tuple(taints) == node.taints
        and (node.unschedulable or not plan.cordon)
        and not new_labels
        and node.annotations.get(STATE_ANNOTATION) == encoded
    ):
        return None
    spec: dict[str, Any] = {"taints": [t.to_dict() for t in taints]}
    if plan.cordon:
        spec["unschedulable"] = True
    meta: dict[str, Any] = {"annotations": {STATE_ANNOTATION: encoded}}
    if new_labels:
        meta["labels"] = new_labels
    return {"spec": spec, "metadata": meta}


def _extra(event: InterruptionEvent, old: NodeState | None) -> dict[str, Any]:
    if old is not None:
        return dict(old.extra)
    extra: dict[str, Any] = {"source": event.source.value}
    if event.instance_id:
        extra["instance_id"] = event.instance_id
    code = event.raw.get("Code") if event.kind is Kind.SCHEDULED_MAINTENANCE else None
    if isinstance(code, str):
        extra["code"] = code
    return extra


def _undo_patch(node: NodeView, event_id: str) -> Mapping[str, Any] | None:
    try:
        state = decode(node.annotations.get(STATE_ANNOTATION))
    except StateError:
        return None
    if state is None or state.event_id != event_id:
        return None  # nothing of ours, or the node is now handled for another event
    patch: dict[str, Any] = {
        "metadata": {"annotations": {STATE_ANNOTATION: None, UNDONE_ANNOTATION: event_id}}
    }
    spec: dict[str, Any] = {}
    keep = [t for t in node.taints if t.key not in state.taints]
    if len(keep) != len(node.taints):
        spec["taints"] = [t.to_dict() for t in keep]
    if state.cordoned_by_us and node.unschedulable:
        spec["unschedulable"] = None
    if spec:
        patch["spec"] = spec
    if state.labels:
        patch["metadata"]["labels"] = {k: None for k in state.labels}
    return patch
