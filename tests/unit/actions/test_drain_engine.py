"""The drain engine on a fake cluster and a fake clock: deadline decisions, deterministically."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from kubespot.actions import drain
from kubespot.actions.drain import Outcome, drain_node
from kubespot.config.drain import DrainSettings
from kubespot.kube import EvictionOutcome, EvictionResult, PodEvent, PodEventType, PodList, PodView

T0 = datetime(2026, 11, 20, 17, 0, 0, tzinfo=UTC)
SETTINGS = DrainSettings(safety_margin=5, retry_backoff_base=1, retry_backoff_cap=4)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.t)

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)
        await asyncio.sleep(0)


class FakeKube:
    """Pods whose eviction a budget refuses ``blocked_for`` times; deletions end in a DELETED event."""

    def __init__(self, pods: list[PodView], *, blocked_for: int = 10**9) -> None:
        self.pods = {p.uid: p for p in pods}
        self.blocked_for = blocked_for
        self.evictions: list[tuple[str, int | None]] = []
        self.deletes: list[tuple[str, int | None]] = []
        self.events: asyncio.Queue[PodEvent] = asyncio.Queue()

    async def list_pods_on_node(self, node: str) -> PodList:
        return PodList(tuple(self.pods.values()), "1")

    async def watch_pods_on_node(self, node: str, *, resource_version: str) -> AsyncIterator[PodEvent]:
        while True:
            yield await self.events.get()

    def _gone(self, name: str) -> None:
        pod = next(p for p in self.pods.values() if p.name == name)
        self.events.put_nowait(PodEvent(PodEventType.DELETED, pod))

    async def evict_pod(
        self,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> EvictionResult:
        self.evictions.append((name, grace_period_seconds))
        if len(self.evictions) <= self.blocked_for:
            return EvictionResult(EvictionOutcome.BLOCKED, 429, "budget")
        self._gone(name)
        return EvictionResult(EvictionOutcome.EVICTED, 201)

    async def delete_pod(
        self,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> bool:
        self.deletes.append((name, grace_period_seconds))
        self._gone(name)
        return True


POD = PodView(namespace="ns", name="db-0", uid="u1", controller_kind="StatefulSet", grace_period_seconds=30)


async def test_blocked_pod_is_deleted_when_grace_plus_margin_is_all_that_is_left() -> None:
    clock, kube = FakeClock(), FakeKube([POD])
    result = await drain_node(
        "n1", kube=kube, settings=SETTINGS, deadline=T0 + timedelta(seconds=120), clock=clock
    )
    (res,) = result.pods
    assert res.outcome is Outcome.DELETED_AT_DEADLINE
    assert res.blocked > 5
    # Deleted 35 s (grace 30 + margin 5) before the deadline, not earlier and not much later.
    assert res.evicted_at is not None
    assert 84.0 <= (res.evicted_at - T0).total_seconds() <= 86.0
    # The whole grace period still fits: its own (None), or capped by at most the second the last
    # retry's jitter may have cost (the cap keeps grace + margin inside the deadline).
    ((name, grace),) = kube.deletes
    assert name == "db-0" and (grace is None or grace >= 29), kube.deletes
    assert result.emptied


async def test_keep_retries_until_the_deadline_and_reports_still_running() -> None:
    clock, kube = FakeClock(), FakeKube([POD])
    settings = dataclasses.replace(SETTINGS, pdb_deadline_action="keep")
    result = await drain_node(
        "n1", kube=kube, settings=settings, deadline=T0 + timedelta(seconds=60), clock=clock
    )
    (res,) = result.pods
    assert res.outcome is Outcome.STILL_RUNNING and kube.deletes == []
    assert not result.emptied and clock.t >= 60 - 1e-6  # kept trying until the deadline (float time)


async def test_budget_that_frees_up_means_a_normal_eviction_with_a_capped_grace() -> None:
    clock, kube = FakeClock(), FakeKube([POD], blocked_for=2)
    result = await drain_node(
        "n1", kube=kube, settings=SETTINGS, deadline=T0 + timedelta(seconds=20), clock=clock
    )
    (res,) = result.pods
    assert res.outcome is Outcome.EVICTED and res.blocked == 2
    # 20 s left minus the 5 s margin: the pod's 30 s are cut to at most 15.
    assert all(g is not None and g <= 15 for _, g in kube.evictions)
    assert result.emptied


async def test_no_deadline_means_node_termination_grace_period() -> None:
    clock, kube = FakeClock(), FakeKube([POD], blocked_for=0)
    result = await drain_node("n1", kube=kube, settings=SETTINGS, deadline=None, clock=clock)
    assert result.deadline == T0 + timedelta(seconds=120)
    assert kube.evictions == [("db-0", None)]


async def test_a_notice_seen_after_the_deadline_still_tries_each_pod_once() -> None:
    """A late notice (agent restart, clock skew) must not give up without a single attempt."""
    clock, kube = FakeClock(), FakeKube([POD], blocked_for=0)
    result = await drain_node(
        "n1", kube=kube, settings=SETTINGS, deadline=T0 - timedelta(seconds=3), clock=clock
    )
    (res,) = result.pods
    assert [name for name, _grace in kube.evictions] == ["db-0"]
    assert res.outcome is Outcome.EVICTED and res.attempts == 1


class SlowKube(FakeKube):
    """Each eviction holds its call slot for a few loop turns; pods named a* are always refused."""

    async def evict_pod(
        self,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> EvictionResult:
        self.evictions.append((name, grace_period_seconds))
        for _ in range(3):
            await asyncio.sleep(0)
        if name.startswith("a"):
            return EvictionResult(EvictionOutcome.BLOCKED, 429, "budget")
        self._gone(name)
        return EvictionResult(EvictionOutcome.EVICTED, 201)


async def test_first_evictions_go_ahead_of_the_retries_of_refused_pods(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With every call slot of the process taken, a newly drained node's pods are not queued behind
    the retries of pods a budget keeps refusing on the nodes drained before it."""
    monkeypatch.setattr(drain, "CALLS_AT_ONCE", 1)

    def pods(prefix: str, n: int) -> list[PodView]:
        return [dataclasses.replace(POD, name=f"{prefix}{i}", uid=f"{prefix}{i}") for i in range(n)]

    clock = FakeClock()
    refused, fresh = SlowKube(pods("a", 6)), SlowKube(pods("b", 5))
    fresh.evictions = refused.evictions  # one log of the process's calls, in the order they ran
    deadline = T0 + timedelta(seconds=200)
    first = asyncio.ensure_future(
        drain_node("n1", kube=refused, settings=SETTINGS, deadline=deadline, clock=clock)
    )
    for _ in range(10_000):  # until a0..a5 were tried once and their retries wait
        if len(refused.evictions) >= 8:
            break
        await asyncio.sleep(0)
    started = len(refused.evictions)
    await drain_node("n2", kube=fresh, settings=SETTINGS, deadline=deadline, clock=clock)
    await first
    after = [name for name, _ in refused.evictions[started:]]
    last_fresh = max(i for i, name in enumerate(after) if name.startswith("b"))
    # Only calls already holding the slot when n2 started may come before its pods.
    assert sum(1 for name in after[:last_fresh] if name.startswith("a")) <= 1, after[: last_fresh + 1]


