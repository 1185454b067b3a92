"""The response to interruption events on one node: the agent's for its own, the operator's per node.

``NodeHandler`` is composed of parts with one job each, which it builds, owns and wires together:

- ``intake``: which event holds the node (the one whose instance goes first, ``policy.supersedes``),
  timers for notices not due yet, withdrawals, and when each event's handling ended (``settled``);
- ``fence``: the compare-and-set writes of the ``kubespot.io/interruption`` record (fence, the
  holder's renewals, phases, undo, the release at shutdown; their patches: ``node_patches``);
- ``drain_run``: the drain, following another process that holds the node, or a dry run;
- ``timeline_steps``: the steps around the drain (notifications by stage, HTTP calls, the wait for
  load-balancer deregistration);
- ``node_context``: the node and clients they share, its phase and the events reported on it.

The handler itself holds the work for the event holding the node: fence (taints, labels, cordon and
the state annotation in one compare-and-set write), the pre-drain actions (the ``started``
notification, outgoing HTTP calls, the wait for load-balancer deregistration), drain, the post-drain
actions (HTTP calls, the ``finished`` or ``failed`` notification with the summary), and for a
rebalance recommendation undo the fence if nothing followed. Every action is bounded by the time
left and never stops the timeline (``handling.timeline``, docs/designs/response-actions.md).

What was done lives in the node's ``kubespot.io/interruption`` annotation (``records.interruption``),
so ``resume()`` at start-up continues an interrupted drain, re-arms an auto-undo, or cleans up after
a reboot.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import weakref
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import ParamSpec, TypeVar

from kubespot.actions.drain import DrainResult
from kubespot.config.drain import DrainSettings
from kubespot.config.imds import MonitorSettings
from kubespot.config.loadbalancer import LoadBalancerWaitSettings
from kubespot.config.node import NodeActionSettings
from kubespot.kube import EventRecorder, KubeClient, KubeError, NodeView
from kubespot.model import Clock, InterruptionEvent, Kind, Source
from kubespot.observability.logs import log_context
from kubespot.observability.metrics import Metrics
from kubespot.records.interruption import (
    STATE_ANNOTATION,
    UNDONE_ANNOTATION,
    NodeState,
    Phase,
    StateError,
    decode,
    undone_ids,
)

from .drain_run import DrainRun
from .fence import Fence
from .intake import CURRENT_KEPT_PAST_DEADLINE, Intake, Settled
from .node_context import NodeContext
from .node_patches import HOLD_STALE
from .policy import Plan, plan_for
from .timeline import Run
from .timeline_steps import Notifier, StageCalls, TimelineSteps

__all__ = ["NodeHandler", "Notifier", "Settled", "StageCalls"]

log = logging.getLogger("kubespot.handling")

#: A node state is cleared when the instance booted this long after the node was fenced: the boot
#: time is computed from uptime and the wall clock, which can disagree by a little.
BOOT_SLACK = timedelta(seconds=5)


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
        #: The Node's UID when known (the controller): names are reused (EKS and Karpenter name
        #: nodes by private IP), so a handler belongs to one Node object, not to a name.
        self.node_uid = node_uid
        self._actions = actions
        self._monitors = monitors
        self._boot_time = boot_time
        self._ctx = NodeContext(
            node=node_name,
            identity=identity or f"{socket.gethostname()}/{os.getpid()}",
            kube=kube,
            clock=clock,
            metrics=metrics,
            recorder=recorder,
            node_hint=node_hint,
            retry_cap=retry_cap,
        )
        self._timeline = TimelineSteps(
            self._ctx,
            actions=actions,
            drain=drain,
            notifier=notifier,
            http_calls=http_calls,
            loadbalancer_wait=loadbalancer_wait,
        )
        # Fence and intake call on each other: a withdrawal undoes the fence, an undo is remembered
        # by intake (a repeat of its notice is ignored). Their calls back go through ``weakly``, so
        # no part keeps the handler (or another part) alive: a handler the queue path drops when its
        # Node goes is freed at once, not left to the cyclic collector.
        self._fence = Fence(self._ctx, timeline=self._timeline, undone=weakly(self._mark_undone))
        self._intake = Intake(
            self._ctx,
            actions=actions,
            monitors=monitors,
            window=timedelta(seconds=drain.node_termination_grace_period),
            timeline=self._timeline,
            work=weakly(self._execute),
            undo=weakly(self._fence.undo),
        )
        self._drain = DrainRun(
            self._ctx,
            fence=self._fence,
            timeline=self._timeline,
            drain=drain,
            own_pod=own_pod,
            keep_last_drain=keep_last_drain,
        )

    def _mark_undone(self, event_id: str) -> None:
        self._intake.mark_undone(event_id)

    @property
    def node(self) -> str:
        return self._ctx.node

    @property
    def identity(self) -> str:
        """Who is working on the node, as written in its state (see ``NodeState.holder``)."""
        return self._ctx.identity

    @identity.setter
    def identity(self, identity: str) -> None:
        self._ctx.identity = identity

    @property
    def phase(self) -> str:
        return self._ctx.phase

    @property
    def last_drain(self) -> DrainResult | None:
        """The last drain's result (for logs, tests and the sandbox)."""
        return self._drain.last_drain

    @property
    def current(self) -> InterruptionEvent | None:
        return self._intake.current

    @property
    def busy(self) -> bool:
        return self._intake.busy

    async def settled(self, event_id: str) -> Settled:
        """Wait until kubespot has done what it will do for ``event_id`` before the instance goes:
        fenced, and drained when the plan drains (a rebalance's later undo is not waited for); or
        until the event lost the node to a stronger one, was withdrawn, or its handling failed.

        The queue processor keeps a message until this returns, and completes an Auto Scaling
        lifecycle action only after it.
        """
        return await self._intake.settled(event_id)

    def close_gone(self) -> None:
        """The Node was deleted: every event still waited for ends as ``GONE`` (its instance is
        gone with it); the work is stopped by ``aclose()``."""
        self._intake.close_gone()

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
            await self._intake.take(event, announce=announce)

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
                await self._ctx.clock.sleep(delay)
                delay = min(self._ctx.retry_cap, delay * 2)
            except Exception:
                log.exception("resuming %s from its state failed; going on without it", self.node)
                return

    async def resume(self) -> None:
        """Continue from the state on the node (after a restart). Raises ``KubeError`` if unreadable."""
        ctx = self._ctx
        node = ctx.node_hint() or await ctx.kube.get_node(self.node)
        if node is None:
            log.error("node %s not found: nothing to resume, and nothing can be fenced", self.node)
            return
        self._intake.undone = undone_ids(node.annotations.get(UNDONE_ANNOTATION))
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
                self._intake.undone = (*self._intake.undone, state.event_id)
                plan = Plan(acts=True, undo=True, dry_run=self._actions.dry_run, reason="reboot")
                await self._fence.undo(state.event_id, "the instance rebooted", plan, attempts=1)
                return
            plan = plan_for(event, actions=self._actions, monitors=self._monitors)
            if not plan.acts:
                log.warning("state for %s found, but that kind is switched off: left as it is", event.kind)
                return
            ended = self._intake.ends(event) + CURRENT_KEPT_PAST_DEADLINE < ctx.clock.now()
            if state.phase is Phase.DRAINED and state.undo_at is None and ended:
                # Long over: nothing to resume, and a new notice must not be taken for its follow-up.
                log.info("state of %s (drained, ended) left as it is", event.id)
                return
            log.info("resuming %s from phase %s", event.id, state.phase.value)
            await self._intake.resume(event, plan)

    async def aclose(self, *, release: bool = True) -> None:
        """Stop the work in progress (its state stays on the node, for the next start to resume).

        ``release``: if this process holds the node (fencing or draining), clear its mark at once so
        the next process (another replica, the restarted agent) takes over without waiting for the
        mark to go stale (``Fence.release``).
        """
        await self._intake.stop()
        await self._ctx.cancel_side()
        if release:
            await self._fence.release()

    # --- the work for one event ------------------------------------------------------------------

    async def _execute(
        self, event: InterruptionEvent, plan: Plan, *, resumed: bool = False, take_over: bool = False
    ) -> None:
        ctx, timeline = self._ctx, self._timeline
        reported = False  # "finished" went out: a later failure (of the undo) is no news for it
        try:
            if plan.dry_run:
                await self._drain.dry_run(event, plan)
                self._intake.settle(event.id, Settled.DONE)
                return
            if not take_over and await self._fence.held_elsewhere() is not None:
                await self._follow(event, plan)
                return
            state = await self._fence.fence(event, plan, announce=not resumed)
            if state is None:
                self._intake.settle(event.id, Settled.FAILED)
                timeline.failed(event, "the node could not be fenced: the API server was unreachable")
                return
            if state.held_by_other(ctx.identity, ctx.clock.now(), HOLD_STALE):
                await self._follow(event, plan)  # another process fenced it first (see fence_patch)
                return
            # The timeline of this process: a fresh fence made the run (and sent "started"); a
            # resumed or taken-over drain gets one too, without its pre-drain actions (they may have
            # run before the restart). A resumed fence with nothing left to do reports nothing.
            drains = plan.drain and state.phase is not Phase.DRAINED
            run = timeline.runs.get(event.id)
            if run is None and drains:
                run = timeline.runs[event.id] = Run(started=ctx.clock.now(), pre_drain=False)
            if drains:
                state = await self._drain.drain(event, plan, state, run)
            elif run is not None and run.pre_drain:
                await timeline.pre_drain(event, run)
            if run is not None:
                await timeline.post_drain(event, run)
            # A drain that did not empty the node is no DONE: its hook stays uncompleted.
            self._intake.settle(
                event.id, Settled.FAILED if drains and state.phase is not Phase.DRAINED else Settled.DONE
            )
            if run is not None:
                timeline.finish(event, run)
            reported = True
            if state.undo_at is not None:
                log.info("event %s: undoing at %s unless an interruption follows", event.id, state.undo_at)
                await ctx.sleep_until(state.undo_at)
                await self._fence.undo(event.id, "no interruption followed the recommendation", plan)
                await self._intake.forget(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("event %s: handling failed", event.id)
            ctx.metrics.action("handle", "failure")
            self._intake.settle(event.id, Settled.FAILED)
            if not reported:
                timeline.failed(event, f"unexpected error: {type(exc).__name__}")

    async def _follow(self, event: InterruptionEvent, plan: Plan) -> None:
        """Follow the process holding the node; ``event`` ends as its drain did, or this process
        takes over if that one died."""
        how = await self._drain.follow(event)
        if how is None:
            await self._execute(event, plan, resumed=True, take_over=True)
        else:
            self._intake.settle(event.id, how)


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


P = ParamSpec("P")
R = TypeVar("R")


def weakly(method: Callable[P, R]) -> Callable[P, R]:
    """``method`` (a bound method) as a call that does not keep its object alive."""
    ref = weakref.WeakMethod(method)
    name = method.__qualname__  # not ``method`` itself: the closure would keep its object alive

    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        target = ref()
        if target is None:
            raise ReferenceError(f"{name}: its handler is gone")
        return target(*args, **kwargs)

    return call
