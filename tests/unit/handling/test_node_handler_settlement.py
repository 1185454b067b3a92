"""Every event a node handler takes in settles, and what a handler keeps is bounded (issue 10 §1).

The queue processor holds a message until ``settled()`` answers: an event that never settles wedges a
slot of the consumer for ever. These tests use the intake tests' fake API (one node, compare-and-set
patches) and manual clock; tests/e2e/controller/test_e2e_queue_followups.py checks the same through
moto and kubesim.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import weakref
from datetime import timedelta

from test_node_handler_intake import (
    T0,
    FakeKube,
    ManualClock,
    event,
    fresh,
    held,
    held_node,
    make,
    settle,
    withdrawn,
)

from kubespot.config.node import NodeActionSettings
from kubespot.handling.intake import SETTLED_KEPT
from kubespot.handling.node_handler import NodeHandler, Settled
from kubespot.kube import NodeView
from kubespot.model import InterruptionEvent, Kind
from kubespot.records.interruption import STATE_ANNOTATION, decode
from support.node_handler import node_handler

OOS = "node.kubernetes.io/out-of-service"


async def test_a_weaker_follow_up_after_a_spot_drain_settles_done_at_once() -> None:
    # EventBridge sends the EC2 "shutting-down" state change after every spot interruption: its
    # effective deadline is not earlier than the spot one, so it never takes the node over.
    clock, kube, h = fresh()
    await h.handle(event(Kind.SPOT_INTERRUPTION, "spot", clock, deadline_in=120))
    assert await asyncio.wait_for(h.settled("spot"), 1) is Settled.DONE
    await clock.advance(5)
    await h.handle(event(Kind.STATE_CHANGE, "shutting-down", clock))
    assert await asyncio.wait_for(h.settled("shutting-down"), 1) is Settled.DONE
    await h.handle(event(Kind.ASG_LIFECYCLE, "asg-hook-1", clock))
    await h.handle(event(Kind.ASG_LIFECYCLE, "asg-hook-2", clock))
    assert await asyncio.wait_for(h.settled("asg-hook-1"), 1) is Settled.DONE
    assert await asyncio.wait_for(h.settled("asg-hook-2"), 1) is Settled.DONE
    assert kube.owner == "spot", "the node stays the spot event's"
    await h.aclose()


async def test_a_follow_up_during_the_drain_settles_when_the_drain_does() -> None:
    clock, kube = ManualClock(T0), FakeKube()
    kube.failures = 1000  # the fence hangs in retries: the spot event's work is still running
    h = make(kube, clock)
    await h.handle(event(Kind.SPOT_INTERRUPTION, "spot", clock, deadline_in=120))
    await settle()
    await h.handle(event(Kind.ASG_LIFECYCLE, "asg", clock))  # ASG terminate after the spot warning
    waiting = asyncio.ensure_future(h.settled("asg"))
    await settle()
    assert not waiting.done(), "the lifecycle hook waits for the node to be drained"
    kube.failures = 0
    await clock.advance(10)
    assert await asyncio.wait_for(waiting, 1) is Settled.DONE
    await h.aclose()


async def test_a_follow_up_of_a_failed_handling_settles_failed() -> None:
    clock, kube = ManualClock(T0), FakeKube()
    kube.failures = 10_000  # the API never takes the fence: the spot event fails at its deadline
    h = make(kube, clock)
    await h.handle(event(Kind.SPOT_INTERRUPTION, "spot", clock, deadline_in=20))
    await h.handle(event(Kind.STATE_CHANGE, "stopping", clock))
    for _ in range(5):
        await clock.advance(10)
    assert await asyncio.wait_for(h.settled("spot"), 1) is Settled.FAILED
    assert await asyncio.wait_for(h.settled("stopping"), 1) is Settled.FAILED
    await h.aclose()


async def test_outcomes_and_old_notices_are_bounded() -> None:
    clock, _, h = fresh()
    await h.handle(event(Kind.SPOT_INTERRUPTION, "spot", clock, deadline_in=120))
    for i in range(SETTLED_KEPT * 3):
        await h.handle(event(Kind.STATE_CHANGE, f"follow-up-{i}", clock))
        await clock.advance(60)
    assert len(h._intake._known) < 20, "notices long past their instance's end are forgotten"
    assert len(h._intake._settled) <= SETTLED_KEPT + len(h._intake._known), len(h._intake._settled)
    await h.aclose()


async def test_a_new_interruption_after_the_nodes_event_ended_is_handled_on_its_own() -> None:
    # The instance was stopped (EC2 "stopping"), drained, started again days later on the same Node:
    # a spot warning then is a new interruption, not a follow-up of the old event (issue 10 review).
    clock, kube, h = fresh()
    await h.handle(event(Kind.STATE_CHANGE, "stopping", clock, deadline_in=0))
    assert await asyncio.wait_for(h.settled("stopping"), 1) is Settled.DONE
    kube.node = NodeView("n", uid="u")  # an operator uncordoned it; the instance runs again
    await clock.advance(3 * 86400)
    writes = kube.writes
    await h.handle(event(Kind.SPOT_INTERRUPTION, "spot", clock, deadline_in=120))
    assert await asyncio.wait_for(h.settled("spot"), 1) is Settled.DONE
    assert kube.writes > writes and kube.owner == "spot" and kube.node.unschedulable
    await h.aclose()


async def test_an_old_drained_state_is_not_resumed_as_the_current_event() -> None:
    clock, kube = ManualClock(T0), FakeKube()
    state = decode(held("drained", "gone-replica", T0))
    assert state is not None
    kube.node = NodeView("n", uid="u", annotations={STATE_ANNOTATION: state.encode()})
    await clock.advance(30 * 86400)
    h = make(kube, clock)
    await h.resume()
    assert h.current is None and kube.writes == 0, "nothing to resume, nothing written"
    await h.handle(event(Kind.ASG_LIFECYCLE, "asg", clock))
    await settle()
    assert kube.owner == "asg", "a new hook drains the node instead of being taken as covered"
    await h.aclose()


async def test_a_deleted_node_settles_what_is_still_awaited_as_gone() -> None:
    clock, kube = ManualClock(T0), FakeKube()
    kube.failures = 1000
    h = make(kube, clock)
    await h.handle(event(Kind.SPOT_INTERRUPTION, "spot", clock, deadline_in=120))
    waiting = asyncio.ensure_future(h.settled("spot"))
    await settle()
    h.close_gone()
    assert await asyncio.wait_for(waiting, 1) is Settled.GONE
    await h.aclose(release=False)


async def test_a_live_hold_for_another_event_is_followed() -> None:
    # The agent fenced for its IMDS notice; the controller sees the same interruption from
    # EventBridge under another event id: it must follow, not drain a second time.
    clock, kube, h = fresh()
    h.identity = "controller-a"
    kube.node = held_node("draining", "agent", T0)
    h._fence.held_elsewhere = _no_hold  # type: ignore[method-assign]  # only the compare-and-set decides
    await h.handle(event(Kind.SPOT_INTERRUPTION, "spot-from-eventbridge", clock, deadline_in=120))
    await settle()
    assert kube.writes == 0 and h.phase == "following"
    state = decode(kube.node.annotations[STATE_ANNOTATION])
    assert state is not None and state.holder == "agent" and state.event_id == "spot"
    await h.aclose()


async def _no_hold() -> None:
    return None


async def test_a_renewal_does_not_overwrite_a_hold_another_process_took() -> None:
    clock, kube, h = fresh()
    h.identity = "me"
    state = decode(held("draining", "me", T0))
    assert state is not None
    kube.node = NodeView("n", unschedulable=True, annotations={STATE_ANNOTATION: state.encode()})
    renewer = asyncio.ensure_future(h._fence.renew(state))
    await settle()
    await clock.advance(10)
    mine = decode(kube.node.annotations[STATE_ANNOTATION])
    assert mine is not None and mine.renewed == T0 + timedelta(seconds=10), "renewed while held"
    # Another process took the node over (our mark looked stale to it): the next renewal sees it.
    kube.node = held_node("draining", "other", clock.now())
    await clock.advance(10)
    theirs = decode(kube.node.annotations[STATE_ANNOTATION])
    assert theirs is not None and theirs.holder == "other"
    assert renewer.done(), "a lost hold stops the renewals"
    await h.aclose()


async def test_shutdown_releases_the_hold_so_the_next_process_takes_over_at_once() -> None:
    clock, kube = ManualClock(T0), FakeKube()
    kube.failures = 0
    h = make(kube, clock)
    h.identity = "old-replica"
    # A drain that is still running: the fence holds, the drain waits on the empty pod watch.
    await h.handle(event(Kind.ASG_LIFECYCLE, "asg", clock))
    await settle()
    state = decode(kube.node.annotations[STATE_ANNOTATION])
    assert state is not None and state.holder == "old-replica"
    await h.aclose()
    released = decode(kube.node.annotations[STATE_ANNOTATION])
    assert released is not None and released.event_id == "asg" and released.phase is state.phase
    assert not released.held_by_other("new-replica", clock.now(), 30.0), "no 30 s wait for the next one"
    assert kube.node.unschedulable, "the fence stays"


async def drained_for(code: str) -> tuple[ManualClock, FakeKube, NodeHandler, InterruptionEvent]:
    """A handler with the out-of-service taint on, after it handled (done) a scheduled event with
    IMDS code ``code``: the clock, the fake API, the handler and the event."""
    clock, kube = ManualClock(T0), FakeKube()
    h = node_handler(kube, clock, actions=NodeActionSettings(enable_out_of_service_taint=True))
    scheduled = event(Kind.SCHEDULED_MAINTENANCE, code, clock, deadline_in=600)
    scheduled = dataclasses.replace(scheduled, raw={"Code": code})
    await h.handle(scheduled)
    assert await asyncio.wait_for(h.settled(code), 1) is Settled.DONE
    await settle()
    return clock, kube, h, scheduled


async def test_out_of_service_is_recorded_and_removed_by_the_undo() -> None:
    clock, kube, h, stop = await drained_for("instance-stop")
    assert any(t.key == OOS for t in kube.node.taints)
    state = decode(kube.node.annotations[STATE_ANNOTATION])
    assert state is not None and OOS in state.taints
    await h.handle(withdrawn(stop, clock))  # the stop was canceled after all
    await settle()
    assert not any(t.key == OOS for t in kube.node.taints) and not kube.node.unschedulable
    await h.aclose()


async def test_no_out_of_service_for_a_reboot() -> None:
    _, kube, h, _ = await drained_for("system-reboot")
    assert kube.node.unschedulable and not any(t.key == OOS for t in kube.node.taints)
    await h.aclose()


async def test_a_dropped_handler_is_freed_without_the_cyclic_collector() -> None:
    """The queue path drops a handler when its Node goes; the operator runs the cyclic collector
    rarely (``process.collector``), so a handler in a reference cycle would stay for minutes. Its
    parts call back into it weakly: reference counting alone frees it, after it handled an event."""
    kube, clock = FakeKube(), ManualClock(T0)
    handler = make(kube, clock)
    await handler.handle(event(Kind.SPOT_INTERRUPTION, "spot", clock, deadline_in=120))
    await settle()
    await handler.aclose()
    gone = weakref.ref(handler)
    gc.disable()
    try:
        del handler
        assert gone() is None
    finally:
        gc.enable()
