"""The control endpoint under ``/_imdssim``: inspect, add instances, fire events now, change
scheduled-event state, clear, faults, settings; malformed requests get JSON 4xx, never a crash."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from imdssim_http import IID, get_text

from kubespot.sim.imdssim import FakeClock, ImdsSim, SimInstance


@pytest.fixture
async def sim(clock: FakeClock) -> AsyncIterator[ImdsSim]:
    async with ImdsSim([SimInstance(IID)], clock=clock) as s:
        yield s


async def call(
    http: aiohttp.ClientSession, method: str, url: str, body: Any = None, raw: bytes | None = None
) -> tuple[int, Any]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    async with http.request(method, url, data=data) as resp:
        assert resp.content_type == "application/json"
        return resp.status, await resp.json()


async def test_health_and_list(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    assert await call(http, "GET", sim.control_url + "/health") == (200, {"ok": True, "instances": 1})
    status, body = await call(http, "GET", sim.control_url + "/instances")
    assert status == 200
    (inst,) = body["instances"]
    assert inst["instance_id"] == IID and inst["urls"]["root"] == sim.url
    assert inst["visible"]["spot"] is None


async def test_fire_spot_itn_now(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    status, body = await call(
        http, "POST", f"{sim.control_url}/instances/{IID}/events", {"kind": "spot-itn", "action": "stop"}
    )
    assert status == 201 and body["added"]["action"] == "stop"
    status, text = await get_text(http, sim.url + "/latest/meta-data/spot/instance-action")
    assert status == 200 and json.loads(text) == {"action": "stop", "time": "2026-11-20T16:02:00Z"}


async def test_fire_later_then_time_passes(
    sim: ImdsSim, http: aiohttp.ClientSession, clock: FakeClock
) -> None:
    await call(
        http, "POST", f"{sim.control_url}/instances/{IID}/events", {"kind": "rebalance", "after_seconds": 30}
    )
    url = sim.url + "/latest/meta-data/events/recommendations/rebalance"
    assert (await get_text(http, url))[0] == 404
    (inst,) = (await call(http, "GET", sim.control_url + "/instances"))[1]["instances"]
    assert inst["pending"]["rebalance"] == ["2026-11-20T16:00:30Z"]
    clock.advance(30)
    assert (await get_text(http, url))[0] == 200


async def test_scheduled_event_then_cancel(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    status, body = await call(
        http,
        "POST",
        f"{sim.control_url}/instances/{IID}/events",
        {
            "kind": "scheduled",
            "code": "instance-retirement",
            "event_id": "instance-event-42",
            "not_before_in": 60,
        },
    )
    assert status == 201 and body["added"]["EventId"] == "instance-event-42"
    url = sim.url + "/latest/meta-data/events/maintenance/scheduled"
    assert json.loads((await get_text(http, url))[1])[0]["State"] == "active"
    status, event = await call(
        http,
        "POST",
        f"{sim.control_url}/instances/{IID}/scheduled/instance-event-42/state",
        {"state": "canceled"},
    )
    assert status == 200 and event["State"] == "canceled"
    assert json.loads((await get_text(http, url))[1])[0]["State"] == "canceled"
    missing = await call(
        http, "POST", f"{sim.control_url}/instances/{IID}/scheduled/nope/state", {"state": "canceled"}
    )
    assert missing[0] == 404


async def test_asg_state_and_clear(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    events = f"{sim.control_url}/instances/{IID}/events"
    await call(http, "POST", events, {"kind": "asg-lifecycle", "state": "Standby"})
    url = sim.url + "/latest/meta-data/autoscaling/target-lifecycle-state"
    assert await get_text(http, url) == (200, "Standby")
    await call(http, "POST", events, {"kind": "spot-itn"})
    assert (await call(http, "DELETE", events + "?kind=spot-itn"))[0] == 200
    assert (await get_text(http, sim.url + "/latest/meta-data/spot/instance-action"))[0] == 404
    assert await get_text(http, url) == (200, "Standby")
    assert (await call(http, "DELETE", events))[0] == 200
    assert await get_text(http, url) == (200, "InService")
    assert (await call(http, "DELETE", events + "?kind=meteor"))[0] == 400


async def test_add_and_delete_instance(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    new = {
        "instance_id": "i-0fedcba9876543210",
        "instance_type": "r6g.large",
        "events": [{"kind": "rebalance"}],
    }
    status, body = await call(http, "POST", sim.control_url + "/instances", new)
    assert status == 201 and body["instance_type"] == "r6g.large"
    base = body["urls"]["base"]
    assert await get_text(http, base + "/latest/meta-data/instance-type") == (200, "r6g.large")
    assert (await get_text(http, base + "/latest/meta-data/events/recommendations/rebalance"))[0] == 200
    assert (await call(http, "POST", sim.control_url + "/instances", new))[0] == 409
    assert (await call(http, "DELETE", f"{sim.control_url}/instances/i-0fedcba9876543210"))[0] == 200
    assert (await get_text(http, base + "/latest/meta-data/instance-type"))[0] == 404


async def test_fleet_wide_event(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    await call(http, "POST", sim.control_url + "/instances", {"instance_id": "i-0000000000000000b"})
    status, body = await call(http, "POST", sim.control_url + "/events", {"kind": "spot-itn"})
    assert status == 201 and len(body["added"]) == 2
    for iid in (IID, "i-0000000000000000b"):
        assert (await get_text(http, sim.instance_url(iid) + "/latest/meta-data/spot/instance-action"))[
            0
        ] == 200


async def test_faults_via_control(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    status, fault = await call(http, "POST", sim.control_url + "/faults", {"kind": "error", "status": 502})
    assert status == 201 and fault["id"]
    assert (await get_text(http, sim.url + "/latest/meta-data/instance-id"))[0] == 502
    # Control stays reachable while IMDS paths fail.
    assert (await call(http, "GET", sim.control_url + "/faults"))[1]["faults"][0]["status"] == 502
    assert (await call(http, "DELETE", f"{sim.control_url}/faults/{fault['id']}"))[0] == 200
    assert (await get_text(http, sim.url + "/latest/meta-data/instance-id"))[0] == 200
    await call(http, "POST", sim.control_url + "/faults", {"kind": "error"})
    assert (await call(http, "DELETE", sim.control_url + "/faults"))[0] == 200
    assert (await get_text(http, sim.url + "/latest/meta-data/instance-id"))[0] == 200
    assert (await call(http, "DELETE", sim.control_url + "/faults/f999"))[0] == 404


async def test_settings_toggle_require_v2(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    assert await call(http, "POST", sim.control_url + "/settings", {"require_v2": True}) == (
        200,
        {"require_v2": True},
    )
    assert (await get_text(http, sim.url + "/latest/meta-data/instance-id"))[0] == 401
    assert (await call(http, "POST", sim.control_url + "/settings", {"require_v2": "yes"}))[0] == 400


@pytest.mark.parametrize(
    ("method", "path", "raw", "status"),
    [
        ("POST", "/faults", b"{not json", 400),
        ("POST", "/faults", b"[1, 2]", 400),
        ("POST", "/faults", b'{"kind": "error", "status": 42}', 400),
        ("POST", "/faults", b'{"kind": "error", "instance_id": "i-0nope"}', 404),
        ("POST", "/faults", b"\xff\xfe", 400),
        ("POST", f"/instances/{IID}/events", b'{"kind": "meteor"}', 400),
        ("POST", f"/instances/{IID}/events", b'{"kind": "spot-itn", "action": 3}', 400),
        ("POST", f"/instances/{IID}/events", b'{"kind": "spot-itn", "after_seconds": "soon"}', 400),
        ("POST", f"/instances/{IID}/events", b"", 400),
        ("POST", "/instances/i-0nope/events", b'{"kind": "spot-itn"}', 404),
        ("POST", "/instances", b'{"instance_id": "not-an-id"}', 400),
        ("POST", "/instances", b'{"private_ip": "999.1.1.1"}', 400),
        (
            "POST",
            "/instances",
            b'{"events": [{"kind": "scheduled", "event_id": "e"}, {"kind": "scheduled", "event_id": "e"}]}',
            400,
        ),
        ("POST", "/events", b'{"kind": "spot-itn", "instance_ids": "all"}', 400),
        ("POST", f"/instances/{IID}/scheduled/x/state", b'{"state": "exploded"}', 400),
        ("POST", f"/instances/{IID}/scheduled/x/state", b'{"state": "canceled", "extra": 1}', 400),
        ("GET", "/no/such/route", b"", 404),
        ("PUT", "/instances", b"{}", 405),
        ("GET", "/instances/i-0nope", b"", 404),
    ],
)
async def test_malformed_control_requests(
    sim: ImdsSim, http: aiohttp.ClientSession, method: str, path: str, raw: bytes, status: int
) -> None:
    got, body = await call(http, method, sim.control_url + path, raw=raw)
    assert got == status
    assert isinstance(body["error"], str) and body["error"]
    # And the server still answers afterwards.
    assert (await call(http, "GET", sim.control_url + "/health"))[0] == 200
