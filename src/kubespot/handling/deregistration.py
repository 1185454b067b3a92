"""The drain's wait for load-balancer deregistration (docs/designs/response-actions.md, Decision 2).

The controller's action runner deregisters a fenced node's targets and records it in the node's
``kubespot.io/actions`` annotation. The process draining the node (the agent, or a controller
replica in queue mode) polls the Node for that record before the first eviction, then gives the
drain engine a per-pod gate: pods that are no target go at once, target pods wait until their
deregistration started plus the settle time. Everything is bounded by ``until`` (computed by
``wait_bound``): past it the drain goes ahead, and the outcome says so.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from kubespot.kube import KubeError, NodeView, PodView
from kubespot.model import Clock
from kubespot.model.summary import ActionResult, ActionSummary
from kubespot.records.actions import ACTIONS_ANNOTATION, Deregistration, StepState, deregistration_for

log = logging.getLogger("kubespot.handling")

#: Seconds between two reads of the Node while the record is awaited or still pending. No watch of
#: its own: the agent's one extra GET per half second lasts a second or two per interruption.
POLL = 0.5
#: What the drain keeps for itself, on top of the safety margin, when the wait is bounded by the
#: deadline: the default terminationGracePeriodSeconds, so a typical pod still gets its full grace.
DRAIN_RESERVE = 30.0
ACTION = "loadbalancer_wait"


def wait_bound(
    *, now: datetime, max_delay: float, deadline: datetime | None, safety_margin: float
) -> datetime:
    """The latest moment the drain may hold pods for deregistration.

    ``max_delay`` after ``now`` (the fence), and never so late that the drain would be left less than
    half the time before the deadline, or less than the safety margin plus ``DRAIN_RESERVE``.
    """
    until = now + timedelta(seconds=max(0.0, max_delay))
    if deadline is not None:
        left = (deadline - now).total_seconds()
        keep = max(safety_margin + DRAIN_RESERVE, left / 2)
        until = min(until, now + timedelta(seconds=max(0.0, left - keep)))
    return until


class DeregistrationWait:
    """One event's wait: ``wait_for_record()`` before the drain, ``hold`` as the drain's gate.

    ``read`` returns the node (a fresh GET, or the controller's watched copy); a read that fails is
    logged and retried at the next poll. Never raises but for cancellation.
    """

    def __init__(
        self,
        *,
        event_id: str,
        read: Callable[[], Awaitable[NodeView | None]],
        clock: Clock,
        until: datetime,
        poll: float = POLL,
    ) -> None:
        self.event_id = event_id
        self.until = until
        self._read = read
        self._clock = clock
        self._poll = poll
        self._lock = asyncio.Lock()
        self._read_at: float | None = None
        self.started = clock.now()
        #: The deregistration as last read; None until the record for this event is seen.
        self.deregistration: Deregistration | None = None
        #: When the record was first seen.
        self.found_at: datetime | None = None
        #: Pods held (``namespace/name``) -> seconds each was held.
        self.held: dict[str, float] = {}
        #: Pods let go by the bound while their deregistration still held them.
        self.expired: list[str] = []
        #: When the last held pod was let go.
        self.released_at: datetime | None = None
        self._warned = False

    # --- before the drain ----------------------------------------------------------------------

    async def wait_for_record(self) -> Deregistration | None:
        """Poll the node until the record of this event appears, or until ``until``."""
        while True:
            await self._refresh(force=True)
            if self.deregistration is not None:
                return self.deregistration
            left = (self.until - self._clock.now()).total_seconds()
            if left <= 0:
                return None
            await self._clock.sleep(min(self._poll, left))

    @property
    def holds_any(self) -> bool:
        """Whether the record (as last read) may hold some pod: the drain needs the gate."""
        d = self.deregistration
        return d is not None and (d.state is StepState.PENDING or d.release_at is not None)

    # --- the drain's gate ------------------------------------------------------------------------

    async def hold(self, pod: PodView) -> None:
        """Return when ``pod`` may be evicted: it is no target, its deregistration started ``settle``
        seconds ago (or failed), or ``until`` passed (the pod then counts in ``expired``)."""
        key = f"{pod.namespace}/{pod.name}"
        first = self._clock.now()
        held = False
        while True:
            now = self._clock.now()
            d = self.deregistration
            if d is None or not d.holds(key, now):
                break
            if now >= self.until:
                self.expired.append(key)
                break
            if not held:
                held = True
                log.info("holding %s for its load-balancer deregistration (%s)", key, d.state.value)
            release = d.release_at
            if release is not None:
                await self._sleep_until(min(release, self.until))
            else:  # pending: the targets are known, their deregistration not accepted yet
                await self._clock.sleep(max(0.0, min(self._poll, (self.until - now).total_seconds())))
                await self._refresh()
        if held:
            self.released_at = self._clock.now()
            self.held[key] = (self.released_at - first).total_seconds()

    # --- the outcome ---------------------------------------------------------------------------

    def summary(self, *, now: datetime) -> ActionSummary:
        """The wait as one action of the timeline (``loadbalancer_wait``): from the fence to the
        record, or to the last held pod's release."""
        d = self.deregistration
        ends = [t for t in (self.found_at, self.released_at) if t is not None]
        duration = ((max(ends) if ends else min(now, self.until)) - self.started).total_seconds()
        if d is None:
            return ActionSummary(
                name=ACTION,
                result=ActionResult.TIMEOUT,
                started=self.started,
                duration=duration,
                detail="no deregistration record before the bound: the drain went ahead",
            )
        parts = [f"record after {self._seconds(self.found_at)}s, deregistration {d.state.value}"]
        if d.state is StepState.FAILED and d.error:
            parts.append(f"({d.error})")
        if self.held:
            longest = max(self.held.values())
            parts.append(f"{len(self.held)} pods held up to {longest:.1f}s")
        else:
            parts.append("no pod held")
        result = ActionResult.SUCCESS
        if self.expired:
            result = ActionResult.TIMEOUT
            parts.append(f"{len(self.expired)} released at the bound")
        return ActionSummary(
            name=ACTION, result=result, started=self.started, duration=duration, detail=", ".join(parts)
        )

    # --- helpers ---------------------------------------------------------------------------------

    def _seconds(self, when: datetime | None) -> str:
        return "?" if when is None else f"{(when - self.started).total_seconds():.1f}"

    async def _refresh(self, *, force: bool = False) -> None:
        """Read the node's record; concurrent holders share one read per poll interval."""
        async with self._lock:
            mono = self._clock.monotonic()
            if not force and self._read_at is not None and mono - self._read_at < self._poll / 2:
                return  # another holder read it just now
            self._read_at = mono
            try:
                node = await self._read()
            except KubeError as err:
                if not self._warned:
                    self._warned = True
                    log.warning("cannot read the node's deregistration record yet: %s", err)
                return
            if node is None:
                return
            found = deregistration_for(node.annotations.get(ACTIONS_ANNOTATION), self.event_id)
            if found is None:
                return
            if self.deregistration is None:
                self.found_at = self._clock.now()
            self.deregistration = found

    async def _sleep_until(self, when: datetime) -> None:
        while (left := (when - self._clock.now()).total_seconds()) > 0:
            await self._clock.sleep(left)
