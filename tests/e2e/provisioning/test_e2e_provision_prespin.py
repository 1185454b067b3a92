"""Pre-spin through the real queue path: EC2 reclaims the spot pool of a provisioned node (awssim's
``reclaim_spot``: an interruption warning on EventBridge, routed to the interruption queue), the
controller's queue processor fences and drains the node, and the provisioner, seeing the node
doomed, launches its replacement while the drain runs (docs/designs/launching.md §7); the evicted
pods' replacements land on the new node inside the (scaled) two-minute notice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubespot.sandbox.provision_world import GENERAL_POOL, ProvisionWorld
from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import deployment, namespace, until
from support.kube_history import recording
from support.provision_checks import NODECLAIMS, Obj, claims, controller_log, log_tail, pods, started_world

NAMESPACE = "prespin"
#: 120 s of notice become 6 s: room for a batch (its 1 s idle window is not scaled), a CreateFleet
#: and a (scaled) 35 s boot on a loaded machine.
SCALE = 20.0


@pytest.fixture
async def world(moto_server: MotoServer, tmp_path: Path) -> AsyncIterator[ProvisionWorld]:
    async with started_world(moto_server, tmp_path / "world", scale=SCALE) as w:
        yield w


def _evicted(pod: Obj, kind: str) -> bool:
    """The pod's eviction: the drain's write that marks it terminating."""
    return kind == "MODIFIED" and bool(pod["metadata"].get("deletionTimestamp"))


async def test_a_spot_warning_gets_the_replacement_launched_during_the_drain(world: ProvisionWorld) -> None:
    """kubernetes-sigs/karpenter ``pkg/controllers/provisioning/provisioner.go`` ``Schedule`` (the
    pods of nodes being deleted planned with the pending ones) and aws/karpenter-provider-aws
    ``pkg/controllers/interruption/controller.go`` ``Reconcile`` (a spot interruption warning from
    the queue → the node's claim deleted, its pods drained); kubespot plans from its own fence at
    once (docs/designs/launching.md §7, ``controllers/provisioning/doomed.py``)."""
    aws = world.aws
    await world.create("/api/v1/namespaces", namespace(NAMESPACE))
    app = deployment("app", 2, namespace=NAMESPACE, requests={"cpu": "1500m", "memory": "2Gi"})
    app["spec"]["template"]["spec"]["nodeSelector"] = {
        "karpenter.sh/nodepool": GENERAL_POOL,
        "karpenter.sh/capacity-type": "spot",
    }
    await world.create(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", app)

    async def running() -> list[Obj] | None:
        now = await pods(world, NAMESPACE)
        ok = len(now) == 2 and all(p["spec"].get("nodeName") for p in now)
        return now if ok and all(p["status"].get("phase") == "Running" for p in now) else None

    placed = await until(running, within=30.0)
    (first,) = await claims(world, GENERAL_POOL)
    assert {p["spec"]["nodeName"] for p in placed} == {first["status"]["nodeName"]}, log_tail(world)
    labels = first["metadata"]["labels"]
    zone, itype = labels["topology.kubernetes.io/zone"], labels["node.kubernetes.io/instance-type"]
    old_node = first["status"]["nodeName"]

    async with recording(world.api_url, f"/api/v1/namespaces/{NAMESPACE}/pods", NODECLAIMS) as history:
        warned = time.monotonic()
        # The warning goes out at once, the termination two (scaled) minutes later; the pool keeps
        # room for the replacement (else the provisioner's fallback, not pre-spin, is on trial).
        reclaim = await asyncio.to_thread(aws.reclaim_spot, zone, itype, capacity_after=10)
        notice = reclaim.terminate_at - reclaim.warning_at

        async def moved() -> list[Obj] | None:
            now = [p for p in await pods(world, NAMESPACE) if not p["metadata"].get("deletionTimestamp")]
            ok = len(now) == 2 and all(p["spec"].get("nodeName") not in (None, old_node) for p in now)
            return now if ok and all(p["status"].get("phase") == "Running" for p in now) else None

        try:
            landed = await until(moved, within=30.0)
        except AssertionError as err:
            raise AssertionError(f"{err}\n{log_tail(world)}") from None
        landed_after = time.monotonic() - warned

    new_claims = [
        e
        for e in history.of(NODECLAIMS)
        if e[1] == "ADDED" and e[2]["metadata"]["name"] != first["metadata"]["name"]
    ]
    assert len(new_claims) == 1, f"replacements: {[e[2]['metadata']['name'] for e in new_claims]}"
    created_rv, _, replacement = new_claims[0]
    pod_events = history.of(f"/api/v1/namespaces/{NAMESPACE}/pods")
    evicted = history.first(f"/api/v1/namespaces/{NAMESPACE}/pods", _evicted)
    gone = [rv for rv, kind, _ in pod_events if kind == "DELETED"]
    assert evicted is not None and gone, "the queue processor's drain evicted nothing"
    # The drain starts right after the fence (node_handler), so its evictions may come first; the
    # replacement must come while the evicted pods are still terminating, not after they are gone
    # and their successors wait for kube-scheduler (Karpenter's path).
    assert created_rv < min(gone), (
        f"the replacement (rv {created_rv}) came only after the evicted pods were gone (rv {min(gone)})"
    )
    assert f"node {old_node} is going away; planning its pods now (pre-spin)" in controller_log(world)
    new_node = (await world.get(f"{NODECLAIMS}/{replacement['metadata']['name']}"))["status"]["nodeName"]
    assert {p["spec"]["nodeName"] for p in landed} == {new_node}
    assert landed_after < notice, (
        f"the pods ran again {landed_after:.1f}s after the warning (notice {notice:.1f}s)"
    )
