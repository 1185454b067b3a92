"""A drain longer than the visibility timeout: with KUBESPOT_QUEUE_VISIBILITY_TIMEOUT=3 and pods
taking ~8 s to shut down, the message's visibility is renewed while the drain runs, so it is never
seen again (one receive, one handling) and it is deleted once the node is drained."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from controller_world import controller_world, spot_warning, workload

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


async def test_visibility_is_renewed_through_a_long_drain(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("slow", 2, shutdown=8.0), tmp=tmp_path, instances=2) as world:
        target = world.instances[0]
        await world.start_controller(KUBESPOT_QUEUE_VISIBILITY_TIMEOUT="3")
        message_id = world.send_message(spot_warning(target.instance_id))

        async def taken() -> bool:
            return world.queue_counts() == (0, 1)

        await until(taken, within=10)
        # While the drain runs (well past several visibility timeouts) the message stays hidden.
        # Wall time, not a count of samples: on a busy machine each sample takes longer than its sleep.
        started = time.monotonic()
        while (world.state(target.node_name) or {}).get("phase") != "drained":
            visible, in_flight = world.queue_counts()
            assert visible == 0, "the message became visible again during the drain"
            assert in_flight == 1
            assert time.monotonic() - started < 30, "the drain did not finish within 30 s"
            await asyncio.sleep(0.05)
        assert time.monotonic() - started > 6, "the drain was not longer than two visibility timeouts"

        async def deleted() -> bool:
            return world.queue_depth() == 0

        await until(deleted, within=10)
        assert not world.pods_on(target.node_name)
        records = [r for r in world.log_records() if r.get("message_id") == message_id]
        handled = [
            r for r in records if r.get("logger") == "kubespot.handling.queue" and ": done" in r["message"]
        ]
        noticed = [
            r for r in records if r.get("logger") == "kubespot.handling" and "(acting at" in r["message"]
        ]
        assert len(handled) == 1 and len(noticed) == 1
        assert not any("already known" in r["message"] for r in records), "the message was received twice"
        await world.assert_node_events(target.node_name, "DrainStarted", 1)
