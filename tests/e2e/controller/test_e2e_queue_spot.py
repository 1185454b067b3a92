"""Spot interruption warnings (the smoke test covers the plain case): the NTH taint with
TAINT_NODE, and the DRY_RUN twin that changes nothing but still deletes the message."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_world import controller_world, spot_warning, workload

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


async def test_spot_warning_with_nth_taint(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0]
        await world.start_controller(TAINT_NODE="true")
        world.send(spot_warning(target.instance_id))

        await world.until_handled(target.node_name, within=20)
        taints = {t["key"] for t in world.node(target.node_name)["spec"]["taints"]}
        assert {"kubespot.io/spot-itn", "aws-node-termination-handler/spot-itn"} <= taints
        assert not world.pods_on(target.node_name)


async def test_spot_warning_dry_run_changes_nothing(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0]
        pods_before = {p["metadata"]["name"] for p in world.pods_on(target.node_name)}
        await world.start_controller(DRY_RUN="true")
        world.send(spot_warning(target.instance_id))

        async def done() -> bool:
            return world.queue_depth() == 0 and world.node_events(target.node_name, "DryRun") > 0

        await until(done, within=15)
        node = world.node(target.node_name)
        assert not node["spec"].get("unschedulable") and not node["spec"].get("taints")
        assert world.state(target.node_name) is None
        assert {p["metadata"]["name"] for p in world.pods_on(target.node_name)} == pods_before
