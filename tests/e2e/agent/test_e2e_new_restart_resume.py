"""An agent that dies (SIGKILL) or is stopped (SIGTERM) in the middle of a drain: the next process
finds the same notice in IMDS and the state on the node, and resumes the drain where it was instead
of starting over: same event id, one notice event, every pod evicted once."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from agent_world import (
    NODE,
    AgentProcess,
    World,
    agent_world,
    budget,
    has_log,
    node_events_with,
    pod_events_with,
    running_uids,
    slow_start_web,
)

from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

REPLICAS = 4
#: Replacements take this long to turn Ready, and the budget lets one pod go at a time, so the
#: drain takes about REPLICAS * START seconds: time to stop the agent in the middle of it.
START = 1.2


def one_at_a_time() -> tuple[dict[str, object], dict[str, object]]:
    return slow_start_web("web", REPLICAS, start=START), budget("web", max_unavailable=1)


async def agent_mid_drain(world: World) -> tuple[set[str], AgentProcess, str]:
    """Start an agent, fire a spot notice, and wait until the agent has evicted a pod and is blocked
    on the next: the uids of the pods there were, the agent, and the state's event id."""
    originals = running_uids(world)
    agent = await world.start_agent()
    world.fire_spot_itn(lead_seconds=60)

    async def mid() -> bool:
        state = world.state()
        evicted = {str(e["involvedObject"]["uid"]) for e in pod_events_with(world, "Evicted")}
        return (
            state is not None
            and state["phase"] == "draining"
            and bool(evicted & originals)
            and bool(running_uids(world) & originals)
        )

    await until(mid, within=10, interval=0.02)
    state = world.state()
    assert state is not None
    return originals, agent, str(state["event_id"])


async def resumed_to_the_end(world: World, agent: AgentProcess, event_id: str, originals: set[str]) -> None:
    """The second agent resumes ``event_id`` and finishes the drain, evicting each pod once."""

    async def said_so() -> bool:
        return has_log(agent, "resuming")

    await until(said_so, within=5)
    assert has_log(agent, f"resuming {event_id} from phase draining"), agent.text()[-3000:]

    async def drained() -> bool:
        state = world.state()
        return state is not None and state["phase"] == "drained" and not world.workload_pods_on(NODE)

    await until(drained, within=REPLICAS * START + 10)
    state = world.state()
    assert state is not None and state["event_id"] == event_id, state
    assert world.cordoned() and "kubespot.io/spot-itn" in world.taint_keys()
    # One notice: the new process recognised the notice it found in IMDS as the one on the node.
    notices = node_events_with(world, "SpotInterruption")
    assert len(notices) == 1 and notices[0].get("count", 1) == 1, notices
    # Every original pod evicted exactly once, by one process or the other; nothing else evicted.
    evictions = Counter(str(e["involvedObject"]["uid"]) for e in pod_events_with(world, "Evicted"))
    assert set(evictions) == originals, evictions
    assert all(n == 1 for n in evictions.values()), evictions
    assert all(e.get("count", 1) == 1 for e in pod_events_with(world, "Evicted"))
    live = [p for p in world.pods(None) if (p["metadata"].get("labels") or {}).get("app") == "web"]
    assert len([p for p in live if not p["metadata"].get("deletionTimestamp")]) == REPLICAS
    assert agent.running


async def test_sigkill_mid_drain_then_a_new_agent_resumes(tmp_path: Path) -> None:
    async with agent_world(*one_at_a_time(), tmp=tmp_path) as world:
        originals, first, event_id = await agent_mid_drain(world)
        await first.kill()
        assert first.proc.returncode == -9
        left = running_uids(world) & originals
        assert left, "the drain finished before the agent was killed; nothing left to resume"

        second = await world.start_agent()
        await resumed_to_the_end(world, second, event_id, originals)


async def test_sigterm_exits_0_promptly_and_the_next_agent_resumes(tmp_path: Path) -> None:
    async with agent_world(*one_at_a_time(), tmp=tmp_path) as world:
        originals, first, event_id = await agent_mid_drain(world)
        asked = time.monotonic()
        code = await first.stop()
        took = time.monotonic() - asked
        assert code == 0, first.text()[-3000:]
        assert took < 3.0, f"SIGTERM took {took:.2f}s to stop the agent"
        state = world.state()
        assert state is not None and state["event_id"] == event_id and state["phase"] == "draining", state

        second = await world.start_agent()
        await resumed_to_the_end(world, second, event_id, originals)
