"""A pod whose PodDisruptionBudget never allows a disruption, and a spot notice a few seconds out.

With ``KUBESPOT_DRAIN_PDB_DEADLINE_ACTION=delete`` (the default) the agent deletes the pod gracefully
before the deadline; with ``keep`` it respects the budget and the pod is still running when the
instance goes, which is reported as a deadline miss; under DRY_RUN nothing is touched.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path

import pytest
from agent_world import (
    INSTANCE,
    NODE,
    World,
    agent_world,
    budget,
    has_log,
    pod_events_with,
    running_uids,
    sample_sum,
    scrape_agent_metrics,
    web,
)

from kubespot.sim.kubesim.testing import until
from support.kubespot_process import free_port

pytestmark = pytest.mark.slow

LEAD = 6.0
REPLICAS = 2


def blocked_db() -> tuple[dict[str, object], dict[str, object]]:
    """Two replicas under a budget that needs both available: no eviction is ever allowed."""
    return web("db", REPLICAS), budget("db", min_available=REPLICAS)


def deadline_of(world: World) -> float:
    state = world.state()
    assert state is not None and state.get("deadline"), state
    return datetime.fromisoformat(str(state["deadline"])).timestamp()


async def notice_fenced(world: World) -> float:
    """Fire a spot notice ``LEAD`` seconds ahead and wait until the agent has fenced the node; the
    deadline it recorded (epoch seconds)."""
    world.fire_spot_itn(lead_seconds=LEAD)

    async def fenced() -> bool:
        return world.cordoned() and world.state() is not None

    await until(fenced, within=5)
    return deadline_of(world)


async def test_pdb_blocked_pod_is_deleted_before_the_deadline(tmp_path: Path) -> None:
    async with agent_world(*blocked_db(), tmp=tmp_path) as world:
        originals = running_uids(world)
        assert len(originals) == REPLICAS
        agent = await world.start_agent()
        deadline = await notice_fenced(world)

        async def deleted() -> bool:
            return not (running_uids(world) & originals)

        await until(deleted, within=LEAD + 2)
        assert time.time() < deadline, "the blocked pods were deleted only after the deadline"

        async def gone() -> bool:
            return not world.workload_pods_on(NODE)

        await until(gone, within=max(0.5, deadline - time.time()))
        assert time.time() <= deadline + 0.5, "the pods were still shutting down at the deadline"

        async def reported() -> bool:
            # The agent posts its events after the deletes: on a busy machine they may trail them.
            return {
                str(e["involvedObject"]["uid"]) for e in pod_events_with(world, "DeletedAtDeadline")
            } >= originals

        await until(reported, within=10)
        deleted_events = pod_events_with(world, "DeletedAtDeadline")
        assert {str(e["involvedObject"]["uid"]) for e in deleted_events} == originals, deleted_events
        assert all(e.get("type") == "Warning" for e in deleted_events)
        assert not pod_events_with(world, "StillRunningAtDeadline")
        assert has_log(agent, "deleting it gracefully"), agent.text()[-3000:]


async def test_keep_leaves_the_pod_running_at_the_deadline_and_reports_a_miss(tmp_path: Path) -> None:
    port = free_port()
    async with agent_world(*blocked_db(), tmp=tmp_path) as world:
        originals = running_uids(world)
        agent = await world.start_agent(
            KUBESPOT_DRAIN_PDB_DEADLINE_ACTION="keep",
            ENABLE_PROMETHEUS_SERVER="true",
            PROMETHEUS_SERVER_PORT=str(port),
        )
        deadline = await notice_fenced(world)

        async def reported() -> bool:
            return len(pod_events_with(world, "StillRunningAtDeadline")) == REPLICAS

        await until(reported, within=LEAD + 5)
        assert time.time() >= deadline - 0.5
        assert running_uids(world) == originals, "keep must never delete a budget-protected pod"
        assert not pod_events_with(world, "DeletedAtDeadline")

        async def missed() -> bool:
            text = await scrape_agent_metrics(port)
            return sample_sum(text, "kubespot_deadline_misses_total", kind="spot-itn") >= 1

        await until(missed, within=5)
        assert has_log(agent, "still running at the deadline"), agent.text()[-3000:]
        errors = [str(line.get("message")) for line in agent.lines() if line.get("level") == "error"]
        assert any("incomplete" in m for m in errors), agent.text()[-3000:]


async def test_dry_run_deletes_nothing_at_the_deadline(tmp_path: Path) -> None:
    async with agent_world(*blocked_db(), tmp=tmp_path) as world:
        originals = running_uids(world)
        agent = await world.start_agent(DRY_RUN="true")
        fired = time.time()
        world.fire_spot_itn(lead_seconds=LEAD)

        async def announced() -> bool:
            return "DryRun" in world.reasons()

        await until(announced, within=5)
        # Nothing may happen: look again after the delete would have been due (deadline - 4.5 s).
        await asyncio.sleep(max(0.0, fired + LEAD - 1.0 - time.time()))
        assert running_uids(world) == originals
        assert not world.cordoned() and world.state() is None
        assert not {"DeletedAtDeadline", "StillRunningAtDeadline", "Evicted"} & world.reasons()
        assert agent.running


async def test_a_scale_in_keeps_the_budget_whatever_the_grace_period(tmp_path: Path) -> None:
    """An Auto Scaling scale-in (target lifecycle state Terminated) is voluntary: the group's hook
    holds the instance, so no deadline is invented from NODE_TERMINATION_GRACE_PERIOD and the budget
    is respected to the end (no delete), the drain still going on past that window."""
    async with agent_world(*blocked_db(), tmp=tmp_path) as world:
        originals = running_uids(world)
        await world.start_agent(ENABLE_ASG_LIFECYCLE_DRAINING="true", NODE_TERMINATION_GRACE_PERIOD="4")
        world.imds.fleet.set_asg_state(INSTANCE, "Terminated")

        async def draining() -> bool:
            state = world.state()
            return state is not None and state.get("phase") == "draining"

        await until(draining, within=10)
        state = world.state()
        assert state is not None and not state.get("deadline"), "a deadline was invented"
        await asyncio.sleep(8)  # twice the would-be window
        assert running_uids(world) == originals, "a budget-blocked pod was removed"
        state = world.state()
        assert state is not None and state.get("phase") == "draining"
