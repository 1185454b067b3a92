"""The node handler's decisions over time: which event owns the node, when pending ones fire, what a
withdrawal or a restart does. A fake API (one node, compare-and-set patches) and a clock that moves
only when the test says so; the end-to-end suite checks the same things against kubesim."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

from kubespot.config.imds import MonitorSettings
from kubespot.config.node import NodeActionSettings
from kubespot.handling.node_handler import NodeHandler, Settled
from kubespot.kube import KubeError, NodeView
from kubespot.model import InterruptionEvent, Kind
from kubespot.records.interruption import STATE_ANNOTATION, decode
from support import fake_kube
from support.clocks import ManualClock, settle
from support.events import imds_event
from support.node_handler import RecordingNotifier, node_handler

T0 = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


class FakeKube(fake_kube.FakeKube):
    """The shared fake API with one node, "n"; ``owner`` is the event whose state the node carries."""

    def __init__(self) -> None:
        super().__init__(NodeView("n", uid="u"))

    @property
    def owner(self) -> str | None:
        state = decode(self.node.annotations.get(STATE_ANNOTATION))
        return None if state is None else state.event_id


def make(
    kube: FakeKube,
    clock: ManualClock,
    *,
    boot: datetime | None = None,
    notifier: RecordingNotifier | None = None,
) -> NodeHandler:
    return node_handler(
        kube,
        clock,
        actions=NodeActionSettings(rebalance_undo_after=1800),
        monitors=MonitorSettings(rebalance_monitoring=True, asg_lifecycle_draining=True),
        notifier=notifier,
        boot_time=lambda: boot,
    )


def fresh() -> tuple[ManualClock, FakeKube, NodeHandler]:
    """A clock at T0, the fake API with node "n", and that node's handler over them."""
    clock, kube = ManualClock(T0), FakeKube()
    return clock, kube, make(kube, clock)


def event(
    kind: Kind, ident: str, clock: ManualClock, *, act_in: float = 0.0, deadline_in: float | None = None
) -> InterruptionEvent:
    return imds_event(kind, ident, clock.now(), act_in=act_in, deadline_in=deadline_in, description=ident)


def withdrawn(ev: InterruptionEvent, clock: ManualClock) -> InterruptionEvent:
    return dataclasses.replace(ev, cancelled=True, act_at=clock.now())


DAY = 86400.0


async def test_a_due_asg_termination_is_not_held_back_by_a_pending_scheduled_event() -> None:
    clock, kube, h = fresh()
    await h.handle(event(Kind.SCHEDULED_MAINTENANCE, "retire", clock, act_in=5 * DAY, deadline_in=5 * DAY))
    await settle()
    assert kube.owner is None and h.phase == "pending"
    await h.handle(event(Kind.ASG_LIFECYCLE, "asg", clock))
    await settle()
    assert kube.owner == "asg" and kube.node.unschedulable
    await h.aclose()


async def test_a_pending_event_does_not_cancel_a_rebalance_undo() -> None:
    clock, kube, h = fresh()
    await h.handle(event(Kind.REBALANCE_RECOMMENDATION, "rebalance", clock))
    await settle()
    assert kube.owner == "rebalance"
    sched = event(Kind.SCHEDULED_MAINTENANCE, "sched", clock, act_in=3 * DAY, deadline_in=3 * DAY)
    await h.handle(sched)
    await clock.advance(1801)
    assert kube.owner is None and not kube.node.unschedulable, "the 30 min undo still happened"
    await h.handle(withdrawn(sched, clock))
    await settle()
    assert kube.owner is None and not kube.node.unschedulable
    await h.aclose()


async def test_withdrawing_the_nearer_of_two_scheduled_events_keeps_the_other() -> None:
    clock, kube, h = fresh()
    far = event(Kind.SCHEDULED_MAINTENANCE, "far", clock, act_in=7200, deadline_in=7500)
    near = event(Kind.SCHEDULED_MAINTENANCE, "near", clock, act_in=3600, deadline_in=3900)
    await h.handle(far)
    await h.handle(near)
    await h.handle(withdrawn(near, clock))
    await clock.advance(3700)
    assert kube.owner is None, "nothing is due before the far event's act_at"
    await clock.advance(3600)
    assert kube.owner == "far" and kube.node.unschedulable
    await h.aclose()


async def test_a_rescheduled_event_acts_at_its_new_time() -> None:
    clock, kube, h = fresh()
    await h.handle(event(Kind.SCHEDULED_MAINTENANCE, "s", clock, act_in=7200, deadline_in=7500))
    await h.handle(event(Kind.SCHEDULED_MAINTENANCE, "s", clock, act_in=600, deadline_in=900))
    await clock.advance(601)
    assert kube.owner == "s"
    state = decode(kube.node.annotations[STATE_ANNOTATION])
    assert state is not None and state.deadline == T0 + timedelta(seconds=900)
    await h.aclose()


