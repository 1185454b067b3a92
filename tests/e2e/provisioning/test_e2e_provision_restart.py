"""Restart without double launch: the controller is killed (SIGKILL) while CreateFleet has launched
the NodeClaims' instances but not yet answered, so no NodeClaim status was written; the restarted
controller finds each instance by its ``karpenter.sh/nodeclaim`` tag and launches nothing more.

The crash is made deterministic by awssim's held answer (``MotoServer.hold_fleet_answers``): EC2
Fleet ``instant`` is synchronous, its instances exist (tagged from ``TagSpecifications``) before the
answer reaches the caller, and a caller that dies meanwhile never learns of them.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from support.provision_e2e import E2E, Obj, condition, pool, workload

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="package")]

TEST = "restart"
REPLICAS = 2
#: Long enough for the test to see every launch in EC2 and kill the controller before any answer,
#: on a loaded machine where the claims' launches may be seconds apart (only the killed process's
#: server threads wait it out).
HOLD_SECONDS = 20.0
NODECLAIM_TAG = "karpenter.sh/nodeclaim"


def _live_by_claim(e2e: E2E, nodepool: str) -> dict[str, list[str]]:
    """NodeClaim name -> its pending or running instances, as DescribeInstances lists them by tag."""
    out: dict[str, list[str]] = {}
    for i in e2e.instances(nodepool):
        if i["State"]["Name"] in ("pending", "running"):
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
            out.setdefault(tags[NODECLAIM_TAG], []).append(i["InstanceId"])
    return out


async def test_a_controller_killed_mid_launch_does_not_launch_again(e2e: E2E) -> None:
    """kubespot's deliberate difference (docs/designs/launching.md §3) from kubernetes-sigs/karpenter
    ``pkg/controllers/nodeclaim/lifecycle/launch.go`` ``Launch.Reconcile`` (a launch kept in memory
    only) and aws/karpenter-provider-aws ``pkg/controllers/nodeclaim/garbagecollection/controller.go``
    ``Reconcile`` (the unclaimed instance terminated 30 s later, a second one launched): after the
    restart ``AwsCloud.create`` finds the instance by the tag ``karpenter.sh/nodeclaim`` (aws
    ``pkg/providers/instance/instance.go`` ``List``'s tag filters) and sends no second CreateFleet."""
    name = f"{TEST}-pool"
    await e2e.add_pools(pool(TEST, name, ["spot", "on-demand"]))
    await e2e.namespace(TEST)
    # Every call held (one per claim): more than the claims need, cleared once they are made, as
    # the world is shared with the tests after this one.
    await asyncio.to_thread(e2e.aws.hold_fleet_answers, HOLD_SECONDS, times=10)
    started = time.time()
    # One pod per node (3 of a 4-vCPU type's CPUs each): two claims, two CreateFleet calls.
    await e2e.deploy(TEST, workload("app", TEST, REPLICAS, cpu="3", memory="4Gi"))

    async def every_claim_in_ec2() -> list[Obj] | None:
        claims = await e2e.claims(TEST)
        tagged = await asyncio.to_thread(_live_by_claim, e2e, name)
        names = {c["metadata"]["name"] for c in claims}
        return claims if claims and names <= set(tagged) else None

    claims = await e2e.until(every_claim_in_ec2, "every NodeClaim's instance in EC2", within=15)
    assert not any(condition(c, "Launched") == "True" for c in claims), "a status was written before the kill"
    await asyncio.to_thread(e2e.aws.hold_fleet_answers, 0, times=0)
    killed_log = await e2e.kill_controller()
    calls = len(e2e.fleet_calls(started))
    assert calls == len(claims), f"{calls} CreateFleet calls for {len(claims)} claims"

    await e2e.restart_controller(catalog=True)
    names = sorted(c["metadata"]["name"] for c in claims)

    async def all_launched() -> list[Obj] | None:
        now = await e2e.claims(TEST)
        return (
            now if len(now) == len(names) and all(condition(c, "Launched") == "True" for c in now) else None
        )

    relaunched = await e2e.until(all_launched, "the claims Launched after the restart", within=30)
    assert sorted(c["metadata"]["name"] for c in relaunched) == names, "the restart made new claims"
    tagged = await asyncio.to_thread(_live_by_claim, e2e, name)
    for claim in relaunched:
        # Exactly one instance per claim in EC2, and it is the claim's.
        (instance,) = tagged[claim["metadata"]["name"]]
        assert claim["status"]["providerID"].endswith(f"/{instance}")
    assert len(tagged) == len(names)
    assert len(e2e.fleet_calls(started)) == calls, "a second CreateFleet went out after the restart"
    # The first controller never heard of its launches: the claims' launch came from the restart.
    killed = killed_log.read_text(errors="replace")
    assert not any(f"nodeclaim {n}: launched" in killed for n in names), "the kill came too late"
    await e2e.until(lambda: e2e.bound(TEST, REPLICAS), f"{REPLICAS} pods bound", within=15)
