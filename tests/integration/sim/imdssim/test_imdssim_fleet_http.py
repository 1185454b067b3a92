"""Many instances on one server: root = first instance, ``/<instance-id>/...`` for each, optional
per-instance ports; and the Python API's addresses."""

from __future__ import annotations

import json

import aiohttp
import pytest
from imdssim_http import get_text

from kubespot.sim.imdssim import FakeClock, ImdsSim, Scenario, synthetic_instance


async def test_each_instance_under_its_base_path(http: aiohttp.ClientSession) -> None:
    clock = FakeClock()
    fleet = [synthetic_instance(i, launched_at=clock()) for i in range(5)]
    async with ImdsSim(fleet, clock=clock) as sim:
        assert await get_text(http, sim.url + "/latest/meta-data/instance-id") == (200, fleet[0].instance_id)
        for inst in fleet:
            base = sim.instance_url(inst.instance_id)
            assert base == f"{sim.url}/{inst.instance_id}"
            assert await get_text(http, base + "/latest/meta-data/instance-id") == (200, inst.instance_id)
            assert await get_text(http, base + "/latest/meta-data/local-ipv4") == (200, inst.private_ip)
            doc = json.loads((await get_text(http, base + "/latest/dynamic/instance-identity/document"))[1])
            assert doc["availabilityZone"] == inst.availability_zone
        status, versions = await get_text(http, sim.instance_url(fleet[1].instance_id))
        assert status == 200 and "latest" in versions.split("\n")


async def test_signals_are_per_instance(http: aiohttp.ClientSession) -> None:
    clock = FakeClock()
    a, b = synthetic_instance(0, launched_at=0), synthetic_instance(1, launched_at=0)
    async with ImdsSim([a, b], clock=clock) as sim:
        sim.fleet.fire_spot_itn(b.instance_id)
        path = "/latest/meta-data/spot/instance-action"
        assert (await get_text(http, sim.instance_url(a.instance_id) + path))[0] == 404
        assert (await get_text(http, sim.instance_url(b.instance_id) + path))[0] == 200


async def test_unknown_instance_path_is_404(http: aiohttp.ClientSession) -> None:
    async with ImdsSim([synthetic_instance(0, launched_at=0)]) as sim:
        assert (await get_text(http, sim.url + "/i-0ffffffffffffffff/latest/meta-data/instance-id"))[0] == 404
        with pytest.raises(KeyError):
            sim.instance_url("i-0ffffffffffffffff")


async def test_empty_server_answers_404_not_crash(http: aiohttp.ClientSession) -> None:
    async with ImdsSim() as sim:
        assert (await get_text(http, sim.url + "/latest/meta-data/instance-id"))[0] == 404


async def test_instance_ports_serve_each_instance_at_root(http: aiohttp.ClientSession) -> None:
    fleet = [synthetic_instance(i, launched_at=0) for i in range(3)]
    async with ImdsSim(fleet, instance_ports=True) as sim:
        urls = [sim.instance_port_url(i.instance_id) for i in fleet]
        assert all(urls) and len(set(urls)) == 3 and sim.url not in urls
        for inst, url in zip(fleet, urls, strict=True):
            assert await get_text(http, f"{url}/latest/meta-data/instance-id") == (200, inst.instance_id)
        extra = synthetic_instance(7, launched_at=0)
        await sim.add_instance(extra)
        own = sim.instance_port_url(extra.instance_id)
        assert own is not None
        assert await get_text(http, f"{own}/latest/meta-data/instance-id") == (200, extra.instance_id)
        await sim.remove_instance(extra.instance_id)
        assert sim.instance_port_url(extra.instance_id) is None


async def test_url_before_start_is_an_error() -> None:
    sim = ImdsSim()
    with pytest.raises(RuntimeError):
        _ = sim.url


async def test_from_scenario(http: aiohttp.ClientSession) -> None:
    clock = FakeClock()
    scenario = Scenario.read(
        {
            "require_v2": True,
            "instances": [{"instance_id": "i-0abc", "events": [{"kind": "rebalance", "after_seconds": 2}]}],
        }
    )
    async with ImdsSim.from_scenario(scenario, clock=clock) as sim:
        assert (await get_text(http, sim.url + "/latest/meta-data/instance-id"))[0] == 401
        sim.fleet.require_v2 = False
        assert await get_text(http, sim.url + "/latest/meta-data/instance-id") == (200, "i-0abc")
        clock.advance(2)
        assert (await get_text(http, sim.url + "/latest/meta-data/events/recommendations/rebalance"))[
            0
        ] == 200
