"""The scale-up test's dry-run twin: the same world and workload, the controller restarted with
``node_actions.dry_run``: the pass batches and simulates the pending pods and says what it would
create, and nothing changes in the cloud or the cluster (no NodeClaim, no CreateFleet, no instance,
no pod bound).
"""

from __future__ import annotations

import time

import pytest

from support.provision_e2e import E2E, RESTARTS, pool, workload

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="package"), getattr(pytest.mark, RESTARTS)]

TEST = "scaleup-dry"
REPLICAS = 6
DRY_RUN = {"KUBESPOT_NODE_ACTIONS_DRY_RUN": "true"}


async def test_under_dry_run_pending_pods_get_a_logged_decision_and_nothing_is_launched(e2e: E2E) -> None:
    """aws/aws-node-termination-handler's dry-run e2e twins (test/e2e/*-dry-run-test: the same
    scenario with DRY_RUN, asserting the decision logged and nothing changed; pkg/node/node.go
    CordonAndDrain under DryRun); the path left out is kubernetes-sigs/karpenter
    pkg/controllers/provisioning/provisioner.go ``CreateNodeClaims`` and, behind it,
    aws/karpenter-provider-aws pkg/providers/instance/instance.go ``launchInstance`` (CreateFleet)."""
    name = f"{TEST}-pool"
    await e2e.restarted(DRY_RUN)
    await e2e.add_pools(pool(TEST, name, ["spot", "on-demand"]))
    await e2e.namespace(TEST)
    started = time.time()
    await e2e.deploy(TEST, workload("web", TEST, REPLICAS, cpu="500m"))
    try:
        await _nothing_changes(e2e, name, started)
    finally:
        # Gone before a controller without dry run starts (it would launch for them).
        await e2e.scale(TEST, "web", 0)
        await e2e.until(lambda: _none(e2e), f"the pods of {TEST} gone", within=20)


async def _none(e2e: E2E) -> bool:
    return not await e2e.pods(TEST)


async def _nothing_changes(e2e: E2E, name: str, started: float) -> None:

    async def all_planned() -> bool:
        # A pass over every replica (the first batches may close before all are pending).
        return any(f"pass created 0 nodeclaims for {REPLICAS} pods" in m for m in e2e.log_messages())

    await e2e.until(all_planned, f"a pass over the {REPLICAS} pending pods", within=20)
    said = [m for m in e2e.log_messages() if m.startswith("dry-run: would create NodeClaim for")]
    assert any(f"nodepool {name}" in m and "capacity type spot" in m for m in said), said
    # The decision is taken in the pass that would have created the claims: nothing was.
    assert await e2e.claims(TEST) == []
    assert e2e.fleet_calls(started) == []
    assert e2e.instances(name) == []
    assert not [p for p in await e2e.pods(TEST) if p["spec"].get("nodeName")]
    assert await e2e.metric("kubespot_nodeclaims_created_total", nodepool=name, reason="dry_run") >= 1
    assert await e2e.metric("kubespot_nodeclaims_created_total", nodepool=name, reason="provisioned") == 0
    pool_events = [
        e
        for e in await e2e.events("default", "DryRun")
        if e["involvedObject"].get("kind") == "NodePool" and e["involvedObject"].get("name") == name
    ]
    assert pool_events and all(e["type"] == "Normal" for e in pool_events), pool_events
