"""A rebalance recommendation fences the node; with an undo delay and no interruption after it, the
agent takes back exactly what it added (its taint, its cordon, its annotation) and says so."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from agent_world import INSTANCE, World, agent_world, node_events_with, running_uids, web

from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

TAINT = "kubespot.io/rebalance-recommendation"
UNDO_AFTER = 2.0


def rebalance_env(undo_after: float, **extra: str) -> dict[str, Any]:
    return {
        "ENABLE_REBALANCE_MONITORING": "true",
        "KUBESPOT_NODE_ACTIONS_REBALANCE_UNDO_AFTER": str(undo_after),
        **extra,
    }


async def fenced(world: World) -> float:
    """Wait until the node is fenced for the recommendation; the time it was first seen so."""

    async def probe() -> bool:
        return world.cordoned() and TAINT in world.taint_keys() and world.state() is not None

    await until(probe, within=5, interval=0.02)
    return time.monotonic()


async def test_rebalance_fence_is_undone_after_the_delay(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        pods = running_uids(world)
        await world.start_agent(**rebalance_env(UNDO_AFTER))
        world.imds.fleet.fire_rebalance(INSTANCE)
        seen = await fenced(world)
        state = world.state()
        assert state is not None and state["kind"] == "rebalance-recommendation", state
        assert state.get("undo_at"), state

        async def undone() -> bool:
            return not world.cordoned() and TAINT not in world.taint_keys() and world.state() is None

        await until(undone, within=UNDO_AFTER + 4, interval=0.02)
        waited = time.monotonic() - seen
        assert waited >= UNDO_AFTER - 0.5, f"undone after {waited:.2f}s, before the {UNDO_AFTER}s delay"
        assert not any(
            k.startswith(("kubespot.io/", "aws-node-termination-handler/")) for k in world.taint_keys()
        )

        async def told() -> bool:
            return bool(node_events_with(world, "Uncordon"))

        await until(told, within=3)
        # A recommendation alone cordons; it drains nothing (ENABLE_REBALANCE_DRAINING is off).
        assert running_uids(world) == pods


async def test_rebalance_fence_stays_when_undo_is_off(tmp_path: Path) -> None:
    async with agent_world(web("web", 1), tmp=tmp_path) as world:
        await world.start_agent(**rebalance_env(0))
        world.imds.fleet.fire_rebalance(INSTANCE)
        await fenced(world)
        state = world.state()
        assert state is not None and not state.get("undo_at"), state
        await asyncio.sleep(UNDO_AFTER + 1.0)
        assert world.cordoned() and TAINT in world.taint_keys() and world.state() is not None
        assert not node_events_with(world, "Uncordon")


async def test_rebalance_under_dry_run_changes_nothing(tmp_path: Path) -> None:
    async with agent_world(web("web", 1), tmp=tmp_path) as world:
        await world.start_agent(**rebalance_env(UNDO_AFTER, DRY_RUN="true"))
        world.imds.fleet.fire_rebalance(INSTANCE)

        async def announced() -> bool:
            return bool(node_events_with(world, "DryRun"))

        await until(announced, within=5)
        await asyncio.sleep(UNDO_AFTER + 0.5)
        node = world.node()
        assert not world.cordoned() and TAINT not in world.taint_keys() and world.state() is None, node
        assert not node_events_with(world, "Uncordon")
        assert not node_events_with(world, "Cordon")
