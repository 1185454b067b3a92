"""Rebalance recommendations from the queue: with ENABLE_REBALANCE_MONITORING the node is fenced
(tainted and cordoned) but not drained; off (the default) the message is deleted and nothing is done;
under DRY_RUN nothing changes and the message is still deleted."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_world import ControllerWorld, controller_world, rebalance_recommendation, workload

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


async def _emptied_queue(world: ControllerWorld) -> None:
    async def empty() -> bool:
        return world.queue_depth() == 0

    await until(empty, within=15)


async def test_rebalance_monitoring_fences_without_draining(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0].node_name
        pods_before = {p["metadata"]["name"] for p in world.pods_on(target)}
        assert pods_before
        await world.start_controller(ENABLE_REBALANCE_MONITORING="true")
        world.send(rebalance_recommendation(world.instances[0].instance_id))

        async def fenced() -> bool:
            return world.fenced(target)

        await until(fenced, within=15)
        await _emptied_queue(world)
        state = world.state(target)
        assert state is not None and state["kind"] == "rebalance-recommendation"
        assert state["phase"] == "fenced"
        taints = {t["key"] for t in world.node(target)["spec"]["taints"]}
        assert "kubespot.io/rebalance-recommendation" in taints
        # Not drained: the same pods are still there, and no drain was started.
        assert {p["metadata"]["name"] for p in world.pods_on(target)} == pods_before
        assert world.node_events(target, "DrainStarted") == 0
        await world.assert_node_events(target, "RebalanceRecommendation", 1)
        assert not world.fenced(world.instances[1].node_name)


async def test_rebalance_is_ignored_by_default(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0].node_name
        pods_before = {p["metadata"]["name"] for p in world.pods_on(target)}
        await world.start_controller()
        world.send(rebalance_recommendation(world.instances[0].instance_id))
        await _emptied_queue(world)
        assert "switched off" in world.log_text()
        assert not world.fenced(target)
        assert world.state(target) is None
        assert {p["metadata"]["name"] for p in world.pods_on(target)} == pods_before


async def test_rebalance_dry_run_changes_nothing(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0].node_name
        pods_before = {p["metadata"]["name"] for p in world.pods_on(target)}
        await world.start_controller(ENABLE_REBALANCE_MONITORING="true", DRY_RUN="true")
        world.send(rebalance_recommendation(world.instances[0].instance_id))
        await _emptied_queue(world)

        async def said_so() -> bool:
            return world.node_events(target, "DryRun") > 0

        await until(said_so, within=5)
        node = world.node(target)
        assert not node["spec"].get("unschedulable")
        assert not node["spec"].get("taints")
        assert world.state(target) is None
        assert {p["metadata"]["name"] for p in world.pods_on(target)} == pods_before
