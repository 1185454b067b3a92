"""Which event holds ``NodeHandler``'s node, and when each event's handling has ended: the intake.

Every live notice is remembered; the node belongs to at most one *due* event at a time, the one
whose instance goes first (``policy.supersedes``: a rebalance recommendation yields to any real
interruption). A notice that is not due yet (scheduled maintenance acts at NotBefore minus the lead
time) waits on a timer without disturbing the current one; a withdrawn notice (canceled or
completed) is forgotten, its fence undone if it held the node, and the strongest remaining due
event takes over. Intake decides and runs the work it is given for the event holding the node (one
task at a time); what that work does is the handler's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from kubespot.config.imds import MonitorSettings
from kubespot.config.node import NodeActionSettings
from kubespot.model import InterruptionEvent, Kind
from kubespot.model.summary import Outcome
from kubespot.records.interruption import UNDONE_KEPT

from .node_context import NodeContext
from .policy import Plan, effective_deadline, plan_for, supersedes
from .timeline_steps import TimelineSteps

log = logging.getLogger("kubespot.handling")

#: Kubernetes event reasons on receipt of a notice: the reference handler's, so alerts keep matching.
NOTICE_REASONS = {
    Kind.SPOT_INTERRUPTION: "SpotInterruption",
    Kind.REBALANCE_RECOMMENDATION: "RebalanceRecommendation",
    Kind.SCHEDULED_MAINTENANCE: "ScheduledEvent",
    Kind.ASG_LIFECYCLE: "ASGLifecycle",
    Kind.STATE_CHANGE: "StateChange",
}
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


class Settled(StrEnum):
    """How the handling of one event ended, as far as the instance's fate goes."""

    #: An event that lost the node to a stronger one (or was covered by it) ends as that one ends.
    DONE = "done"  # fenced, and drained if the plan drains (or a dry run of that)
    WITHDRAWN = "withdrawn"  # canceled or completed before or while it was handled
    IGNORED = "ignored"  # its kind is switched off
    FAILED = "failed"  # gave up (the deadline passed) or an unexpected error
    GONE = "gone"  # the Node was deleted (or replaced by another Node of the same name)


class Work(Protocol):
    """The work for the event holding the node (``NodeHandler``'s): fence, drain, undo timer."""

    def __call__(
        self, event: InterruptionEvent, plan: Plan, *, resumed: bool = False
    ) -> Coroutine[Any, Any, None]: ...


