"""The three interruptions the sandbox fires, each on its own spot node, and what the world does after.

Owns the scenario drivers: each one opens a ``ScenarioRecord`` (so the observer starts timing that
node), makes the signal appear in imdssim, then plays the rest of the world's part -- EC2 terminating
the spot instance at its instance-action time, the scheduled reboot happening at NotBefore -- and
waits until there is something to judge. It never acts on the node through the API: fencing,
draining and cleaning up are the agent's job, and the verdict is about whether it did them.

Also owns which node gets which scenario (``assign_nodes``): the spot interruption goes to the node
with the most evictable pods, preferring one with an emptyDir pod, so the drain has something to show.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from kubespot.sim.imdssim import Fleet
from kubespot.sim.kubesim.controllers.kubelet import KubeletController

from .observer import Obj, Observer, TimelineEntry, is_daemon_pod
from .processes import AgentProcess, UptimeFile
from .summary import REBALANCE, SCHEDULED_REBOOT, SPOT_ITN, ScenarioRecord
from .timing import Timing

#: How often drivers look at the records while waiting (they also wake on every watch event).
TICK = 0.05
#: Real seconds a fence may take to appear before a driver stops waiting for it.
FENCE_GRACE = 10.0


@dataclass
class NodeKit:
    """What a driver needs to play the world's part for one node."""

    node: str
    instance_id: str
    agent: AgentProcess
    uptime: UptimeFile


@dataclass
class World:
    """The simulators and the observer, as the drivers use them."""

    fleet: Fleet
    kubelet: KubeletController
    observer: Observer
    timing: Timing
    emit: Callable[[TimelineEntry], None]
    #: Nodes whose agent is down on purpose (terminated instance, reboot): not a failure.
    agent_down: set[str]


def _has_empty_dir(pod: Obj) -> bool:
    return any("emptyDir" in v for v in (pod.get("spec") or {}).get("volumes") or ())


def assign_nodes(
    scenarios: Sequence[str], spot_nodes: Sequence[str], pods_on: Callable[[str], list[Obj]]
) -> dict[str, str]:
    """scenario -> node: the busiest spot nodes, the spot interruption first (see module docstring)."""

    def weight(node: str) -> tuple[int, int, str]:
        pods = [p for p in pods_on(node) if not is_daemon_pod(p)]
        return (int(any(_has_empty_dir(p) for p in pods)), len(pods), node)

    order = sorted(spot_nodes, key=weight, reverse=True)
    assigned: dict[str, str] = {}
    priority = [s for s in (SPOT_ITN, SCHEDULED_REBOOT, REBALANCE) if s in scenarios]
    for scenario, node in zip(priority, order, strict=False):
        assigned[scenario] = node
    return assigned


async def wait_for(predicate: Callable[[], bool], observer: Observer, until: float) -> bool:
    """Wait until ``predicate()`` or the epoch time ``until``; wakes on every watch event."""
    while not predicate():
        left = until - time.time()
        if left <= 0:
            return False
        observer.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(observer.changed.wait(), min(left, 0.25))
    return True


async def sleep_until(epoch: float) -> None:
    await asyncio.sleep(max(0.0, epoch - time.time()))


async def spot_interruption(world: World, kit: NodeKit) -> ScenarioRecord:
    """A spot notice; at the instance-action time the instance is terminated, drained or not."""
    now = time.time()
    # IMDS shows whole seconds: put the action time on one, so the deadline the agent reads is exact.
    deadline = float(math.ceil(now + world.timing.spot_notice))
    rec = ScenarioRecord(SPOT_ITN, kit.node, kit.instance_id, notice_at=now, deadline=deadline)
    world.observer.track(rec)
    world.fleet.fire_spot_itn(kit.instance_id, "terminate", at=now, lead_seconds=deadline - now)
    world.emit(
        TimelineEntry(
            now,
            kit.node,
            f"notice: spot interruption (terminate, deadline +{deadline - now:.1f}s)",
            "bold red",
        )
    )
    await sleep_until(deadline)
    await terminate(world, kit, rec)
    rec.finished_at = time.time()
    return rec


