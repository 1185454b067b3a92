"""At-least-once delivery: the same spot interruption warning three times on the queue is acted on
once (one SpotInterruption event, one fence, one drain) and all three messages are deleted."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_world import controller_world, spot_warning, workload

from kubespot.sim.awssim import MotoServer

pytestmark = pytest.mark.slow


async def test_three_copies_of_one_message_act_once(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 3), tmp=tmp_path, instances=2) as world:
        target = world.instances[0]
        await world.start_controller()
        message = spot_warning(target.instance_id, event_id="e2e-dup")
        for _ in range(3):
            world.send(message)

        await world.until_handled(target.node_name, within=20)
        assert not world.pods_on(target.node_name)

        await world.assert_drained_once(target.node_name)
        await world.assert_node_events(target.node_name, "SpotInterruption", 1)
        # Each copy was handled (and deleted), and only the first started anything.
        done_lines = [
            r
            for r in world.log_records()
            if r.get("logger") == "kubespot.handling.queue" and ": done" in r["message"]
        ]
        assert len({r["message_id"] for r in done_lines}) == 3
        assert not world.fenced(world.instances[1].node_name)
