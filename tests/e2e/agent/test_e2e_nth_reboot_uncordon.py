"""NTH IMDS e2e: uncordon after a scheduled reboot (UPTIME_FROM_FILE), and the "completed" state.

The reference handler's ``scheduled-maintenance-event-reboot-test``: the node is fenced and drained
for a system-reboot, the instance reboots (the agent's process ends), and the agent that starts
after it sees from host uptime that the reboot happened, then uncordons the node and removes its
taints. The reboot event may still be listed as active for a while after it: that must not fence the
node again (the reference handler ignores the event it uncordoned for). A restart without a reboot
(uptime long) keeps the node fenced. Separately: the event turning "completed" undoes the fence.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

import pytest
from agent_world import NODE, agent_world, web
from nth_support import (
    check,
    moved_to_spares,
    node_events,
    phase,
    schedule_event,
    set_scheduled_state,
    stays_false,
    untouched,
    write_uptime,
)

from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

TAINT = "kubespot.io/scheduled-maintenance"
#: The agent counts a reboot only when the boot came this long after the fence (clock slack).
BOOT_SLACK_SECONDS = 5.0


async def test_reboot_is_detected_from_uptime_and_uncordons(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        uptime = write_uptime(world, 100_000.0)  # long-running host
        first = await world.start_agent(UPTIME_FROM_FILE=str(uptime))
        schedule_event(world, not_before_in=60.0)
        await until(check(lambda: moved_to_spares(world, "web", 2) and phase(world) == "drained"), within=20)
        await first.stop()

        # A restart without a reboot resumes: the node stays fenced.
        second = await world.start_agent(UPTIME_FROM_FILE=str(uptime))
        await until(check(lambda: "resuming" in second.text()), within=5)
        await stays_false(lambda: not world.cordoned() or TAINT not in world.taint_keys(), during=0.5)
        await second.stop()
        assert world.cordoned() and phase(world) == "drained"

        # The reboot: the host comes back (uptime 1 s) some time after the fence.
        state = world.state()
        assert state is not None
        since = datetime.fromisoformat(state["since"]).timestamp()
        await asyncio.sleep(max(0.0, since + BOOT_SLACK_SECONDS + 1.0 - world.imds.fleet.clock()))
        write_uptime(world, 1.0, 0.5)
        third = await world.start_agent(UPTIME_FROM_FILE=str(uptime))

        await until(check(lambda: untouched(world)), within=10)
        await until(check(lambda: bool(node_events(world, "Uncordon"))), within=5)
        assert "restarted" in third.text()
        # The event is still listed as active just after the reboot: the node must stay in service.
        await stays_false(lambda: not untouched(world), during=1.5)
        assert not world.workload_pods_on(NODE)


async def test_completed_event_is_undone(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        await world.start_agent()
        event = schedule_event(world, not_before_in=60.0, code="instance-reboot")
        await until(check(lambda: moved_to_spares(world, "web", 2) and phase(world) == "drained"), within=20)
        assert TAINT in world.taint_keys() and world.cordoned()

        set_scheduled_state(world, event, "completed")

        await until(check(lambda: untouched(world)), within=10)
        await until(check(lambda: bool(node_events(world, "Uncordon"))), within=5)
        await stays_false(lambda: not untouched(world), during=0.5)
