"""Node clean-up by the real controller on kubesim and moto: a Node NotReady for longer than
``not_ready_for`` whose instance is terminated is deleted (with an event); a NotReady node whose
instance runs, a Ready node whose instance was just terminated and an ordinary node are kept; the
dry-run twin deletes nothing and says what it would have done."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from controller_world import ControllerWorld, controller_world, http_get, metric_value

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.controllers.kubelet import kubelet_of, set_condition
from kubespot.sim.kubesim.store import rfc3339
from kubespot.sim.kubesim.testing import until
from support.kubespot_process import free_port

pytestmark = pytest.mark.slow

INTERVAL = 0.5


def mark_not_ready(world: ControllerWorld, name: str, *, for_seconds: float) -> None:
    """The node's kubelet stops (as when its instance goes) and its Ready condition has been False
    for ``for_seconds``, as the node lifecycle controller would have left it."""
    kubelet_of(world.kubesim.controllers).stop_node(name)
    since = rfc3339((datetime.now(tz=UTC) - timedelta(seconds=for_seconds)).timestamp())

    def not_ready(obj: dict[str, Any]) -> None:
        conds = obj.setdefault("status", {}).setdefault("conditions", [])
        set_condition(conds, "Ready", "False", since, "KubeletNotReady", "e2e: kubelet stopped")

    rt = world.kubesim.store.registry.lookup("", "v1", "nodes")
    assert rt is not None
    world.kubesim.store.mutate(rt, None, name, not_ready, status_only=True)


def exists(world: ControllerWorld, name: str) -> bool:
    rt = world.kubesim.store.registry.lookup("", "v1", "nodes")
    assert rt is not None
    return world.kubesim.store.find(rt, None, name) is not None


@pytest.mark.parametrize("dry_run", [False, True], ids=["delete", "dry-run"])
async def test_notready_nodes_of_terminated_instances_are_deleted(
    aws: MotoServer, tmp_path: Path, dry_run: bool
) -> None:
    async with controller_world(aws, tmp=tmp_path, instances=4) as world:
        gone, stuck, lagging, healthy = world.instances
        ec2 = aws.client("ec2")
        ec2.terminate_instances(InstanceIds=[gone.instance_id, lagging.instance_id])
        mark_not_ready(world, gone.node_name, for_seconds=30)
        mark_not_ready(world, stuck.node_name, for_seconds=30)  # NotReady, but its instance runs
        # lagging: instance terminated, Node still Ready (its kubelet has not missed a beat yet).
        port = free_port()
        await world.start_controller(
            KUBESPOT_NODE_CLEANUP_ENABLED="true",
            KUBESPOT_NODE_CLEANUP_INTERVAL=str(INTERVAL),
            KUBESPOT_NODE_CLEANUP_NOT_READY_FOR="10",
            KUBESPOT_NODE_ACTIONS_DRY_RUN=str(dry_run).lower(),
            KUBESPOT_OBSERVABILITY_ENABLE_PROMETHEUS_SERVER="true",
            KUBESPOT_OBSERVABILITY_PROMETHEUS_SERVER_PORT=str(port),
        )
        reason = "DryRun" if dry_run else "NodeDeleted"

        async def acted() -> bool:
            return world.node_events(gone.node_name, reason) > 0

        await until(acted, within=20)
        # A few more sweeps, so a wrong deletion of the others would have happened by now.
        await asyncio.sleep(4 * INTERVAL)
        assert exists(world, gone.node_name) is dry_run
        for kept in (stuck, lagging, healthy):
            assert exists(world, kept.node_name), kept.node_name
            assert world.node_events(kept.node_name, reason) == 0
        metrics = await http_get(f"http://127.0.0.1:{port}/metrics")
        result = "dry_run" if dry_run else "deleted"
        assert metric_value(metrics, "kubespot_node_cleanups_total", result=result) == 1
        assert (
            metric_value(metrics, "kubespot_node_cleanups_total", result="deleted" if dry_run else "dry_run")
            == 0
        )
        said = [r["message"] for r in world.log_records() if gone.node_name in r["message"]]
        if dry_run:
            assert any(m.startswith(f"dry run: would delete node {gone.node_name}") for m in said)
        else:
            assert any(m.startswith(f"deleted node {gone.node_name}") and "terminated" in m for m in said)
