"""Interruption → pool avoided: EC2 reclaims the spot pool of a provisioned node (awssim's
``reclaim_spot``: a rebalance recommendation and an interruption warning on EventBridge, routed to
the interruption queue), the controller's queue processor marks that pool unavailable for the
provisioner, and the launch for the displaced pods leaves it out of its CreateFleet overrides while
the other pools stay in. The twin runs the same story with ``launch.learn_from_interruptions``
off (``KUBESPOT_LAUNCH_LEARN_FROM_INTERRUPTIONS=false``, Karpenter beside NTH sharing nothing):
the reclaimed pool is offered to EC2 again.

The reclaimed pool keeps room afterwards (``capacity_after``): EC2 would launch there again, so
only what the controller learnt keeps the launch away, not an insufficient-capacity answer.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from support.provision_e2e import E2E, Obj, label, pool, workload

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="package")]

LEARN_ENV = "KUBESPOT_LAUNCH_LEARN_FROM_INTERRUPTIONS"
#: The reclaim takes back every spot instance of its pool, and the learning test's mark must not
#: reach the twin: one type each that no other test uses (none of ``SHARED_TYPES``).
LEARN_TYPE = "m6a.large"
TWIN_TYPE = "m6a.xlarge"


async def _reclaim_and_relaunch(e2e: E2E, test: str, itype: str) -> tuple[tuple[str, str], list[Obj], str]:
    """A spot node for ``test``, its pool reclaimed: (its (type, zone), the CreateFleet calls made
    since the reclaim until the pods run elsewhere, the old node's name)."""
    await e2e.add_pools(pool(test, f"{test}-pool", ["spot"], instance_types=(itype,)))
    await e2e.namespace(test)
    await e2e.deploy(test, workload("app", test, 1, cpu="1"))
    (placed,) = await e2e.until(lambda: e2e.bound(test, 1), "the pod bound", within=20)
    (claim,) = await e2e.claims(test)
    old_node = placed["spec"]["nodeName"]
    where = (
        str(label(claim, "node.kubernetes.io/instance-type")),
        str(label(claim, "topology.kubernetes.io/zone")),
    )
    since = time.time()
    await asyncio.to_thread(e2e.aws.reclaim_spot, where[1], where[0], rebalance=True, capacity_after=10)

    async def elsewhere() -> list[Obj] | None:
        pods = await e2e.bound(test, 1)
        return pods if pods and pods[0]["spec"]["nodeName"] != old_node else None

    await e2e.until(elsewhere, "the pod bound on another node", within=20)
    calls = [c for c in e2e.fleet_calls(since) if c["Launched"]]
    assert calls, f"no launch after the reclaim\n{e2e.log_tail()}"
    return where, calls, old_node


def _spot_pools(call: Obj) -> set[tuple[str, str]]:
    request = call["Request"]
    assert request["DefaultTargetCapacityType"] == "spot", request
    return {(p["InstanceType"], p["AvailabilityZone"]) for p in request["Pools"]}


async def test_a_reclaimed_spot_pool_is_left_out_of_the_next_launch(e2e: E2E) -> None:
    """aws/karpenter-provider-aws ``pkg/controllers/interruption/controller.go`` ``Reconcile`` →
    ``markUnavailableOfferings`` (a spot interruption warning marks its (capacity type, type,
    zone) unavailable in ``pkg/cache/unavailableofferings.go`` for 3 minutes) and
    ``pkg/providers/instance/instance.go`` / ``pkg/cloudprovider/cloudprovider.go`` ``Create``
    (``filterUnavailableOfferings``: the unavailable pools are not offered to CreateFleet)."""
    test = "itn-learn"
    (itype, zone), calls, old_node = await _reclaim_and_relaunch(e2e, test, LEARN_TYPE)
    first = calls[0]
    offered = _spot_pools(first)
    assert (itype, zone) not in offered, f"the reclaimed pool {itype}/{zone} was offered: {sorted(offered)}"
    # Only that pool: the same type in the other zones stays in (the pool has that one type).
    assert {(itype, z) for z in ("us-east-1a", "us-east-1b", "us-east-1c") if z != zone} <= offered, sorted(
        offered
    )
    learnt = f"spot-itn on node {old_node}: the provisioner learns of its spot pool"
    assert learnt in e2e.log_messages(), e2e.log_tail()


async def test_twin_without_learning_offers_the_reclaimed_pool_again(e2e: E2E) -> None:
    """The twin: ``launch.learn_from_interruptions=false`` (docs/designs/launching.md §2 and §7:
    the handler and the provisioner share nothing, as Karpenter's provisioner beside NTH, which
    has no ``markUnavailableOfferings``): the drain still moves the pods, and the next CreateFleet
    offers the reclaimed pool to EC2 again."""
    shared = dict(e2e.env)
    await _restart(e2e, {**shared, LEARN_ENV: "false"})
    try:
        test = "itn-twin"
        (itype, zone), calls, _ = await _reclaim_and_relaunch(e2e, test, TWIN_TYPE)
        offered = _spot_pools(calls[0])
        assert (itype, zone) in offered, f"the reclaimed pool {itype}/{zone} was left out: {sorted(offered)}"
        assert not any("the provisioner learns of its spot pool" in m for m in e2e.log_messages())
    finally:
        await e2e.finish()
        await _restart(e2e, shared)  # the shared world's settings for the tests after this one


async def _restart(e2e: E2E, env: dict[str, str]) -> None:
    controller = e2e.world.controller
    assert controller is not None
    await controller.stop()
    e2e.env = env
    await e2e.restart_controller(catalog=True)
