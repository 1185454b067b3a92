"""The agent's response to interruption events on its own node.

Every live notice is remembered; the node belongs to at most one *due* event at a time, the one
whose instance goes first (``policy.supersedes``: a rebalance recommendation yields to any real
interruption). A notice that is not due yet (scheduled maintenance acts at NotBefore minus the lead
time) waits on a timer without disturbing the current one; a withdrawn notice (canceled or
completed) is forgotten, its fence undone if it held the node, and the strongest remaining due
event takes over. The work for the event holding the node: fence (taints, labels, cordon and the
state annotation in one compare-and-set write), the pre-drain actions (the ``started`` notification,
outgoing HTTP calls, the wait for load-balancer deregistration), drain, the post-drain actions (HTTP
calls, the ``finished`` or ``failed`` notification with the summary), and for a rebalance
recommendation undo the fence if nothing followed. Every action is bounded by the time left and
never stops the timeline (``handling.timeline``, docs/designs/response-actions.md).

What was done lives in the node's ``kubespot.io/interruption`` annotation (``handling.state``), so
``resume()`` at start-up continues an interrupted drain, re-arms an auto-undo, or cleans up after a
reboot; undo removes exactly what kubespot added, never a taint or cordon someone else set, and is
retried until the API server takes it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from kubespot.actions.drain import DrainResult, drain_node
from kubespot.config.drain import DrainSettings
from kubespot.config.imds import MonitorSettings
from kubespot.config.loadbalancer import LoadBalancerWaitSettings
from kubespot.config.node import NodeActionSettings
from kubespot.kube import EventRecorder, KubeClient, KubeError, NodeView, Taint, fencing
from kubespot.model import Clock, InterruptionEvent, Kind, Source
from kubespot.model.summary import Outcome, Stage
from kubespot.observability.logs import log_context
from kubespot.observability.metrics import Metrics
from kubespot.records.interruption import (
    STATE_ANNOTATION,
    UNDONE_ANNOTATION,
    UNDONE_KEPT,
    NodeState,
    Phase,
    StateError,
    decode,
    undone_ids,
    with_undone,
)

from .policy import (
    OUT_OF_SERVICE,
    Plan,
    effective_deadline,
    plan_for,
    scheduled_code,
    supersedes,
    voluntary_drain,
)
from .timeline import Run, counts_extra, drain_error, drain_summary, pod_counts
from .timeline_steps import Notifier, StageCalls, TimelineSteps

if TYPE_CHECKING:
    from .deregistration import DeregistrationWait

__all__ = ["NodeHandler", "Notifier", "Settled", "StageCalls"]

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
#: While draining, the holder renews its mark on the node this often; a mark older than
#: HOLD_STALE means its holder died and another process may take over. Followers look this often.
HOLD_RENEW = 10.0
HOLD_STALE = 30.0
FOLLOW_POLL = 2.0
#: A node state is cleared when the instance booted this long after the node was fenced: the boot
#: time is computed from uptime and the wall clock, which can disagree by a little.
BOOT_SLACK = timedelta(seconds=5)
#: How many ended events' outcomes are kept for ``settled()`` callers that come late.
SETTLED_KEPT = 64
#: A live event that lost the node (covered by the current one) is forgotten this long after its
#: instance was expected to go, so a long-lived handler does not keep every notice it ever saw.
KNOWN_KEPT_PAST_DEADLINE = timedelta(minutes=10)
#: An event whose work has ended keeps the node (and covers weaker follow-ups: the EC2 state changes
#: and hooks that come after a spot interruption) until this long after its instance's expected end;
#: then the node is free again, so a later interruption of the same Node (a stopped and restarted
#: instance, a warm pool) is handled on its own instead of being taken for a follow-up.
CURRENT_KEPT_PAST_DEADLINE = timedelta(minutes=10)
#: At shutdown, how long the release of this process's hold on the node may take.
RELEASE_TIMEOUT = 2.0


class Settled(StrEnum):
    """How the handling of one event ended, as far as the instance's fate goes."""

    #: An event that lost the node to a stronger one (or was covered by it) ends as that one ends.
    DONE = "done"  # fenced, and drained if the plan drains (or a dry run of that)
    WITHDRAWN = "withdrawn"  # canceled or completed before or while it was handled
    IGNORED = "ignored"  # its kind is switched off
    FAILED = "failed"  # gave up (the deadline passed) or an unexpected error
    GONE = "gone"  # the Node was deleted (or replaced by another Node of the same name)


