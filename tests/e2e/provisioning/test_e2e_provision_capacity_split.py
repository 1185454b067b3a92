"""The capacity split end to end: a NodePool annotated ``kubespot.io/capacity-split:
"onDemandBase=2,onDemandPercentAboveBase=30"`` scaled to 5 then 7 nodes (one pod per node) runs
the on-demand count Auto Scaling's rule gives (``min(total, 2) + ceil(30 % x (total - 2))``: 3 of
5, then 4 of 7), the rest spot, as EC2 itself reports the instances (DescribeInstances'
``InstanceLifecycle``), not only as the NodeClaims' labels say.
"""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from support.provision_e2e import E2E, Obj, label, pool, workload

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="package")]

TEST = "split"
POOL = f"{TEST}-pool"
BASE, PERCENT = 2, 30


def _on_demand_target(total: int) -> int:
    return min(total, BASE) + math.ceil(PERCENT * max(0, total - BASE) / 100)


def _ec2_capacity_types(e2e: E2E) -> dict[str, str]:
    """Instance id -> capacity type as EC2 reports it (``InstanceLifecycle: spot``, absent for
    on-demand), for the pool's live instances."""
    return {
        i["InstanceId"]: "spot" if i.get("InstanceLifecycle") == "spot" else "on-demand"
        for i in e2e.instances(POOL)
        if i["State"]["Name"] in ("pending", "running")
    }


async def _scaled(e2e: E2E, replicas: int, since: float) -> tuple[dict[str, str], list[Obj]]:
    await e2e.until(lambda: e2e.bound(TEST, replicas), f"{replicas} pods bound", within=30)
    claims = await e2e.claims(TEST)
    assert len(claims) == replicas, f"{len(claims)} claims for {replicas} one-node pods"
    by_ec2 = await asyncio.to_thread(_ec2_capacity_types, e2e)
    for claim in claims:
        instance = claim["status"]["providerID"].rsplit("/", 1)[1]
        assert label(claim, "karpenter.sh/capacity-type") == by_ec2[instance], claim["metadata"]["name"]
    return by_ec2, [c for c in e2e.fleet_calls(since) if c["Launched"]]


async def test_a_split_pool_runs_the_auto_scaling_share_of_on_demand(e2e: E2E) -> None:
    """kubespot's own (docs/designs/launching.md §6, ``controllers/provisioning/capacity_split.py``
    ``narrow``), after Auto Scaling's ``InstancesDistribution`` (``OnDemandBaseCapacity``,
    ``OnDemandPercentageAboveBaseCapacity``; the Auto Scaling User Guide's "Setup overview for
    creating a mixed instances group", Scaling behavior: a fraction rounded up in favour of
    on-demand); each narrowed claim launched by aws/karpenter-provider-aws
    ``pkg/providers/instance/instance.go`` ``launchInstance`` with that capacity type
    (``getCapacityType``: the claim's single capacity-type requirement)."""
    body = pool(TEST, POOL, ["spot", "on-demand"], instance_types=("m5.xlarge",))
    body["metadata"]["annotations"] = {
        "kubespot.io/capacity-split": f"onDemandBase={BASE},onDemandPercentAboveBase={PERCENT}"
    }
    await e2e.add_pools(body)
    await e2e.namespace(TEST)
    since = time.time()
    # 3 of an m5.xlarge's 4 vCPUs: one pod per node.
    await e2e.deploy(TEST, workload("app", TEST, 5, cpu="3"))
    by_ec2, calls = await _scaled(e2e, 5, since)
    assert sorted(by_ec2.values()).count("on-demand") == _on_demand_target(5) == 3, by_ec2
    assert sorted(by_ec2.values()).count("spot") == 2, by_ec2
    # The mechanism: each claim was launched with its one capacity type, none fell back.
    asked = sorted(c["Request"]["DefaultTargetCapacityType"] for c in calls)
    assert asked == ["on-demand"] * 3 + ["spot"] * 2, calls
    assert not any(c["Errors"] for c in calls), calls

    since = time.time()
    await e2e.scale(TEST, "app", 7)
    by_ec2, calls = await _scaled(e2e, 7, since)
    assert list(by_ec2.values()).count("on-demand") == _on_demand_target(7) == 4, by_ec2
    assert list(by_ec2.values()).count("spot") == 3, by_ec2
    assert sorted(c["Request"]["DefaultTargetCapacityType"] for c in calls) == ["on-demand", "spot"], calls
