"""NTH IMDS e2e: rebalance recommendations (ENABLE_REBALANCE_MONITORING / ENABLE_REBALANCE_DRAINING).

The reference handler's ``rebalance-recommendation-test`` and ``...-drain-test``: monitoring cordons
and taints without evicting; draining drains too. kubespot's fix on top: a rebalance cordon is undone
after KUBESPOT_NODE_ACTIONS_REBALANCE_UNDO_AFTER unless an interruption follows, and when a spot
notice does follow the node is drained and the auto-undo never fires.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pytest
from agent_world import INSTANCE, NODE, agent_world, web
from nth_support import (
    NTH_TAINT_PREFIX,
    check,
    moved_to_spares,
    node_events,
    none_terminating,
    phase,
    spot_itn,
    stays_false,
    stays_untouched,
    taint_map,
    uids_on,
    untouched,
)

from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

TAINT = "kubespot.io/rebalance-recommendation"


async def test_rebalance_cordons_then_spot_itn_drains_and_no_undo(tmp_path: Path) -> None:
    undo_after = 3.0
    async with agent_world(web("web", 3), tmp=tmp_path) as world:
        before = uids_on(world)
        await world.start_agent(
            ENABLE_REBALANCE_MONITORING="true",
            KUBESPOT_NODE_ACTIONS_REBALANCE_UNDO_AFTER=str(undo_after),
        )
        world.imds.fleet.fire_rebalance(INSTANCE)

        await until(check(lambda: TAINT in world.taint_keys() and world.cordoned()), within=10)
        state = world.state()
        assert state is not None and state["kind"] == "rebalance-recommendation" and state.get("undo_at")
        undo_at = datetime.fromisoformat(state["undo_at"]).timestamp()
        assert node_events(world, "RebalanceRecommendation")
        await until(check(lambda: bool(node_events(world, "Cordon"))), within=5)
        # Monitoring only: nothing evicted.
        assert uids_on(world) == before and none_terminating(world)
        assert not node_events(world, "CordonAndDrain")

        spot_itn(world, lead_seconds=15)
        await until(check(lambda: moved_to_spares(world, "web", 3) and phase(world) == "drained"), within=20)
        assert "kubespot.io/spot-itn" in world.taint_keys()
        assert world.cordoned()

        # Past the rebalance's undo time the node is still out of service.
        await stays_false(
            lambda: not world.cordoned() or "kubespot.io/spot-itn" not in world.taint_keys(),
            during=max(0.0, undo_at - time.time()) + 1.0,
        )
        assert not node_events(world, "Uncordon")
        state = world.state()
        assert state is not None and state["kind"] == "spot-itn" and not state.get("undo_at"), state


async def test_rebalance_cordon_is_undone_when_nothing_follows(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        await world.start_agent(
            ENABLE_REBALANCE_MONITORING="true",
            TAINT_NODE="true",
            KUBESPOT_NODE_ACTIONS_REBALANCE_UNDO_AFTER="1",
        )
        world.imds.fleet.fire_rebalance(INSTANCE)

        await until(check(lambda: TAINT in world.taint_keys() and world.cordoned()), within=10)
        taints = taint_map(world)
        assert taints[NTH_TAINT_PREFIX + "rebalance-recommendation"]["value"] == taints[TAINT]["value"]

        await until(check(lambda: untouched(world)), within=10)
        await until(check(lambda: bool(node_events(world, "Uncordon"))), within=5)


async def test_rebalance_monitoring_dry_run_changes_nothing(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        before = uids_on(world)
        await world.start_agent(ENABLE_REBALANCE_MONITORING="true", DRY_RUN="true")
        world.imds.fleet.fire_rebalance(INSTANCE)

        await until(check(lambda: bool(node_events(world, "DryRun"))), within=10)
        await stays_untouched(world, before)
        assert node_events(world, "RebalanceRecommendation")


async def test_rebalance_draining_drains(tmp_path: Path) -> None:
    async with agent_world(web("web", 3), tmp=tmp_path) as world:
        await world.start_agent(ENABLE_REBALANCE_DRAINING="true")
        world.imds.fleet.fire_rebalance(INSTANCE)

        await until(check(lambda: moved_to_spares(world, "web", 3) and phase(world) == "drained"), within=20)
        assert TAINT in world.taint_keys() and world.cordoned()
        assert not world.workload_pods_on(NODE)
        assert node_events(world, "RebalanceRecommendation") and node_events(world, "CordonAndDrain")


async def test_rebalance_draining_dry_run_changes_nothing(tmp_path: Path) -> None:
    async with agent_world(web("web", 3), tmp=tmp_path) as world:
        before = uids_on(world)
        await world.start_agent(ENABLE_REBALANCE_DRAINING="true", DRY_RUN="true")
        world.imds.fleet.fire_rebalance(INSTANCE)

        await until(check(lambda: len(node_events(world, "DryRun")) >= 2), within=10)  # fence + drain
        await stays_untouched(world, before)
