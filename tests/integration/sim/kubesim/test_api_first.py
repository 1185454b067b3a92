"""API requests go first, and the simulated control plane still keeps up (``controllers/pacing.py``).

A steady stream of API calls runs while the control plane has plenty to do (a rollout of hundreds
of pods, then replacing deleted ones); assertions are about outcomes (pods Ready, requests served,
the control plane stayed away at times), never about how long anything took.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import deployment, is_ready, is_terminating, node, until

Obj = dict[str, Any]
NS = "default"
REPLICAS = 600
FAST = ControllerConfig(
    pod_start_seconds=0.05, lease_renew_seconds=5.0, node_status_seconds=30.0, node_ready_seconds=0.05
)


class Load:
    """``workers`` clients each sending one request after the other until stopped."""

    def __init__(self, http: aiohttp.ClientSession, path: str, workers: int = 8) -> None:
        self.http, self.path = http, path
        self.served = 0
        self.failed = 0
        self._tasks = [asyncio.get_running_loop().create_task(self._worker()) for _ in range(workers)]

    async def _worker(self) -> None:
        while True:
            async with self.http.get(self.path) as r:
                await r.read()
                if r.status == 200:
                    self.served += 1
                else:
                    self.failed += 1

    def running(self) -> bool:
        return all(not t.done() for t in self._tasks)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t


async def start(config: ControllerConfig) -> tuple[KubeSim, aiohttp.ClientSession]:
    sim = await KubeSim(controllers=config).start()
    http = aiohttp.ClientSession(sim.url)
    for i in range(10):
        async with http.post("/api/v1/nodes", json=node(f"node-{i}", pods="200")) as r:
            assert r.status == 201, await r.text()
    return sim, http


@pytest.fixture
async def busy_cluster(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[KubeSim, aiohttp.ClientSession]]:
    sim, http = await start(request.param)
    try:
        yield sim, http
    finally:
        await http.close()
        await sim.stop()


def pods_of(sim: KubeSim, app: str) -> list[Obj]:
    pod_rt = sim.store.registry.lookup("", "v1", "pods")
    assert pod_rt is not None
    return [
        p
        for p in sim.store.iter_objects(pod_rt, NS)
        if (p["metadata"].get("labels") or {}).get("app") == app and not is_terminating(p)
    ]


def ready_count(sim: KubeSim, app: str) -> int:
    return sum(1 for p in pods_of(sim, app) if is_ready(p))


async def wait(probe: Any, within: float = 90.0) -> None:
    async def check() -> Any:
        return probe()

    await until(check, within=within, interval=0.05)


@pytest.mark.parametrize("busy_cluster", [FAST], indirect=True)
async def test_the_control_plane_keeps_up_under_a_steady_stream_of_requests(
    busy_cluster: tuple[KubeSim, aiohttp.ClientSession],
) -> None:
    sim, http = busy_cluster
    pacer = sim.controllers.pacer
    load = Load(http, "/api/v1/nodes/node-0")
    try:
        async with http.post(
            f"/apis/apps/v1/namespaces/{NS}/deployments",
            json=deployment("web", REPLICAS, requests={"cpu": "1m", "memory": "1Mi"}),
        ) as r:
            assert r.status == 201, await r.text()
        # The whole rollout (ReplicaSet, 600 pods created, scheduled, started) happens under load.
        await wait(lambda: ready_count(sim, "web") == REPLICAS)
        assert load.running()
        before = {p["metadata"]["name"] for p in pods_of(sim, "web")}
        served_during_rollout = load.served
        assert served_during_rollout > 0

        # Deleting a third of them: replacements are created and become Ready, still under load.
        for name in sorted(before)[: REPLICAS // 3]:
            async with http.delete(f"/api/v1/namespaces/{NS}/pods/{name}") as r:
                assert r.status == 200, await r.text()
        await wait(
            lambda: (
                ready_count(sim, "web") == REPLICAS
                and len({p["metadata"]["name"] for p in pods_of(sim, "web")} - before) == REPLICAS // 3
            )
        )
        assert load.running()
        assert load.served > served_during_rollout
        assert load.failed == 0
    finally:
        await load.stop()
    # Requests went first at times: the control plane stayed away while it was over its share.
    assert pacer.enabled
    assert pacer.pauses > 0
    assert pacer.served >= load.served


@pytest.mark.parametrize(
    "busy_cluster", [ControllerConfig(pod_start_seconds=0.05, api_first=False)], indirect=True
)
async def test_with_api_first_off_the_control_plane_never_stays_away(
    busy_cluster: tuple[KubeSim, aiohttp.ClientSession],
) -> None:
    sim, http = busy_cluster
    load = Load(http, "/api/v1/nodes/node-0")
    try:
        async with http.post(
            f"/apis/apps/v1/namespaces/{NS}/deployments",
            json=deployment("web", REPLICAS // 2, requests={"cpu": "1m", "memory": "1Mi"}),
        ) as r:
            assert r.status == 201, await r.text()
        await wait(lambda: ready_count(sim, "web") == REPLICAS // 2)
        assert load.served > 0
    finally:
        await load.stop()
    assert not sim.controllers.pacer.enabled
    assert sim.controllers.pacer.pauses == 0


@pytest.mark.parametrize("busy_cluster", [FAST], indirect=True)
async def test_requests_are_counted_but_watch_streams_are_not(
    busy_cluster: tuple[KubeSim, aiohttp.ClientSession],
) -> None:
    sim, http = busy_cluster
    pacer = sim.controllers.pacer
    served = pacer.served
    async with http.get("/api/v1/pods", params={"watch": "true", "timeoutSeconds": "30"}) as watch:
        assert watch.status == 200
        async with http.get("/api/v1/nodes/node-1") as r:
            assert r.status == 200
        assert pacer.served == served + 1
        assert pacer.in_flight == 0  # the open watch is not a request anyone waits on
    async with http.get("/kubesim/v1/stats") as r:
        stats = await r.json()
    assert stats["pacing"]["apiFirst"] is True
    assert stats["pacing"]["pauses"] == pacer.pauses
