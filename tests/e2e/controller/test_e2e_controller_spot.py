"""The controller end to end: a spot interruption warning on the queue fences and drains its node,
and the message is deleted only then; a message for another cluster's instance is left alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_world import controller_world, spot_warning

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import deployment, until

pytestmark = pytest.mark.slow


async def test_spot_warning_fences_drains_and_deletes_the_message(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, deployment("web", 3, namespace="default"), tmp=tmp_path) as world:
        target = world.instances[0]
        assert world.pods_on(target.node_name), "the workload starts on the interrupted node"
        await world.start_controller()
        world.send(spot_warning(target.instance_id))

        async def emptied() -> bool:
            return world.fenced(target.node_name) and not world.pods_on(target.node_name)

        await until(emptied, within=30)

        # Recorded just after the drain saw the last pod go.
        state = await world.until_phase(target.node_name, "drained", within=10)
        assert state["kind"] == "spot-itn"

        async def deleted() -> bool:
            return world.queue_depth() == 0

        await until(deleted, within=15)
        for other in world.instances[1:]:
            assert not world.fenced(other.node_name)


async def test_a_message_about_a_foreign_instance_is_left_then_dropped(
    aws: MotoServer, tmp_path: Path
) -> None:
    async with controller_world(aws, tmp=tmp_path, instances=1) as world:
        await world.start_controller(
            KUBESPOT_QUEUE_FOREIGN_MAX_RECEIVES="2", KUBESPOT_QUEUE_VISIBILITY_TIMEOUT="3"
        )
        world.send(spot_warning("i-0123456789abcdef0"))

        async def dropped() -> bool:
            return world.queue_depth() == 0

        await until(dropped, within=30)
        assert "is not a node of this cluster" in world.log_text()
        assert not world.fenced(world.instances[0].node_name)
