"""lightkube's async client, the Kubernetes library the product uses, against kubesim over HTTP."""

from __future__ import annotations

import asyncio

import pytest
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig


@pytest.fixture
async def sim() -> KubeSim:
    async with KubeSim(
        nodes=3, pods_per_node=3, seed=3, controllers=ControllerConfig(pod_start_seconds=0.1)
    ) as s:
        yield s  # type: ignore[misc]


def _client(sim: KubeSim) -> AsyncClient:
    return AsyncClient(config=KubeConfig.from_file(str(sim.kubeconfig_path)))


async def test_list_watch_and_patch_nodes(sim: KubeSim) -> None:
    kc = _client(sim)
    nodes = [n async for n in kc.list(Node)]
    assert len(nodes) == 3
    name = nodes[0].metadata.name
    events: list[tuple[str, bool]] = []

    async def consume() -> None:
        async for op, node in kc.watch(Node, resource_version=nodes[0].metadata.resourceVersion):
            if node.metadata.name == name and node.spec.unschedulable:
                events.append((op, True))
                return

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.1)
    await kc.patch(Node, name, {"spec": {"unschedulable": True}}, patch_type=PatchType.STRATEGIC)
    await asyncio.wait_for(task, 10)
    assert events == [("MODIFIED", True)]
    await kc.close()


async def test_pods_by_node_field_selector_and_eviction(sim: KubeSim) -> None:
    kc = _client(sim)
    node = sim.store.list(sim.store.registry.lookup("", "v1", "nodes"))[0]["metadata"]["name"]  # type: ignore[arg-type]
    pods = [p async for p in kc.list(Pod, namespace="*", fields={"spec.nodeName": node})]
    assert pods and all(p.spec.nodeName == node for p in pods)
    bare = [p for p in pods if not p.metadata.ownerReferences]
    target = bare[0] if bare else pods[0]
    eviction = Pod.Eviction(
        metadata=ObjectMeta(name=target.metadata.name, namespace=target.metadata.namespace)
    )
    await kc.create(eviction, target.metadata.name, namespace=target.metadata.namespace)
    got = await kc.get(Pod, target.metadata.name, namespace=target.metadata.namespace)
    assert got.metadata.deletionTimestamp is not None
    await kc.close()


async def test_lease_conflict_is_an_api_error_409(sim: KubeSim) -> None:
    kc = _client(sim)
    from lightkube.models.coordination_v1 import LeaseSpec

    lease = await kc.create(
        Lease(metadata=ObjectMeta(name="l", namespace="default"), spec=LeaseSpec(holderIdentity="a"))
    )
    lease.spec.holderIdentity = "b"
    await kc.replace(lease)
    lease.spec.holderIdentity = "c"
    with pytest.raises(ApiError) as err:
        await kc.replace(lease)
    assert err.value.status.code == 409
    await kc.close()
