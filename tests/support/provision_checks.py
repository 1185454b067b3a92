"""Helpers of the provisioning end-to-end tests (tests/e2e/provisioning/) that read the world
(``sandbox.provision_world.ProvisionWorld``): its controller's progress, NodeClaim conditions,
EC2's instances by tag, and a failure message with the controller's log tail."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from kubespot.sandbox.provision_world import ProvisionWorld
from kubespot.sandbox.timing import Timing
from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

Obj = dict[str, Any]
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
NODECLAIM_TAG = "karpenter.sh/nodeclaim"
#: The controller reads ~1 400 instance types and their prices before its first launch: on a
#: loaded 2-core machine that is most of a world's start-up.
CATALOG_WITHIN = 90.0


@contextlib.asynccontextmanager
async def started_world(
    aws: MotoServer, workdir: Path, *, scale: float, env: Mapping[str, str] | None = None
) -> AsyncIterator[ProvisionWorld]:
    """A provisioning world on a reset ``aws`` with its controller up and its catalog read."""
    aws.reset()
    world = ProvisionWorld(workdir=workdir, timing=Timing(scale=scale), aws=aws)
    try:
        await world.start()
        await world.start_controller(env)
        await catalog_loaded(world)
        yield world
    finally:
        await world.stop()


def controller_log(world: ProvisionWorld) -> str:
    path = world.workdir / "controller.log"
    return path.read_text(errors="replace") if path.is_file() else ""


def log_tail(world: ProvisionWorld, lines: int = 30) -> str:
    """The controller's log tail without botocore's request lines, for a failure message."""
    kept = [line for line in controller_log(world).splitlines() if "botocore" not in line]
    return "\n".join(kept[-lines:])


async def catalog_loaded(world: ProvisionWorld, *, within: float = CATALOG_WITHIN) -> None:
    """Until the controller has read the instance-type catalog (its first launch needs it)."""

    async def loaded() -> bool:
        return "catalog refreshed" in controller_log(world)

    await until(loaded, within=within, interval=0.2)


def condition_true(obj: Obj, kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


async def claims(world: ProvisionWorld, nodepool: str | None = None) -> list[Obj]:
    query = f"?labelSelector=karpenter.sh/nodepool%3D{nodepool}" if nodepool else ""
    return list((await world.get(NODECLAIMS + query))["items"])


def tagged_instances(
    aws: MotoServer, states: tuple[str, ...] = ("pending", "running")
) -> dict[str, list[Obj]]:
    """NodeClaim name -> its instances in ``states``, as DescribeInstances lists them by tag."""
    found = aws.client("ec2").describe_instances(
        Filters=[
            {"Name": "tag-key", "Values": [NODECLAIM_TAG]},
            {"Name": "instance-state-name", "Values": list(states)},
        ]
    )["Reservations"]
    out: dict[str, list[Obj]] = {}
    for r in found:
        for i in r["Instances"]:
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
            out.setdefault(tags[NODECLAIM_TAG], []).append(dict(i))
    return out


async def pods(world: ProvisionWorld, namespace: str) -> list[Obj]:
    return list((await world.get(f"/api/v1/namespaces/{namespace}/pods"))["items"])
