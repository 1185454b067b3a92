"""Shared fixture for kubesim controller tests: a KubeSim with fast timings and an HTTP helper.

``cluster`` starts a ``KubeSim`` in the test's event loop with the scheduler, kubelets and node
lifecycle running on sub-second timings (workload controllers off, so only the controllers under test
write), and yields a ``Cluster``: aiohttp calls against ``sim.url`` plus in-process reads for
assertions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.controllers.kubelet import KubeletController, kubelet_of
from kubespot.sim.kubesim.store import WatchEvent
from kubespot.sim.kubesim.testing import condition, node, pod, until
from support.kubesim_timings import FAST_CONTROLLERS

Obj = dict[str, Any]

MERGE = {"Content-Type": "application/merge-patch+json"}


class Cluster:
    """HTTP helpers for one running KubeSim."""

    def __init__(self, sim: KubeSim, http: aiohttp.ClientSession) -> None:
        self.sim = sim
        self.http = http
        self.events: list[tuple[float, WatchEvent]] = []
        sim.store.add_listener(lambda ev: self.events.append((time.monotonic(), ev)))

    @property
    def kubelet(self) -> KubeletController:
        return kubelet_of(self.sim.controllers)

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        expect: int | None = None,
    ) -> Obj:
        async with self.http.request(method, path, json=body, headers=headers) as r:
            data: Obj = await r.json()
            if expect is not None:
                assert r.status == expect, (method, path, r.status, data)
            else:
                assert r.status < 300, (method, path, r.status, data)
            return data

    async def patch(self, path: str, body: Obj) -> Obj:
        return await self.call("PATCH", path, body, headers=MERGE)

    async def create_node(
        self, name: str, *, memory: str = "8Gi", wait_ready: bool = True, **node_args: Any
    ) -> Obj:
        """POST ``testing.node(name, **node_args)`` and, unless told not to, wait until it is Ready.

        ``memory`` stays at the 8Gi these tests were written with (the builder's default is 16Gi).
        """
        body = node(name, memory=memory, **node_args)
        resources = body["status"]["allocatable"]
        created = await self.call("POST", "/api/v1/nodes", body)
        if (created.get("status") or {}).get("allocatable") != resources:
            await self.patch(f"/api/v1/nodes/{name}/status", {"status": {"allocatable": resources}})
        if wait_ready:  # Ready, and the not-ready taint of its registration gone: schedulable
            await self.until(lambda: self.node_ready(name) == "True" and not self.not_ready_tainted(name))
        return created

    async def create_pod(
        self,
        name: str,
        *,
        ns: str = "default",
        cpu: str | None = None,
        memory: str | None = None,
        node_name: str | None = None,
        annotations: dict[str, str] | None = None,
        grace: int | None = None,
        **spec_extra: Any,
    ) -> Obj:
        requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
        body = pod(
            name,
            namespace=ns,
            node=node_name,
            annotations=annotations,
            grace=grace,
            requests=requests,
            image="nginx:1.27",
        )
        body["spec"].update(spec_extra)
        return await self.call("POST", f"/api/v1/namespaces/{ns}/pods", body)

    async def delete_pod(self, name: str, *, ns: str = "default", grace: int | None = None) -> Obj:
        body = {"gracePeriodSeconds": grace} if grace is not None else None
        return await self.call("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", body)

    def pod(self, name: str, ns: str = "default") -> Obj | None:
        return self.sim.store.find(self.sim.store.registry.lookup("", "v1", "pods"), ns, name)  # type: ignore[arg-type]

    def node(self, name: str) -> Obj | None:
        return self.sim.store.find(self.sim.store.registry.lookup("", "v1", "nodes"), None, name)  # type: ignore[arg-type]

    @staticmethod
    def condition(obj: Obj | None, type_: str, field: str = "status") -> Any:
        """One field of the condition ``type_`` (its status by default); None when it is absent."""
        return (condition(obj, type_) or {}).get(field)

    async def get_or_none(self, path: str) -> Obj | None:
        async with self.http.get(path) as r:
            if r.status == 404:
                return None
            data: Obj = await r.json()
            assert r.status == 200, (path, r.status, data)
            return data

    def not_ready_tainted(self, name: str) -> bool:
        taints = ((self.node(name) or {}).get("spec") or {}).get("taints") or []
        return any(t.get("key") == "node.kubernetes.io/not-ready" for t in taints)

    def node_ready(self, name: str) -> str | None:
        return self.condition(self.node(name), "Ready")  # type: ignore[no-any-return]

    def phase(self, name: str, ns: str = "default") -> str | None:
        pod = self.pod(name, ns)
        return None if pod is None else (pod.get("status") or {}).get("phase")

    def deleted_at(self, name: str, ns: str = "default") -> float | None:
        """Monotonic time of the pod's DELETED event, if it happened."""
        for t, ev in self.events:
            meta = ev.obj["metadata"]
            if (
                ev.type == "DELETED"
                and ev.rkey == ("", "pods")
                and meta["name"] == name
                and meta.get("namespace") == ns
            ):
                return t
        return None

    async def until(self, predicate: Callable[[], Any], within: float = 8.0) -> Any:
        """Wait for ``predicate()`` (synchronous: it reads the store) to return something truthy."""

        async def probe() -> Any:
            return predicate()

        return await until(probe, within=within, interval=0.02)


@contextlib.asynccontextmanager
async def running(config: ControllerConfig = FAST_CONTROLLERS) -> AsyncIterator[Cluster]:
    async with KubeSim(controllers=config) as sim, aiohttp.ClientSession(sim.url) as http:
        yield Cluster(sim, http)


#: The API server alone: no scheduler, kubelets or workload controllers writing beside the test.
QUIET = ControllerConfig(scheduler=False, kubelet=False, workloads=False)


@pytest.fixture
async def sim() -> AsyncIterator[KubeSim]:
    """A quiet kubesim (``QUIET``, bookmarks every 0.2 s); modules that need another define their own."""
    async with KubeSim(controllers=QUIET, bookmark_interval=0.2) as s:
        yield s


@pytest.fixture
async def http(sim: KubeSim) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=sim.url) as session:
        yield session


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with running() as c:
        yield c


@pytest.fixture
def cluster_with() -> Callable[..., contextlib.AbstractAsyncContextManager[Cluster]]:
    """``async with cluster_with(terminated_pod_gc_threshold=2) as cluster``: the fast config, changed."""

    def make(**changes: Any) -> contextlib.AbstractAsyncContextManager[Cluster]:
        return running(dataclasses.replace(FAST_CONTROLLERS, **changes))

    return make