async def test_an_undo_during_an_api_outage_is_retried_until_it_succeeds() -> None:
    clock, kube, h = fresh()
    sched = event(Kind.SCHEDULED_MAINTENANCE, "s", clock, deadline_in=600)
    await h.handle(sched)
    await settle()
    assert kube.node.unschedulable
    kube.failures = 3
    await h.handle(withdrawn(sched, clock))
    for _ in range(6):
        await clock.advance(10)
    assert not kube.node.unschedulable and kube.owner is None
    await h.aclose()


async def test_after_a_reboot_the_fence_goes_and_the_still_listed_event_does_not_come_back() -> None:
    clock, kube = ManualClock(T0), FakeKube()
    first = make(kube, clock)
    sched = event(Kind.SCHEDULED_MAINTENANCE, "reboot", clock, deadline_in=300)
    await first.handle(sched)
    await settle()
    assert kube.owner == "reboot"
    await first.aclose()
    await clock.advance(600)
    second = make(kube, clock, boot=clock.now() - timedelta(seconds=30))
    await second.resume()
    assert kube.owner is None and not kube.node.unschedulable
    await second.handle(sched)  # IMDS still lists it as active for a while
    await settle()
    assert kube.owner is None and not kube.node.unschedulable
    await second.aclose()


async def test_a_resumed_fence_does_not_notify_again() -> None:
    clock, kube, notifier = ManualClock(T0), FakeKube(), RecordingNotifier()
    first = make(kube, clock, notifier=notifier)
    spot = event(Kind.SPOT_INTERRUPTION, "spot", clock, deadline_in=120)
    await first.handle(spot)
    await settle()
    await first.aclose()
    second = make(kube, clock, notifier=notifier)
    await second.resume()
    await second.handle(spot)
    await settle()
    assert notifier.started() == ["spot"]
    # The first handler finished the event (an empty node drains at once); the second says nothing.
    assert [(ident, stage.value) for ident, stage, _ in notifier.sent] == [
        ("spot", "started"),
        ("spot", "finished"),
    ]
    await second.aclose()


async def test_a_state_of_an_unknown_kind_is_ignored_not_fatal() -> None:
    clock, kube = ManualClock(T0), FakeKube()
    kube.node = NodeView(
        "n",
        annotations={
            STATE_ANNOTATION: '{"event_id":"x","kind":"spot-interruption","phase":"fenced",'
            '"since":"2026-11-22T03:00:00+00:00"}'
        },
    )
    h = make(kube, clock)
    await h.resume()
    await h.handle(event(Kind.SPOT_INTERRUPTION, "spot", clock, deadline_in=120))
    await settle()
    assert kube.owner == "spot"
    await h.aclose()


async def test_settled_tells_the_queue_processor_how_each_event_ended() -> None:
    clock, _, h = fresh()
    rebalance = event(Kind.REBALANCE_RECOMMENDATION, "rebalance", clock)
    await h.handle(rebalance)
    assert await asyncio.wait_for(h.settled("rebalance"), 1) == Settled.DONE, (
        "fenced; the undo is not awaited"
    )
    await h.handle(event(Kind.SPOT_INTERRUPTION, "spot", clock, deadline_in=120))
    assert await asyncio.wait_for(h.settled("spot"), 1) == Settled.DONE
    sched = event(Kind.SCHEDULED_MAINTENANCE, "later", clock, act_in=DAY, deadline_in=DAY)
    await h.handle(sched)
    waiting = asyncio.ensure_future(h.settled("later"))
    await settle()
    assert not waiting.done(), "a pending event is not settled until it is handled or withdrawn"
    await h.handle(withdrawn(sched, clock))
    assert await asyncio.wait_for(waiting, 1) == Settled.WITHDRAWN
    await h.aclose()


async def test_an_event_that_loses_the_node_ends_when_the_stronger_one_does() -> None:
    # An Auto Scaling hook superseded by a spot warning must not be completed (CONTINUE) at the
    # takeover: AWS terminates the instance on CONTINUE, cutting the spot drain short (issue 10 review).
    clock, kube, h = fresh()
    kube.failures = 1000  # the first fence hangs in retries, so the spot notice arrives mid-work
    await h.handle(event(Kind.ASG_LIFECYCLE, "asg", clock))
    await settle()
    await h.handle(event(Kind.SPOT_INTERRUPTION, "spot", clock, deadline_in=60))
    waiting = asyncio.ensure_future(h.settled("asg"))
    await settle()
    assert not waiting.done(), "the hook waits while the spot event's fence is still retrying"
    kube.failures = 0
    await clock.advance(10)
    assert await asyncio.wait_for(h.settled("spot"), 1) == Settled.DONE
    assert await asyncio.wait_for(waiting, 1) == Settled.DONE
    await h.aclose()


