"""NTH IMDS e2e: scheduled maintenance events (ENABLE_SCHEDULED_EVENT_DRAINING) and their cancellation.

The reference handler's ``scheduled-maintenance-event-test`` and ``...-cancellation-test``, with
kubespot's difference: the node is fenced at NotBefore minus KUBESPOT_IMDS_SCHEDULED_LEAD_TIME, not
as soon as the event is announced. A canceled event undoes exactly what kubespot did: a cordon
someone else set stays.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from agent_world import NODE, STATE_ANNOTATION, agent_world, web
from nth_support import (
    NTH_TAINT_PREFIX,
    check,
    moved_to_spares,
    node_events,
    phase,
    schedule_event,
    set_scheduled_state,
    stays_false,
    stays_untouched,
    taint_map,
    uids_on,
    untouched,
)

from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

TAINT = "kubespot.io/scheduled-maintenance"
NTH_TAINT = NTH_TAINT_PREFIX + "scheduled-maintenance"


async def test_scheduled_event_is_handled_at_not_before_minus_lead_time(tmp_path: Path) -> None:
    lead = 3.0
    async with agent_world(web("web", 3), tmp=tmp_path) as world:
        await world.start_agent(
            ENABLE_SCHEDULED_EVENT_DRAINING="true",
            TAINT_NODE="true",
            KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=str(lead),
        )
        event = schedule_event(world, not_before_in=6.0)
        act_at = event.not_before - lead

        # Seen at once (the notice event), acted on only at NotBefore - lead.
        await until(check(lambda: bool(node_events(world, "ScheduledEvent"))), within=5)
        await stays_false(lambda: not untouched(world), during=max(0.0, act_at - time.time() - 0.3))

        await until(check(lambda: TAINT in world.taint_keys() and world.cordoned()), within=5)
        assert time.time() >= act_at, f"fenced {act_at - time.time():.2f}s before NotBefore - lead time"
        taints = taint_map(world)
        assert taints[NTH_TAINT]["value"] == taints[TAINT]["value"]
        assert taints[TAINT]["value"].startswith("scheduled-maintenance-")

        # Drained before NotBefore (the deadline of a reboot).
        await until(check(lambda: moved_to_spares(world, "web", 3) and phase(world) == "drained"), within=5)
        assert time.time() < event.not_before + 0.5
        assert not world.workload_pods_on(NODE)
        assert node_events(world, "CordonAndDrain")
        state = world.state()
        assert state is not None and state["kind"] == "scheduled-maintenance", state


async def test_scheduled_event_dry_run_changes_nothing(tmp_path: Path) -> None:
    lead = 2.0
    async with agent_world(web("web", 3), tmp=tmp_path) as world:
        before = uids_on(world)
        agent = await world.start_agent(DRY_RUN="true", KUBESPOT_IMDS_SCHEDULED_LEAD_TIME=str(lead))
        event = schedule_event(world, not_before_in=4.0)
        act_at = event.not_before - lead

        await until(check(lambda: bool(node_events(world, "ScheduledEvent"))), within=5)
        await until(check(lambda: bool(node_events(world, "DryRun"))), within=act_at - time.time() + 5)
        assert time.time() >= act_at, "the dry run acted before NotBefore - lead time"
        await stays_untouched(world, before)
        assert "dry run" in agent.text().lower()


async def test_canceled_event_is_undone(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        # Default lead time (300 s) > NotBefore - now: act at once.
        await world.start_agent(TAINT_NODE="true")
        event = schedule_event(world, not_before_in=60.0)
        await until(check(lambda: moved_to_spares(world, "web", 2) and phase(world) == "drained"), within=20)
        assert {TAINT, NTH_TAINT} <= world.taint_keys() and world.cordoned()

        set_scheduled_state(world, event, "canceled")

        await until(check(lambda: untouched(world)), within=10)
        assert not {TAINT, NTH_TAINT} & world.taint_keys()
        assert STATE_ANNOTATION not in (world.node()["metadata"].get("annotations") or {})
        await until(check(lambda: bool(node_events(world, "Uncordon"))), within=5)


async def test_cancel_keeps_a_cordon_kubespot_did_not_set(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        await world.kube.cordon(NODE)  # an operator's cordon, before any event
        await world.start_agent()
        event = schedule_event(world, not_before_in=60.0)
        await until(check(lambda: phase(world) == "drained" and TAINT in world.taint_keys()), within=20)
        state = world.state()
        assert state is not None and not state.get("cordoned_by_us"), state

        set_scheduled_state(world, event, "canceled")

        await until(check(lambda: TAINT not in world.taint_keys() and world.state() is None), within=10)
        await until(check(lambda: bool(node_events(world, "Uncordon"))), within=5)
        # The operator's cordon is theirs to lift.
        await stays_false(lambda: not world.cordoned(), during=0.5)


async def test_canceled_event_dry_run_changes_nothing(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        before = uids_on(world)
        await world.start_agent(DRY_RUN="true")
        event = schedule_event(world, not_before_in=60.0)
        await until(check(lambda: len(node_events(world, "DryRun")) >= 2), within=15)  # fence + drain

        set_scheduled_state(world, event, "canceled")

        def would_uncordon() -> bool:
            return any("would uncordon" in e["message"] for e in node_events(world, "DryRun"))

        await until(check(would_uncordon), within=10)
        assert untouched(world) and uids_on(world) == before
        assert not node_events(world, "Uncordon")
