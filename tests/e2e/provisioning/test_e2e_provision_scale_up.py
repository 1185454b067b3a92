"""Scale-up end to end: pending pods → NodeClaims → CreateFleet on awssim's spot market → instances →
Nodes registered by the joiner → pods bound, through the real controller process.

Its dry-run twin (``node_actions.dry_run``: decided, said, nothing launched) is
``test_e2e_provision_scale_up_dry_run.py``.
"""

from __future__ import annotations

import time

import pytest

from kubespot.model.quantity import milli
from support.provision_e2e import (
    E2E,
    TEST_LABEL,
    UNREGISTERED_TAINT,
    Obj,
    condition,
    label,
    pool,
    taint_keys,
    workload,
)

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="package")]

TEST = "scaleup"
REPLICAS = 6


async def test_pending_pods_get_claims_instances_and_nodes_and_are_bound(e2e: E2E) -> None:
    """kubernetes-sigs/karpenter pkg/controllers/provisioning/provisioner.go ``Schedule`` and
    ``CreateNodeClaims`` (one NodeClaim per planned node, owned by its NodePool, labelled with it);
    pkg/controllers/nodeclaim/lifecycle/launch.go, registration.go (the ``karpenter.sh/unregistered``
    taint removed once the Node joins), initialization.go (Initialized, ``karpenter.sh/initialized``);
    lifecycle/controller.go (the ``karpenter.sh/termination`` finalizer); aws/karpenter-provider-aws
    pkg/providers/instance/instance.go ``launchInstance`` and types.go ``CreateFleetInputBuilder``
    (CreateFleet ``instant``, at most 60 overrides, spot ``price-capacity-optimized``);
    pkg/controllers/nodepool/counter/controller.go (the NodePool's ``status.resources``)."""
    name = f"{TEST}-pool"
    await e2e.add_pools(pool(TEST, name, ["spot", "on-demand"]))
    await e2e.namespace(TEST)
    started = time.time()
    await e2e.deploy(TEST, workload("web", TEST, REPLICAS, cpu="500m"))
    pods = await e2e.until(lambda: e2e.bound(TEST, REPLICAS), f"{REPLICAS} pods bound", within=20)

    claims = await e2e.claims(TEST)
    assert claims, "pods were bound without a NodeClaim"

    async def initialized() -> list[Obj] | None:
        # A pod may bind once the unregistered taint is gone, a moment before the claim's
        # Initialized condition is written (initialization.go runs on the next reconcile).
        now = await e2e.claims(TEST)
        done = all(condition(c, "Initialized") == "True" for c in now)
        return now if done and len(now) >= len(claims) else None

    claims = await e2e.until(initialized, "every claim Initialized", within=20)
    nodes = {n["metadata"]["name"]: n for n in await e2e.nodes(TEST)}
    assert {p["spec"]["nodeName"] for p in pods} <= set(nodes), "a pod is bound to a node not launched here"
    for claim in claims:
        meta = claim["metadata"]
        assert meta["name"].startswith(f"{name}-")
        assert [(o["kind"], o["name"]) for o in meta["ownerReferences"]] == [("NodePool", name)]
        assert label(claim, "karpenter.sh/nodepool") == name
        assert label(claim, TEST_LABEL) == TEST
        assert "karpenter.sh/termination" in meta.get("finalizers", [])
        states = {c: condition(claim, c) for c in ("Launched", "Registered", "Initialized")}
        assert states == dict.fromkeys(states, "True"), f"{meta['name']}: {states}\n{e2e.log_tail()}"
        node = nodes[claim["status"]["nodeName"]]
        assert node["spec"]["providerID"] == claim["status"]["providerID"]
        assert UNREGISTERED_TAINT not in taint_keys(node)
        assert label(node, "karpenter.sh/initialized") == "true"
        assert label(node, "karpenter.sh/nodepool") == name

    # The mechanism: one CreateFleet instant call per claim, each launching the claim's instance.
    calls = [c for c in e2e.fleet_calls(started) if c["Launched"]]
    assert len(calls) == len(claims), calls
    for call in calls:
        request = call["Request"]
        assert request["Type"] == "instant"
        assert request["TotalTargetCapacity"] == 1
        assert 1 <= request["Overrides"] <= 60
        # Spot is cheaper and nothing ran out: every launch is spot, asked price-capacity-optimized.
        assert request["DefaultTargetCapacityType"] == "spot"
        assert request["SpotAllocationStrategy"] == "price-capacity-optimized"
        assert [entry["CapacityType"] for entry in call["Launched"]] == ["spot"]
    running = [i for i in e2e.instances(name) if i["State"]["Name"] == "running"]
    assert sorted(i["InstanceId"] for i in running) == sorted(
        c["status"]["providerID"].rsplit("/", 1)[1] for c in claims
    )

    # The pool counts what it runs (its counter's 5 s pass).
    capacity = sum(milli(n["status"]["capacity"]["cpu"]) for n in nodes.values())

    async def counted() -> bool:
        resources = ((await e2e.nodepool(name)).get("status") or {}).get("resources") or {}
        return bool(resources) and milli(resources["cpu"]) == capacity

    await e2e.until(counted, f"NodePool {name} status.resources.cpu == {capacity}m", within=10)
    assert capacity >= REPLICAS * 500
