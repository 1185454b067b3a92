"""The deadline-aware drain engine, shared by the node agent, the queue processor and `kubespot drain`.

The instance dies at a known time whatever happens, so every step is measured against the deadline:

1. List the node's pods and plan each one (``drain_plan``): skip DaemonSet, mirror and finished pods
   and our own pod; refuse (like kubectl) when a pod may not be moved under the settings; otherwise
   evict through policy/v1, bare pods included.
2. Evict in parallel (bounded by ``eviction_concurrency`` and the client's QPS limit), ordinary pods
   first, then the ``critical_last`` tier once the others are gone, or earlier if waiting would cost
   those pods their grace period.
3. A 429 (PodDisruptionBudget) is retried with exponential backoff and jitter until the time left is
   less than the pod's grace period plus the safety margin; then ``pdb_deadline_action`` decides:
   ``delete`` deletes the pod gracefully (logged, Warning event; only that pod, by uid), ``keep``
   retries to the end. A 429 from the API server's throttling is no refusal: the eviction is sent
   again after its Retry-After, and neither counts as blocked nor advances the backoff.
4. Grace periods are cut so pods finish before the deadline.
5. Completion is observed on one watch of the node's pods (not by polling): a pod is gone when it is
   deleted or a different uid takes its name.
6. An optional ``hold`` gate delays each pod's first eviction until it says the pod may go (the caller's
   reason: a load balancer still routing to it). The engine knows nothing of the reason; it bounds
   every hold itself, so a held pod still starts leaving in time to keep its grace period.

The result lists every pod with its outcome and timings. Dry-run plans and reports, emits events that
say so, and changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol, Unpack

from ..config.drain import DrainSettings
from ..kube.inflight import InFlight
from ..kube.views import (
    EvictionOutcome,
    EvictionResult,
    PodCallOptions,
    PodEvent,
    PodEventType,
    PodList,
    PodView,
)
from ..model.backoff import full_jitter
from ..model.clock import Clock, wait_event
from .drain_plan import (
    Action,
    PodPlan,
    capped_grace,
    deadline_action_due,
    deadline_reserve,
    own_grace,
    plan_pod,
)

log = logging.getLogger("kubespot.actions.drain")
#: Shortest time budget one API call gets, even when the deadline has passed.
MIN_CALL_SECONDS = 5.0

#: Shortest wait between two eviction attempts of one pod.
MIN_RETRY_SECONDS = 0.02
#: Seconds given to outstanding event writes once the drain itself is over.
EVENT_FLUSH_SECONDS = 5.0
#: Eviction and delete calls started at once by all the drains of a process (of an event loop), on top
#: of each drain's ``eviction_concurrency``. The client's rate limit lets a few hundred calls through
#: per second; a burst of a thousand drains would otherwise start ~20 000 at once, each a chain of
#: coroutines waiting for a token, which costs memory and nothing else. The others wait here, cheaply,
#: and a pod's first eviction goes ahead of the retries of pods a PodDisruptionBudget refused: those are
#: likely refused again, while a first attempt mostly succeeds (in a 1 000-node burst the retries were
#: two thirds of the calls and would hold the last first evictions back by tens of seconds).
CALLS_AT_ONCE = 256

_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, InFlight] = weakref.WeakKeyDictionary()
#: Backoff jitter for every drain (a generator each would cost 2.5 KiB a drain for nothing).
_rng = random.Random()


def _gate() -> InFlight:
    """``CALLS_AT_ONCE`` for the running event loop."""
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = InFlight(CALLS_AT_ONCE)
    return gate


class DrainKube(Protocol):
    """The part of ``kubespot.kube.KubeClient`` the engine uses (a fake implements it in tests)."""

    async def list_pods_on_node(self, node: str) -> PodList: ...

    def watch_pods_on_node(self, node: str, *, resource_version: str) -> AsyncIterator[PodEvent]: ...

    async def evict_pod(
        self, namespace: str, name: str, **options: Unpack[PodCallOptions]
    ) -> EvictionResult: ...

    async def delete_pod(self, namespace: str, name: str, **options: Unpack[PodCallOptions]) -> bool: ...


#: Called before a pod's first eviction; the pod is evicted once the awaitable ends (or the engine's
#: bound passes, or the pod goes away meanwhile). It must not raise; if it does, the pod goes at once.
Hold = Callable[[PodView], Awaitable[None]]


class DrainEvents(Protocol):
    """The part of ``kubespot.kube.EventRecorder`` the engine uses; it must never raise."""

    async def node(self, node: str, reason: str, message: str, *, warning: bool = False) -> None: ...

    async def pod(self, pod: PodView, reason: str, message: str, *, warning: bool = False) -> None: ...


class Outcome(StrEnum):
    EVICTED = "evicted"
    DELETED_BARE = "deleted-bare"
    DELETED_AT_DEADLINE = "deleted-at-deadline"
    #: Went away without our eviction (already terminating, or deleted by someone else).
    GONE = "gone"
    SKIPPED = "skipped"
    #: Not movable under the settings; the drain did not start.
    REFUSED = "refused"
    STILL_RUNNING = "still-running"
    WOULD_EVICT = "would-evict"
    WOULD_DELETE_BARE = "would-delete-bare"


@dataclass(slots=True)
class PodResult:
    namespace: str
    name: str
    uid: str
    outcome: Outcome
    reason: str = ""
    tier: int = 0
    #: ``gracePeriodSeconds`` sent (None: the pod's own).
    grace_seconds: int | None = None
    attempts: int = 0
    #: Evictions refused with 429 (PodDisruptionBudget).
    blocked: int = 0
    #: Evictions the API server throttled (429, no budget cause): sent again, never a refusal.
    throttled: int = 0
    started_at: datetime | None = None
    evicted_at: datetime | None = None
    gone_at: datetime | None = None

    @property
    def must_leave(self) -> bool:
        return self.outcome not in (
            Outcome.SKIPPED,
            Outcome.REFUSED,
            Outcome.WOULD_EVICT,
            Outcome.WOULD_DELETE_BARE,
        )

    def to_dict(self) -> dict[str, Any]:
        def iso(t: datetime | None) -> str | None:
            return t.isoformat() if t is not None else None

        return {
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "outcome": self.outcome.value,
            "reason": self.reason,
            "tier": self.tier,
            "grace_seconds": self.grace_seconds,
            "attempts": self.attempts,
            "blocked": self.blocked,
            "throttled": self.throttled,
            "started_at": iso(self.started_at),
            "evicted_at": iso(self.evicted_at),
            "gone_at": iso(self.gone_at),
        }


@dataclass
class DrainResult:
    node: str
    started_at: datetime
    deadline: datetime
    dry_run: bool = False
    finished_at: datetime | None = None
    pods: list[PodResult] = field(default_factory=list)
    #: A pod may not be moved under the settings, so nothing was (kubectl's behaviour).
    refused: bool = False

    @property
    def emptied(self) -> bool:
        """Every pod that had to leave is gone, before the deadline (never true for a dry run)."""
        if self.dry_run or self.refused:
            return False
        return all(p.gone_at is not None and p.gone_at <= self.deadline for p in self.pods if p.must_leave)

    @property
    def sent_away(self) -> bool:
        """Every pod that had to leave is gone or on its way out at kubespot's request (evicted or
        deleted, maybe still in its grace period at the deadline): nothing was refused or left
        behind. Such a node counts as drained; its pods end with the instance at the latest."""
        if self.dry_run or self.refused:
            return False
        away = (Outcome.EVICTED, Outcome.DELETED_BARE, Outcome.DELETED_AT_DEADLINE, Outcome.GONE)
        return all(p.outcome in away or p.gone_at is not None for p in self.pods if p.must_leave)

    @property
    def ok(self) -> bool:
        """Emptied in time; for a dry run, would be allowed to start."""
        return (not self.refused) if self.dry_run else self.emptied

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.pods:
            out[p.outcome.value] = out.get(p.outcome.value, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        end = self.finished_at or self.started_at
        return {
            "node": self.node,
            "dry_run": self.dry_run,
            "refused": self.refused,
            "emptied": self.emptied,
            "started_at": self.started_at.isoformat(),
            "finished_at": end.isoformat(),
            "deadline": self.deadline.isoformat(),
            "duration_s": round((end - self.started_at).total_seconds(), 3),
            "counts": self.counts(),
            "pods": [p.to_dict() for p in self.pods],
        }


async def drain_node(
    node: str,
    *,
    kube: DrainKube,
    settings: DrainSettings,
    deadline: datetime | None,
    clock: Clock,
    dry_run: bool = False,
    own_pod: tuple[str, str] | None = None,
    recorder: DrainEvents | None = None,
    hold: Hold | None = None,
) -> DrainResult:
    """Move every movable pod off ``node`` before ``deadline`` (None: now + NODE_TERMINATION_GRACE_PERIOD).

    Does not cordon: the caller does that first, or replacements could land on the node again.
    ``hold``: awaited per pod before its first eviction (see ``Hold``), at most until the moment the
    pod must start leaving to keep its grace period before the deadline. Not used by a dry run.
    """
    started = clock.now()
    if deadline is None:
        deadline = started + timedelta(seconds=settings.node_termination_grace_period)
    drain = _Drain(
        node,
        kube=kube,
        settings=settings,
        deadline=deadline,
        clock=clock,
        dry_run=dry_run,
        own_pod=own_pod,
        recorder=recorder,
        hold=hold,
    )
    return await drain.run()


class _Gone(asyncio.Event):
    """An ``asyncio.Event`` whose waiters are kept in a list: an empty deque costs 624 bytes, and a
    burst of drains keeps one event per pod (tens of thousands), almost all without any waiter."""

    def __init__(self) -> None:
        super().__init__()
        self._waiters: list[asyncio.Future[bool]] = []  # type: ignore[assignment]


class _Tracker:
    """Follows the node's pods on one watch and tells each waiting task when its pod is gone."""

    def __init__(self, *, clock: Clock) -> None:
        self._clock = clock
        self._gone: dict[str, asyncio.Event] = {}
        self._gone_at: dict[str, datetime] = {}
        self._by_key: dict[tuple[str, str], str] = {}

    def track(self, pod: PodView) -> asyncio.Event:
        self._by_key[pod.key] = pod.uid
        return self._gone.setdefault(pod.uid, _Gone())

    def gone_at(self, uid: str) -> datetime | None:
        return self._gone_at.get(uid)

    def mark_gone(self, uid: str) -> None:
        ev = self._gone.get(uid)
        if ev is not None and not ev.is_set():
            self._gone_at[uid] = self._clock.now()
            ev.set()

    def apply(self, event: PodEvent) -> None:
        if event.type is PodEventType.RESYNC:
            present = {p.uid for p in event.pods}
            for uid in list(self._gone):
                if uid not in present:
                    self.mark_gone(uid)
            return
        pod = event.pod
        if pod is None:
            return
        if event.type is PodEventType.DELETED:
            self.mark_gone(pod.uid)
            return
        old = self._by_key.get(pod.key)
        if old is not None and old != pod.uid:
            # A namesake (a StatefulSet's next incarnation) means ours is gone.
            self.mark_gone(old)

    async def follow(self, events: AsyncIterator[PodEvent]) -> None:
        async for event in events:
            self.apply(event)