def held(phase: str, holder: str, renewed: datetime) -> str:
    return (
        f'{{"event_id":"spot","kind":"spot-itn","phase":"{phase}","since":"{T0.isoformat()}",'
        f'"holder":"{holder}","renewed":"{renewed.isoformat()}","cordoned_by_us":true,'
        '"taints":["kubespot.io/spot-itn"]}'
    )


def held_node(phase: str, holder: str, renewed: datetime) -> NodeView:
    """Node "n" fenced (cordoned, its state recorded) for event "spot" by ``holder``."""
    return NodeView("n", unschedulable=True, annotations={STATE_ANNOTATION: held(phase, holder, renewed)})


async def test_a_node_another_live_process_is_draining_is_followed_not_drained_again() -> None:
    clock, kube = ManualClock(T0), FakeKube()
    kube.node = held_node("draining", "replica-a", T0)
    h = make(kube, clock)
    await h.handle(event(Kind.SPOT_INTERRUPTION, "spot", clock, deadline_in=120))
    await settle()
    assert kube.writes == 0 and h.phase == "following"
    waiting = asyncio.ensure_future(h.settled("spot"))
    kube.node = held_node("drained", "replica-a", T0)
    await clock.advance(3)
    assert await asyncio.wait_for(waiting, 1) == Settled.DONE
    assert kube.writes == 0, "the other process did the work"
    await h.aclose()


async def test_a_hold_that_goes_stale_is_taken_over() -> None:
    clock, kube = ManualClock(T0), FakeKube()
    kube.node = held_node("draining", "replica-a", T0)
    h = make(kube, clock)
    await h.handle(event(Kind.SPOT_INTERRUPTION, "spot", clock, deadline_in=120))
    for _ in range(20):
        await clock.advance(2)  # replica-a never renews
    assert await asyncio.wait_for(h.settled("spot"), 1) == Settled.DONE
    state = decode(kube.node.annotations[STATE_ANNOTATION])
    assert state is not None and state.holder == h.identity and state.phase.value == "drained"
    await h.aclose()


async def test_start_retries_an_unreadable_node_and_survives_a_broken_resume() -> None:
    clock, kube = ManualClock(T0), FakeKube()
    kube.node = held_node("draining", "me", T0)
    calls = {"n": 0}
    real_get = kube.get_node

    async def flaky_get(name: str) -> NodeView:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise KubeError(503, "apiserver restarting")
        return await real_get(name)

    kube.get_node = flaky_get  # type: ignore[method-assign]
    h = make(kube, clock)
    h.identity = "me"
    starting = asyncio.ensure_future(h.start())
    for _ in range(5):
        await clock.advance(2)
    await asyncio.wait_for(starting, 1)
    assert calls["n"] >= 3 and h.current is not None and h.current.id == "spot", "resumed after the outage"
    await h.aclose()

    broken = make(FakeKube(), clock)

    async def boom() -> None:
        raise RuntimeError("a bug in resume")

    broken.resume = boom  # type: ignore[method-assign]
    await asyncio.wait_for(broken.start(), 1)  # logged, not raised: intake must still start
    await broken.aclose()


class RecordingEvents:
    """The part of EventRecorder the handler uses: node events by reason."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    async def node(self, node: str, reason: str, message: str, *, warning: bool = False) -> None:
        self.reasons.append(reason)

    async def pod(self, pod: object, reason: str, message: str, *, warning: bool = False) -> None:
        return None


async def test_a_notice_rearmed_from_its_record_is_not_counted_or_announced_again() -> None:
    """Each controller replica re-arms a scheduled change recorded on the Node; only the replica
    that received the message reports it as a new notice."""
    clock, kube = ManualClock(T0), FakeKube()
    recorder = RecordingEvents()
    h = make(kube, clock)
    h._ctx.recorder = recorder  # type: ignore[assignment]
    count = "kubespot_interruptions_total"
    labels = {"kind": "scheduled-maintenance", "source": "imds"}
    rearmed = event(Kind.SCHEDULED_MAINTENANCE, "s1", clock, act_in=7200, deadline_in=7500)
    await h.handle(rearmed, announce=False)
    await settle()
    seen = h._ctx.metrics.registry.get_sample_value
    assert recorder.reasons == [] and seen(count, labels) in (None, 0.0)
    await h.handle(event(Kind.SCHEDULED_MAINTENANCE, "s2", clock, act_in=7200, deadline_in=7500))
    await settle()
    assert recorder.reasons == ["ScheduledEvent"] and seen(count, labels) == 1.0
    await h.aclose()