async def terminate(world: World, kit: NodeKit, rec: ScenarioRecord) -> None:
    """EC2 reclaims the instance: its kubelet and agent stop, and its Node is deleted at once (the
    scenarios judge the drain before the deadline; the node lifecycle timings after it, Ready
    Unknown after the grace and the deletion at the next pass, are the provision scenario's joiner's)."""
    world.agent_down.add(kit.node)
    world.kubelet.stop_node(kit.node)
    await kit.agent.stop()
    rec.terminated_at = time.time()
    resp = await world.observer.request("DELETE", f"/api/v1/nodes/{kit.node}")
    if resp.status_code >= 400:
        rec.problems.append(f"could not delete Node {kit.node}: HTTP {resp.status_code}")
    left = [p for p in rec.evictable() if p.gone_at is None]
    world.emit(
        TimelineEntry(
            rec.terminated_at,
            kit.node,
            f"instance terminated at the deadline ({len(left)} pod(s) still there die with it)",
            "red" if left else "dim",
        )
    )


async def rebalance(world: World, kit: NodeKit) -> ScenarioRecord:
    """A rebalance recommendation: the agent fences, and undoes the fence when nothing follows."""
    now = time.time()
    undo = world.timing.rebalance_undo
    within = max(2.0, world.timing.s(10.0))
    rec = ScenarioRecord(
        REBALANCE, kit.node, kit.instance_id, notice_at=now, undo_after=undo, cleanup_within=within
    )
    world.observer.track(rec)
    world.fleet.fire_rebalance(kit.instance_id, at=now)
    world.emit(
        TimelineEntry(
            now,
            kit.node,
            f"notice: rebalance recommendation (undo expected after {undo:.1f}s)",
            "bold yellow",
        )
    )
    fenced = await wait_for(lambda: rec.fenced_at is not None, world.observer, now + FENCE_GRACE)
    if fenced and rec.fenced_at is not None:
        done = await wait_for(
            lambda: rec.cleaned_at is not None, world.observer, rec.fenced_at + undo + within + 1.0
        )
        rec.timed_out = not done
    else:
        rec.timed_out = True
    rec.finished_at = time.time()
    return rec


async def scheduled_reboot(
    world: World, kit: NodeKit, restart: Callable[[], Awaitable[None]]
) -> ScenarioRecord:
    """A system-reboot announced ahead: fence at NotBefore - lead, reboot at NotBefore, clean up after."""
    t = world.timing
    now = time.time()
    not_before = float(math.ceil(now + t.scheduled_announced_early + t.scheduled_lead))
    rec = ScenarioRecord(
        SCHEDULED_REBOOT,
        kit.node,
        kit.instance_id,
        notice_at=now,
        deadline=not_before,
        act_at=not_before - t.scheduled_lead,
        cleanup_within=t.cleanup_within,
    )
    world.observer.track(rec)
    event = world.fleet.add_scheduled_event(
        kit.instance_id, "system-reboot", at=now, not_before=not_before, not_after=not_before + 7200
    )
    world.emit(
        TimelineEntry(
            now,
            kit.node,
            f"notice: scheduled system-reboot {event.event_id} (NotBefore +{not_before - now:.1f}s, "
            f"agent should act at +{not_before - t.scheduled_lead - now:.1f}s)",
            "bold blue",
        )
    )
    await sleep_until(not_before)
    # The reboot: the host goes down (agent and kubelet with it), comes back with a fresh uptime, and
    # EC2 marks the event completed.
    rec.reboot_started_at = time.time()
    world.agent_down.add(kit.node)
    world.kubelet.stop_node(kit.node)
    await kit.agent.stop()
    left = [p for p in rec.evictable() if p.gone_at is None]
    world.emit(
        TimelineEntry(
            rec.reboot_started_at,
            kit.node,
            f"reboot: kubelet and agent down ({len(left)} pod(s) still there)",
            "red" if left else "dim",
        )
    )
    await asyncio.sleep(t.reboot)
    world.fleet.set_scheduled_state(kit.instance_id, event.event_id, "completed")
    kit.uptime.reboot()
    world.kubelet.start_node(kit.node)
    await restart()
    world.agent_down.discard(kit.node)
    rec.reboot_done_at = time.time()
    world.emit(
        TimelineEntry(
            rec.reboot_done_at,
            kit.node,
            "back up: kubelet running, agent restarted (uptime 0s), event completed",
            "dim",
        )
    )
    done = await wait_for(
        lambda: rec.cleaned_at is not None, world.observer, rec.reboot_done_at + t.cleanup_within + 1.0
    )
    rec.timed_out = not done
    rec.finished_at = time.time()
    return rec
