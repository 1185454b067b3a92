"""The IMDS monitor's loop over real HTTP against imdssim: every signal, once, through faults."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest
from imds_sim_helpers import IID, CountingTransport, SimTime, next_event, running_monitor

from kubespot.config.imds import MonitorSettings
from kubespot.model import Kind, Source
from kubespot.sim.imdssim import FakeClock, Fault, ImdsSim, SimInstance
from kubespot.sim.imdssim import imds_http as imdssim_http
from kubespot.sources.imds import paths

T0 = datetime(2026, 11, 20, 16, 0, 0, tzinfo=UTC)  # imdssim's FakeClock start


async def test_spot_itn_is_detected_with_its_deadline(
    sim: ImdsSim, sim_clock: FakeClock, sim_time: SimTime
) -> None:
    async with running_monitor(sim.url, sim_time) as (monitor, queue):
        sim_clock.advance(30)
        sim.fleet.fire_spot_itn(IID, "terminate")
        ev = await next_event(queue)
    assert ev.kind is Kind.SPOT_INTERRUPTION and ev.source is Source.IMDS
    assert ev.instance_id == IID and ev.node_name == "spot-node-1"
    assert ev.deadline == T0 + timedelta(seconds=150)  # notice at +30 s, action 120 s later
    assert ev.act_at == ev.notice_time == T0 + timedelta(seconds=30)
    assert monitor.health.last_contact is not None


async def test_spot_itn_on_an_imdsv2_only_instance(sim_clock: FakeClock, sim_time: SimTime) -> None:
    transport = CountingTransport()
    async with ImdsSim([SimInstance(IID)], clock=sim_clock, require_v2=True) as sim:
        sim.fleet.fire_spot_itn(IID, "stop")
        async with running_monitor(sim.instance_url(IID), sim_time, transport=transport) as (_, queue):
            ev = await next_event(queue)
    assert ev.kind is Kind.SPOT_INTERRUPTION and "stop" in ev.description
    assert all(token for m, _, token in transport.requests if m == "GET")


async def test_repeated_polls_yield_one_event(sim: ImdsSim, sim_time: SimTime) -> None:
    sim.fleet.fire_spot_itn(IID)
    sim.fleet.fire_rebalance(IID)
    transport = CountingTransport()
    monitors = MonitorSettings(rebalance_monitoring=True)
    async with running_monitor(sim.url, sim_time, transport=transport, monitors=monitors) as (_, queue):
        first = await next_event(queue)
        second = await next_event(queue)
        await transport.reads(paths.SPOT_INSTANCE_ACTION, 10)
        assert queue.empty()
    assert {first.kind, second.kind} == {Kind.SPOT_INTERRUPTION, Kind.REBALANCE_RECOMMENDATION}


async def test_rebalance_recommendation(sim: ImdsSim, sim_clock: FakeClock, sim_time: SimTime) -> None:
    monitors = MonitorSettings(rebalance_monitoring=True)
    async with running_monitor(sim.url, sim_time, monitors=monitors) as (_, queue):
        sim.fleet.fire_rebalance(IID, at=sim_clock() + 10)
        await asyncio.sleep(0.1)
        assert queue.empty()  # not visible yet
        sim_clock.advance(10)
        ev = await next_event(queue)
    assert ev.kind is Kind.REBALANCE_RECOMMENDATION and ev.deadline is None
    assert ev.notice_time == T0 + timedelta(seconds=10)


async def test_rebalance_is_not_polled_by_default(sim: ImdsSim, sim_time: SimTime) -> None:
    sim.fleet.fire_rebalance(IID)
    transport = CountingTransport()
    async with running_monitor(sim.url, sim_time, transport=transport) as (_, queue):
        await transport.reads(paths.SPOT_INSTANCE_ACTION, 3)
        assert queue.empty()
    assert transport.count("GET", paths.REBALANCE) == 0


async def test_scheduled_event_acts_lead_time_before_not_before_and_cancel_undoes(
    sim: ImdsSim, sim_clock: FakeClock, sim_time: SimTime
) -> None:
    monitors = MonitorSettings(scheduled_lead_time=600)
    not_before = sim_clock() + 3600
    async with running_monitor(sim.url, sim_time, monitors=monitors) as (_, queue):
        scheduled = sim.fleet.add_scheduled_event(IID, "system-reboot", not_before=not_before)
        active = await next_event(queue)
        sim.fleet.set_scheduled_state(IID, scheduled.event_id, "canceled", at=sim_clock() + 60)
        sim_clock.advance(60)
        canceled = await next_event(queue)
    nb = datetime.fromtimestamp(not_before, tz=UTC)
    assert active.kind is Kind.SCHEDULED_MAINTENANCE and not active.cancelled
    assert active.deadline == nb and active.act_at == nb - timedelta(seconds=600)
    assert scheduled.event_id in active.description
    assert canceled.id == active.id and canceled.cancelled
    assert "[Canceled]" in canceled.description


async def test_a_rescheduled_event_is_emitted_again_with_its_new_time(
    sim: ImdsSim, sim_clock: FakeClock, sim_time: SimTime
) -> None:
    """ModifyInstanceEventStartTime keeps the EventId and moves NotBefore: same id, new schedule."""
    monitors = MonitorSettings(scheduled_lead_time=600)
    async with running_monitor(sim.url, sim_time, monitors=monitors) as (_, queue):
        scheduled = sim.fleet.add_scheduled_event(IID, "system-reboot", not_before=sim_clock() + 7200)
        first = await next_event(queue)
        scheduled.not_before = sim_clock() + 3600  # moved an hour earlier
        sim_clock.advance(1)
        moved = await next_event(queue)
        sim_clock.advance(1)
        await asyncio.sleep(0.2)
        repeats = queue.qsize()
    assert moved.id == first.id and not moved.cancelled
    assert moved.deadline is not None and first.deadline is not None
    assert first.deadline - moved.deadline == timedelta(hours=1)
    assert moved.act_at == moved.deadline - timedelta(seconds=600)
    assert repeats == 0, "an unchanged event is not emitted again"


async def test_scheduled_completed_is_a_cancellation_too(sim: ImdsSim, sim_time: SimTime) -> None:
    ev = sim.fleet.add_scheduled_event(IID, "instance-stop")
    sim.fleet.set_scheduled_state(IID, ev.event_id, "completed")
    async with running_monitor(sim.url, sim_time) as (_, queue):
        done = await next_event(queue)
    assert done.cancelled and done.kind is Kind.SCHEDULED_MAINTENANCE


async def test_asg_terminated(sim: ImdsSim, sim_clock: FakeClock, sim_time: SimTime) -> None:
    sim.fleet.set_asg_state(IID, "InService")
    transport = CountingTransport()
    monitors = MonitorSettings(asg_lifecycle_draining=True)
    async with running_monitor(sim.url, sim_time, transport=transport, monitors=monitors) as (_, queue):
        await transport.reads(paths.ASG_TARGET_LIFECYCLE_STATE, 3)
        assert queue.empty()  # InService is not an event
        sim.fleet.set_asg_state(IID, "Terminated")
        ev = await next_event(queue)
    assert ev.kind is Kind.ASG_LIFECYCLE and ev.instance_id == IID


async def test_500s_are_logged_and_the_monitor_keeps_going(
    sim: ImdsSim, sim_time: SimTime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kubespot.sources.imds")
    sim.fleet.faults.add(Fault(kind="error", status=500, path="/latest/meta-data/spot", count=12))
    sim.fleet.fire_spot_itn(IID)
    transport = CountingTransport()
    async with running_monitor(sim.url, sim_time, transport=transport) as (monitor, queue):
        await transport.reads(paths.SPOT_INSTANCE_ACTION, 6)
        assert queue.empty()
        assert monitor.health.consecutive_failed_polls >= 1
        ev = await next_event(queue)  # the fault's budget runs out; the notice gets through
    assert ev.kind is Kind.SPOT_INTERRUPTION
    assert any("HTTP 500" in r.getMessage() for r in caplog.records)


async def test_garbage_bodies_are_logged_and_the_event_is_found_later(
    sim: ImdsSim, sim_time: SimTime, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # imdssim's faults replace the status, not the body; for a 200 with a broken body its lookup is
    # wrapped: the first few reads of the spot path get a truncated document.
    caplog.set_level(logging.WARNING, logger="kubespot.sources.imds")
    real_lookup = imdssim_http.lookup
    garbage_left = 5

    def lookup(instance: SimInstance, now: float, path: str) -> str | None:
        nonlocal garbage_left
        body = real_lookup(instance, now, path)
        if path == paths.SPOT_INSTANCE_ACTION and body is not None and garbage_left:
            garbage_left -= 1
            return body[: len(body) // 2]
        return body

    monkeypatch.setattr(imdssim_http, "lookup", lookup)
    sim.fleet.fire_spot_itn(IID)
    async with running_monitor(sim.url, sim_time) as (monitor, queue):
        ev = await next_event(queue)
    assert garbage_left == 0 and ev.kind is Kind.SPOT_INTERRUPTION
    (warning,) = [r for r in caplog.records if "not JSON" in r.getMessage()]  # logged once, not per poll
    assert warning.imds_path == paths.SPOT_INSTANCE_ACTION  # type: ignore[attr-defined]
    assert monitor.health.consecutive_failed_polls == 0


async def test_imds_down_at_start_then_up(sim_clock: FakeClock, sim_time: SimTime) -> None:
    sim = ImdsSim([SimInstance(IID)], clock=sim_clock)
    await sim.start()
    url = sim.url
    await sim.stop()  # nothing listens on the port now
    async with running_monitor(url, sim_time) as (monitor, queue):
        await asyncio.sleep(0.2)
        assert monitor.identity is None and monitor.health.last_error
        restarted = ImdsSim([SimInstance(IID)], clock=sim_clock, port=int(url.rsplit(":", 1)[1]))
        async with restarted:
            restarted.fleet.fire_spot_itn(IID)
            ev = await next_event(queue)
    assert ev.instance_id == IID
