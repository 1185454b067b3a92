"""Restart without double launch: the controller is killed (SIGKILL) while CreateFleet has launched
the NodeClaims' instances but not yet answered, so no NodeClaim status was written; the restarted
controller finds each instance by its ``karpenter.sh/nodeclaim`` tag and launches nothing more.

The crash is made deterministic by awssim's held answer (``MotoServer.hold_fleet_answers``): EC2
Fleet ``instant`` is synchronous, its instances exist (tagged from ``TagSpecifications``) before the
answer reaches the caller, and a caller that dies meanwhile never learns of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubespot.sandbox.provision_world import GENERAL_POOL, ProvisionWorld
from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import deployment, namespace, until
from support.provision_checks import (
    NODECLAIMS,
    Obj,
    condition_true,
    log_tail,
    started_world,
    tagged_instances,
)

NAMESPACE = "restart"
#: Long enough for the test to see every launch logged and kill the controller before any answer.
HOLD_SECONDS = 6.0


@pytest.fixture
async def world(moto_server: MotoServer, tmp_path: Path) -> AsyncIterator[ProvisionWorld]:
    async with started_world(moto_server, tmp_path / "world", scale=30.0) as w:
        yield w


def _tagged(aws: MotoServer) -> dict[str, list[str]]:
    return {name: [i["InstanceId"] for i in found] for name, found in tagged_instances(aws).items()}


async def test_a_controller_killed_mid_launch_does_not_launch_again(world: ProvisionWorld) -> None:
    """kubespot's deliberate difference (docs/designs/launching.md §3) from kubernetes-sigs/karpenter
    ``pkg/controllers/nodeclaim/lifecycle/launch.go`` ``Launch.Reconcile`` (a launch kept in memory
    only) and aws/karpenter-provider-aws ``pkg/controllers/nodeclaim/garbagecollection/controller.go``
    ``Reconcile`` (the unclaimed instance terminated 30 s later, a second one launched): after the
    restart ``AwsCloud.create`` finds the instance by the tag ``karpenter.sh/nodeclaim`` (aws
    ``pkg/providers/instance/instance.go`` ``List``'s tag filters) and sends no second CreateFleet."""
    aws = world.aws
    await world.create("/api/v1/namespaces", namespace(NAMESPACE))
    await asyncio.to_thread(aws.hold_fleet_answers, HOLD_SECONDS, times=10)
    app = deployment("app", 2, namespace=NAMESPACE, requests={"cpu": "3", "memory": "4Gi"})
    app["spec"]["template"]["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": GENERAL_POOL}
    await world.create(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", app)

    async def every_claim_in_ec2() -> list[Obj] | None:
        claims = (await world.get(NODECLAIMS))["items"]
        calls = await asyncio.to_thread(aws.fleet_call_log)
        tagged = await asyncio.to_thread(_tagged, aws)
        if claims and len(calls) >= len(claims) and all(c["metadata"]["name"] in tagged for c in claims):
            return claims
        return None

    claims = await until(every_claim_in_ec2, within=10.0)
    assert not any(condition_true(c, "Launched") for c in claims), "a status was written before the kill"
    controller = world.controller
    assert controller is not None and controller.proc is not None
    controller.proc.kill()  # SIGKILL: no shutdown hook runs
    await controller.proc.wait()
    first_log = world.workdir / "controller.log"
    first_log.rename(world.workdir / "controller-killed.log")
    calls_before = len(await asyncio.to_thread(aws.fleet_call_log))

    await world.start_controller()
    names = sorted(c["metadata"]["name"] for c in claims)

    async def all_launched() -> list[Obj] | None:
        now = (await world.get(NODECLAIMS))["items"]
        return now if all(condition_true(c, "Launched") for c in now) and len(now) == len(names) else None

    try:
        relaunched = await until(all_launched, within=60.0)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{log_tail(world)}") from None
    assert sorted(c["metadata"]["name"] for c in relaunched) == names, "the restart made new claims"
    tagged = await asyncio.to_thread(_tagged, aws)
    for claim in relaunched:
        (instance,) = tagged[claim["metadata"]["name"]]
        assert claim["status"]["providerID"].endswith(f"/{instance}")
    assert len(await asyncio.to_thread(aws.fleet_call_log)) == calls_before, "a second CreateFleet went out"

    async def bound() -> bool:
        pods = (await world.get(f"/api/v1/namespaces/{NAMESPACE}/pods"))["items"]
        return len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)

    await until(bound, within=15.0)
