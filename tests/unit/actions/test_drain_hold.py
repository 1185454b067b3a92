"""The drain engine's per-pod ``hold`` gate: free pods go at once, held ones once their gate opens,
and no hold outlasts the moment a pod must leave to keep its grace period. A fake cluster and a
clock that moves only when the test says so."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from kubespot.actions.drain import DrainResult, Outcome, drain_node
from kubespot.config.drain import DrainSettings
from kubespot.kube import PodView
from support.clocks import ManualClock, settle
from support.fake_kube import FakeKube

T0 = datetime(2026, 11, 22, 4, 0, tzinfo=UTC)
SETTINGS = DrainSettings(safety_margin=5)


def web(name: str, grace: int = 30) -> PodView:
    return PodView(
        namespace="default",
        name=name,
        uid=f"u-{name}",
        node_name="n1",
        controller_kind="ReplicaSet",
        grace_period_seconds=grace,
    )


def start(kube: FakeKube, clock: ManualClock, hold: object, deadline_in: float) -> asyncio.Task[DrainResult]:
    return asyncio.create_task(
        drain_node(
            "n1",
            kube=kube,
            settings=SETTINGS,
            deadline=T0 + timedelta(seconds=deadline_in),
            clock=clock,
            hold=hold,  # type: ignore[arg-type]  # the gate under test
        )
    )


def names(kube: FakeKube) -> list[str]:
    return [name for name, _ in kube.evictions]


async def test_free_pods_go_at_once_held_ones_when_their_gate_opens() -> None:
    clock = ManualClock(T0)
    kube = FakeKube("n1", pods=[web("free"), web("target")], clock=clock)
    release = asyncio.Event()
    asked: list[str] = []

    async def hold(pod: PodView) -> None:
        asked.append(pod.name)
        if pod.name == "target":
            await release.wait()

    drain = start(kube, clock, hold, deadline_in=120)
    await settle()
    assert sorted(asked) == ["free", "target"]
    assert names(kube) == ["free"]  # the target pod waits, the other did not wait for it

    await clock.advance(4)
    assert names(kube) == ["free"]
    release.set()
    await settle()
    result = await asyncio.wait_for(drain, 1)
    assert kube.evicted_at == [("free", 0.0), ("target", 4.0)]
    assert result.emptied
    assert {p.name: p.outcome for p in result.pods} == {"free": Outcome.EVICTED, "target": Outcome.EVICTED}


async def test_a_hold_never_outlasts_the_time_the_pod_needs_before_the_deadline() -> None:
    clock = ManualClock(T0)
    kube = FakeKube("n1", pods=[web("target", grace=30)], clock=clock)

    async def forever(pod: PodView) -> None:
        await asyncio.Event().wait()

    # 60 s left: the pod must start leaving 30 s (its grace, at most half the window) + 5 s (the
    # margin) before the deadline, so the gate is given 25 s at most.
    drain = start(kube, clock, forever, deadline_in=60)
    await settle()
    await clock.advance(24.5)
    assert kube.evictions == []
    await clock.advance(1)
    result = await asyncio.wait_for(drain, 1)
    assert names(kube) == ["target"]
    assert 25.0 <= kube.evicted_at[0][1] <= 25.5
    assert result.emptied


async def test_a_pod_that_goes_while_held_is_not_evicted() -> None:
    clock = ManualClock(T0)
    kube = FakeKube("n1", pods=[web("target")], clock=clock)

    async def forever(pod: PodView) -> None:
        await asyncio.Event().wait()

    drain = start(kube, clock, forever, deadline_in=120)
    await settle()
    await kube.delete_pod("default", "target")  # by someone else (a rollout) while kubespot held it
    await settle()
    result = await asyncio.wait_for(drain, 1)
    assert kube.evictions == []
    assert result.pods[0].outcome is Outcome.GONE and result.emptied


async def test_a_failing_gate_lets_the_pod_go_at_once() -> None:
    clock = ManualClock(T0)
    kube = FakeKube("n1", pods=[web("target")], clock=clock)

    async def broken(pod: PodView) -> None:
        raise RuntimeError("bug in the gate")

    result = await asyncio.wait_for(start(kube, clock, broken, deadline_in=120), 1)
    assert kube.evicted_at == [("target", 0.0)] and result.emptied


async def test_without_a_gate_nothing_waits() -> None:
    clock = ManualClock(T0)
    kube = FakeKube("n1", pods=[web("a"), web("b")], clock=clock)
    result = await asyncio.wait_for(start(kube, clock, None, deadline_in=120), 1)
    assert sorted(kube.evicted_at) == [("a", 0.0), ("b", 0.0)] and result.emptied
