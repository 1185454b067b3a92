"""Smoke: a spot interruption notice ends with spot-1 fenced and emptied, by a real agent process."""

from __future__ import annotations

from pathlib import Path

from agent_world import NODE, agent_world, web

from kubespot.sim.kubesim.testing import until


async def test_spot_itn_fences_and_drains(tmp_path: Path) -> None:
    async with agent_world(web("web", 3), tmp=tmp_path) as world:
        agent = await world.start_agent()
        world.fire_spot_itn()

        async def emptied() -> bool:
            state = world.state()
            # The pods leave a moment before the agent records the drained phase.
            return (
                world.cordoned()
                and not world.workload_pods_on(NODE)
                and (state or {}).get("phase") == "drained"
            )

        await until(emptied, within=20)
        assert "kubespot.io/spot-itn" in world.taint_keys()
        assert {"SpotInterruption", "CordonAndDrain", "DrainCompleted"} <= world.reasons()
        assert agent.running
        assert await agent.stop() == 0
