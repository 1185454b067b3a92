"""NTH IMDS e2e: IMDSv2 (session tokens).

The reference handler's ``imds-v2-*`` tests: on an instance where IMDSv2 is required (GETs without a
token get 401) the agent still sees the notice and drains. And kubespot's REQUIRE_V2 switch: with the
token endpoint failing, an agent told to require v2 never falls back to IMDSv1 (and acts as soon as a
token can be had again), while one with the default falls back and acts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_world import INSTANCE, NODE, agent_world, web
from nth_support import check, moved_to_spares, phase, spot_itn, stays_false, untouched

from kubespot.sim.imdssim import Fault
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


async def test_imds_v2_required_instance_is_handled(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path, require_v2=True) as world:
        agent = await world.start_agent()
        spot_itn(world, lead_seconds=15)

        await until(check(lambda: moved_to_spares(world, "web", 2) and phase(world) == "drained"), within=20)

        assert "kubespot.io/spot-itn" in world.taint_keys() and world.cordoned()
        assert not world.workload_pods_on(NODE)
        # It read with a session token (the simulator issued one) and never tried IMDSv1.
        assert len(world.imds.fleet.tokens(INSTANCE)) >= 1
        assert "IMDSv1" not in agent.text()


async def test_require_v2_never_falls_back_to_v1(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        # IMDS allows v1 reads here, but the token endpoint is broken.
        fault = world.imds.fleet.faults.add(Fault(kind="token", status=503))
        agent = await world.start_agent(wait_ready=False, KUBESPOT_IMDS_REQUIRE_V2="true")
        spot_itn(world, lead_seconds=30)

        async def refused() -> bool:
            return "IMDSv2 is required" in agent.text()

        await until(refused, within=10)
        await stays_false(lambda: not untouched(world), during=1.5)
        assert "reading with IMDSv1" not in agent.text()
        assert agent.running

        # Once tokens can be had again, the notice (still showing) is handled.
        world.imds.fleet.faults.remove(fault)
        await until(check(lambda: moved_to_spares(world, "web", 2) and phase(world) == "drained"), within=20)
        assert "kubespot.io/spot-itn" in world.taint_keys()


async def test_without_require_v2_falls_back_to_v1(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        world.imds.fleet.faults.add(Fault(kind="token", status=503))
        agent = await world.start_agent()
        spot_itn(world, lead_seconds=15)

        await until(check(lambda: moved_to_spares(world, "web", 2) and phase(world) == "drained"), within=20)
        assert "kubespot.io/spot-itn" in world.taint_keys()
        assert "reading with IMDSv1" in agent.text()