class _Drain:
    def __init__(
        self,
        node: str,
        *,
        kube: DrainKube,
        settings: DrainSettings,
        deadline: datetime,
        clock: Clock,
        dry_run: bool,
        own_pod: tuple[str, str] | None,
        recorder: DrainEvents | None,
        hold: Hold | None = None,
    ) -> None:
        self.node = node
        self.kube = kube
        self.settings = settings
        self.deadline = deadline
        self.clock = clock
        self.dry_run = dry_run
        self.own_pod = own_pod
        self.recorder = recorder
        self.hold = hold
        self.tracker = _Tracker(clock=clock)
        self.sem = asyncio.Semaphore(settings.eviction_concurrency)
        self.rng = _rng
        self._event_tasks: set[asyncio.Task[None]] = set()
        self.result = DrainResult(node=node, started_at=clock.now(), deadline=deadline, dry_run=dry_run)
        #: Seconds from the start of the drain to the deadline.
        self.window = (deadline - self.result.started_at).total_seconds()

    def left(self) -> float:
        return (self.deadline - self.clock.now()).total_seconds()

    # -- events, sent in the background so they never slow the drain ------------------------------

    def _emit(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._event_tasks.add(task)
        task.add_done_callback(self._event_tasks.discard)

    def node_event(self, reason: str, message: str, *, warning: bool = False) -> None:
        if self.recorder is not None:
            self._emit(self.recorder.node(self.node, reason, message, warning=warning))

    def pod_event(self, pod: PodView, reason: str, message: str, *, warning: bool = False) -> None:
        if self.recorder is not None:
            self._emit(self.recorder.pod(pod, reason, message, warning=warning))

    async def _flush_events(self) -> None:
        if self._event_tasks:
            await asyncio.wait(set(self._event_tasks), timeout=EVENT_FLUSH_SECONDS)

    # -- the drain ---------------------------------------------------------------------------------

    async def run(self) -> DrainResult:
        listing = await self.kube.list_pods_on_node(self.node)
        plans = [plan_pod(p, settings=self.settings, own_pod=self.own_pod) for p in listing.pods]
        refused = [p for p in plans if p.action is Action.REFUSE]
        movers = [p for p in plans if p.action not in (Action.SKIP, Action.REFUSE)]
        for plan in plans:
            if plan.action is Action.SKIP:
                self._add(plan, Outcome.SKIPPED)
            elif plan.action is Action.REFUSE:
                self._add(plan, Outcome.REFUSED)
        deadline_s = self.deadline.isoformat()
        if self.dry_run:
            return await self._dry_run(movers, refused)
        if refused:
            self.result.refused = True
            for plan in movers:
                self._add(plan, Outcome.STILL_RUNNING, "drain refused")
            names = ", ".join(f"{p.pod.namespace}/{p.pod.name}" for p in refused)
            log.warning("drain of %s refused: %s", self.node, names)
            self.node_event("DrainRefused", f"Cannot drain: {names}", warning=True)
            return await self._finish()
        log.info("draining %s: %d pods to move, deadline %s", self.node, len(movers), deadline_s)
        self.node_event("DrainStarted", f"Draining {len(movers)} pods before {deadline_s}")
        results = {p.pod.uid: self._add(p, Outcome.STILL_RUNNING) for p in movers}
        gone = {p.pod.uid: self.tracker.track(p.pod) for p in movers}
        watch = asyncio.ensure_future(
            self.tracker.follow(
                self.kube.watch_pods_on_node(self.node, resource_version=listing.resource_version)
            )
        )
        running: list[asyncio.Task[None]] = []
        try:
            tiers = sorted({p.tier for p in movers})
            previous: list[PodPlan] = []
            for tier in tiers:
                members = [p for p in movers if p.tier == tier]
                if previous:
                    await self._wait_for_tier(previous, members, gone)
                running += [
                    asyncio.ensure_future(self._move(p, results[p.pod.uid], gone[p.pod.uid])) for p in members
                ]
                previous = previous + members
            if running:
                await asyncio.gather(*running)
        finally:
            # A failed or cancelled drain must not leave evictions running behind its back.
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watch
        if self.result.emptied:
            self.node_event("DrainCompleted", f"All {len(movers)} pods gone before the deadline")
        else:
            left = [f"{r.namespace}/{r.name}" for r in results.values() if r.gone_at is None]
            self.node_event(
                "DrainIncomplete",
                f"{len(left)} pods not gone by {deadline_s}: {', '.join(left[:10])}",
                warning=True,
            )
        return await self._finish()

    async def _finish(self) -> DrainResult:
        self.result.finished_at = self.clock.now()
        await self._flush_events()
        return self.result

    def _add(self, plan: PodPlan, outcome: Outcome, reason: str | None = None) -> PodResult:
        pod = plan.pod
        res = PodResult(
            pod.namespace,
            pod.name,
            pod.uid,
            outcome,
            reason if reason is not None else plan.reason,
            plan.tier,
        )
        self.result.pods.append(res)
        return res

    async def _dry_run(self, movers: list[PodPlan], refused: list[PodPlan]) -> DrainResult:
        self.result.refused = bool(refused)
        verb = "would refuse to drain" if refused else "would drain"
        for plan in movers:
            bare = plan.action is Action.EVICT_BARE
            grace = capped_grace(plan.pod, settings=self.settings, seconds_left=self.left())
            res = self._add(plan, Outcome.WOULD_DELETE_BARE if bare else Outcome.WOULD_EVICT)
            res.grace_seconds = grace
            what = "delete (bare pod)" if bare else "evict"
            self.pod_event(plan.pod, "DryRun", f"Dry run: {verb} node {self.node}; would {what} this pod")
        self.node_event("DryRun", f"Dry run: {verb}: {len(movers)} pods to move, {len(refused)} blocking")
        log.info("dry run of %s: %s (%d pods to move)", self.node, verb, len(movers))
        return await self._finish()

    async def _wait_for_tier(
        self, previous: list[PodPlan], members: list[PodPlan], gone: dict[str, asyncio.Event]
    ) -> None:
        """Wait until the earlier tiers are gone, or until the tier must start to keep its grace."""
        need = max(own_grace(p.pod, self.settings) for p in members)
        # Reserve their grace period, but at most half of what is left: when grace periods exceed
        # the whole window they are cut anyway, and the order still matters more than a few seconds.
        reserve = min(need + self.settings.safety_margin, max(0.0, self.left()) / 2)
        latest_start = self.deadline - timedelta(seconds=reserve)
        for plan in previous:
            seconds = (latest_start - self.clock.now()).total_seconds()
            if not await wait_event(gone[plan.pod.uid], seconds, self.clock):
                log.info("%s: starting the critical tier early to keep its grace period", self.node)
                return

    async def _call(self, call: Callable[[], Awaitable[Any]], *, first: bool = False) -> Any:
        """``first``: a pod's first eviction, ahead of every retry (see ``CALLS_AT_ONCE``)."""
        # No call may outlive the drain: a hung API server (each call retries internally) must not
        # hold a pod's slot past the moment the deadline action has to run (the time left is read
        # once this drain's slot is taken: the contexts are entered in order).
        async with (
            self.sem,
            asyncio.timeout(max(MIN_CALL_SECONDS, self.left())),
            _gate().slot(urgent=first),
        ):
            return await call()

    async def _move(self, plan: PodPlan, res: PodResult, gone: asyncio.Event) -> None:
        pod = plan.pod
        res.started_at = self.clock.now()
        if plan.action is Action.WAIT:
            if await wait_event(gone, self.left(), self.clock):
                res.outcome, res.gone_at = Outcome.GONE, self.tracker.gone_at(pod.uid)
            return
        if self.hold is not None:
            await self._hold(plan, gone)
        if await self._evict(plan, res, gone):
            if await wait_event(gone, self.left(), self.clock):
                res.gone_at = self.tracker.gone_at(pod.uid)
            else:
                log.warning("%s: %s/%s not gone by the deadline", self.node, pod.namespace, pod.name)

    async def _hold(self, plan: PodPlan, gone: asyncio.Event) -> None:
        """Await the caller's gate for the pod, until it opens, the pod goes, or the pod must leave
        now to keep its grace period (the moment a PodDisruptionBudget would be overridden)."""
        assert self.hold is not None
        pod = plan.pod
        bound = self.left() - deadline_reserve(pod, settings=self.settings, window=self.window)
        if bound <= 0 or gone.is_set():
            return
        gate = asyncio.ensure_future(self.hold(pod))
        waiter = asyncio.ensure_future(gone.wait())
        sleeper = asyncio.ensure_future(self.clock.sleep(bound))
        try:
            await asyncio.wait({gate, waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (gate, waiter, sleeper):
                task.cancel()
            await asyncio.gather(gate, waiter, sleeper, return_exceptions=True)
        if gate.cancelled():
            if not gone.is_set():
                log.warning(
                    "%s: %s/%s held until it had to leave to keep its grace period",
                    self.node,
                    pod.namespace,
                    pod.name,
                )
            return
        if (err := gate.exception()) is not None:
            log.error("%s: hold of %s/%s failed: %r; evicting it", self.node, pod.namespace, pod.name, err)

    async def _evict(self, plan: PodPlan, res: PodResult, gone: asyncio.Event) -> bool:
        """Evict (or, at the deadline, delete) the pod; True once the API accepted its removal."""
        pod = plan.pod
        s = self.settings
        attempt = 0
        while True:
            left = self.left()
            # At least one attempt even past the deadline: AWS's times are approximate and a late
            # notice (agent restart, clock skew) should still move what it can.
            if left <= 0 and res.attempts > 0:
                res.outcome = Outcome.STILL_RUNNING
                res.reason = _still_running(res)
                log.warning("%s: %s/%s still running at the deadline", self.node, pod.namespace, pod.name)
                self.pod_event(pod, "StillRunningAtDeadline", res.reason, warning=True)
                return False
            if gone.is_set():
                res.outcome, res.gone_at = Outcome.GONE, self.tracker.gone_at(pod.uid)
                return False
            grace = capped_grace(pod, settings=s, seconds_left=left)
            try:
                answer: EvictionResult = await self._call(
                    lambda grace=grace: self.kube.evict_pod(  # type: ignore[misc]
                        pod.namespace, pod.name, uid=pod.uid, grace_period_seconds=grace
                    ),
                    # Throttled attempts were not looked at: the pod's first answer is still to come.
                    first=res.attempts == res.throttled,
                )
            except TimeoutError:
                answer = EvictionResult(EvictionOutcome.ERROR, 0, "the eviction request timed out")
            res.attempts += 1
            if answer.outcome is EvictionOutcome.THROTTLED:
                # The server did not look at the eviction: no refusal, no step of the backoff, no
                # deadline action on its account (that one follows a budget's own answer)...
                res.throttled += 1
                left = self.left()
                if (
                    res.blocked > 0
                    and s.pdb_deadline_action == "delete"
                    and deadline_action_due(pod, settings=s, seconds_left=left, window=self.window)
                ):
                    # ...unless a budget already refused this pod and the action is due now: that
                    # refusal stands, and throttling must not carry the pod past its delete.
                    return await self._delete_at_deadline(plan, res, left, answer)
                pause = answer.retry_after
                if pause is None:
                    pause = full_jitter(
                        attempt, base=s.retry_backoff_base, cap=s.retry_backoff_cap, rng=self.rng.random
                    )
                log.debug(
                    "%s: evicting %s/%s throttled; again in %.2fs", self.node, pod.namespace, pod.name, pause
                )
                # Honoured, but never past the moment the deadline action becomes due (nor past
                # the deadline): the answer then decides, not the throttling.
                left = self.left()
                due_in = left - deadline_reserve(pod, settings=s, window=self.window)
                bound = due_in if due_in > 0 else left
                await wait_event(gone, max(MIN_RETRY_SECONDS, min(pause, bound)), self.clock)
                continue
            if answer.outcome is EvictionOutcome.EVICTED:
                res.evicted_at, res.grace_seconds = self.clock.now(), grace
                if plan.action is Action.EVICT_BARE:
                    res.outcome = Outcome.DELETED_BARE
                    self.pod_event(
                        pod,
                        "BarePodDeleted",
                        f"Evicted from {self.node}; no controller will recreate it",
                        warning=True,
                    )
                else:
                    res.outcome = Outcome.EVICTED
                    self.pod_event(pod, "Evicted", f"Evicted by kubespot: node {self.node} is draining")
                return True
            if answer.outcome is EvictionOutcome.NOT_FOUND:
                self.tracker.mark_gone(pod.uid)
                res.outcome, res.gone_at = Outcome.GONE, self.tracker.gone_at(pod.uid)
                return False
            if answer.outcome is EvictionOutcome.BLOCKED:
                res.blocked += 1
                self.pod_event(pod, "EvictionBlocked", f"Eviction refused: {answer.message}", warning=True)
            else:
                log.info("%s: evicting %s/%s failed: %s", self.node, pod.namespace, pod.name, answer.message)
            left = self.left()
            if deadline_action_due(pod, settings=s, seconds_left=left, window=self.window):
                if s.pdb_deadline_action == "delete":
                    return await self._delete_at_deadline(plan, res, left, answer)
                wait = min(
                    full_jitter(
                        attempt, base=s.retry_backoff_base, cap=s.retry_backoff_cap, rng=self.rng.random
                    ),
                    left,
                )
            else:
                # Sleep no later than the moment the deadline action becomes due.
                due_in = left - deadline_reserve(pod, settings=s, window=self.window)
                backoff = full_jitter(
                    attempt, base=s.retry_backoff_base, cap=s.retry_backoff_cap, rng=self.rng.random
                )
                wait = min(backoff, due_in)
            attempt += 1
            # Never retry in a hot loop, whatever the jitter drew.
            wait = max(MIN_RETRY_SECONDS, wait)
            await wait_event(gone, wait, self.clock)

    async def _delete_at_deadline(
        self, plan: PodPlan, res: PodResult, left: float, answer: EvictionResult
    ) -> bool:
        pod = plan.pod
        grace = capped_grace(pod, settings=self.settings, seconds_left=left)
        log.warning(
            "%s: %s/%s still blocked (%s) %.1fs before the deadline; deleting it gracefully "
            "(pdb_deadline_action=delete, grace %ss)",
            self.node,
            pod.namespace,
            pod.name,
            answer.message,
            left,
            grace if grace is not None else "own",
        )
        try:
            existed = await self._call(
                # By uid, as the eviction: a namesake created since (a StatefulSet's next pod) stays.
                lambda: self.kube.delete_pod(pod.namespace, pod.name, uid=pod.uid, grace_period_seconds=grace)
            )
        except Exception as err:
            log.error(
                "%s: deleting %s/%s at the deadline failed: %s", self.node, pod.namespace, pod.name, err
            )
            res.outcome, res.reason = Outcome.STILL_RUNNING, f"delete at deadline failed: {err}"
            return False
        if not existed:
            self.tracker.mark_gone(pod.uid)
            res.outcome, res.gone_at = Outcome.GONE, self.tracker.gone_at(pod.uid)
            return False
        res.outcome, res.evicted_at, res.grace_seconds = Outcome.DELETED_AT_DEADLINE, self.clock.now(), grace
        res.reason = f"eviction blocked {res.blocked} times; deleted {left:.1f}s before the deadline"
        self.pod_event(
            pod,
            "DeletedAtDeadline",
            f"Eviction still refused ({answer.message}) {left:.0f}s before node {self.node} goes away: "
            "deleted gracefully (pdb_deadline_action=delete)",
            warning=True,
        )
        return True


def _still_running(res: PodResult) -> str:
    """Why a pod is still running at the deadline, from the answers its evictions got."""
    if res.blocked:
        return f"PodDisruptionBudget still blocking at the deadline ({res.blocked} refusals)"
    if res.throttled == res.attempts:
        return f"the API server throttled every eviction until the deadline ({res.throttled} times)"
    return f"eviction still failing at the deadline ({res.attempts} attempts)"
