"""Scheduled maintenance is handled at NotBefore minus KUBESPOT_IMDS_SCHEDULED_LEAD_TIME, not when it
is announced, and the node's state carries NotBefore as the deadline."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from agent_world import INSTANCE, NODE, World, agent_world, node_events_with, running_uids, web

from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

LEAD = 2.0
#: NotBefore this many whole seconds from now (IMDS shows whole seconds).
NOT_BEFORE_IN = 5
#: How far the observed fence time may fall on either side of NotBefore - LEAD.
EARLY_SLACK = 0.05
LATE_SLACK = 1.5


def schedule(world: World, code: str) -> float:
    """Add an active scheduled event of ``code`` with an integral NotBefore; return NotBefore."""
    not_before = float(math.floor(time.time()) + NOT_BEFORE_IN)
    world.imds.fleet.add_scheduled_event(INSTANCE, code, not_before=not_before)  # type: ignore[arg-type]
    return not_before


async def first_seen(probe: Callable[[], bool], *, within: float) -> float:
    """Poll ``probe`` every 20 ms; the wall-clock time it first held."""

    async def check() -> float | None:
        return time.time() if probe() else None

    seen = await until(check, within=within, interval=0.02)
    assert seen is not None
    return seen


@pytest.mark.parametrize("code", ["instance-stop", "system-reboot"])
async def test_scheduled_event_is_fenced_at_not_before_minus_lead(tmp_path: Path, code: str) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        agent = await world.start_agent(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=str(LEAD))
        not_before = schedule(world, code)
        act_at = not_before - LEAD

        fenced_at = await first_seen(world.cordoned, within=NOT_BEFORE_IN + 2)
        assert fenced_at >= act_at - EARLY_SLACK, f"fenced {act_at - fenced_at:.2f}s before NotBefore-lead"
        assert fenced_at <= act_at + LATE_SLACK, f"fenced {fenced_at - act_at:.2f}s after NotBefore-lead"
        assert "kubespot.io/scheduled-maintenance" in world.taint_keys()
        state = world.state()
        assert state is not None and state["kind"] == "scheduled-maintenance", state
        assert datetime.fromisoformat(str(state["deadline"])).timestamp() == not_before, state
        assert state.get("extra", {}).get("code") == code, state

        async def emptied() -> bool:
            return not world.workload_pods_on(NODE)

        await until(emptied, within=max(1.0, not_before - time.time() + 1))
        assert time.time() <= not_before + 0.5, "drain finished after NotBefore"
        assert agent.running


async def test_scheduled_event_under_dry_run_is_only_announced_at_its_time(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        pods = running_uids(world)
        agent = await world.start_agent(KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=str(LEAD), DRY_RUN="true")
        not_before = schedule(world, "instance-stop")
        act_at = not_before - LEAD

        try:
            said_at = await first_seen(
                lambda: bool(node_events_with(world, "DryRun")), within=NOT_BEFORE_IN + 2
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}; events {world.events()}; log:\n{agent.text()[-6000:]}") from None
        assert said_at >= act_at - EARLY_SLACK, "the dry run acted before NotBefore - lead time"
        await asyncio.sleep(max(0.0, not_before + 0.3 - time.time()))
        assert not world.cordoned() and world.state() is None and not world.taint_keys()
        assert running_uids(world) == pods
