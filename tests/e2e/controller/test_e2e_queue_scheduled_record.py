"""AWS Health scheduled changes due days ahead: recorded on the Node (``kubespot.io/scheduled``) and the
message deleted, since the queue keeps messages for minutes; a restarted controller, and every
replica, re-arms from the Node; a "closed" message removes the entry and withdraws the event
everywhere; dry run writes nothing and leaves the message on the queue as before.

A replica re-arming applies its own ``scheduled_lead_time`` to the recorded start time, which is how
these tests bring a change recorded 15 minutes ahead within seconds of being due."""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from controller_world import ControllerWorld, controller_world, health_scheduled_change, workload

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

SCHEDULED_ANNOTATION = "kubespot.io/scheduled"
LEAD = 3
AHEAD = timedelta(minutes=15)
#: Seconds from a re-arming replica's start to the moment it acts: room for starting controllers on a
#: machine busy with other tests (each start waits on its log, not on the clock).
ACT_IN = 20


def recorded(world: ControllerWorld, name: str) -> list[dict[str, Any]]:
    raw = (world.node(name)["metadata"].get("annotations") or {}).get(SCHEDULED_ANNOTATION)
    return [] if raw is None else list(orjson.loads(raw))


async def stop(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 15) == 0


def lead_for(start: datetime, act_in: float) -> float:
    """The lead time that makes a replica starting now act ``act_in`` seconds from now."""
    return (start - datetime.now(tz=UTC)).total_seconds() - act_in


def logged(world: ControllerWorld, index: int, text: str, event_id: str) -> bool:
    return any(text in r["message"] and event_id in r["message"] for r in world.log_records(index))


async def record_far_change(world: ControllerWorld, instance_id: str, node: str) -> tuple[datetime, str]:
    """Send a change due in ``AHEAD`` and wait until it is on the node and off the queue."""
    start = (datetime.now(tz=UTC) + AHEAD).replace(microsecond=0)  # whole seconds, as Health writes
    world.send(health_scheduled_change([instance_id], start))

    async def kept_on_node() -> bool:
        return bool(recorded(world, node)) and world.queue_depth() == 0

    await until(kept_on_node, within=10)
    [entry] = recorded(world, node)
    return start, str(entry["id"])


async def test_far_change_is_recorded_on_the_node_and_rearmed_after_a_restart(
    aws: MotoServer, tmp_path: Path
) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0]
        first = await world.start_controller(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=str(LEAD))
        start, event_id = await record_far_change(world, target.instance_id, target.node_name)

        [entry] = recorded(world, target.node_name)
        assert entry["kind"] == "scheduled-maintenance" and entry["instance"] == target.instance_id
        assert datetime.fromisoformat(entry["deadline"]) == start
        assert datetime.fromisoformat(entry["act_at"]) == start - timedelta(seconds=LEAD)
        assert "RETIREMENT" in entry["summary"]
        assert logged(world, 0, "recorded on node", event_id)
        assert not world.fenced(target.node_name) and world.state(target.node_name) is None

        # The message is gone: only the Node can tell the next process about the change.
        await stop(first)
        lead = lead_for(start, act_in=8)
        await world.start_controller(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=f"{lead:.3f}")
        act_at = start - timedelta(seconds=lead)
        while datetime.now(tz=UTC) < act_at - timedelta(seconds=0.3):
            assert not world.fenced(target.node_name), "fenced before startTime - lead time"
            await asyncio.sleep(0.1)

        async def drained() -> bool:
            state = world.state(target.node_name) or {}
            return state.get("phase") == "drained" and not world.pods_on(target.node_name)

        await until(drained, within=15)
        assert logged(world, 1, "re-armed from node", event_id)
        state = world.state(target.node_name)
        assert state is not None and state["event_id"] == event_id

        async def settled() -> bool:
            return recorded(world, target.node_name) == []

        await until(settled, within=5)
        assert world.queue_depth() == 0


