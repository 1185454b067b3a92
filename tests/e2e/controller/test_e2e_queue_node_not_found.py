"""Messages about instances that are not nodes of this cluster: with
DELETE_SQS_MSG_IF_NODE_NOT_FOUND=true deleted on the first receive; without it left for their owner
until KUBESPOT_QUEUE_FOREIGN_MAX_RECEIVES receives, then deleted. No node is touched either way."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from controller_world import controller_world, spot_warning

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

UNKNOWN = "i-0123456789abcdef0"
VISIBILITY = 20


async def test_node_not_found_deleted_at_once(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, tmp=tmp_path, instances=1) as world:
        await world.start_controller(
            DELETE_SQS_MSG_IF_NODE_NOT_FOUND="true", KUBESPOT_QUEUE_VISIBILITY_TIMEOUT=str(VISIBILITY)
        )
        sent = time.monotonic()
        world.send(spot_warning(UNKNOWN))

        async def deleted() -> bool:
            return world.queue_depth() == 0

        await until(deleted, within=VISIBILITY)
        # Gone before its visibility could lapse: on the first receive. (A long visibility: the first
        # receive takes seconds on a busy machine, a second one could not come before it lapses.)
        assert time.monotonic() - sent < VISIBILITY
        assert "is not a node of this cluster: message deleted (received 1 times)" in world.log_text()
        assert not world.fenced(world.instances[0].node_name)


async def test_node_not_found_left_until_max_receives(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, tmp=tmp_path, instances=1) as world:
        await world.start_controller(
            DELETE_SQS_MSG_IF_NODE_NOT_FOUND="false",
            KUBESPOT_QUEUE_FOREIGN_MAX_RECEIVES="3",
            KUBESPOT_QUEUE_VISIBILITY_TIMEOUT="3",
        )
        world.send(spot_warning(UNKNOWN))

        async def left_once() -> bool:
            return "left for its owner (received 1 times)" in world.log_text()

        await until(left_once, within=10)
        assert world.queue_depth() == 1

        async def deleted() -> bool:
            return world.queue_depth() == 0

        await until(deleted, within=20)
        log = world.log_text()
        assert "left for its owner (received 2 times)" in log
        assert "message deleted (received 3 times)" in log
        assert not world.fenced(world.instances[0].node_name)
