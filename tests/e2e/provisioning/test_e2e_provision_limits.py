"""NodePool limits end to end: a pool's ``spec.limits.cpu`` stops its launches; the pods beyond it
stay pending and are told why; no instance beyond the limit is ever launched."""

from __future__ import annotations

import asyncio

import pytest

from kubespot.model.quantity import milli
from support.provision_e2e import E2E, Obj, pool, workload

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="package")]

TEST = "limits"
#: m5.xlarge only (4 vCPU, 3 pods of 1 CPU after kube-reserved) and a 4-CPU limit: one node.
TYPE = "m5.xlarge"
LIMIT_CPU = 4
REPLICAS = 6
FITS = 3
#: Karpenter's scheduling error for a pool whose every type would take it over its limits.
LIMIT_MESSAGE = "all available instance types exceed limits for nodepool"


async def test_a_cpu_limit_stops_launches_and_leaves_the_rest_pending(e2e: E2E) -> None:
    """kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/scheduler.go (a NodePool's
    remaining resources: ``subtractMax`` of its limits, no new claim once an instance type would
    exceed them) and provisioner.go ``Create`` (the limits checked again against the NodePool's live
    usage, ``ExceededBy``; kubespot refuses a claim that would take usage over, docs/designs/
    launching.md §2b); events.go ``PodFailedToScheduleEvent`` (Warning ``FailedScheduling``) for the
    pods left; pkg/controllers/nodepool/counter/controller.go (``status.resources``)."""
    name = f"{TEST}-pool"
    await e2e.add_pools(
        pool(TEST, name, ["spot", "on-demand"], instance_types=(TYPE,), cpu_limit=str(LIMIT_CPU))
    )
    await e2e.namespace(TEST)
    await e2e.deploy(TEST, workload("web", TEST, REPLICAS, cpu="1"))
    most_claims = 0

    async def settled() -> list[Obj] | None:
        nonlocal most_claims
        most_claims = max(most_claims, len(await e2e.claims(TEST)))
        pods = await e2e.pods(TEST)
        bound = [p for p in pods if p["spec"].get("nodeName")]
        told = [
            e for e in await e2e.events(TEST, "FailedScheduling") if LIMIT_MESSAGE in e.get("message", "")
        ]
        pending = {p["metadata"]["name"] for p in pods} - {p["metadata"]["name"] for p in bound}
        # kube-scheduler binds whichever pods it takes first, not always those the provisioner
        # planned onto the claim: a pod left pending is told at the provisioner's next pass.
        told_pods = {e["involvedObject"]["name"] for e in told}
        return told if len(pods) == REPLICAS and len(bound) == FITS and pending <= told_pods else None

    told = await e2e.until(settled, f"{FITS} pods bound, each pending one told of the limit", within=20)

    # Give the provisioner more passes (its batches re-trigger while pods stay pending): still one.
    for _ in range(10):
        most_claims = max(most_claims, len(await e2e.claims(TEST)))
        await asyncio.sleep(0.2)
    assert most_claims == 1, f"{most_claims} claims for a {LIMIT_CPU}-CPU limit\n{e2e.log_tail()}"
    launched = e2e.instances(name)  # in any state: a launched-then-terminated one counts too
    assert len(launched) == 1, [i["InstanceId"] for i in launched]
    assert launched[0]["InstanceType"] == TYPE
    pending = [p for p in await e2e.pods(TEST) if not p["spec"].get("nodeName")]
    assert len(pending) == REPLICAS - FITS
    # Each pod left pending was told the pool's limit is why.
    assert {p["metadata"]["name"] for p in pending} <= {e["involvedObject"]["name"] for e in told}
    assert all(e["type"] == "Warning" and e["message"].startswith("Failed to schedule pod, ") for e in told)
    status = (await e2e.nodepool(name)).get("status") or {}
    nodes = [(n["metadata"]["name"], n["spec"].get("providerID")) for n in await e2e.nodes(TEST)]
    claims = [(c["metadata"]["name"], c["status"].get("providerID")) for c in await e2e.claims(TEST)]
    assert milli((status.get("resources") or {}).get("cpu", "0")) <= LIMIT_CPU * 1000, (status, nodes, claims)
