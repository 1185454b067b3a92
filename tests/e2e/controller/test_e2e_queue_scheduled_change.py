"""AWS Health scheduled changes from the queue: the node is fenced and drained at
``startTime - scheduled_lead_time``, not before; DRY_RUN changes nothing but the message goes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from controller_world import controller_world, health_scheduled_change, workload

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

LEAD = 3


async def test_scheduled_change_is_fenced_at_start_minus_lead_time(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0]
        await world.start_controller(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=str(LEAD))
        # Whole seconds, as Health writes them.
        start = (datetime.now(tz=UTC) + timedelta(seconds=LEAD + 4)).replace(microsecond=0)
        act_at = start - timedelta(seconds=LEAD)
        world.send(health_scheduled_change([target.instance_id], start))

        # Seen at once (the notice is recorded), but nothing is done before act_at.
        async def noticed() -> bool:
            return world.node_events(target.node_name, "ScheduledEvent") > 0

        await until(noticed, within=5)
        while datetime.now(tz=UTC) < act_at - timedelta(seconds=0.3):
            assert not world.fenced(target.node_name), "fenced before startTime - lead time"
            assert world.state(target.node_name) is None
            await asyncio.sleep(0.1)

        async def fenced() -> bool:
            return world.fenced(target.node_name)

        await until(fenced, within=5)
        fenced_at = datetime.now(tz=UTC)
        assert fenced_at >= act_at - timedelta(seconds=0.3)
        assert fenced_at < start, "fenced only after the maintenance started"

        async def drained() -> bool:
            state = world.state(target.node_name) or {}
            return state.get("phase") == "drained" and not world.pods_on(target.node_name)

        await until(drained, within=10)
        state = world.state(target.node_name)
        assert state is not None and state["kind"] == "scheduled-maintenance"

        async def deleted() -> bool:
            return world.queue_depth() == 0

        await until(deleted, within=10)


async def test_scheduled_change_dry_run_changes_nothing(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0]
        pods_before = {p["metadata"]["name"] for p in world.pods_on(target.node_name)}
        await world.start_controller(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=str(LEAD), DRY_RUN="true")
        start = (datetime.now(tz=UTC) + timedelta(seconds=LEAD + 2)).replace(microsecond=0)
        world.send(health_scheduled_change([target.instance_id], start))

        async def done() -> bool:
            return world.queue_depth() == 0 and world.node_events(target.node_name, "DryRun") > 0

        await until(done, within=15)
        assert not world.fenced(target.node_name) and world.state(target.node_name) is None
        assert {p["metadata"]["name"] for p in world.pods_on(target.node_name)} == pods_before
