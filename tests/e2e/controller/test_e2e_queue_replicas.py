"""Two controller replicas on one queue, each receiving a copy of the same notice while the other is
still working on it: the node is fenced once and drained once."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_world import controller_world, spot_warning, workload

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


async def test_two_replicas_act_once_per_node(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 3, shutdown=2.0), tmp=tmp_path, instances=3) as world:
        target = world.instances[0]
        # One message in flight per replica: while the first holds copy 1 (a 2 s drain), copy 2 can
        # only go to the other replica.
        await world.start_controller(KUBESPOT_QUEUE_MAX_IN_FLIGHT="1")
        await world.start_controller(KUBESPOT_QUEUE_MAX_IN_FLIGHT="1")
        message = spot_warning(target.instance_id, event_id="e2e-replicas")
        world.send(message)

        async def taken() -> bool:
            return world.queue_counts() == (0, 1) and world.fenced(target.node_name)

        await until(taken, within=10)
        world.send(message)

        await world.until_handled(target.node_name, within=20)
        assert not world.pods_on(target.node_name)
        handled_by = [
            index
            for index in range(2)
            if any(
                r.get("logger") == "kubespot.handling.queue" and ": done" in r["message"]
                for r in world.log_records(index)
            )
        ]
        assert handled_by == [0, 1], "each replica handled one copy"

        await world.assert_drained_once(target.node_name)
        for other in world.instances[1:]:
            assert not world.fenced(other.node_name)
