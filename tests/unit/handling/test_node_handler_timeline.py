"""The node handler's timeline around the drain: the stages of the notifications, the pre- and
post-drain HTTP calls, the wait for load-balancer deregistration, and the drain's counts in the
state. A fake API (one node with pods, compare-and-set patches) and a clock that moves only when the
test says so; tests/e2e/agent/test_e2e_new_timeline_*.py check the same against kubesim."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from kubespot.config.drain import DrainSettings
from kubespot.config.loadbalancer import LoadBalancerWaitSettings
from kubespot.handling.deregistration import wait_bound
from kubespot.handling.node_handler import NodeHandler, Settled
from kubespot.handling.timeline import pre_drain_budget
from kubespot.kube import NodeView, PodView
from kubespot.model import InterruptionEvent, Kind
from kubespot.model.summary import ActionResult, ActionSummary, InterruptionSummary
from kubespot.observability.metrics import Metrics
from kubespot.records.actions import (
    ACTIONS_ANNOTATION,
    ActionsRecord,
    StepState,
    loadbalancer_step,
)
from kubespot.records.interruption import STATE_ANNOTATION, Phase, decode
from support import fake_kube
from support.clocks import ManualClock, settle
from support.events import imds_event
from support.node_handler import RecordingNotifier, node_handler

T0 = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)


class FakeKube(fake_kube.FakeKube):
    """The shared fake API with one node ("n") and ``pods`` on it; ``annotate`` is what another
    process (the controller's action runner) writes on the node."""

    def __init__(self, clock: ManualClock, pods: list[PodView]) -> None:
        super().__init__(NodeView("n", uid="u"), pods=pods, clock=clock)

    @property
    def state_extra(self) -> dict[str, Any]:
        state = decode(self.node.annotations.get(STATE_ANNOTATION))
        assert state is not None
        return dict(state.extra)


class Calls:
    """The outgoing HTTP calls: records each stage, when, and how many pods were evicted by then."""

    def __init__(self, kube: FakeKube, clock: ManualClock, *, pre_seconds: float = 0.0) -> None:
        self.kube = kube
        self.clock = clock
        self.pre_seconds = pre_seconds
        self.ran: list[tuple[str, float, int, float | None]] = []

    async def run_stage(
        self,
        stage: str,
        event: InterruptionEvent,
        *,
        node_name: str,
        summary: InterruptionSummary | None = None,
        extra: Mapping[str, Any] | None = None,
        budget: float | None = None,
    ) -> tuple[ActionSummary, ...]:
        self.ran.append((stage, self.clock.elapsed, len(self.kube.evictions), budget))
        if stage == "pre-drain" and self.pre_seconds:
            await self.clock.sleep(self.pre_seconds)
        name = "http:mute" if stage == "pre-drain" else "http:ticket"
        return (
            ActionSummary(
                name=name, result=ActionResult.SUCCESS, started=self.clock.now(), detail="HTTP 200"
            ),
        )


class Recorder:
    def __init__(self) -> None:
        self.node_events: list[tuple[str, str, bool]] = []

    async def node(self, node: str, reason: str, message: str, *, warning: bool = False) -> None:
        self.node_events.append((reason, message, warning))

    async def pod(self, pod: PodView, reason: str, message: str, *, warning: bool = False) -> None:
        pass

    def reasons(self) -> list[str]:
        return [r for r, _, _ in self.node_events]


def web(name: str) -> PodView:
    return PodView(
        namespace="default", name=name, uid=f"u-{name}", node_name="n", controller_kind="ReplicaSet"
    )


def spot(clock: ManualClock, *, deadline_in: float = 120.0) -> InterruptionEvent:
    return imds_event(Kind.SPOT_INTERRUPTION, "spot-1", clock.now(), deadline_in=deadline_in)


def make(
    kube: FakeKube,
    clock: ManualClock,
    *,
    notes: RecordingNotifier | None = None,
    calls: Calls | None = None,
    wait: LoadBalancerWaitSettings | None = None,
    recorder: Recorder | None = None,
    metrics: Metrics | None = None,
) -> NodeHandler:
    return node_handler(
        kube,
        clock,
        drain=DrainSettings(safety_margin=5),
        metrics=metrics,
        recorder=recorder,
        notifier=notes,
        http_calls=calls,
        loadbalancer_wait=wait,
    )


def counter(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def record(event_id: str, state: StepState, at: datetime, pods: list[str], settle: float = 5.0) -> str:
    step = loadbalancer_step(state, at, settle=settle, pods=pods)
    return ActionsRecord(
        event=event_id, runner="controller-0", at=at, kind="spot-itn", loadbalancer=step
    ).encode()


# --- stages, calls, counts ---------------------------------------------------------------------------


async def test_stages_and_calls_surround_the_drain_and_counts_ride_on_the_drained_write() -> None:
    clock = ManualClock(T0, step=0.25)
    kube = FakeKube(clock, [web("a"), web("b")])
    notes, calls, recorder = RecordingNotifier(), Calls(kube, clock), Recorder()
    handler = make(kube, clock, notes=notes, calls=calls, recorder=recorder)
    event = spot(clock)
    await handler.handle(event)
    await settle()
    assert await asyncio.wait_for(handler.settled(event.id), 1) is Settled.DONE
    await settle()

    # pre-drain before the first eviction, with its budget; post-drain after the last one.
    assert [(stage, evicted) for stage, _, evicted, _ in calls.ran] == [("pre-drain", 0), ("post-drain", 2)]
    assert calls.ran[0][3] == pre_drain_budget(120.0, window=120.0) == 12.0
    assert calls.ran[1][3] is None  # bounded by the deadline alone

    assert notes.stages() == ["started", "finished"]
    started, finished = notes.summaries()[:2]
    assert started is not None and started.pods is None and started.actions == ()
    assert finished is not None and finished.pods is not None and finished.pods.evicted == 2
    assert [a.name for a in finished.actions] == ["http:mute", "drain", "http:ticket"]
    assert finished.outcome.value == "done" and finished.error is None

    # Fence and DRAINED: two writes, the counts in the second.
    assert kube.writes == 2
    state = decode(kube.node.annotations[STATE_ANNOTATION])
    assert state is not None and state.phase is Phase.DRAINED
    assert state.extra["pods"] == {"evicted": 2}
    assert {"PreDrain", "PostDrain"} <= set(recorder.reasons())
    await handler.aclose()


async def test_a_broken_notifier_stops_nothing() -> None:
    clock = ManualClock(T0, step=0.25)
    kube = FakeKube(clock, [web("a")])
    notes = RecordingNotifier(broken=True)
    handler = make(kube, clock, notes=notes)
    event = spot(clock)
    await handler.handle(event)
    await settle()
    assert await asyncio.wait_for(handler.settled(event.id), 1) is Settled.DONE
    assert [name for name, _ in kube.evictions] == ["a"]
    assert notes.stages() == ["started", "finished"]
    await handler.aclose()


async def test_an_empty_node_still_records_its_counts() -> None:
    clock = ManualClock(T0, step=0.25)
    kube = FakeKube(clock, [])
    handler = make(kube, clock)
    event = spot(clock)
    await handler.handle(event)
    await settle()
    assert await asyncio.wait_for(handler.settled(event.id), 1) is Settled.DONE
    assert kube.state_extra["pods"] == {"evicted": 0}
    await handler.aclose()


async def test_a_withdrawn_event_is_reported_finished_as_withdrawn() -> None:
    clock = ManualClock(T0, step=0.25)
    kube = FakeKube(clock, [web("target")])
    notes = RecordingNotifier()
    wait = LoadBalancerWaitSettings(enabled=True, max_delay=30)
    handler = make(kube, clock, notes=notes, wait=wait)
    event = spot(clock)
    await handler.handle(event)
    await clock.advance(2)  # waiting for a deregistration record that never comes
    await handler.handle(replace(event, cancelled=True))
    await settle()
    assert notes.stages() == ["started", "finished"]
    summary = notes.summaries()[1]
    assert summary is not None and summary.outcome.value == "withdrawn"
    assert kube.evictions == []
    await handler.aclose()


# --- the wait for load-balancer deregistration ------------------------------------------------------


async def test_target_pods_are_held_until_draining_plus_settle_others_go_once_the_record_lands() -> None:
    clock = ManualClock(T0, step=0.25)
    kube = FakeKube(clock, [web("target"), web("other")])
    notes, recorder, metrics = RecordingNotifier(), Recorder(), Metrics()
    wait = LoadBalancerWaitSettings(enabled=True, max_delay=30)
    handler = make(kube, clock, notes=notes, wait=wait, recorder=recorder, metrics=metrics)
    event = spot(clock)
    await handler.handle(event)
    await clock.advance(1)
    assert kube.evictions == []  # no record yet: nothing is evicted

    # The controller's runner claims the node: targets known, deregistration not accepted yet.
    kube.annotate(ACTIONS_ANNOTATION, record(event.id, StepState.PENDING, clock.now(), ["default/target"]))
    await clock.advance(1)
    assert [name for name, _ in kube.evictions] == ["other"]

    await clock.advance(2)  # t=4: AWS accepted the deregistration; settle 5 s from now
    kube.annotate(ACTIONS_ANNOTATION, record(event.id, StepState.DRAINING, clock.now(), ["default/target"]))
    await clock.advance(4.5)
    assert [name for name, _ in kube.evictions] == ["other"]
    await clock.advance(1)
    assert [name for name, _ in kube.evictions] == ["other", "target"]
    target_at = dict(kube.evicted_at)["target"]
    assert 9.0 <= target_at <= 9.6

    assert await asyncio.wait_for(handler.settled(event.id), 1) is Settled.DONE
    assert counter(metrics, "kubespot_actions_total", action="loadbalancer_wait", result="success") == 1
    assert "LoadBalancerWait" in recorder.reasons()
    finished = notes.summaries()[-1]
    assert finished is not None
    waited = next(a for a in finished.actions if a.name == "loadbalancer_wait")
    assert waited.result is ActionResult.SUCCESS and "1 pods held" in waited.detail
    await handler.aclose()


async def test_without_a_record_the_drain_goes_ahead_at_max_delay_and_says_so() -> None:
    clock = ManualClock(T0, step=0.25)
    kube = FakeKube(clock, [web("target")])
    recorder, metrics = Recorder(), Metrics()
    wait = LoadBalancerWaitSettings(enabled=True, max_delay=10)
    handler = make(kube, clock, wait=wait, recorder=recorder, metrics=metrics)
    event = spot(clock)
    await handler.handle(event)
    await clock.advance(9.5)
    assert kube.evictions == []
    reads = kube.reads
    assert 15 <= reads <= 25  # one read of the node every half second, no more
    await clock.advance(1)
    assert [name for name, _ in kube.evictions] == ["target"]
    assert 10.0 <= kube.evicted_at[0][1] <= 10.5
    assert await asyncio.wait_for(handler.settled(event.id), 1) is Settled.DONE
    assert counter(metrics, "kubespot_actions_total", action="loadbalancer_wait", result="timeout") == 1
    assert ("LoadBalancerWaitTimeout", True) in {(r, w) for r, _, w in recorder.node_events}
    await handler.aclose()


async def test_a_record_without_deregistration_holds_nothing() -> None:
    clock = ManualClock(T0, step=0.25)
    kube = FakeKube(clock, [web("target")])
    wait = LoadBalancerWaitSettings(enabled=True, max_delay=30)
    handler = make(kube, clock, wait=wait)
    event = spot(clock)
    # The runner recorded the event without a load-balancer step (not configured for the kind).
    kube.annotate(ACTIONS_ANNOTATION, ActionsRecord(event=event.id, runner="c", at=clock.now()).encode())
    await handler.handle(event)
    await clock.advance(0.5)
    assert [name for name, _ in kube.evictions] == ["target"]
    await handler.aclose()


async def test_kinds_without_the_wait_do_not_wait() -> None:
    clock = ManualClock(T0, step=0.25)
    kube = FakeKube(clock, [web("target")])
    wait = LoadBalancerWaitSettings(enabled=True, max_delay=30, kinds=frozenset({Kind.ASG_LIFECYCLE}))
    handler = make(kube, clock, wait=wait)
    await handler.handle(spot(clock))
    await settle()
    assert [name for name, _ in kube.evictions] == ["target"]
    assert kube.reads == 1  # the look for another holder before the fence; no polling
    await handler.aclose()


async def test_pre_drain_calls_and_the_record_wait_run_side_by_side() -> None:
    clock = ManualClock(T0, step=0.25)
    kube = FakeKube(clock, [web("other")])
    calls = Calls(kube, clock, pre_seconds=3)
    wait = LoadBalancerWaitSettings(enabled=True, max_delay=30)
    handler = make(kube, clock, calls=calls, wait=wait)
    event = spot(clock)
    kube.annotate(ACTIONS_ANNOTATION, record(event.id, StepState.DRAINING, clock.now(), []))
    await handler.handle(event)
    await clock.advance(2.5)
    assert kube.evictions == []  # the pre-drain call is still running
    await clock.advance(1)
    assert [name for name, _ in kube.evictions] == ["other"]
    await handler.aclose()


def test_the_wait_bound_keeps_time_for_the_drain() -> None:
    now = T0
    # A spot notice: max_delay wins.
    assert wait_bound(now=now, max_delay=30, deadline=now + timedelta(seconds=118), safety_margin=5) == (
        now + timedelta(seconds=30)
    )
    # 50 s left: the drain keeps 35 s (margin + 30).
    assert wait_bound(now=now, max_delay=30, deadline=now + timedelta(seconds=50), safety_margin=5) == (
        now + timedelta(seconds=15)
    )
    # 20 s left: nothing to spare.
    assert wait_bound(now=now, max_delay=30, deadline=now + timedelta(seconds=20), safety_margin=5) == now
    # No deadline: max_delay alone.
    assert wait_bound(now=now, max_delay=7, deadline=None, safety_margin=5) == now + timedelta(seconds=7)
