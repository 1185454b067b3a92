"""The Kubernetes API misbehaving while the agent fences and drains: injected 409 conflicts and
429/500 bursts on node patches and evictions, a real concurrent writer tainting the node at the same
time, and a foreign taint (and cordon) that must outlive the undo of a rebalance fence."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from pathlib import Path

import pytest
from agent_world import (
    INSTANCE,
    NODE,
    World,
    agent_world,
    budget,
    has_log,
    node_events_with,
    web,
)

from kubespot.kube import KubeError, Taint
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

FOREIGN = Taint("example.com/maintenance", "NoSchedule", "by-someone-else")
SPOT_TAINT = "kubespot.io/spot-itn"


async def fenced_and_drained(world: World, *, within: float = 20) -> None:
    async def done() -> bool:
        state = world.state()
        return (
            world.cordoned()
            and SPOT_TAINT in world.taint_keys()
            and state is not None
            and state["phase"] == "drained"
            and not world.workload_pods_on(NODE)
        )

    await until(done, within=within)


async def test_fence_and_drain_ride_out_409_429_and_500(tmp_path: Path) -> None:
    async with agent_world(web("web", 3), budget("web", max_unavailable=1), tmp=tmp_path) as world:
        agent = await world.start_agent()
        faults = world.kubesim.faults
        # Rules matching one request all count it, so these come one after another on node patches:
        # three conflicts, then two 500s, then two 429s.
        faults.add("verb=patch,resource=nodes,rate=1,code=409,count=3")
        faults.add("verb=patch,resource=nodes,rate=1,code=500,count=5")
        faults.add("verb=patch,resource=nodes,rate=1,code=429,count=7")
        # Evictions: four 500s, then four 429s (which read as a budget saying "not now").
        faults.add("verb=create,resource=pods/eviction,rate=1,code=500,count=4")
        faults.add("verb=create,resource=pods/eviction,rate=1,code=429,count=8")
        world.fire_spot_itn(lead_seconds=60)
        await fenced_and_drained(world)
        assert not faults.rules, f"some injected faults were never hit: {faults.to_dict()}"
        assert faults.injected >= 3 + 2 + 2 + 4 + 4
        assert has_log(agent, "changed under us (409)"), agent.text()[-3000:]
        assert {"CordonAndDrain", "DrainCompleted"} <= world.reasons()
        assert agent.running


async def test_concurrent_writer_taint_and_agent_fence_both_survive(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        agent = await world.start_agent()
        # Node writes take 50 ms to land, so a busy writer all but surely slips in between the
        # agent's read of the node and its compare-and-set write: a real conflict, not an injected one.
        world.kubesim.faults.add("verb=patch,resource=nodes,latency=50")
        stop = asyncio.Event()

        async def busy_writer(lane: int) -> None:
            """Another controller writing to the node all the time (each write a new version)."""
            for i in itertools.count():
                if stop.is_set():
                    return
                await world.kube.set_annotations(NODE, {f"example.com/heartbeat-{lane}": str(i)})

        async def foreign_taint() -> None:
            """Its own taint, written at the moment the agent fences (compare-and-set, retried).
            On a loaded machine the three writers can win every race for good (a livelock that
            once held this test for ten minutes): after 10 s they stop, the conflicts are made
            by then, and the taint lands; it must within 30 s."""
            loop = asyncio.get_running_loop()
            started = loop.time()
            while True:
                try:
                    await world.kube.add_taint(NODE, FOREIGN)
                    return
                except KubeError:
                    if loop.time() - started > 10:
                        stop.set()
                    assert loop.time() - started < 30, "the foreign taint never landed"
                    await asyncio.sleep(0.05)

        # Three lanes: a write lands every ~17 ms, inside every read-to-write window of the agent.
        writers = [asyncio.create_task(busy_writer(lane)) for lane in range(3)]
        try:
            world.fire_spot_itn(lead_seconds=60)
            await foreign_taint()

            async def conflicted() -> bool:
                return has_log(agent, "changed under us (409)") or world.state() is not None

            await until(conflicted, within=5, interval=0.01)
        finally:
            stop.set()
            with contextlib.suppress(Exception):
                await asyncio.gather(*writers)
        await fenced_and_drained(world)
        assert has_log(agent, "changed under us (409)"), "the agent never met the concurrent write"
        node = world.node()
        taints = {(t["key"], t.get("value")) for t in node["spec"]["taints"]}
        assert (FOREIGN.key, FOREIGN.value) in taints, taints
        assert SPOT_TAINT in world.taint_keys()
        assert int(node["metadata"]["annotations"]["example.com/heartbeat-0"]) > 0


@pytest.mark.parametrize("cordoned_before", [False, True], ids=["schedulable", "cordoned-by-someone"])
async def test_foreign_taint_and_cordon_survive_rebalance_undo(tmp_path: Path, cordoned_before: bool) -> None:
    async with agent_world(web("web", 1), tmp=tmp_path) as world:
        await world.start_agent(
            ENABLE_REBALANCE_MONITORING="true", KUBESPOT_NODE_ACTIONS_REBALANCE_UNDO_AFTER="2"
        )
        if cordoned_before:
            await world.kube.cordon(NODE)
        world.imds.fleet.fire_rebalance(INSTANCE)

        async def fenced() -> bool:
            return world.state() is not None and "kubespot.io/rebalance-recommendation" in world.taint_keys()

        await until(fenced, within=5)
        await world.kube.add_taint(NODE, FOREIGN)

        async def undone() -> bool:
            return world.state() is None and "kubespot.io/rebalance-recommendation" not in world.taint_keys()

        await until(undone, within=6)
        assert FOREIGN.key in world.taint_keys(), world.node()["spec"]
        # The agent uncordons only a cordon it made itself.
        assert world.cordoned() is cordoned_before, world.node()["spec"]

        async def told() -> bool:
            return bool(node_events_with(world, "Uncordon"))

        await until(told, within=3)
