"""NTH IMDS e2e: spot interruption notice (cordon, taint, drain), its NTH taint, and dry run.

The reference handler's ``spot-interruption-test``, ``spot-interruption-dry-run-test`` and
``imds-v2-spot-interruption-test`` with TAINT_NODE: a real agent process against kubesim and imdssim;
everything asserted is what the cluster shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_world import NODE, agent_world, web
from nth_support import (
    MIXED_WORKLOADS,
    NTH_TAINT_PREFIX,
    app_pods,
    check,
    moved_to_spares,
    node_events,
    pod_events,
    spot_event_id,
    spot_itn,
    stays_untouched,
    taint_map,
    uids_on,
)

from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


async def test_spot_itn_taints_cordons_and_drains(tmp_path: Path) -> None:
    async with agent_world(*MIXED_WORKLOADS, tmp=tmp_path) as world:
        agent = await world.start_agent()
        itn = spot_itn(world, lead_seconds=15)

        await until(
            check(lambda: moved_to_spares(world, "web", 3) and not world.workload_pods_on(NODE)), within=20
        )

        node = world.node()
        assert node["spec"].get("unschedulable") is True
        taints = taint_map(world)
        assert taints["kubespot.io/spot-itn"]["effect"] == "NoSchedule"
        assert taints["kubespot.io/spot-itn"]["value"] == spot_event_id(itn)[:63]
        # TAINT_NODE is off by default: none of the reference handler's taints.
        assert not any(k.startswith(NTH_TAINT_PREFIX) for k in taints)
        assert not world.workload_pods_on(NODE)
        # The DaemonSet pod stays; the bare pod is deleted, and says so.
        assert [p["metadata"]["labels"]["app"] for p in world.pods(NODE)] == ["node-agent"]
        assert not [p for p in world.pods(None) if p["metadata"]["name"] == "lonely"]
        assert pod_events(world, "lonely", "BarePodDeleted")

        async def recorded() -> bool:
            # The drain's event is sent in the background and the drained phase written after the
            # drain returns: wait for both, in whichever order they land.
            state = world.state()
            drained = state is not None and state["phase"] == "drained"
            return drained and bool(node_events(world, "DrainCompleted"))

        await until(recorded, within=5)
        state = world.state()
        assert state is not None and state["phase"] == "drained" and state["event_id"] == spot_event_id(itn)
        assert node_events(world, "SpotInterruption") and node_events(world, "CordonAndDrain")
        assert agent.running and await agent.stop() == 0


async def test_spot_itn_with_taint_node_adds_the_nth_taint(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        await world.start_agent(TAINT_NODE="true")
        itn = spot_itn(world, lead_seconds=15)

        await until(check(lambda: moved_to_spares(world, "web", 2)), within=20)

        taints = taint_map(world)
        expected = spot_event_id(itn)[:63]
        assert taints[NTH_TAINT_PREFIX + "spot-itn"] == {
            "key": NTH_TAINT_PREFIX + "spot-itn",
            "value": expected,
            "effect": "NoSchedule",
        }
        assert taints["kubespot.io/spot-itn"]["value"] == expected
        assert world.cordoned()


async def test_spot_itn_dry_run_changes_nothing(tmp_path: Path) -> None:
    async with agent_world(*MIXED_WORKLOADS, tmp=tmp_path) as world:
        before = uids_on(world)
        agent = await world.start_agent(DRY_RUN="true", TAINT_NODE="true")
        spot_itn(world, lead_seconds=15)

        async def dry_run_reported() -> bool:
            # One node event for the fence, one for the drain, and one per pod that would move.
            return len(node_events(world, "DryRun")) >= 2 and bool(pod_events(world, "lonely", "DryRun"))

        await until(dry_run_reported, within=15)
        await stays_untouched(world, before)

        assert node_events(world, "SpotInterruption")
        assert all(pod_events(world, p["metadata"]["name"], "DryRun") for p in app_pods(world, "web"))
        assert not pod_events(world, "lonely", "BarePodDeleted")
        reasons = {e["reason"] for e in node_events(world)}
        assert not reasons & {"Cordon", "CordonAndDrain", "DrainStarted", "DrainCompleted"}, reasons
        assert "dry run" in agent.text().lower()
