"""Malformed messages (not JSON, an unknown shape) are logged with their message id and left for
the dead-letter queue (KUBESPOT_QUEUE_MALFORMED_ACTION=leave, the default) or deleted (=delete); the
consumer keeps going: a valid message after them is still handled."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_world import ControllerWorld, controller_world, spot_warning, workload

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


async def _send_bad_then_good(world: ControllerWorld) -> list[str]:
    bad = [world.send_message("this is {not json"), world.send_message({"hello": "world", "n": 1})]
    world.send(spot_warning(world.instances[0].instance_id))

    async def drained() -> bool:
        state = world.state(world.instances[0].node_name) or {}
        return state.get("phase") == "drained"

    await until(drained, within=20)
    assert not world.pods_on(world.instances[0].node_name)
    return bad


def _malformed_lines(world: ControllerWorld, message_id: str) -> list[str]:
    return [
        r["message"]
        for r in world.log_records()
        if r.get("level") == "warning"
        and message_id in r["message"]
        and "is not an event kubespot understands" in r["message"]
    ]


async def test_malformed_messages_are_left_by_default(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        await world.start_controller(KUBESPOT_QUEUE_VISIBILITY_TIMEOUT="30")
        bad = await _send_bad_then_good(world)

        async def settled() -> bool:
            return world.queue_counts() == (0, 2)

        await until(settled, within=10)
        for message_id in bad:
            lines = _malformed_lines(world, message_id)
            assert lines and all("left for the dead-letter queue" in line for line in lines), message_id
        assert "not JSON" in _malformed_lines(world, bad[0])[0]
        assert "unknown message shape" in _malformed_lines(world, bad[1])[0]


async def test_malformed_messages_are_deleted_when_configured(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        await world.start_controller(KUBESPOT_QUEUE_MALFORMED_ACTION="delete")
        bad = await _send_bad_then_good(world)

        async def emptied() -> bool:
            return world.queue_depth() == 0

        await until(emptied, within=10)
        for message_id in bad:
            lines = _malformed_lines(world, message_id)
            assert lines and all("deleted" in line for line in lines), message_id
