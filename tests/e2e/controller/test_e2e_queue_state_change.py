"""EC2 instance state changes from the queue: ``stopping`` and ``terminated`` fence and drain the
node; ``running`` is not an interruption (deleted, nothing done); DRY_RUN changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_world import controller_world, state_change, workload

from kubespot.process.collector import BURST_THRESHOLDS
from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


async def test_stopping_and_terminated_drain_running_is_ignored(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 3), tmp=tmp_path, instances=4) as world:
        stopping, terminated, running, spare = world.instances
        assert world.pods_on(stopping.node_name)
        await world.start_controller()
        world.send(state_change(stopping.instance_id, "stopping", event_id="e2e-stopping"))
        world.send(state_change(terminated.instance_id, "terminated", event_id="e2e-terminated"))
        world.send(state_change(running.instance_id, "running", event_id="e2e-running"))

        async def handled() -> bool:
            return (
                world.queue_depth() == 0
                and all(
                    (world.state(n) or {}).get("phase") == "drained"
                    for n in (stopping.node_name, terminated.node_name)
                )
                and not world.pods_on(stopping.node_name)
            )

        await until(handled, within=20)
        for gone in (stopping, terminated):
            state = world.state(gone.node_name)
            assert state is not None and state["kind"] == "state-change"
            assert world.fenced(gone.node_name)
        assert not world.fenced(running.node_name) and world.state(running.node_name) is None
        assert not world.fenced(spare.node_name)
        assert "'running': not an interruption" in world.log_text()
        # Once its index synced, the controller set the collector for bursts (process.collector).
        assert f"collector thresholds {BURST_THRESHOLDS}" in world.log_text()


async def test_state_change_dry_run_changes_nothing(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0].node_name
        pods_before = {p["metadata"]["name"] for p in world.pods_on(target)}
        await world.start_controller(DRY_RUN="true")
        world.send(state_change(world.instances[0].instance_id, "stopping"))

        async def done() -> bool:
            return world.queue_depth() == 0 and world.node_events(target, "DryRun") > 0

        await until(done, within=15)
        assert not world.fenced(target) and world.state(target) is None
        assert not world.node(target)["spec"].get("unschedulable")
        assert {p["metadata"]["name"] for p in world.pods_on(target)} == pods_before
