"""The NodePool counter over HTTP: kubesim (the chart's CRDs, no control plane) and the process's
Node and NodeClaim informers, the counter reading only them.

Sources: kubernetes-sigs/karpenter ``pkg/controllers/nodepool/counter/controller.go``
(``Reconcile``: counts from ``state.Cluster``, fed by controller-runtime's informer cache, never a
LIST of its own; requeued while ``cluster.Synced`` is false, so a cache not synced never lowers
``status.resources``); client-go ``tools/cache/shared_informer.go`` (``HasSynced``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

import aiohttp
import pytest
import yaml

from kubespot.config.kube import KubeSettings
from kubespot.controllers.provisioning.nodepool_counter import NodePoolCounter, PoolCounts
from kubespot.kube import connect
from kubespot.kube.informer import Informers
from kubespot.model import SystemClock
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import node, until
from support.provisioning_env import CRD_PATH, CRDS, NODECLAIMS, Obj

NODES = "api/v1/nodes"
POOL = {"karpenter.sh/nodepool": "general"}
TICK = 0.05


@dataclass
class World:
    sim: KubeSim
    http: aiohttp.ClientSession
    informers: Informers
    counter: NodePoolCounter
    published: list[Mapping[str, PoolCounts]]

    def lists(self) -> int:
        """LIST requests kubesim has served (any resource)."""
        return sum(n for k, n in self.sim.server.requests.items() if k.startswith("list "))

    async def create(self, path: str, body: Obj) -> Obj:
        async with self.http.post(f"/{path}", json=body) as r:
            assert r.status == 201, await r.text()
            return dict(await r.json())

    async def delete(self, path: str, name: str) -> None:
        async with self.http.delete(f"/{path}/{name}") as r:
            assert r.status in (200, 202), await r.text()

    async def counted(self, nodes: int, cpu: str) -> Mapping[str, PoolCounts]:
        """The counter's latest figures once ``general`` has ``nodes`` nodes and ``cpu``."""

        async def probe() -> Mapping[str, PoolCounts] | None:
            last = self.published[-1] if self.published else None
            got = (last or {}).get("general")
            return last if got is not None and got[1] == nodes and got[0]["cpu"] == cpu else None

        return await until(probe, within=2.0, interval=0.01)


def claim(name: str) -> Obj:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": dict(POOL)},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [],
        },
    }


async def _true(value: bool) -> bool:
    return value


@contextlib.asynccontextmanager
async def world() -> AsyncIterator[World]:
    idle = ControllerConfig(scheduler=False, kubelet=False, workloads=False)
    first = node("n-0", cpu="4", labels=POOL, ready=True)
    async with KubeSim(controllers=idle, objects=[first]) as sim, aiohttp.ClientSession(sim.url) as http:
        for path in sorted(CRDS.glob("*.yaml")):
            for crd in yaml.safe_load_all(path.read_text()):
                async with http.post(CRD_PATH, json=crd) as r:
                    assert r.status == 201, await r.text()
        kube = connect(KubeSettings(kubeconfig=str(sim.kubeconfig_path)))
        informers = Informers(kube)
        published: list[Mapping[str, PoolCounts]] = []
        counter = NodePoolCounter(
            informers.get(NODES),
            informers.get(NODECLAIMS),
            published.append,
            clock=SystemClock(),
            interval=TICK,
        )
        try:
            yield World(sim, http, informers, counter, published)
        finally:
            await asyncio.gather(*(i.stop() for i in informers))
            await kube.close()


@pytest.fixture
async def w() -> AsyncIterator[World]:
    async with world() as found:
        yield found


async def test_the_counter_lists_nothing_once_the_informers_synced_and_follows_changes(w: World) -> None:
    """counter/controller.go Reconcile reads the cluster state the shared informers keep: after
    their first LIST, ticks every 50 ms serve no LIST at all, while a Node and a NodeClaim created
    and then deleted move the counts (capacity, not allocatable; a claim counts once it has
    capacity)."""
    task = asyncio.create_task(w.counter.run())
    try:
        await w.counted(1, "4")
        lists = w.lists()
        await w.create(NODES, node("n-1", cpu="8", labels=POOL, ready=True))
        await w.counted(2, "12")
        stored = await w.create(NODECLAIMS, claim("general-a"))
        stored["status"] = {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"}}
        async with w.http.put(f"/{NODECLAIMS}/general-a/status", json=stored) as r:
            assert r.status == 200, await r.text()
        counts = await w.counted(3, "14")
        assert counts["general"][0]["nodes"] == "3"
        await w.delete(NODES, "n-1")
        await w.delete(NODECLAIMS, "general-a")
        await w.counted(1, "4")
        ticks = len(w.published)
        await asyncio.sleep(6 * TICK)
        assert len(w.published) >= ticks + 3  # still ticking
        assert w.lists() == lists, dict(w.sim.server.requests)
        assert w.informers.get(NODES).lists == 1 and w.informers.get(NODECLAIMS).lists == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_no_counts_are_published_from_a_cache_not_synced(w: World) -> None:
    """counter/controller.go Reconcile requeues while ``cluster.Synced`` is false ("we have the
    potential to patch over the status with a lower value"): the counter publishes nothing until
    the informers' first LIST is in, and after they were dropped (the lease lost: ``Informer.stop``
    empties the cache) nothing until they listed again: never zero counts for a pool that has a
    node."""
    w.sim.faults.add("verb=list,resource=nodes,latency=300")
    task = asyncio.create_task(w.counter.run())
    try:
        await asyncio.sleep(0.2)
        assert w.published == []  # the node LIST is not in: no tick counted
        first = await w.counted(1, "4")
        assert first["general"][1] == 1
        # The lease lost and won back: the caches are dropped and list again (slowly).
        before = len(w.published)
        await asyncio.gather(*(i.stop() for i in w.informers))
        assert not w.informers.get(NODES).synced.is_set()
        await asyncio.sleep(0.2)
        nodes = w.informers.get(NODES)
        assert not nodes.synced.is_set() and len(w.published) == before  # listing again: no tick
        await asyncio.wait_for(nodes.synced.wait(), 2.0)
        await until(lambda: _true(len(w.published) > before), within=2.0, interval=0.01)
        assert all(p.get("general", (None, 0))[1] == 1 for p in w.published[before:]), w.published[before:]
        assert w.informers.get(NODES).lists == 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
