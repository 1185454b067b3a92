"""NTH IMDS e2e: Auto Scaling target lifecycle state (ENABLE_ASG_LIFECYCLE_DRAINING).

The reference handler's ``asg-lifecycle-imds-test``: when ``autoscaling/target-lifecycle-state``
turns ``Terminated`` the node is tainted, cordoned and drained; off by default, so an agent without
the switch ignores it; and the dry-run twin changes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_world import INSTANCE, NODE, agent_world, web
from nth_support import (
    NTH_TAINT_PREFIX,
    check,
    daemonset,
    moved_to_spares,
    node_events,
    phase,
    stays_false,
    stays_untouched,
    taint_map,
    uids_on,
    untouched,
)

from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

TAINT = "kubespot.io/asg-lifecycle-termination"


async def test_asg_terminated_taints_and_drains(tmp_path: Path) -> None:
    async with agent_world(web("web", 3), daemonset("node-agent"), tmp=tmp_path) as world:
        await world.start_agent(ENABLE_ASG_LIFECYCLE_DRAINING="true", TAINT_NODE="true")
        world.imds.fleet.set_asg_state(INSTANCE, "InService")
        await stays_false(lambda: not untouched(world), during=0.5)  # InService is not a notice

        world.imds.fleet.set_asg_state(INSTANCE, "Terminated")

        await until(check(lambda: moved_to_spares(world, "web", 3) and phase(world) == "drained"), within=20)
        taints = taint_map(world)
        assert TAINT in taints and world.cordoned()
        assert taints[NTH_TAINT_PREFIX + "asg-lifecycle-termination"]["value"] == taints[TAINT]["value"]
        assert not world.workload_pods_on(NODE)
        assert [p["metadata"]["labels"]["app"] for p in world.pods(NODE)] == ["node-agent"]
        assert node_events(world, "ASGLifecycle") and node_events(world, "CordonAndDrain")


async def test_asg_terminated_ignored_when_switched_off(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        before = uids_on(world)
        await world.start_agent()  # ENABLE_ASG_LIFECYCLE_DRAINING defaults to false
        world.imds.fleet.set_asg_state(INSTANCE, "Terminated")
        await stays_untouched(world, before)
        assert not node_events(world)


async def test_asg_terminated_dry_run_changes_nothing(tmp_path: Path) -> None:
    async with agent_world(web("web", 3), tmp=tmp_path) as world:
        before = uids_on(world)
        await world.start_agent(ENABLE_ASG_LIFECYCLE_DRAINING="true", DRY_RUN="true")
        world.imds.fleet.set_asg_state(INSTANCE, "Terminated")

        await until(check(lambda: len(node_events(world, "DryRun")) >= 2), within=10)  # fence + drain
        await stays_untouched(world, before)
        assert node_events(world, "ASGLifecycle")