async def test_replicas_rearm_from_the_node_and_act_once(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 3), tmp=tmp_path, instances=3) as world:
        target = world.instances[0]
        began = time.monotonic()
        first = await world.start_controller(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=str(LEAD))
        one_start = time.monotonic() - began
        start, event_id = await record_far_change(world, target.instance_id, target.node_name)
        await stop(first)

        # Both wake at the same act_at: the state's compare-and-set lets one fence, the other follows.
        # Both must be up and armed before act_at (a replica starting after the first one acted and
        # removed the record has nothing to re-arm): on a machine slower still than ACT_IN allows
        # for, act_at is set from how long the first start took, and the waits run until it.
        lead = lead_for(start, act_in=max(ACT_IN, 3 * one_start + 3))
        act_at = start - timedelta(seconds=round(lead, 3))
        await world.start_controller(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=f"{lead:.3f}")
        await world.start_controller(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=f"{lead:.3f}")

        async def both_armed() -> bool:
            return all(logged(world, index, "re-armed from node", event_id) for index in (1, 2))

        await until(both_armed, within=max((act_at - datetime.now(tz=UTC)).total_seconds(), 1.0))
        assert datetime.now(tz=UTC) < act_at, "the replicas armed only after act_at: no race tested"
        assert not world.fenced(target.node_name)

        async def done() -> bool:
            state = world.state(target.node_name) or {}
            drained = state.get("phase") == "drained" and not world.pods_on(target.node_name)
            return drained and recorded(world, target.node_name) == []

        await until(done, within=(act_at - datetime.now(tz=UTC)).total_seconds() + 15)

        await world.assert_drained_once(target.node_name)
        for other in world.instances[1:]:
            assert not world.fenced(other.node_name)


async def test_closed_change_is_removed_and_withdrawn_on_every_replica(
    aws: MotoServer, tmp_path: Path
) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0]
        began = time.monotonic()
        await world.start_controller(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=str(LEAD))
        one_start = time.monotonic() - began
        start, event_id = await record_far_change(world, target.instance_id, target.node_name)
        # A second replica arms it from the node, due within seconds for it: after its start, the
        # arming, the closing message's round trip and both withdrawals, all slower on a busy
        # machine in proportion to how long the first start took.
        lead = lead_for(start, act_in=max(ACT_IN, 4 * one_start + 5))
        await world.start_controller(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=f"{lead:.3f}")
        act_at = start - timedelta(seconds=lead)

        async def armed() -> bool:
            return logged(world, 1, "re-armed from node", event_id)

        await until(armed, within=ACT_IN)

        world.send(health_scheduled_change([target.instance_id], start, status="closed"))

        async def removed() -> bool:
            return recorded(world, target.node_name) == [] and world.queue_depth() == 0

        await until(removed, within=ACT_IN)

        # One replica took the message, the other saw the entry go: both let go of the event.
        async def withdrawn() -> bool:
            return all(logged(world, index, "withdrawn before kubespot acted", event_id) for index in (0, 1))

        await until(withdrawn, within=max(0.1, (act_at - datetime.now(tz=UTC)).total_seconds()))
        assert datetime.now(tz=UTC) < act_at, "too slow to tell a withdrawal from a miss"
        while datetime.now(tz=UTC) < act_at + timedelta(seconds=2):
            assert not world.fenced(target.node_name), "fenced for a closed change"
            assert world.state(target.node_name) is None
            await asyncio.sleep(0.2)
        assert world.node_events(target.node_name, "CordonAndDrain") == 0


async def test_far_change_in_dry_run_is_not_recorded_and_stays_on_the_queue(
    aws: MotoServer, tmp_path: Path
) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0]
        await world.start_controller(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=str(LEAD), DRY_RUN="true")
        start = (datetime.now(tz=UTC) + AHEAD).replace(microsecond=0)
        world.send(health_scheduled_change([target.instance_id], start))

        async def left() -> bool:
            return any("not recorded on the node; message left" in r["message"] for r in world.log_records(0))

        await until(left, within=10)
        assert world.queue_counts() == (0, 1), "the message waits, hidden, to come back before it is due"
        assert recorded(world, target.node_name) == []
        assert not world.fenced(target.node_name) and world.state(target.node_name) is None