class ThrottledKube(FakeKube):
    """The budget refuses the first eviction; the API server then throttles every other one with a
    long Retry-After (API Priority and Fairness under a burst)."""

    def __init__(self, pods: list[PodView], *, retry_after: float) -> None:
        super().__init__(pods)
        self.retry_after = retry_after
        self.times: list[float] = []
        self.clock: FakeClock | None = None

    async def evict_pod(
        self,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> EvictionResult:
        assert self.clock is not None
        self.times.append(self.clock.t)
        if len(self.times) == 1:
            return EvictionResult(EvictionOutcome.BLOCKED, 429, "budget")
        return EvictionResult(EvictionOutcome.THROTTLED, 429, "Too many requests", self.retry_after)


async def test_throttling_waits_its_retry_after_but_never_past_the_deadline_action() -> None:
    clock, kube = FakeClock(), ThrottledKube([POD], retry_after=50)
    kube.clock = clock
    result = await drain_node(
        "n1", kube=kube, settings=SETTINGS, deadline=T0 + timedelta(seconds=120), clock=clock
    )
    (res,) = result.pods
    assert res.blocked == 1 and res.throttled == len(kube.times) - 1
    # Refused at 0 and retried after the backoff; then the Retry-After (50 s) is honoured, but the
    # next one is cut to the deadline action's moment (85 s: 120 - grace 30 - margin 5).
    first_retry = kube.times[1]
    assert 0 < first_retry <= 1
    assert kube.times[2:] == pytest.approx([first_retry + 50, 85], abs=0.01), kube.times
    # The budget's one refusal stands: at the deadline action's moment the throttled answer does
    # not hold the pod back, it is deleted then (as a budget's answer would have it).
    assert res.outcome is Outcome.DELETED_AT_DEADLINE and [d[0] for d in kube.deletes] == [POD.name]