class NodeHandler(TimelineSteps):
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
        http_calls: StageCalls | None = None,
        loadbalancer_wait: LoadBalancerWaitSettings | None = None,
        own_pod: tuple[str, str] | None = None,
        boot_time: Callable[[], datetime | None] = lambda: None,
        node_hint: Callable[[], NodeView | None] = lambda: None,
        identity: str = "",
        retry_cap: float = 10.0,
        node_uid: str = "",
        keep_last_drain: bool = True,
    ) -> None:
        self.node = node_name
        #: The Node's UID when known (the controller): names are reused (EKS and Karpenter name
        #: nodes by private IP), so a handler belongs to one Node object, not to a name.
        self.node_uid = node_uid
        self._keep_last_drain = keep_last_drain
        #: Who is working on the node, as written in its state (see ``NodeState.holder``).
        self.identity = identity or f"{socket.gethostname()}/{os.getpid()}"
        self._kube = kube
        self._actions = actions
        self._monitors = monitors
        self._drain_settings = drain
        self._clock = clock
        self._metrics = metrics
        self._recorder = recorder
        self._notifier = notifier
        self._http_calls = http_calls
        self._lb_wait = loadbalancer_wait
        self._own_pod = own_pod
        self._boot_time = boot_time
        #: A recent copy of the node (the controller's watch), saving the GET before the fence.
        self._node_hint = node_hint
        self._retry_cap = retry_cap
        #: The due event whose work runs (fence, drain, undo timer); None when the node is unclaimed.
        self._current: InterruptionEvent | None = None
        #: Every live event: due ones and those waiting for their act_at (scheduled maintenance).
        self._known: dict[str, InterruptionEvent] = {}
        #: Events whose fence was undone (from the node at start-up): their notices may still be in IMDS.
        self._undone: tuple[str, ...] = ()
        #: Intake and the timer decide under this lock; the work itself runs outside it.
        self._lock = asyncio.Lock()
        self._work: asyncio.Task[None] | None = None
        self._timer: asyncio.Task[None] | None = None
        self._side: set[asyncio.Task[None]] = set()
        #: Per event: how its handling ended (see ``settled``); bounded by ``_prune``.
        self._settled: dict[str, asyncio.Future[Settled]] = {}
        #: Whether this process's mark is on the node's state (released at shutdown).
        self._holding = False
        #: Per event handled by this process and not reported as ended yet: its timeline so far.
        self._runs: dict[str, Run] = {}
        self._window = timedelta(seconds=drain.node_termination_grace_period)
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

    async def settled(self, event_id: str) -> Settled:
        """Wait until kubespot has done what it will do for ``event_id`` before the instance goes:
        fenced, and drained when the plan drains (a rebalance's later undo is not waited for); or
        until the event lost the node to a stronger one, was withdrawn, or its handling failed.

        The queue processor keeps a message until this returns, and completes an Auto Scaling
        lifecycle action only after it.
        """
        return await asyncio.shield(self._future(event_id))

    def _future(self, event_id: str) -> asyncio.Future[Settled]:
        fut = self._settled.get(event_id)
        if fut is None:
            fut = self._settled[event_id] = asyncio.get_running_loop().create_future()
        return fut

    def _settle(self, event_id: str, how: Settled) -> None:
        fut = self._future(event_id)
        if not fut.done():
            fut.set_result(how)
        if self._current is not None and self._current.id == event_id:
            self._settle_covered()

    def _settle_covered(self) -> None:
        """Due events that did not take the node over are covered by the current event's work (an
        EC2 "shutting-down" or an ASG termination after a spot warning, a second lifecycle hook): the
        node is fenced and drained for the stronger reason, so they end as the current one ends."""
        current = self._current
        fut = None if current is None else self._settled.get(current.id)
        if current is None or fut is None or not fut.done():
            return
        how = fut.result()
        if how not in (Settled.DONE, Settled.FAILED):
            return  # superseded or withdrawn: the next current event decides for them
        now = self._clock.now()
        for event in self._known.values():
            if event.id != current.id and event.act_at <= now:
                other = self._future(event.id)
                if not other.done():
                    log.info("event %s: covered by %s (%s)", event.id, current.id, how.value)
                    other.set_result(how)

    def _ends(self, event: InterruptionEvent) -> datetime:
        """When ``event``'s instance was expected to go (its deadline, else the drain window)."""
        return effective_deadline(event, now=event.act_at, window=self._window)

    def _release_ended(self, now: datetime) -> None:
        """Free the node from a current event whose work has ended well past its instance's end."""
        current = self._current
        fut = None if current is None else self._settled.get(current.id)
        if current is None or fut is None or not fut.done() or self.busy:
            return  # still working (a rebalance's undo timer counts), or never settled
        if self._ends(current) + CURRENT_KEPT_PAST_DEADLINE >= now:
            return
        log.info("event %s ended at %s: the node is free for new notices", current.id, self._ends(current))
        self._known.pop(current.id, None)
        self._current = None

    def _prune(self, now: datetime) -> None:
        """Forget live events long past their instance's end and the oldest outcomes, so memory stays
        bounded on a handler that lives as long as its Node."""
        current = None if self._current is None else self._current.id
        for event_id, event in list(self._known.items()):
            fut = self._settled.get(event_id)
            if event_id == current or fut is None or not fut.done():
                continue
            if self._ends(event) + KNOWN_KEPT_PAST_DEADLINE < now:
                del self._known[event_id]
        ended = [i for i, f in self._settled.items() if f.done() and i not in self._known]
        for event_id in ended[: max(0, len(ended) - SETTLED_KEPT)]:
            del self._settled[event_id]

    def close_gone(self) -> None:
        """The Node was deleted: every event still waited for ends as ``GONE`` (its instance is
        gone with it); the work is stopped by ``aclose()``."""
        for fut in self._settled.values():
            if not fut.done():
                fut.set_result(Settled.GONE)

    async def run(self, events: asyncio.Queue[InterruptionEvent]) -> None:
        """Handle events from ``events`` until cancelled; a failure handling one never stops the loop."""
        while True:
            event = await events.get()
            try:
                await self.handle(event)
            except Exception:
                log.exception("event %s: handling failed", event.id, extra={"event_id": event.id})

    async def handle(self, event: InterruptionEvent, *, announce: bool = True) -> None:
        """Take ``event`` in: returns once the decision is made (its work runs in the background).

        ``announce=False``: a notice this process re-reads rather than receives (a scheduled change
        re-armed from its record on the Node): it is not counted or reported as a new notice again,
        so each controller replica and restart does not add one more Kubernetes event.

        A new notice is remembered; if it is due and stronger than the event being handled (see
        ``policy.supersedes``) it takes the node over, if it is not due yet a timer wakes the handler
        at its act_at. A withdrawn event (canceled or completed) is forgotten, and if it was being
        handled its fence is undone and the strongest remaining due event, if any, takes over.
        """
        with log_context(
            event_id=event.id, kind=event.kind.value, node=self.node, instance_id=event.instance_id
        ):
            async with self._lock:
                await self._take(event, announce=announce)

    async def _take(self, event: InterruptionEvent, *, announce: bool = True) -> None:
        plan = plan_for(event, actions=self._actions, monitors=self._monitors)
        if not plan.acts:
            log.info("event %s: %s is switched off; ignored", event.id, event.kind.value)
            self._settle(event.id, Settled.IGNORED)
            return
        if event.cancelled:
            await self._withdraw(event, plan)
            return
        now = self._clock.now()
        known = self._known.get(event.id)
        if known is not None and _same_schedule(known, event, now):
            log.debug("event %s: already known", event.id)
            return
        if known is None and event.id in self._undone:
            log.info("event %s: already handled and undone; ignored", event.id)
            self._settle(event.id, Settled.DONE)
            return
        self._known[event.id] = event
        if known is None:
            if announce:
                self._metrics.interruption(event.kind.value, event.source.value)
            log.info(
                "event %s: %s (acting at %s, deadline %s)",
                event.id,
                event.description,
                event.act_at.isoformat(),
                event.deadline.isoformat() if event.deadline else "none",
            )
            if announce:
                self._node_event(NOTICE_REASONS[event.kind], event.description or event.kind.value)
        else:
            log.info(
                "event %s rescheduled: acting at %s, deadline %s",
                event.id,
                event.act_at.isoformat(),
                event.deadline.isoformat() if event.deadline else "none",
            )
            if self._current is not None and self._current.id == event.id:
                self._current = event  # the same fence, with the new deadline
                await self._replace_work(self._execute(event, plan))
        await self._reschedule()

    async def _withdraw(self, event: InterruptionEvent, plan: Plan) -> None:
        self._known.pop(event.id, None)
        self._settle(event.id, Settled.WITHDRAWN)
        if self._current is not None and self._current.id == event.id:
            log.info("event %s withdrawn (%s): undoing", event.id, event.description)
            self._report_end(self._current, Outcome.WITHDRAWN)
            self._current = None
            await self._replace_work(None)
            self._spawn(self._undo(event.id, "the event was canceled or completed", plan))
        else:
            log.info("event %s withdrawn before kubespot acted on it", event.id)
        await self._reschedule()

    async def _reschedule(self) -> None:
        """Give the node to the strongest due event if it beats the current one; arm the timer for
        the next event that is not due yet. Called under the lock."""
        now = self._clock.now()
        self._release_ended(now)
        best: InterruptionEvent | None = None
        for event in self._known.values():
            if event.act_at <= now and supersedes(event, best, now=now, window=self._window):
                best = event
        if best is not None and supersedes(best, self._current, now=now, window=self._window):
            if self._current is not None:
                # Not settled here: the event that lost the node is covered by the one that took it
                # and ends as that one ends (an Auto Scaling hook is completed only once the node is
                # drained for the stronger reason, never at the takeover).
                log.info("event %s takes the node over from %s", best.id, self._current.id)
                self._report_end(self._current, Outcome.SUPERSEDED)
            self._current = best
            plan = plan_for(best, actions=self._actions, monitors=self._monitors)
            await self._replace_work(self._execute(best, plan))
        self._settle_covered()
        self._prune(now)
        waiting = [e.act_at for e in self._known.values() if e.act_at > now]
        self._arm_timer(min(waiting) if waiting else None)
        if self._current is None:
            self._set_phase("pending" if waiting else "none")

    def _arm_timer(self, when: datetime | None) -> None:
        if self._timer is not None and self._timer is not asyncio.current_task():
            self._timer.cancel()
        self._timer = None
        if when is not None:
            log.info("next scheduled event due at %s", when.isoformat())
            self._timer = asyncio.create_task(self._wake_at(when))

    async def _wake_at(self, when: datetime) -> None:
        await self._sleep_until(when)
        async with self._lock:
            self._timer = None
            await self._reschedule()

    async def start(self) -> None:
        """``resume()``, retried with backoff while the API server cannot be read; any other failure
        is logged and skipped: taking in new notices matters more than resuming an old one."""
        delay = 0.5
        while True:
            try:
                await self.resume()
                return
            except KubeError as err:
                log.warning("cannot read node %s yet (%s); retrying", self.node, err)
                await self._clock.sleep(delay)
                delay = min(self._retry_cap, delay * 2)
            except Exception:
                log.exception("resuming %s from its state failed; going on without it", self.node)
                return

    async def resume(self) -> None:
        """Continue from the state on the node (after a restart). Raises ``KubeError`` if unreadable."""
        node = self._node_hint() or await self._kube.get_node(self.node)
        if node is None:
            log.error("node %s not found: nothing to resume, and nothing can be fenced", self.node)
            return
        self._undone = undone_ids(node.annotations.get(UNDONE_ANNOTATION))
        try:
            state = decode(node.annotations.get(STATE_ANNOTATION))
        except StateError as exc:
            log.warning("ignoring the node's state: %s", exc)
            return
        if state is None:
            return
        event = _event_from_state(state, node_name=self.node)
        with log_context(event_id=event.id, kind=event.kind.value, node=self.node):
            boot = self._boot_time()
            if boot is not None and boot > state.since + BOOT_SLACK:
                log.info(
                    "the instance restarted (boot %s) after it was fenced: cleaning up", boot.isoformat()
                )
                # Before anything else is taken in: the notice may still be listed in IMDS.
                self._undone = (*self._undone, state.event_id)
                plan = Plan(acts=True, undo=True, dry_run=self._actions.dry_run, reason="reboot")
                await self._undo(state.event_id, "the instance rebooted", plan, attempts=1)
                return
            plan = plan_for(event, actions=self._actions, monitors=self._monitors)
            if not plan.acts:
                log.warning("state for %s found, but that kind is switched off: left as it is", event.kind)
                return
            ended = self._ends(event) + CURRENT_KEPT_PAST_DEADLINE < self._clock.now()
            if state.phase is Phase.DRAINED and state.undo_at is None and ended:
                # Long over: nothing to resume, and a new notice must not be taken for its follow-up.
                log.info("state of %s (drained, ended) left as it is", event.id)
                return
            log.info("resuming %s from phase %s", event.id, state.phase.value)
            async with self._lock:
                self._known[event.id] = event
                self._current = event
                await self._replace_work(self._execute(event, plan, resumed=True))

    async def aclose(self, *, release: bool = True) -> None:
        """Stop the work in progress (its state stays on the node, for the next start to resume).

        ``release``: if this process holds the node (fencing or draining), clear its mark at once so
        the next process (another replica, the restarted agent) takes over without waiting for the
        mark to go stale. One bounded try: a shutdown must not hang on an unreachable API server.
        """
        self._arm_timer(None)
        await self._replace_work(None)
        for task in list(self._side):
            task.cancel()
        if self._side:
            await asyncio.wait(self._side)
        if release and self._holding:
            try:
                async with asyncio.timeout(RELEASE_TIMEOUT):
                    await self._kube.update_node(self.node, self._release_patch, current=self._node_hint())
            except (KubeError, TimeoutError) as err:
                log.warning("could not release the hold on %s at shutdown: %s", self.node, err)
            self._holding = False

    def _release_patch(self, node: NodeView) -> Mapping[str, Any] | None:
        try:
            state = decode(node.annotations.get(STATE_ANNOTATION))
        except StateError:
            return None
        if state is None or state.holder != self.identity or state.phase is Phase.DRAINED:
            return None
        log.info("releasing the hold on %s (%s, %s)", self.node, state.event_id, state.phase.value)
        released = replace(state, holder="", renewed=None)
        return {"metadata": {"annotations": {STATE_ANNOTATION: released.encode()}}}

    async def _replace_work(self, coro: Coroutine[Any, Any, None] | None) -> None:
        old = self._work
        if old is not None and old is not asyncio.current_task() and not old.done():
            old.cancel()
            await asyncio.wait({old})
        # The task copies the log context, so every line it logs names the event.
        self._work = asyncio.create_task(coro) if coro is not None else None

    # --- the work for one event ------------------------------------------------------------------

    async def _execute(
        self, event: InterruptionEvent, plan: Plan, *, resumed: bool = False, take_over: bool = False
    ) -> None:
        reported = False  # "finished" went out: a later failure (of the undo) is no news for it
        try:
            if plan.dry_run:
                await self._dry_run(event, plan)
                self._settle(event.id, Settled.DONE)
                return
            if not take_over and await self._held_elsewhere() is not None:
                await self._follow(event, plan)
                return
            state = await self._fence(event, plan, announce=not resumed)
            if state is None:
                self._settle(event.id, Settled.FAILED)
                self._failed(event, "the node could not be fenced: the API server was unreachable")
                return
            if state.held_by_other(self.identity, self._clock.now(), HOLD_STALE):
                await self._follow(event, plan)  # another process fenced it first (see _fence_patch)
                return
            # The timeline of this process: a fresh fence made the run (and sent "started"); a
            # resumed or taken-over drain gets one too, without its pre-drain actions (they may have
            # run before the restart). A resumed fence with nothing left to do reports nothing.
            drains = plan.drain and state.phase is not Phase.DRAINED
            run = self._runs.get(event.id)
            if run is None and drains:
                run = self._runs[event.id] = Run(started=self._clock.now(), pre_drain=False)
            if drains:
                state = await self._drain(event, plan, state, run)
            elif run is not None and run.pre_drain:
                await self._pre_drain(event, run)
            if run is not None:
                await self._post_drain(event, run)
            # A drain that did not empty the node is no DONE: its hook stays uncompleted.
            self._settle(
                event.id, Settled.FAILED if drains and state.phase is not Phase.DRAINED else Settled.DONE
            )
            if run is not None:
                self._finish(event, run)
            reported = True
            if state.undo_at is not None:
                log.info("event %s: undoing at %s unless an interruption follows", event.id, state.undo_at)
                await self._sleep_until(state.undo_at)
                await self._undo(event.id, "no interruption followed the recommendation", plan)
                async with self._lock:
                    self._known.pop(event.id, None)
                    if self._current is event:
                        self._current = None
                        await self._reschedule()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("event %s: handling failed", event.id)
            self._metrics.action("handle", "failure")
            self._settle(event.id, Settled.FAILED)
            if not reported:
                self._failed(event, f"unexpected error: {type(exc).__name__}")

    async def _fence(self, event: InterruptionEvent, plan: Plan, *, announce: bool) -> NodeState | None:
        """Taints, labels, cordon and state in one compare-and-set write; retried until the deadline.

        ``announce``: report the fence (event, webhook, latency) if the write changed the node; a
        resumed or repeated fence that finds everything in place reports nothing.
        """
        due = max(event.notice_time, event.act_at)
        wrote = False

        def change(node: NodeView) -> Mapping[str, Any] | None:
            nonlocal wrote
            patch = _fence_patch(
                node, event, plan, now=self._clock.now(), undo_after=plan.undo_after, holder=self.identity
            )
            wrote = patch is not None
            return patch

        with fencing():  # ahead of every drain's calls when many nodes are hit at once
            node = await self._persist(
                "fence",
                lambda: self._kube.update_node(self.node, change, current=self._node_hint()),
                deadline=event.deadline,
                kind=event.kind,
            )
        if node is None:
            return None
        fenced = self._clock.now()
        state = decode(node.annotations.get(STATE_ANNOTATION))
        if state is not None and state.held_by_other(self.identity, fenced, HOLD_STALE):
            return state  # another live process holds the node (see _fence_patch): the caller follows
        if state is None or state.event_id != event.id:  # pragma: no cover - our own write, just made
            log.error("event %s: the state annotation did not stick", event.id)
            return None
        self._holding = state.holder == self.identity
        self._set_phase(state.phase.value)
        if not (announce and wrote):
            return state
        self._metrics.notice_to_cordon(max(0.0, (fenced - due).total_seconds()), event.kind.value)
        self._metrics.action("cordon", "success")
        what = "Cordoned and tainted" if plan.drain else "Cordoned and tainted (no drain)"
        self._node_event("CordonAndDrain" if plan.drain else "Cordon", f"{what} by kubespot for {event.id}")
        log.info(
            "event %s: tainted and cordoned %.3fs after the notice", event.id, (fenced - due).total_seconds()
        )
        run = self._runs[event.id] = Run(started=fenced)
        self._notify(event, run, Stage.STARTED)
        return state

    async def _drain(
        self, event: InterruptionEvent, plan: Plan, state: NodeState, run: Run | None = None
    ) -> NodeState:
        if state.phase is not Phase.DRAINING:  # the fence normally wrote it already (_fence_patch)
            state = await self._write_state(state.advance(Phase.DRAINING, self._clock.now()))
        self._set_phase(Phase.DRAINING.value)
        gate: DeregistrationWait | None = None
        settings, deadline = voluntary_drain(
            plan, self._drain_settings, event.deadline or state.deadline, self._clock.now()
        )

        async def attempt() -> DrainResult:
            return await drain_node(
                self.node,
                kube=self._kube,
                settings=settings,
                deadline=deadline,
                clock=self._clock,
                own_pod=self._own_pod,
                recorder=self._recorder,
                hold=gate.hold if gate is not None and gate.holds_any else None,
            )

        renewer = asyncio.create_task(self._renew(state))
        started = self._clock.now()
        try:
            gate = await self._before_drain(event, state, run)
            started = self._clock.now()
            result = await self._persist("drain", attempt, deadline=event.deadline, kind=event.kind)
        finally:
            renewer.cancel()
            await asyncio.wait({renewer})
        if gate is not None:
            self._report_wait(event, gate, run)
        if run is not None:
            run.add([drain_summary(result, started=started, now=self._clock.now())])
            run.error = run.error or drain_error(result)
            if result is not None:
                run.pods = pod_counts(result)
        if result is None:
            return await self._write_state(state.advance(Phase.DRAIN_FAILED, self._clock.now()))
        if self._keep_last_drain:
            self.last_drain = result
        self._report_drain(event, result)
        # The counts ride on the write that records DRAINED (DRAIN_FAILED when pods were refused or
        # left): the controller's action runner puts them in the summary it publishes (it acts when
        # the state says drained).
        # DRAIN_FAILED: refused, or pods left (a budget to the end, a failed delete); pods still in
        # their grace period at the deadline were sent away and count as drained.
        drained = state.advance(Phase.DRAINED if result.sent_away else Phase.DRAIN_FAILED, self._clock.now())
        drained = replace(drained, extra={**drained.extra, "pods": counts_extra(pod_counts(result))})
        state = await self._write_state(drained, durable=True)
        self._set_phase(state.phase.value)
        if plan.out_of_service_after_drain and result.emptied:
            # Recorded in the state's taints in the same write, so an undo (a withdrawn event) or the
            # clean-up after a reboot removes it like the fence's own taints.
            await self._persist(
                "out_of_service",
                lambda: self._kube.update_node(
                    self.node, lambda node: _out_of_service_patch(node, event.id), current=self._node_hint()
                ),
                deadline=event.deadline,
                kind=None,  # the drain is done: a late taint is not a missed deadline
            )
        return state

    async def _renew(self, state: NodeState) -> None:
        """Keep the holder mark fresh while the drain runs, so others keep following.

        Compare-and-set: the mark is renewed only while the node's state is still this event's and
        no other live process holds it (one that took over a mark that looked stale, e.g. after a
        long API outage here, is not overwritten). A lost hold stops the renewals."""
        lost = False

        def change(node: NodeView) -> Mapping[str, Any] | None:
            nonlocal lost
            now = self._clock.now()
            try:
                current = decode(node.annotations.get(STATE_ANNOTATION))
            except StateError:
                current = None
            if (
                current is None
                or current.event_id != state.event_id
                or current.held_by_other(self.identity, now, HOLD_STALE)
            ):
                lost = True
                return None
            renewed = replace(current, holder=self.identity, renewed=now)
            return {"metadata": {"annotations": {STATE_ANNOTATION: renewed.encode()}}}

        while True:
            await self._clock.sleep(HOLD_RENEW)
            try:
                await self._kube.update_node(self.node, change, current=self._node_hint())
            except KubeError as err:
                log.warning("could not renew the hold on %s: %s", self.node, err)
                continue
            if lost:
                log.warning("event %s: another process took the hold on %s", state.event_id, self.node)
                self._holding = False
                return

    async def _held_elsewhere(self) -> NodeState | None:
        """The node's state if another live process (a controller replica, the agent) is on it."""
        node = self._node_hint()
        if node is None:
            try:
                node = await self._kube.get_node(self.node)
            except KubeError:
                return None  # the fence will retry and report
        if node is None:
            return None
        try:
            state = decode(node.annotations.get(STATE_ANNOTATION))
        except StateError:
            return None
        if state is not None and state.held_by_other(self.identity, self._clock.now(), HOLD_STALE):
            return state
        return None

    async def _follow(self, event: InterruptionEvent, plan: Plan) -> None:
        """Another process is fencing or draining the node: wait for it to finish instead of
        draining a second time, and take over if it stops renewing its mark (it died)."""
        log.info("event %s: node %s is being handled by another process; following", event.id, self.node)
        self._set_phase("following")
        while True:
            await self._clock.sleep(FOLLOW_POLL)
            # The controller's watch has the node already: no GET per follower every FOLLOW_POLL.
            node = self._node_hint()
            if node is None:
                try:
                    node = await self._kube.get_node(self.node)
                except KubeError as err:
                    log.warning("following node %s: %s", self.node, err)
                    continue
            try:
                state = None if node is None else decode(node.annotations.get(STATE_ANNOTATION))
            except StateError:
                state = None
            if state is None or state.phase in (Phase.DRAINED, Phase.DRAIN_FAILED):
                log.info("event %s: the other process finished with node %s", event.id, self.node)
                self._set_phase(state.phase.value if state else "none")
                failed = state is not None and state.phase is Phase.DRAIN_FAILED
                self._settle(event.id, Settled.FAILED if failed else Settled.DONE)
                return
            if not state.held_by_other(self.identity, self._clock.now(), HOLD_STALE):
                log.warning(
                    "event %s: %s stopped renewing its hold on %s; taking over",
                    event.id,
                    state.holder,
                    self.node,
                )
                await self._execute(event, plan, resumed=True, take_over=True)
                return

    def _report_drain(self, event: InterruptionEvent, result: DrainResult) -> None:
        end = result.finished_at or self._clock.now()
        seconds = (end - result.started_at).total_seconds()
        verdict = "refused" if result.refused else ("emptied" if result.emptied else "incomplete")
        self._metrics.drain_finished(seconds, verdict)
        self._metrics.action("drain", "success" if result.emptied else "failure")
        for outcome, count in result.counts().items():
            self._metrics.eviction(outcome, count)
        if not result.emptied:
            if event.deadline is not None and not result.refused:
                self._metrics.deadline_miss(event.kind.value)
            log.error("event %s: drain %s: %s", event.id, verdict, result.counts())
        else:
            log.info("event %s: drained in %.1fs: %s", event.id, seconds, result.counts())

    async def _undo(self, event_id: str, why: str, plan: Plan, *, attempts: int | None = None) -> None:
        """Remove what kubespot added for ``event_id`` (taints, labels, its cordon, the state).

        Retried with backoff until it succeeds (``attempts``: give up after that many and raise
        ``KubeError``), so an API outage at the moment of an undo cannot leave the node cordoned.
        """
        if plan.dry_run:
            log.info("dry run: would uncordon and remove the taints of %s (%s)", event_id, why)
            self._node_event("DryRun", f"Dry run: would uncordon ({why})")
            self._set_phase("none")
            return
        wrote = False

        def change(node: NodeView) -> Mapping[str, Any] | None:
            nonlocal wrote
            patch = _undo_patch(node, event_id)
            wrote = patch is not None
            return patch

        tries = 0
        delay = 0.5
        while True:
            try:
                await self._kube.update_node(self.node, change)
                break
            except KubeError as err:
                tries += 1
                self._metrics.action("undo", "failure")
                if attempts is not None and tries >= attempts:
                    raise
                log.warning("could not undo %s (%s); retrying in %.1fs", event_id, err, delay)
                if tries == 1:
                    self._node_event(
                        "UncordonError", f"Could not undo the fence for {event_id}: {err}", warning=True
                    )
                await self._clock.sleep(delay)
                delay = min(self._retry_cap, delay * 2)
        self._undone = (*self._undone, event_id)[-UNDONE_KEPT:]
        if self._current is None:
            self._set_phase("none")
        if not wrote:
            log.info("nothing of %s left to undo (%s)", event_id, why)
            return
        self._metrics.action("undo", "success")
        self._node_event("Uncordon", f"Uncordoned by kubespot: {why}")
        log.info("undone: %s", why)

    async def _dry_run(self, event: InterruptionEvent, plan: Plan) -> None:
        taints = ", ".join(t.key for t in plan.taints)
        what = "taint (" + taints + "), cordon" + (" and drain" if plan.drain else "")
        log.info("dry run: would %s node %s", what, self.node)
        self._metrics.action("cordon", "dry_run")
        self._node_event("DryRun", f"Dry run: would {what} for {event.id}")
        # Under dry run the notifier only says what it would send, and the calls what they would do.
        run = Run(started=self._clock.now())
        self._notify(event, run, Stage.STARTED)
        await self._pre_drain(event, run)
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
            run.add([drain_summary(result, started=result.started_at, now=self._clock.now())])
            run.pods = pod_counts(result)
        await self._post_drain(event, run)
        self._notify(event, run, Stage.FINISHED)

    # --- helpers ---------------------------------------------------------------------------------

    async def _persist(
        self,
        action: str,
        call: Callable[[], Coroutine[Any, Any, T]],
        *,
        deadline: datetime | None,
        kind: Kind | None,
    ) -> T | None:
        """Run ``call`` until it succeeds, backing off, for as long as the instance is expected to live
        (``deadline``; None: until it succeeds or the work is cancelled).

        The Kubernetes client already retries transient failures; this outer loop is for outages
        longer than that (an API server restart): an interruption is never dropped while there is
        time to act on it. Giving up at the deadline counts a deadline miss for ``kind``.
        """
        delay = 0.5
        while True:
            try:
                return await call()
            except KubeError as err:
                self._metrics.action(action, "failure")
                left = None if deadline is None else (deadline - self._clock.now()).total_seconds()
                if left is not None and left <= 0:
                    log.error("%s failed and the deadline has passed: %s", action, err)
                    if kind is not None:
                        self._metrics.deadline_miss(kind.value)
                    return None
                log.warning("%s failed (%s); retrying in %.1fs", action, err, delay)
                await self._clock.sleep(delay if left is None else min(delay, left))
                delay = min(self._retry_cap, delay * 2)

    async def _write_state(self, state: NodeState, *, durable: bool = False) -> NodeState:
        """Record ``state`` on the node. ``durable``: retried until it lands or the deadline passes
        (DRAINED: the controller's post-drain actions and the summary wait for it); otherwise one
        try, because only the resume point is lost (a restart would redo this step)."""
        annotations = {STATE_ANNOTATION: state.encode()}
        if durable:
            await self._persist(
                f"record_{state.phase.value}",
                lambda: self._kube.set_annotations(self.node, annotations),
                deadline=state.deadline,
                kind=None,
            )
            return state
        try:
            await self._kube.set_annotations(self.node, annotations)
        except KubeError as err:
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
        if self._recorder is not None:
            self._spawn(self._recorder.node(self.node, reason, message, warning=warning))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` beside the work (events, an undo), keeping a reference until it ends."""
        task = asyncio.create_task(coro)
        self._side.add(task)
        task.add_done_callback(self._side.discard)


def _same_schedule(known: InterruptionEvent, new: InterruptionEvent, now: datetime) -> bool:
    """Whether ``new`` is a repeat of ``known``: same deadline, and the same act_at unless ``known``
    is already due (once a fence is up, a later act_at changes nothing). A rescheduled maintenance
    event keeps its EventId but moves NotBefore, so this is what tells it apart from a repeat."""
    return known.deadline == new.deadline and (known.act_at <= now or known.act_at == new.act_at)


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
        raw={"Code": code} if isinstance(code := state.extra.get("code"), str) else {},
    )


def _fence_patch(
    node: NodeView,
    event: InterruptionEvent,
    plan: Plan,
    *,
    now: datetime,
    undo_after: float | None,
    holder: str = "",
) -> Mapping[str, Any] | None:
    """The merge patch that fences ``node`` for ``event``, or None when it already is."""
    try:
        old = decode(node.annotations.get(STATE_ANNOTATION))
    except StateError:
        old = None  # hand-edited: overwritten with what is true from now on
    same = old is not None and old.event_id == event.id
    if old is not None and old.held_by_other(holder, now, HOLD_STALE):
        # Another live process fenced the node since we last looked: two replicas waking at the same
        # act_at, or the agent (IMDS) and the controller (EventBridge) seeing one interruption under
        # two event ids. It goes on, we follow instead of taking the hold over.
        return None
    wanted = [Taint(t.key, t.effect, t.value) for t in plan.taints]
    keys = {(t.key, t.effect) for t in wanted}
    taints = [t for t in node.taints if (t.key, t.effect) not in keys] + wanted
    new_labels = {k: v for k, v in plan.labels if node.labels.get(k) != v}
    # A plan that drains records DRAINING in this same write (the drain starts right after it): one
    # write per node instead of two. A FENCED state of such a plan (written by an earlier version,
    # or a resumed fence) moves on to DRAINING here; a later phase is kept.
    fenced = Phase.DRAINING if plan.drain else Phase.FENCED
    state = NodeState(
        event_id=event.id,
        kind=event.kind.value,
        # DRAIN_FAILED is retried: back to DRAINING in this compare-and-set write, so the retry has
        # one owner (two replicas resuming the node at a rollout do not both drain it).
        phase=old.phase
        if same and old is not None and old.phase not in (Phase.FENCED, Phase.DRAIN_FAILED)
        else fenced,
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
        holder=holder,
        renewed=now,
        extra=_extra(event, old if same else None),
    )
    encoded = state.encode()
    # Already fenced by this holder: only the renewal time would change, which is not worth a write.
    unchanged = old is not None and replace(state, renewed=old.renewed).encode() == node.annotations.get(
        STATE_ANNOTATION
    )
    if (
        tuple(taints) == node.taints
        and (node.unschedulable or not plan.cordon)
        and not new_labels
        and unchanged
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
    code = scheduled_code(event) if event.kind is Kind.SCHEDULED_MAINTENANCE else None
    if code is not None:
        extra["code"] = code  # read back by _event_from_state: whether the instance stops
    return extra


def _out_of_service_patch(node: NodeView, event_id: str) -> Mapping[str, Any] | None:
    """Taint the node ``node.kubernetes.io/out-of-service`` and record the key in its state."""
    try:
        state = decode(node.annotations.get(STATE_ANNOTATION))
    except StateError:
        return None
    if state is None or state.event_id != event_id:
        return None  # undone or taken over meanwhile: the taint is no longer ours to add
    key, value, effect = OUT_OF_SERVICE
    taint = Taint(key, effect, value)
    if taint in node.taints and key in state.taints:
        return None
    others = [t for t in node.taints if (t.key, t.effect) != (key, effect)]
    recorded = replace(state, taints=tuple(sorted({*state.taints, key})))
    return {
        "spec": {"taints": [t.to_dict() for t in (*others, taint)]},
        "metadata": {"annotations": {STATE_ANNOTATION: recorded.encode()}},
    }


def _undo_patch(node: NodeView, event_id: str) -> Mapping[str, Any] | None:
    try:
        state = decode(node.annotations.get(STATE_ANNOTATION))
    except StateError:
        return None
    if state is None or state.event_id != event_id:
        return None  # nothing of ours, or the node is now handled for another event
    undone = with_undone(node.annotations.get(UNDONE_ANNOTATION), event_id)
    patch: dict[str, Any] = {"metadata": {"annotations": {STATE_ANNOTATION: None, UNDONE_ANNOTATION: undone}}}
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
