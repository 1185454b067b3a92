"""Garbage collection over real HTTP: deleting an owner removes its dependents (background propagation).

Upstream reference: the "Garbage Collection" concepts page (owners and dependents; a dependent is
deleted once all of its owners are gone) and kubernetes/kubernetes ``pkg/controller/garbagecollector``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import deployment, node, owner_reference, until

Obj = dict[str, Any]
NS = "default"
FAST = ControllerConfig(
    pod_start_seconds=0.05, lease_renew_seconds=5.0, node_status_seconds=30.0, node_ready_seconds=0.05
)
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with KubeSim(controllers=FAST) as sim, aiohttp.ClientSession(sim.url) as session:
        for i in range(2):
            r = await session.post("/api/v1/nodes", json=node(f"node-{i}"))
            assert r.status == 201
        yield session


async def call(http: aiohttp.ClientSession, method: str, path: str, body: Any = None) -> Obj:
    r = await http.request(method, path, json=body, headers=MERGE if method == "PATCH" else None)
    data: Obj = await r.json()
    assert r.status < 300, (method, path, r.status, data)
    return data


async def items(http: aiohttp.ClientSession, path: str) -> list[Obj]:
    return list((await call(http, "GET", path))["items"])


async def test_deleting_a_deployment_removes_its_replicaset_and_pods(http: aiohttp.ClientSession) -> None:
    rs_path = f"/apis/apps/v1/namespaces/{NS}/replicasets"
    pods_path = f"/api/v1/namespaces/{NS}/pods?labelSelector=app=web"
    await call(http, "POST", f"/apis/apps/v1/namespaces/{NS}/deployments", deployment("web", 3))

    async def running() -> bool:
        pods = await items(http, pods_path)
        return len(pods) == 3 and all(p["status"].get("phase") == "Running" for p in pods)

    await until(running)
    assert len(await items(http, rs_path)) == 1
    await call(http, "DELETE", f"/apis/apps/v1/namespaces/{NS}/deployments/web")

    async def all_gone() -> bool:
        return not await items(http, rs_path) and not await items(http, pods_path)

    await until(all_gone)


async def test_dependent_with_a_remaining_owner_survives(http: aiohttp.ClientSession) -> None:
    cms = f"/api/v1/namespaces/{NS}/configmaps"
    a = await call(http, "POST", cms, {"metadata": {"name": "owner-a"}})
    b = await call(http, "POST", cms, {"metadata": {"name": "owner-b"}})

    ref_a, ref_b = (owner_reference(o, controller=False) for o in (a, b))
    await call(http, "POST", cms, {"metadata": {"name": "shared", "ownerReferences": [ref_a, ref_b]}})
    await call(http, "POST", cms, {"metadata": {"name": "only-a", "ownerReferences": [ref_a]}})
    await call(http, "DELETE", f"{cms}/owner-a")

    async def collected() -> Obj | None:
        names = {o["metadata"]["name"]: o for o in await items(http, cms)}
        if "only-a" in names or "shared" not in names:
            return None
        refs = names["shared"]["metadata"].get("ownerReferences") or []
        return names["shared"] if [r["name"] for r in refs] == ["owner-b"] else None

    await until(collected)
    await call(http, "DELETE", f"{cms}/owner-b")

    async def shared_gone() -> bool:
        return "shared" not in {o["metadata"]["name"] for o in await items(http, cms)}

    await until(shared_gone)


async def test_orphans_with_missing_owner_are_collected_at_start() -> None:
    """Dependents whose owner no longer exists when the collector starts are deleted."""
    orphan = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "orphan",
            "namespace": NS,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "gone",
                    "uid": "00000000-0000-0000-0000-000000000000",
                }
            ],
        },
    }
    keep = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep", "namespace": NS}}
    async with (
        KubeSim(objects=[orphan, keep], controllers=FAST) as sim,
        aiohttp.ClientSession(sim.url) as http,
    ):

        async def collected() -> bool:
            names = {o["metadata"]["name"] for o in await items(http, f"/api/v1/namespaces/{NS}/configmaps")}
            return "orphan" not in names and "keep" in names

        await until(collected)


async def test_an_orphaning_delete_keeps_the_dependents_without_their_owner(
    http: aiohttp.ClientSession,
) -> None:
    """registry/generic/registry/store.go deletionFinalizersForGarbageCollection (propagationPolicy
    Orphan adds the `orphan` finalizer) and pkg/controller/garbagecollector orphanDependents: the
    ReplicaSet goes, its pods stay with the reference to it removed."""
    rs_path = f"/apis/apps/v1/namespaces/{NS}/replicasets"
    pods_path = f"/api/v1/namespaces/{NS}/pods?labelSelector=app=web"
    await call(http, "POST", f"/apis/apps/v1/namespaces/{NS}/deployments", deployment("web", 2))

    async def two_pods() -> bool:
        return len(await items(http, pods_path)) == 2

    await until(two_pods)
    await call(
        http, "DELETE", f"/apis/apps/v1/namespaces/{NS}/deployments/web", {"propagationPolicy": "Orphan"}
    )
    [rs] = await items(http, rs_path)
    await call(http, "DELETE", f"{rs_path}/{rs['metadata']['name']}", {"propagationPolicy": "Orphan"})

    async def orphaned() -> bool:
        pods = await items(http, pods_path)
        return (
            not await items(http, rs_path)
            and len(pods) == 2
            and not any(p["metadata"].get("ownerReferences") for p in pods)
        )

    await until(orphaned)
