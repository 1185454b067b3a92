"""The monitor on a fake IMDS: one event per notice, re-emission on cancel, errors never escape."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta
from typing import Any

import httpx2
import pytest
from imds_fakes import FakeClock, FakeImds

from kubespot.config.imds import ImdsSettings, MonitorSettings
from kubespot.model import InterruptionEvent, Kind
from kubespot.sources.imds import ImdsClient, ImdsMonitor, InstanceIdentity, paths

IID = "i-0123456789abcdef0"
SPOT = '{"action": "terminate", "time": "2026-11-20T16:02:00Z"}'


def reboot(state: str = "active") -> str:
    return json.dumps(
        [
            {
                "Code": "system-reboot",
                "Description": "scheduled reboot",
                "EventId": "instance-event-0e000000000000001",
                "NotBefore": "20 Nov 2026 18:00:00 GMT",
                "NotAfter": "20 Nov 2026 20:00:00 GMT",
                "State": state,
            }
        ]
    )


def monitor(
    imds: FakeImds, clock: FakeClock, sink: Any = None, *, identity: bool = True, **monitors: Any
) -> tuple[ImdsMonitor, asyncio.Queue[InterruptionEvent]]:
    queue: asyncio.Queue[InterruptionEvent] = asyncio.Queue()
    settings = ImdsSettings(url="http://imds.test", tries=1)
    client = ImdsClient(settings, clock=clock, transport=imds.transport())
    mon = ImdsMonitor(
        client,
        settings=settings,
        monitors=MonitorSettings(**monitors),
        clock=clock,
        sink=queue if sink is None else sink,
        node_name="node-a",
        identity=InstanceIdentity(IID) if identity else None,
    )
    return mon, queue


def drain(queue: asyncio.Queue[InterruptionEvent]) -> list[InterruptionEvent]:
    out = []
    while not queue.empty():
        out.append(queue.get_nowait())
    return out


async def test_repeated_polls_of_one_notice_emit_one_event(imds: FakeImds, clock: FakeClock) -> None:
    mon, queue = monitor(imds, clock)
    assert await mon.poll_once() == []
    imds.bodies[paths.SPOT_INSTANCE_ACTION] = SPOT
    for _ in range(5):
        await mon.poll_once()
        clock.advance(1)
    (ev,) = drain(queue)
    assert ev.kind is Kind.SPOT_INTERRUPTION and ev.node_name == "node-a" and ev.instance_id == IID


async def test_only_enabled_paths_are_polled(imds: FakeImds, clock: FakeClock) -> None:
    mon, _ = monitor(imds, clock)
    assert mon.watched_paths == (paths.SPOT_INSTANCE_ACTION, paths.SCHEDULED_EVENTS)
    await mon.poll_once()
    assert {r.url.path for r in imds.gets()} == {paths.SPOT_INSTANCE_ACTION, paths.SCHEDULED_EVENTS}
    everything, _ = monitor(imds, clock, rebalance_draining=True, asg_lifecycle_draining=True)
    assert len(everything.watched_paths) == 4
    nothing, _ = monitor(imds, clock, spot_interruption_draining=False, scheduled_event_draining=False)
    assert nothing.watched_paths == ()


async def test_scheduled_event_is_re_emitted_when_canceled(imds: FakeImds, clock: FakeClock) -> None:
    mon, queue = monitor(imds, clock, scheduled_lead_time=600)
    imds.bodies[paths.SCHEDULED_EVENTS] = reboot()
    await mon.poll_once()
    await mon.poll_once()
    imds.bodies[paths.SCHEDULED_EVENTS] = reboot("canceled")
    await mon.poll_once()
    await mon.poll_once()
    active, canceled = drain(queue)
    assert active.id == canceled.id and not active.cancelled and canceled.cancelled
    assert active.deadline is not None and active.act_at == active.deadline - timedelta(seconds=600)


async def test_a_callback_sink_that_fails_gets_the_event_again(imds: FakeImds, clock: FakeClock) -> None:
    got: list[InterruptionEvent] = []
    calls = 0

    async def sink(event: InterruptionEvent) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("handler busy")
        got.append(event)

    mon, _ = monitor(imds, clock, sink)
    imds.bodies[paths.SPOT_INSTANCE_ACTION] = SPOT
    assert await mon.poll_once() == []
    assert len(await mon.poll_once()) == 1
    await mon.poll_once()
    assert len(got) == 1 and calls == 2


async def test_errors_and_garbage_are_logged_once_and_health_tracks_them(
    imds: FakeImds, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubespot.sources.imds")
    mon, queue = monitor(imds, clock)
    imds.script[paths.SPOT_INSTANCE_ACTION] = [httpx2.Response(500)] * 3
    for _ in range(3):
        assert await mon.poll_once() == []
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "HTTP 500" in warnings[0].getMessage()
    assert warnings[0].imds_path == paths.SPOT_INSTANCE_ACTION  # type: ignore[attr-defined]
    health = mon.health
    assert health.consecutive_failed_polls == 3 and "HTTP 500" in (health.last_error or "")
    assert health.healthy(clock.now(), timedelta(seconds=10))  # IMDS answers, if badly

    imds.bodies[paths.SPOT_INSTANCE_ACTION] = "<html>not json"
    await mon.poll_once()
    assert "not JSON" in (mon.health.last_error or "")

    imds.bodies[paths.SPOT_INSTANCE_ACTION] = SPOT
    (ev,) = await mon.poll_once()
    assert mon.health.consecutive_failed_polls == 0 and mon.health.last_clean_poll == clock.now()
    assert any("recovered" in r.getMessage() for r in caplog.records)
    emitted = [r for r in caplog.records if getattr(r, "event_id", None) == ev.id]
    assert emitted and ev.id in emitted[0].getMessage()
    assert drain(queue) == [ev]


async def test_an_unexpected_exception_does_not_stop_polling(
    imds: FakeImds, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(request: httpx2.Request) -> httpx2.Response:
        raise ZeroDivisionError("a bug")

    imds.script[paths.SCHEDULED_EVENTS] = [boom]
    imds.bodies[paths.SPOT_INSTANCE_ACTION] = SPOT
    mon, _ = monitor(imds, clock)
    (ev,) = await mon.poll_once()  # the other path still delivers
    assert ev.kind is Kind.SPOT_INTERRUPTION
    assert any(r.levelno == logging.ERROR for r in caplog.records)


async def test_run_reads_identity_until_imds_answers_then_polls_every_interval(
    imds: FakeImds, clock: FakeClock
) -> None:
    imds.script[paths.IDENTITY_DOCUMENT] = [httpx2.Response(503)] * 2
    imds.bodies[paths.IDENTITY_DOCUMENT] = json.dumps({"instanceId": IID})
    imds.script[paths.SPOT_INSTANCE_ACTION] = [httpx2.Response(404)] * 2
    imds.bodies[paths.SPOT_INSTANCE_ACTION] = SPOT
    mon, queue = monitor(imds, clock, identity=False)
    task = asyncio.create_task(mon.run())
    try:
        event = await asyncio.wait_for(queue.get(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert mon.identity is not None and mon.identity.instance_id == IID
    assert event.instance_id == IID
    assert len(imds.gets(paths.SPOT_INSTANCE_ACTION)) >= 3  # the notice shows from the third poll on
    assert clock.sleeps[:2] == [1.0, 1.0]  # identity retries, one poll interval apart
    assert all(s <= 1.0 for s in clock.sleeps)
