"""The agent's drain waiting for load-balancer deregistration (docs/designs/response-actions.md,
Decision 2), with ``KUBESPOT_LOADBALANCER_WAIT_ENABLED``.

The test plays the controller's action runner: it writes the ``kubespot.io/actions`` record on the
Node as the runner would (targets pending, then draining with a settle time). The agent must evict
the pods that are no target as soon as the record lands, hold the target pod until draining plus
settle, and without any record go ahead once ``max_delay`` has passed, saying so in an event.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from agent_world import NODE, Obj, World, agent_world, node_events_with, running_uids, web
from nth_support import app_pods, check, spot_event_id, spot_itn, stays_false

from kubespot.records.actions import ACTIONS_ANNOTATION, ActionsRecord, StepState, loadbalancer_step
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

SETTLE = 2.0
EVENT_LATENCY_MS = 500.0


def on_node(world: World, app: str) -> list[str]:
    """Names of the ``app`` pods on the node that are still running (not terminating)."""
    return [
        p["metadata"]["name"]
        for p in app_pods(world, app)
        if p["spec"].get("nodeName") == NODE and not p["metadata"].get("deletionTimestamp")
    ]


def slow_events(world: World) -> None:
    """Events answered late, as by a loaded API server (how the CI run that read the event right
    after the drained phase found none)."""
    world.kubesim.faults.add(verb="create", resource="events", latency_ms=EVENT_LATENCY_MS)


async def recorded(world: World, reason: str) -> list[Obj]:
    """The node's ``reason`` events, once there is one. The agent records events in the background
    and never holds up a state write for them (``NodeContext.node_event``), as client-go's
    recorders queue an event for sending (k8s.io/client-go/tools/events: "puts it in the queue for
    sending"): an event may land after the phase it tells about, so it is waited for."""
    await until(check(lambda: bool(node_events_with(world, reason))), within=5, interval=0.02)
    return node_events_with(world, reason)


async def write_record(world: World, event_id: str, state: StepState, pods: list[str]) -> None:
    now = datetime.now(UTC)
    step = loadbalancer_step(state, now, settle=SETTLE, pods=pods)
    record = ActionsRecord(event=event_id, runner="controller-0", at=now, kind="spot-itn", loadbalancer=step)
    await world.kube.set_annotations(NODE, {ACTIONS_ANNOTATION: record.encode()})


async def test_target_pod_held_until_draining_plus_settle_others_evicted_at_once(tmp_path: Path) -> None:
    async with agent_world(web("front", 1), web("batch", 1), tmp=tmp_path) as world:
        slow_events(world)
        (front,) = on_node(world, "front")
        await world.start_agent(
            KUBESPOT_LOADBALANCER_WAIT_ENABLED="true", KUBESPOT_LOADBALANCER_WAIT_MAX_DELAY="30"
        )
        itn = spot_itn(world, lead_seconds=90)
        event_id = spot_event_id(itn)

        await until(check(world.cordoned), within=5)
        # No record yet: nothing leaves.
        await stays_false(lambda: len(running_uids(world)) < 2, during=1.0)

        # The runner claims the node: the front pod is a target, its deregistration under way.
        await write_record(world, event_id, StepState.PENDING, [f"default/{front}"])
        await until(check(lambda: not on_node(world, "batch")), within=3)
        assert on_node(world, "front") == [front]
        await stays_false(lambda: not on_node(world, "front"), during=1.0)

        # AWS accepted the deregistration: the pod goes SETTLE seconds later, not before.
        await write_record(world, event_id, StepState.DRAINING, [f"default/{front}"])
        draining = time.monotonic()
        await until(check(lambda: not on_node(world, "front")), within=SETTLE + 3, interval=0.02)
        held = time.monotonic() - draining
        assert SETTLE - 0.3 <= held <= SETTLE + 1.5, held

        await until(check(lambda: (world.state() or {}).get("phase") == "drained"), within=10)
        (event,) = await recorded(world, "LoadBalancerWait")
        assert "1 pods held" in str(event["message"])
        assert not node_events_with(world, "LoadBalancerWaitTimeout")


async def test_without_a_record_the_drain_goes_ahead_after_max_delay(tmp_path: Path) -> None:
    async with agent_world(web("front", 2), tmp=tmp_path) as world:
        slow_events(world)
        await world.start_agent(
            KUBESPOT_LOADBALANCER_WAIT_ENABLED="true", KUBESPOT_LOADBALANCER_WAIT_MAX_DELAY="3"
        )
        spot_itn(world, lead_seconds=90)
        await until(check(world.cordoned), within=5, interval=0.02)
        fenced = time.monotonic()
        await until(check(lambda: len(running_uids(world)) < 2), within=8, interval=0.02)
        waited = time.monotonic() - fenced
        assert 2.5 <= waited <= 4.5, waited

        await until(check(lambda: (world.state() or {}).get("phase") == "drained"), within=10)
        (event,) = await recorded(world, "LoadBalancerWaitTimeout")
        assert event["type"] == "Warning" and "no deregistration record" in str(event["message"])


async def test_other_kinds_and_agents_without_the_wait_do_not_wait(tmp_path: Path) -> None:
    async with agent_world(web("front", 2), tmp=tmp_path) as world:
        await world.start_agent(
            KUBESPOT_LOADBALANCER_WAIT_ENABLED="true",
            KUBESPOT_LOADBALANCER_WAIT_KINDS="scheduled-maintenance",
        )
        spot_itn(world, lead_seconds=90)
        await until(check(world.cordoned), within=5, interval=0.02)
        fenced = time.monotonic()
        await until(check(lambda: len(running_uids(world)) < 2), within=5, interval=0.02)
        assert time.monotonic() - fenced < 1.5
        assert not node_events_with(world, "LoadBalancerWait")
