"""A half-open pod watch during the agent's drain: the drain still sees its pods leave, and /healthz
names the watch while it is stuck silent.

kubesim's ``stall_watch_after_s`` serves what a half-open connection looks like to a client (the
watch answered, then no byte and no end, whatever ``timeoutSeconds`` asked for: client-go#374,
kubernetes#65012). Without an idle bound the agent's watch of its node's pods waited on it for ever:
pods that had left were waited for until the deadline, with /healthz green. Now a watch silent for
``KUBESPOT_KUBE_WATCH_IDLE_TIMEOUT`` is re-listed (kopf's ``settings.watching.inactivity_timeout``
and kube-rs#1945 do the same), and /healthz reports one silent for twice that bound.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from agent_world import NODE, agent_world, web
from nth_support import check, http_get, moved_to_spares, phase, spot_itn

from kubespot.sim.kubesim.testing import until
from support.kubespot_process import free_port

pytestmark = pytest.mark.slow


async def checks(port: int) -> tuple[int, dict[str, dict[str, object]]]:
    status, body = await http_get(f"http://127.0.0.1:{port}/healthz")
    return status, {str(c["name"]): dict(c) for c in orjson.loads(body)["checks"]}


async def test_a_drain_on_a_silent_pod_watch_completes_and_healthz_names_the_watch(tmp_path: Path) -> None:
    port = free_port()
    # Pods take 6 s to exit after SIGTERM: the drain outlives twice the 2 s bound.
    async with agent_world(web("web", 3, shutdown=6.0, grace=30), tmp=tmp_path) as world:
        world.kubesim.faults.add(resource="pods", stall_watch_after_s=0)
        await world.start_agent(
            ENABLE_PROBES_SERVER="true",
            PROBES_SERVER_PORT=str(port),
            KUBESPOT_KUBE_WATCH_IDLE_TIMEOUT="2",
        )
        assert (await checks(port))[1]["watches"]["ok"], "no watch runs while the agent is idle"
        spot_itn(world, lead_seconds=90)

        async def stuck() -> str:
            status, found = await checks(port)
            watches = found["watches"]
            return str(watches["detail"]) if status == 503 and not watches["ok"] else ""

        detail = await until(stuck, within=20)
        assert f"pods on {NODE} silent for" in detail, detail
        # Every reopened watch is silent too: the pods' departure is learnt from the re-lists.
        await until(check(lambda: moved_to_spares(world, "web", 3) and phase(world) == "drained"), within=30)

        async def healthy() -> bool:
            status, found = await checks(port)
            return status == 200 and bool(found["watches"]["ok"])

        await until(healthy, within=10)  # the drain's watch ended with it
