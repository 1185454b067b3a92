"""AWS Health messages out of order: a "closed" message handled before a stale "upcoming" one for the
same event (SQS keeps no order; a redelivery or a slow receive brings the old one back later) must
not re-arm the cancelled change, on any replica and after a restart.

Health sends a scheduled change's updates as separate events with the same ``eventArn`` and a new
``statusCode`` (upcoming → closed); EventBridge's ``time`` says when each was sent. The "closed" one
leaves a tombstone on the Node (``kubespot.io/scheduled-closed``); an "upcoming" sent before it is
outdated and deleted without effect.
"""

from __future__ import annotations

import asyncio
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from controller_world import controller_world, health_scheduled_change, workload

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

LEAD = 3
CLOSED_ANNOTATION = "kubespot.io/scheduled-closed"
SCHEDULED_ANNOTATION = "kubespot.io/scheduled"


def _sent(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_stale_upcoming_after_closed_does_not_rearm_the_change(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0]
        began = datetime.now(tz=UTC)
        first = await world.start_controller(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=str(LEAD))
        now = datetime.now(tz=UTC)
        # The act time must fall after the restart and the stale message's handling: a machine
        # that took long to start one controller takes as long to start the next one.
        one_start = (now - began).total_seconds()
        start = (now + timedelta(seconds=LEAD + max(14.0, 3 * one_start + 8))).replace(microsecond=0)
        act_at = start - timedelta(seconds=LEAD)
        upcoming = health_scheduled_change([target.instance_id], start)
        upcoming["time"] = _sent(now - timedelta(minutes=2))
        closed = health_scheduled_change([target.instance_id], start, status="closed")
        closed["time"] = _sent(now - timedelta(minutes=1))

        world.send(closed)

        def annotations() -> dict[str, str]:
            return dict(world.node(target.node_name)["metadata"].get("annotations") or {})

        async def taken() -> bool:
            return world.queue_depth() == 0

        await until(taken, within=10)
        # A restart: what stops the stale message must be on the Node, not in a replica's memory.
        first.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(first.wait(), 15) == 0
        await world.start_controller(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=str(LEAD))

        world.send(upcoming)

        async def dropped() -> bool:
            return world.queue_depth() == 0 or world.fenced(target.node_name)

        await until(dropped, within=25)
        assert not world.fenced(target.node_name), "fenced for a change closed before"
        assert datetime.now(tz=UTC) < act_at, "too slow to tell an ignored message from a late one"
        while datetime.now(tz=UTC) < act_at + timedelta(seconds=2):
            assert not world.fenced(target.node_name), "fenced for a change closed before"
            assert world.state(target.node_name) is None
            assert SCHEDULED_ANNOTATION not in annotations()
            await asyncio.sleep(0.2)
        assert world.node_events(target.node_name, "CordonAndDrain") == 0
        [event_id] = orjson.loads(annotations()[CLOSED_ANNOTATION])
        assert "outdated message" in world.log_text() and event_id in world.log_text()


async def test_upcoming_sent_after_the_closed_one_is_acted_on(aws: MotoServer, tmp_path: Path) -> None:
    """Only an older message loses: a later "upcoming" (Health scheduling the change anew under the
    same ARN) is fenced for as usual."""
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0]
        await world.start_controller(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=str(LEAD))
        now = datetime.now(tz=UTC)
        start = (now + timedelta(seconds=LEAD + 6)).replace(microsecond=0)
        closed = health_scheduled_change([target.instance_id], start, status="closed")
        closed["time"] = _sent(now - timedelta(minutes=1))
        world.send(closed)

        async def taken() -> bool:
            return world.queue_depth() == 0

        await until(taken, within=10)
        assert CLOSED_ANNOTATION in (world.node(target.node_name)["metadata"].get("annotations") or {})
        world.send(health_scheduled_change([target.instance_id], start))  # sent now: after the closing

        async def fenced() -> bool:
            return world.fenced(target.node_name)

        await until(fenced, within=15)
