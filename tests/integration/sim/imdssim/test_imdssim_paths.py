"""Every path of FACTS.md ("EC2 instance metadata service") over real HTTP, IMDSv1 style.

Also the wire details of real IMDS: directory listings are newline-separated with ``/`` on
sub-directories (EC2 User Guide, "Retrieve instance metadata"); absent items are 404 with IMDS's
XHTML error page; the server identifies as ``EC2ws``. Paths match the constants of
aws-node-termination-handler's ``pkg/ec2metadata``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from imdssim_http import IID, get_text

from kubespot.sim.imdssim import FakeClock, ImdsSim, SimInstance


@pytest.fixture
async def sim(clock: FakeClock) -> AsyncIterator[ImdsSim]:
    inst = SimInstance(
        instance_id=IID,
        instance_type="c5.large",
        availability_zone="us-east-1c",
        account_id="210987654321",
        private_ip="10.9.8.7",
        launched_at=clock() - 7200,
    )
    async with ImdsSim([inst], clock=clock) as s:
        yield s


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/latest/meta-data/instance-id", IID),
        ("/latest/meta-data/instance-type", "c5.large"),
        ("/latest/meta-data/local-ipv4", "10.9.8.7"),
        ("/latest/meta-data/local-hostname", "ip-10-9-8-7.ec2.internal"),
        ("/latest/meta-data/placement/availability-zone", "us-east-1c"),
        ("/latest/meta-data/instance-life-cycle", "spot"),
    ],
)
async def test_text_items(sim: ImdsSim, http: aiohttp.ClientSession, path: str, body: str) -> None:
    async with http.get(sim.url + path) as resp:
        assert resp.status == 200
        assert await resp.text() == body
        assert resp.headers["Server"] == "EC2ws"
        assert resp.content_type == "text/plain"


async def test_identity_document(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    status, text = await get_text(http, sim.url + "/latest/dynamic/instance-identity/document")
    assert status == 200
    doc = json.loads(text)
    assert doc["accountId"] == "210987654321"
    assert doc["instanceId"] == IID
    assert doc["instanceType"] == "c5.large"
    assert doc["privateIp"] == "10.9.8.7"
    assert doc["availabilityZone"] == "us-east-1c"
    assert doc["region"] == "us-east-1"
    assert doc["pendingTime"] == "2026-11-20T14:00:00Z"


@pytest.mark.parametrize(
    "path",
    [
        "/latest/meta-data/spot/instance-action",
        "/latest/meta-data/spot/termination-time",
        "/latest/meta-data/events/recommendations/rebalance",
        "/latest/meta-data/autoscaling/target-lifecycle-state",
        "/latest/meta-data/no-such-thing",
        "/latest/user-data",
        "/nonsense",
        "/latest/meta-data/%ff%fe",
    ],
)
async def test_absent_items_are_404_with_imds_error_page(
    sim: ImdsSim, http: aiohttp.ClientSession, path: str
) -> None:
    async with http.get(sim.url + path) as resp:
        assert resp.status == 404
        body = await resp.text()
        assert "<title>404 - Not Found</title>" in body
        assert resp.headers["Server"] == "EC2ws"


async def test_scheduled_is_empty_array_when_none(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    assert await get_text(http, sim.url + "/latest/meta-data/events/maintenance/scheduled") == (200, "[]")


async def test_spot_itn_and_termination_time(
    sim: ImdsSim, http: aiohttp.ClientSession, clock: FakeClock
) -> None:
    sim.fleet.fire_spot_itn(IID, "terminate", at=clock() + 10)
    assert (await get_text(http, sim.url + "/latest/meta-data/spot/instance-action"))[0] == 404
    clock.advance(10)
    status, text = await get_text(http, sim.url + "/latest/meta-data/spot/instance-action")
    assert status == 200
    assert json.loads(text) == {"action": "terminate", "time": "2026-11-20T16:02:10Z"}
    assert await get_text(http, sim.url + "/latest/meta-data/spot/termination-time") == (
        200,
        "2026-11-20T16:02:10Z",
    )


async def test_rebalance(sim: ImdsSim, http: aiohttp.ClientSession, clock: FakeClock) -> None:
    sim.fleet.fire_rebalance(IID)
    status, text = await get_text(http, sim.url + "/latest/meta-data/events/recommendations/rebalance")
    assert status == 200 and json.loads(text) == {"noticeTime": "2026-11-20T16:00:00Z"}


async def test_scheduled_event_over_time(sim: ImdsSim, http: aiohttp.ClientSession, clock: FakeClock) -> None:
    event = sim.fleet.add_scheduled_event(IID, "system-maintenance", not_before=clock() + 3600)
    sim.fleet.set_scheduled_state(IID, event.event_id, "completed", at=clock() + 7200)
    url = sim.url + "/latest/meta-data/events/maintenance/scheduled"
    (active,) = json.loads((await get_text(http, url))[1])
    assert set(active) == {"Code", "Description", "EventId", "NotBefore", "NotAfter", "State"}
    assert (active["Code"], active["State"], active["NotBefore"]) == (
        "system-maintenance",
        "active",
        "20 Nov 2026 17:00:00 GMT",
    )
    clock.advance(7200)
    (done,) = json.loads((await get_text(http, url))[1])
    assert done["State"] == "completed" and done["Description"].startswith("[Completed]")


async def test_asg_target_lifecycle_state(
    sim: ImdsSim, http: aiohttp.ClientSession, clock: FakeClock
) -> None:
    sim.fleet.set_asg_state(IID, "Terminated", at=clock() + 3)
    url = sim.url + "/latest/meta-data/autoscaling/target-lifecycle-state"
    assert await get_text(http, url) == (200, "InService")
    clock.advance(3)
    assert await get_text(http, url) == (200, "Terminated")


async def test_directory_listings(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    status, text = await get_text(http, sim.url + "/latest/meta-data/")
    assert status == 200
    keys = text.split("\n")
    assert {"instance-id", "instance-type", "local-ipv4", "placement/", "events/"} <= set(keys)
    assert keys == sorted(keys) and not text.endswith("\n")
    assert await get_text(http, sim.url + "/latest/meta-data") == (200, text)
    assert await get_text(http, sim.url + "/latest/meta-data/placement/") == (
        200,
        "availability-zone\nregion",
    )
    assert await get_text(http, sim.url + "/latest/dynamic/instance-identity/") == (200, "document")
    status, versions = await get_text(http, sim.url + "/")
    assert status == 200 and versions.split("\n")[-1] == "latest"


async def test_head_and_query_string(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    async with http.head(sim.url + "/latest/meta-data/instance-id") as resp:
        assert resp.status == 200
        assert await resp.read() == b""
    assert await get_text(http, sim.url + "/latest/meta-data/instance-id?x=1") == (200, IID)


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
async def test_other_methods_on_metadata_are_405(
    sim: ImdsSim, http: aiohttp.ClientSession, method: str
) -> None:
    async with http.request(method, sim.url + "/latest/meta-data/instance-id") as resp:
        assert resp.status == 405
        assert "GET" in resp.headers["Allow"]
