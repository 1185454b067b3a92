"""Leader election between real controller replicas on kubesim: exactly one holds the Lease and runs
the singleton duties (``kubespot_leader`` 1 there, 0 on the other; only the leader exports
``kubespot_managed_instances``); a SIGKILLed leader is replaced once its lease expires, and a
SIGTERMed one hands the lease over at once by releasing it."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
from controller_world import ControllerWorld, controller_world, http_get, metric_value

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until
from support.kubespot_process import free_port

pytestmark = pytest.mark.slow

LEASE = "e2e-kubespot"
NAMESPACE = "kube-system"


def lease(world: ControllerWorld) -> dict[str, Any] | None:
    rt = world.kubesim.store.registry.lookup("coordination.k8s.io", "v1", "leases")
    assert rt is not None
    found = world.kubesim.store.find(rt, NAMESPACE, LEASE)
    return None if found is None else dict(found["spec"])


def holder(world: ControllerWorld) -> str:
    spec = lease(world) or {}
    return str(spec.get("holderIdentity") or "")


async def start_replicas(
    world: ControllerWorld, *, duration: str, renew: str, retry: str
) -> tuple[list[int], list[asyncio.subprocess.Process]]:
    ports, procs = [], []
    for index in range(2):
        port = free_port()
        procs.append(
            await world.start_controller(
                KUBESPOT_POD_NAME=f"replica-{index}",
                KUBESPOT_LEADER_ELECTION_LEASE_NAME=LEASE,
                KUBESPOT_LEADER_ELECTION_LEASE_DURATION=duration,
                KUBESPOT_LEADER_ELECTION_RENEW_DEADLINE=renew,
                KUBESPOT_LEADER_ELECTION_RETRY_PERIOD=retry,
                KUBESPOT_OBSERVABILITY_ENABLE_PROMETHEUS_SERVER="true",
                KUBESPOT_OBSERVABILITY_PROMETHEUS_SERVER_PORT=str(port),
            )
        )
        ports.append(port)
    return ports, procs


async def scrape(port: int) -> str:
    return await http_get(f"http://127.0.0.1:{port}/metrics")


async def leader_index(world: ControllerWorld, ports: list[int]) -> int:
    """The replica holding the lease, once its metrics say it leads (the other's say it does not)."""

    async def elected() -> int:
        name = holder(world)
        if not name.startswith("replica-"):
            return 0
        index = int(name.split("_")[0].removeprefix("replica-"))
        leads = metric_value(await scrape(ports[index]), "kubespot_leader", lease=LEASE)
        return index + 1 if leads == 1 else 0  # +1: replica 0 must count as found

    return await until(elected, within=20) - 1


async def test_one_leader_and_a_killed_leader_is_replaced(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, tmp=tmp_path, instances=3) as world:
        ports, procs = await start_replicas(world, duration="3", renew="2", retry="0.5")
        first = await leader_index(world, ports)
        other = 1 - first
        follower_metrics = await scrape(ports[other])
        assert metric_value(follower_metrics, "kubespot_leader", lease=LEASE) == 0
        assert f'kubespot_leader{{lease="{LEASE}"}} 0.0' in follower_metrics
        spec = lease(world)
        assert spec is not None
        assert spec["leaseDurationSeconds"] == 3
        assert spec["holderIdentity"].startswith(f"replica-{first}_")
        assert spec["renewTime"] and spec["acquireTime"]

        # The leader's duty counts the three managed (tagged) instances; the standby exports none.
        async def counted() -> float:
            return metric_value(await scrape(ports[first]), "kubespot_managed_instances")

        assert await until(counted, within=10) == 3
        # The nodes carry no capacity-type label: the instances' lifecycle (spot) names it.
        assert (
            metric_value(await scrape(ports[first]), "kubespot_managed_instances", capacity_type="spot") == 3
        )
        assert "kubespot_managed_instances{" not in follower_metrics
        transitions = int(spec.get("leaseTransitions") or 0)

        procs[first].send_signal(signal.SIGKILL)
        await procs[first].wait()

        async def taken_over() -> bool:
            return holder(world).startswith(f"replica-{other}_")

        await until(taken_over, within=20)
        after = lease(world) or {}
        assert int(after.get("leaseTransitions") or 0) == transitions + 1
        survivor = await scrape(ports[other])
        assert metric_value(survivor, "kubespot_leader", lease=LEASE) == 1

        async def survivor_counts() -> float:
            return metric_value(await scrape(ports[other]), "kubespot_managed_instances")

        assert await until(survivor_counts, within=10) == 3
        records = world.log_records(other)
        assert any("became leader" in r["message"] for r in records)
        assert any("is held by replica-" in r["message"] for r in records)


async def test_sigterm_releases_the_lease_for_the_standby(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, tmp=tmp_path, instances=2) as world:
        # A lease so long that only a release can explain a takeover within the test's patience.
        ports, procs = await start_replicas(world, duration="120", renew="60", retry="0.5")
        first = await leader_index(world, ports)
        other = 1 - first
        procs[first].send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(procs[first].wait(), 30) == 0
        assert any("released lease" in r["message"] for r in world.log_records(first))

        async def taken_over() -> bool:
            return holder(world).startswith(f"replica-{other}_")

        await until(taken_over, within=20)
        assert metric_value(await scrape(ports[other]), "kubespot_leader", lease=LEASE) == 1