class Intake:
    """The live events of one node, the one holding it, its work task, and each event's outcome."""

    def __init__(
        self,
        ctx: NodeContext,
        *,
        actions: NodeActionSettings,
        monitors: MonitorSettings,
        window: timedelta,
        timeline: TimelineSteps,
        work: Work,
        undo: Callable[[str, str, Plan], Coroutine[Any, Any, None]],
    ) -> None:
        self._ctx = ctx
        self._actions = actions
        self._monitors = monitors
        self._window = window
        self._timeline = timeline
        self._work_for = work
        self._undo = undo
        #: The due event whose work runs (fence, drain, undo timer); None when the node is unclaimed.
        self._current: InterruptionEvent | None = None
        #: Every live event: due ones and those waiting for their act_at (scheduled maintenance).
        self._known: dict[str, InterruptionEvent] = {}
        #: Events whose fence was undone (from the node at start-up): their notices may still be in IMDS.
        self.undone: tuple[str, ...] = ()
        #: Intake and the timer decide under this lock; the work itself runs outside it.
        self._lock = asyncio.Lock()
        self._work: asyncio.Task[None] | None = None
        self._timer: asyncio.Task[None] | None = None
        #: Per event: how its handling ended (see ``settled``); bounded by ``_prune``.
        self._settled: dict[str, asyncio.Future[Settled]] = {}

    @property
    def current(self) -> InterruptionEvent | None:
        return self._current

    @property
    def busy(self) -> bool:
        return self._work is not None and not self._work.done()

    async def settled(self, event_id: str) -> Settled:
        """See ``NodeHandler.settled``."""
        return await asyncio.shield(self._future(event_id))

    def _future(self, event_id: str) -> asyncio.Future[Settled]:
        fut = self._settled.get(event_id)
        if fut is None:
            fut = self._settled[event_id] = asyncio.get_running_loop().create_future()
        return fut

    def settle(self, event_id: str, how: Settled) -> None:
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
        now = self._ctx.clock.now()
        for event in self._known.values():
            if event.id != current.id and event.act_at <= now:
                other = self._future(event.id)
                if not other.done():
                    log.info("event %s: covered by %s (%s)", event.id, current.id, how.value)
                    other.set_result(how)

    def ends(self, event: InterruptionEvent) -> datetime:
        """When ``event``'s instance was expected to go (its deadline, else the drain window)."""
        return effective_deadline(event, now=event.act_at, window=self._window)

    def _release_ended(self, now: datetime) -> None:
        """Free the node from a current event whose work has ended well past its instance's end."""
        current = self._current
        fut = None if current is None else self._settled.get(current.id)
        if current is None or fut is None or not fut.done() or self.busy:
            return  # still working (a rebalance's undo timer counts), or never settled
        if self.ends(current) + CURRENT_KEPT_PAST_DEADLINE >= now:
            return
        log.info("event %s ended at %s: the node is free for new notices", current.id, self.ends(current))
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
            if self.ends(event) + KNOWN_KEPT_PAST_DEADLINE < now:
                del self._known[event_id]
        ended = [i for i, f in self._settled.items() if f.done() and i not in self._known]
        for event_id in ended[: max(0, len(ended) - SETTLED_KEPT)]:
            del self._settled[event_id]

    def close_gone(self) -> None:
        """See ``NodeHandler.close_gone``."""
        for fut in self._settled.values():
            if not fut.done():
                fut.set_result(Settled.GONE)

    def mark_undone(self, event_id: str) -> None:
        """The fence of ``event_id`` was undone: a repeat of its notice is ignored, and the node is
        back to phase none unless another event holds it."""
        self.undone = (*self.undone, event_id)[-UNDONE_KEPT:]
        if self._current is None:
            self._ctx.set_phase("none")

    async def take(self, event: InterruptionEvent, *, announce: bool = True) -> None:
        """See ``NodeHandler.handle``."""
        async with self._lock:
            await self._take(event, announce=announce)

    async def _take(self, event: InterruptionEvent, *, announce: bool = True) -> None:
        ctx = self._ctx
        plan = plan_for(event, actions=self._actions, monitors=self._monitors)
        if not plan.acts:
            log.info("event %s: %s is switched off; ignored", event.id, event.kind.value)
            self.settle(event.id, Settled.IGNORED)
            return
        if event.cancelled:
            await self._withdraw(event, plan)
            return
        now = ctx.clock.now()
        known = self._known.get(event.id)
        if known is not None and _same_schedule(known, event, now):
            log.debug("event %s: already known", event.id)
            return
        if known is None and event.id in self.undone:
            log.info("event %s: already handled and undone; ignored", event.id)
            self.settle(event.id, Settled.DONE)
            return
        self._known[event.id] = event
        if known is None:
            if announce:
                ctx.metrics.interruption(event.kind.value, event.source.value)
            log.info(
                "event %s: %s (acting at %s, deadline %s)",
                event.id,
                event.description,
                event.act_at.isoformat(),
                event.deadline.isoformat() if event.deadline else "none",
            )
            if announce:
                ctx.node_event(NOTICE_REASONS[event.kind], event.description or event.kind.value)
        else:
            log.info(
                "event %s rescheduled: acting at %s, deadline %s",
                event.id,
                event.act_at.isoformat(),
                event.deadline.isoformat() if event.deadline else "none",
            )
            if self._current is not None and self._current.id == event.id:
                self._current = event  # the same fence, with the new deadline
                await self._replace_work(self._work_for(event, plan))
        await self._reschedule()

    async def _withdraw(self, event: InterruptionEvent, plan: Plan) -> None:
        self._known.pop(event.id, None)
        self.settle(event.id, Settled.WITHDRAWN)
        if self._current is not None and self._current.id == event.id:
            log.info("event %s withdrawn (%s): undoing", event.id, event.description)
            self._timeline.report_end(self._current, Outcome.WITHDRAWN)
            self._current = None
            await self._replace_work(None)
            self._ctx.spawn(self._undo(event.id, "the event was canceled or completed", plan))
        else:
            log.info("event %s withdrawn before kubespot acted on it", event.id)
        await self._reschedule()

    async def _reschedule(self) -> None:
        """Give the node to the strongest due event if it beats the current one; arm the timer for
        the next event that is not due yet. Called under the lock."""
        now = self._ctx.clock.now()
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
                self._timeline.report_end(self._current, Outcome.SUPERSEDED)
            self._current = best
            plan = plan_for(best, actions=self._actions, monitors=self._monitors)
            await self._replace_work(self._work_for(best, plan))
        self._settle_covered()
        self._prune(now)
        waiting = [e.act_at for e in self._known.values() if e.act_at > now]
        self._arm_timer(min(waiting) if waiting else None)
        if self._current is None:
            self._ctx.set_phase("pending" if waiting else "none")

    def _arm_timer(self, when: datetime | None) -> None:
        if self._timer is not None and self._timer is not asyncio.current_task():
            self._timer.cancel()
        self._timer = None
        if when is not None:
            log.info("next scheduled event due at %s", when.isoformat())
            self._timer = asyncio.create_task(self._wake_at(when))

    async def _wake_at(self, when: datetime) -> None:
        await self._ctx.sleep_until(when)
        async with self._lock:
            self._timer = None
            await self._reschedule()

    async def resume(self, event: InterruptionEvent, plan: Plan) -> None:
        """``event`` holds the node as its state says (at start-up): its work goes on from there."""
        async with self._lock:
            self._known[event.id] = event
            self._current = event
            await self._replace_work(self._work_for(event, plan, resumed=True))

    async def forget(self, event: InterruptionEvent) -> None:
        """``event``'s work is over (its fence undone on its timer): forget it, and if it still held
        the node give the node to the next due event."""
        async with self._lock:
            self._known.pop(event.id, None)
            if self._current is event:
                self._current = None
                await self._reschedule()

    async def stop(self) -> None:
        """Stop the timer and the work in progress (at shutdown)."""
        self._arm_timer(None)
        await self._replace_work(None)

    async def _replace_work(self, coro: Coroutine[Any, Any, None] | None) -> None:
        old = self._work
        if old is not None and old is not asyncio.current_task() and not old.done():
            old.cancel()
            await asyncio.wait({old})
        # The task copies the log context, so every line it logs names the event.
        self._work = asyncio.create_task(coro) if coro is not None else None


def _same_schedule(known: InterruptionEvent, new: InterruptionEvent, now: datetime) -> bool:
    """Whether ``new`` is a repeat of ``known``: same deadline, and the same act_at unless ``known``
    is already due (once a fence is up, a later act_at changes nothing). A rescheduled maintenance
    event keeps its EventId but moves NotBefore, so this is what tells it apart from a repeat."""
    return known.deadline == new.deadline and (known.act_at <= now or known.act_at == new.act_at)
