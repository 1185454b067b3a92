"""NTH IMDS e2e: Kubernetes events (EMIT_KUBERNETES_EVENTS, KUBERNETES_EVENTS_EXTRA_ANNOTATIONS).

The reference handler's ``emit-events-test``: with events on, every event the handler records
carries the extra annotations and the reasons its users alert on; with events off, none at all.
Both use the reference handler's setting names only: kubespot's own name, which the harness's
BASE_ENV sets, is blanked (the loader treats an empty variable as unset).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_world import NODE, agent_world, bare_pod, web
from nth_support import (
    agent_events,
    check,
    moved_to_spares,
    node_events,
    phase,
    pod_events,
    spot_itn,
    stays_false,
)

from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


async def test_events_carry_the_extra_annotations(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), bare_pod("lonely"), tmp=tmp_path) as world:
        await world.start_agent(
            KUBESPOT_OBSERVABILITY_EMIT_KUBERNETES_EVENTS="",  # unset: the NTH name decides
            EMIT_KUBERNETES_EVENTS="true",
            KUBERNETES_EVENTS_EXTRA_ANNOTATIONS="a=b,c=d",
        )
        spot_itn(world, lead_seconds=15)

        async def done() -> bool:
            return bool(node_events(world, "DrainCompleted")) and not world.workload_pods_on(NODE)

        await until(done, within=20)

        events = agent_events(world)
        reasons = {e["reason"] for e in events}
        assert {"SpotInterruption", "CordonAndDrain", "DrainStarted", "DrainCompleted"} <= reasons
        assert pod_events(world, "lonely", "BarePodDeleted")
        for event in events:
            notes = event["metadata"].get("annotations") or {}
            assert notes.get("a") == "b" and notes.get("c") == "d", event
        node_uid = world.node()["metadata"]["uid"]
        for event in node_events(world):
            assert event["involvedObject"]["name"] == NODE and event["involvedObject"].get("uid") == node_uid


async def test_events_off_records_none(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), bare_pod("lonely"), tmp=tmp_path) as world:
        await world.start_agent(
            KUBESPOT_OBSERVABILITY_EMIT_KUBERNETES_EVENTS="", EMIT_KUBERNETES_EVENTS="false"
        )
        spot_itn(world, lead_seconds=15)

        await until(
            check(
                lambda: (
                    phase(world) == "drained"
                    and moved_to_spares(world, "web", 2)
                    and not world.workload_pods_on(NODE)
                )
            ),
            within=20,
        )
        # Events are recorded in the background: give stragglers a moment to show up.
        await stays_false(lambda: bool(agent_events(world)), during=0.5)
        assert world.events() == [], [(e["reason"], e.get("source")) for e in world.events()]
