"""The drain engine on a fake cluster and a fake clock: deadline decisions, deterministically."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from kubespot.actions import drain
from kubespot.actions.drain import Outcome, drain_node
from kubespot.config.drain import DrainSettings
from kubespot.kube import EvictionOutcome, EvictionResult, PodView
from support.fake_kube import BUDGET_REFUSAL, FakeKube

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


def cluster(pods: list[PodView], *, blocked_for: int = 10**9) -> FakeKube:
    """Pods on n1 whose eviction a budget refuses ``blocked_for`` times; then they go at once."""
    kube = FakeKube("n1", pods=pods)

    async def budget(pod: PodView) -> EvictionResult | None:
        return BUDGET_REFUSAL if len(kube.evictions) <= blocked_for else None

    kube.eviction_gate = budget
    return kube


POD = PodView(
    namespace="ns",
    name="db-0",
    uid="u1",
    node_name="n1",
    controller_kind="StatefulSet",
    grace_period_seconds=30,
)


async def test_blocked_pod_is_deleted_when_grace_plus_margin_is_all_that_is_left() -> None:
    clock, kube = FakeClock(), cluster([POD])
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
    clock, kube = FakeClock(), cluster([POD])
    settings = dataclasses.replace(SETTINGS, pdb_deadline_action="keep")
    result = await drain_node(
        "n1", kube=kube, settings=settings, deadline=T0 + timedelta(seconds=60), clock=clock
    )
    (res,) = result.pods
    assert res.outcome is Outcome.STILL_RUNNING and kube.deletes == []
    assert not result.emptied and clock.t >= 60 - 1e-6  # kept trying until the deadline (float time)


async def test_budget_that_frees_up_means_a_normal_eviction_with_a_capped_grace() -> None:
    clock, kube = FakeClock(), cluster([POD], blocked_for=2)
    result = await drain_node(
        "n1", kube=kube, settings=SETTINGS, deadline=T0 + timedelta(seconds=20), clock=clock
    )
    (res,) = result.pods
    assert res.outcome is Outcome.EVICTED and res.blocked == 2
    # 20 s left minus the 5 s margin: the pod's 30 s are cut to at most 15.
    assert all(g is not None and g <= 15 for _, g in kube.evictions)
    assert result.emptied


async def test_no_deadline_means_node_termination_grace_period() -> None:
    clock, kube = FakeClock(), cluster([POD], blocked_for=0)
    result = await drain_node("n1", kube=kube, settings=SETTINGS, deadline=None, clock=clock)
    assert result.deadline == T0 + timedelta(seconds=120)
    assert kube.evictions == [("db-0", None)]


async def test_a_notice_seen_after_the_deadline_still_tries_each_pod_once() -> None:
    """A late notice (agent restart, clock skew) must not give up without a single attempt."""
    clock, kube = FakeClock(), cluster([POD], blocked_for=0)
    result = await drain_node(
        "n1", kube=kube, settings=SETTINGS, deadline=T0 - timedelta(seconds=3), clock=clock
    )
    (res,) = result.pods
    assert [name for name, _grace in kube.evictions] == ["db-0"]
    assert res.outcome is Outcome.EVICTED and res.attempts == 1


async def test_first_evictions_go_ahead_of_the_retries_of_refused_pods(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With every call slot of the process taken, a newly drained node's pods are not queued behind
    the retries of pods a budget keeps refusing on the nodes drained before it."""
    monkeypatch.setattr(drain, "CALLS_AT_ONCE", 1)

    def pods(prefix: str, n: int, node: str) -> list[PodView]:
        return [
            dataclasses.replace(POD, name=f"{prefix}{i}", uid=f"{prefix}{i}", node_name=node)
            for i in range(n)
        ]

    async def slow(pod: PodView) -> EvictionResult | None:
        """Each eviction holds its call slot for a few loop turns; pods named a* are always refused."""
        for _ in range(3):
            await asyncio.sleep(0)
        return BUDGET_REFUSAL if pod.name.startswith("a") else None

    clock = FakeClock()
    kube = FakeKube("n1", "n2", pods=[*pods("a", 6, "n1"), *pods("b", 5, "n2")])
    kube.eviction_gate = slow  # kube.evictions: one log of the process's calls, in the order they ran
    deadline = T0 + timedelta(seconds=200)
    first = asyncio.ensure_future(
        drain_node("n1", kube=kube, settings=SETTINGS, deadline=deadline, clock=clock)
    )
    for _ in range(10_000):  # until a0..a5 were tried once and their retries wait
        if len(kube.evictions) >= 8:
            break
        await asyncio.sleep(0)
    started = len(kube.evictions)
    await drain_node("n2", kube=kube, settings=SETTINGS, deadline=deadline, clock=clock)
    await first
    after = [name for name, _ in kube.evictions[started:]]
    last_fresh = max(i for i, name in enumerate(after) if name.startswith("b"))
    # Only calls already holding the slot when n2 started may come before its pods.
    assert sum(1 for name in after[:last_fresh] if name.startswith("a")) <= 1, after[: last_fresh + 1]


async def test_throttling_waits_its_retry_after_but_never_past_the_deadline_action() -> None:
    """The budget refuses the first eviction; the API server then throttles every other one with a
    long Retry-After (API Priority and Fairness under a burst)."""
    clock = FakeClock()
    kube = FakeKube("n1", pods=[POD], clock=clock)

    async def throttled(pod: PodView) -> EvictionResult:
        if len(kube.evictions) == 1:
            return BUDGET_REFUSAL
        return EvictionResult(EvictionOutcome.THROTTLED, 429, "Too many requests", 50)

    kube.eviction_gate = throttled
    result = await drain_node(
        "n1", kube=kube, settings=SETTINGS, deadline=T0 + timedelta(seconds=120), clock=clock
    )
    (res,) = result.pods
    times = [at for _, at in kube.evicted_at]
    assert res.blocked == 1 and res.throttled == len(times) - 1
    # Refused at 0 and retried after the backoff; then the Retry-After (50 s) is honoured, but the
    # next one is cut to the deadline action's moment (85 s: 120 - grace 30 - margin 5).
    first_retry = times[1]
    assert 0 < first_retry <= 1
    assert times[2:] == pytest.approx([first_retry + 50, 85], abs=0.01), times
    # The budget's one refusal stands: at the deadline action's moment the throttled answer does
    # not hold the pod back, it is deleted then (as a budget's answer would have it).
    assert res.outcome is Outcome.DELETED_AT_DEADLINE and [d[0] for d in kube.deletes] == [POD.name]
