"""Load-balancer deregistration by the real controller (docs/designs/response-actions.md): a spot
notice on the queue gets the node's instance target and its pods' IP targets draining and recorded
in ``kubespot.io/actions``; a controller without a queue does the same for a node an agent fenced
(the state annotation written as the agent writes it); its dry-run twin deregisters nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from controller_world import ControllerWorld, spot_warning, workload
from response_world import (
    STATE,
    Phase,
    agent_state,
    pod_ips,
    record,
    register,
    response_world,
    target_group,
    target_states,
)

from kubespot.config.kube import KubeSettings
from kubespot.kube import connect
from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

LB = {"KUBESPOT_LOADBALANCER_ENABLED": "true", "KUBESPOT_LOADBALANCER_SETTLE": "1"}


async def fence_as_the_agent(world: ControllerWorld, node_name: str, instance_id: str) -> datetime:
    """Write the state annotation the agent writes when it fences a node for a spot notice."""
    kube = connect(KubeSettings(kubeconfig=str(world.kubesim.kubeconfig_path)))
    try:
        fenced_at = datetime.now(tz=UTC)
        text = agent_state(
            "spot-itn-e2e-agent",
            instance_id,
            Phase.DRAINING,
            since=fenced_at,
            deadline=fenced_at + timedelta(minutes=2),
        )
        await kube.set_annotations(node_name, {STATE: text})
    finally:
        await kube.close()
    return fenced_at


def _draining(rec: dict[str, Any] | None) -> bool:
    return bool(rec) and (rec or {}).get("loadbalancer", {}).get("state") == "draining"


async def test_spot_notice_deregisters_the_node_and_its_pods(aws: MotoServer, tmp_path: Path) -> None:
    # Pods take 3 s to stop, so they are still there (terminating) when the runner lists them.
    async with response_world(aws, workload("web", 2, shutdown=3.0), tmp=tmp_path) as (world, net):
        target, other = world.instances
        ips = pod_ips(world, target.node_name)
        assert len(ips) == 2
        pods_tg = target_group(aws, net.vpc, "e2e-pods", target_type="ip")
        nodes_tg = target_group(aws, net.vpc, "e2e-nodes", target_type="instance")
        register(aws, pods_tg, *ips.values(), "10.99.0.1")  # and a pod of another cluster
        register(aws, nodes_tg, target.instance_id, other.instance_id)
        await world.start_controller(**LB)
        world.send(spot_warning(target.instance_id))

        async def deregistered() -> dict[str, Any]:
            rec = record(world, target.node_name)
            return rec if rec is not None and _draining(rec) else {}

        rec = await until(deregistered, within=20)
        state = world.state(target.node_name) or {}
        assert rec["event"] == state["event_id"] and rec["kind"] == "spot-itn"
        lb = rec["loadbalancer"]
        assert {(t["tg"], t["id"]) for t in lb["targets"]} == {
            *((pods_tg, ip) for ip in ips.values()),
            (nodes_tg, target.instance_id),
        }
        assert sorted(lb["pods"]) == sorted(ips)  # exactly the pods whose IP was a target
        assert lb["node"] is True and lb["settle"] == 1.0 and "error" not in lb
        # At AWS: the node's targets drain, nobody else's.
        assert target_states(aws, pods_tg) == {
            **dict.fromkeys(ips.values(), "draining"),
            "10.99.0.1": "healthy",
        }
        assert target_states(aws, nodes_tg) == {target.instance_id: "draining", other.instance_id: "healthy"}
        await world.assert_node_events(target.node_name, "LoadBalancerDeregistered", 1)

        async def drained() -> bool:
            return (world.state(target.node_name) or {}).get(
                "phase"
            ) == "drained" and world.queue_depth() == 0

        await until(drained, within=30)
        assert not world.pods_on(target.node_name)


async def test_without_a_queue_an_agent_fenced_node_is_deregistered(aws: MotoServer, tmp_path: Path) -> None:
    async with response_world(aws, workload("web", 1), tmp=tmp_path) as (world, net):
        target = world.instances[0]
        ips = pod_ips(world, target.node_name)
        pods_tg = target_group(aws, net.vpc, "e2e-pods", target_type="ip")
        register(aws, pods_tg, *ips.values())
        await world.start_controller(KUBESPOT_QUEUE_URL="", **LB)
        assert "running without a queue" in world.log_text()

        # The agent on the node fences it for a spot notice: its state annotation is all the
        # controller gets (no queue message).
        fenced_at = await fence_as_the_agent(world, target.node_name, target.instance_id)

        async def deregistered() -> dict[str, Any]:
            rec = record(world, target.node_name)
            return rec if rec is not None and _draining(rec) else {}

        rec = await until(deregistered, within=20)
        assert rec["event"] == "spot-itn-e2e-agent" and rec["source"] == "imds"
        assert sorted(rec["loadbalancer"]["pods"]) == sorted(ips) and "node" not in rec["loadbalancer"]
        assert set(target_states(aws, pods_tg).values()) == {"draining"}
        # Deregistered within a few seconds of the fence (the design aims at about one).
        started = datetime.fromisoformat(rec["loadbalancer"]["at"])
        assert started - fenced_at < timedelta(seconds=5)
        assert world.queue_depth() == 0  # the queue was never read


async def test_dry_run_deregisters_nothing(aws: MotoServer, tmp_path: Path) -> None:
    """The twin of the agent-fenced case with the controller in dry run (agents acting for real,
    the controller's AWS actions only said): nothing deregistered, nothing recorded."""
    async with response_world(aws, workload("web", 1), tmp=tmp_path) as (world, net):
        target = world.instances[0]
        ips = pod_ips(world, target.node_name)
        pods_tg = target_group(aws, net.vpc, "e2e-pods", target_type="ip")
        register(aws, pods_tg, *ips.values())
        await world.start_controller(KUBESPOT_QUEUE_URL="", DRY_RUN="true", **LB)
        await fence_as_the_agent(world, target.node_name, target.instance_id)

        def said() -> list[str]:
            return [
                r["message"]
                for r in world.log_records()
                if r.get("logger") == "kubespot.controller.actions"
                and "would deregister" in r.get("message", "")
            ]

        async def reported() -> bool:
            return bool(said()) and world.node_events(target.node_name, "DryRun") > 0

        await until(reported, within=20)
        assert "would deregister 1 load balancer targets" in said()[0]
        assert set(target_states(aws, pods_tg).values()) == {"healthy"}
        assert record(world, target.node_name) is None
