"""Fault injection over HTTP: error codes, rates, budgets, latency, hangs and token failures."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest
from imdssim_http import IID

from kubespot.sim.imdssim import Fault, ImdsSim, SimInstance

ID_PATH = "/latest/meta-data/instance-id"


async def status_of(http: aiohttp.ClientSession, url: str, method: str = "GET", **kw: object) -> int:
    async with http.request(method, url, **kw) as resp:  # type: ignore[arg-type]
        await resp.read()
        return resp.status


async def test_error_fault_on_a_path_prefix_only(http: aiohttp.ClientSession) -> None:
    fault = Fault(kind="error", status=500, path="/latest/meta-data/spot")
    async with ImdsSim([SimInstance(IID)], faults=[fault]) as sim:
        assert await status_of(http, sim.url + "/latest/meta-data/spot/instance-action") == 500
        assert await status_of(http, sim.url + ID_PATH) == 200


async def test_error_rate_with_seeded_rng_and_budget(http: aiohttp.ClientSession) -> None:
    rolls = iter([0.1, 0.7, 0.2, 0.9, 0.0, 0.0])
    async with ImdsSim([SimInstance(IID)], rng=lambda: next(rolls)) as sim:
        sim.fleet.faults.add(Fault(kind="error", status=503, rate=0.5, count=2))
        statuses = [await status_of(http, sim.url + ID_PATH) for _ in range(5)]
        assert statuses == [503, 200, 503, 200, 200]


async def test_latency_delays_the_real_answer(http: aiohttp.ClientSession) -> None:
    async with ImdsSim([SimInstance(IID)], faults=[Fault(kind="latency", seconds=0.3)]) as sim:
        start = time.monotonic()
        assert await status_of(http, sim.url + ID_PATH) == 200
        assert time.monotonic() - start >= 0.29


async def test_timeout_hangs_past_the_client_timeout_and_stop_releases_it(
    http: aiohttp.ClientSession,
) -> None:
    sim = ImdsSim([SimInstance(IID)], faults=[Fault(kind="timeout")])
    await sim.start()
    held = 0
    trigger = sim.fleet.faults.trigger

    def counting(*args: Any, **kwargs: Any) -> list[Fault]:
        nonlocal held
        held += 1
        return trigger(*args, **kwargs)

    sim.fleet.faults.trigger = counting  # type: ignore[method-assign]
    try:
        with pytest.raises(asyncio.TimeoutError):
            await status_of(http, sim.url + ID_PATH, timeout=aiohttp.ClientTimeout(total=0.3))
        pending = asyncio.create_task(status_of(http, sim.url + ID_PATH))
        for _ in range(500):  # until the server holds the second request (a loaded machine is slow)
            if held >= 2:
                break
            await asyncio.sleep(0.01)
        assert held == 2, "the second request never reached the server"
    finally:
        start = time.monotonic()
        await sim.stop()
    assert time.monotonic() - start < 3
    # The hung request is released when the server stops: IMDS-style 503, not a hang until its timeout.
    assert await asyncio.wait_for(pending, 3) == 503


async def test_token_endpoint_failure_leaves_v1_reads_alone(http: aiohttp.ClientSession) -> None:
    async with ImdsSim([SimInstance(IID)], faults=[Fault(kind="token", status=503)]) as sim:
        headers = {"X-aws-ec2-metadata-token-ttl-seconds": "60"}
        assert await status_of(http, sim.url + "/latest/api/token", "PUT", headers=headers) == 503
        assert await status_of(http, sim.url + ID_PATH) == 200


async def test_fault_scoped_to_one_instance(http: aiohttp.ClientSession) -> None:
    other = "i-0bbbbbbbbbbbbbbb0"
    async with ImdsSim([SimInstance(IID), SimInstance(other, private_ip="10.0.0.11")]) as sim:
        sim.fleet.faults.add(Fault(kind="error", status=500, instance_id=other))
        assert await status_of(http, sim.instance_url(IID) + ID_PATH) == 200
        assert await status_of(http, sim.instance_url(other) + ID_PATH) == 500
