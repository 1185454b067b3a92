"""NTH IMDS e2e: CORDON_ONLY (taint and cordon, evict nothing), and its dry-run twin.

The reference handler's ``cordon-only-test``: the node is cordoned and tainted, every pod keeps
running where it is, and the event says Cordon, not CordonAndDrain.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_world import agent_world
from nth_support import (
    MIXED_WORKLOADS,
    check,
    node_events,
    none_terminating,
    phase,
    spot_itn,
    stays_false,
    stays_untouched,
    uids_on,
)

from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


async def test_cordon_only_fences_without_evicting(tmp_path: Path) -> None:
    async with agent_world(*MIXED_WORKLOADS, tmp=tmp_path) as world:
        before = uids_on(world)
        await world.start_agent(CORDON_ONLY="true")
        spot_itn(world, lead_seconds=15)

        await until(check(lambda: bool(node_events(world, "Cordon"))), within=15)
        assert world.cordoned() and "kubespot.io/spot-itn" in world.taint_keys()
        state = world.state()
        assert state is not None and state["phase"] == "fenced", state

        # Nothing is evicted, now or a little later.
        await stays_false(lambda: uids_on(world) != before or not none_terminating(world), during=1.0)
        assert phase(world) == "fenced"
        reasons = {e["reason"] for e in node_events(world)}
        assert "SpotInterruption" in reasons
        assert not reasons & {"CordonAndDrain", "DrainStarted", "DrainCompleted"}, reasons


async def test_cordon_only_dry_run_changes_nothing(tmp_path: Path) -> None:
    async with agent_world(*MIXED_WORKLOADS, tmp=tmp_path) as world:
        before = uids_on(world)
        agent = await world.start_agent(CORDON_ONLY="true", DRY_RUN="true")
        spot_itn(world, lead_seconds=15)

        await until(check(lambda: bool(node_events(world, "DryRun"))), within=15)
        await stays_untouched(world, before)

        dry = node_events(world, "DryRun")
        assert len(dry) == 1, [e["message"] for e in dry]
        message = dry[0]["message"]
        assert "cordon" in message and "drain" not in message, message
        assert not {e["reason"] for e in node_events(world)} & {"Cordon", "CordonAndDrain"}
        assert "dry run" in agent.text().lower()
