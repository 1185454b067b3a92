"""NTH IMDS e2e: the Prometheus server (ENABLE_PROMETHEUS_SERVER, PROMETHEUS_SERVER_PORT) and the
probes server (ENABLE_PROBES_SERVER, PROBES_SERVER_PORT).

The reference handler's ``prometheus-metrics-test``: after a spot interruption is handled, /metrics
counts the interruption, the cordon, the drain and the evictions. kubespot's probe goes further
than the reference handler's: /healthz turns 503 once IMDS has been silent for longer than
KUBESPOT_OBSERVABILITY_PROBES_STALE_AFTER. The dry-run twin counts dry-run actions only.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from agent_world import INSTANCE, NODE, World, agent_world, web
from nth_support import (
    check,
    http_get,
    metric,
    moved_to_spares,
    node_events,
    phase,
    spot_itn,
    stays_false,
    untouched,
)

from kubespot.sim.kubesim.testing import until
from support.kubespot_process import free_port

pytestmark = pytest.mark.slow


async def scrape(port: int) -> str:
    status, body = await http_get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200, (status, body[:200])
    return body


async def health(port: int) -> tuple[int, dict[str, dict[str, object]]]:
    """(status, checks by name) of /healthz."""
    status, body = await http_get(f"http://127.0.0.1:{port}/healthz")
    doc = orjson.loads(body)
    assert isinstance(doc, dict) and doc["ok"] is (status == 200), (status, doc)
    return status, {str(c["name"]): dict(c) for c in doc["checks"]}


async def start_served(world: World, **env: str) -> tuple[int, int]:
    """Start the agent with its metrics and probes servers on free ports: (metrics, probes)."""
    metrics_port, probes_port = free_port(), free_port()
    await world.start_agent(
        ENABLE_PROMETHEUS_SERVER="true",
        PROMETHEUS_SERVER_PORT=str(metrics_port),
        ENABLE_PROBES_SERVER="true",
        PROBES_SERVER_PORT=str(probes_port),
        **env,
    )
    return metrics_port, probes_port


async def drained(world: World) -> None:
    await until(check(lambda: moved_to_spares(world, "web", 3) and phase(world) == "drained"), within=20)


async def test_metrics_and_probes(tmp_path: Path) -> None:
    async with agent_world(web("web", 3), tmp=tmp_path) as world:
        metrics_port, probes_port = await start_served(world, KUBESPOT_OBSERVABILITY_PROBES_STALE_AFTER="1")

        async def healthy() -> bool:
            return (await health(probes_port))[0] == 200

        await until(healthy, within=10)
        _, checks = await health(probes_port)
        assert {"imds", "kubernetes", "tasks"} <= set(checks) and all(c["ok"] for c in checks.values())

        spot_itn(world, lead_seconds=15)
        await drained(world)
        await until(check(lambda: bool(node_events(world, "DrainCompleted"))), within=5)

        text = await scrape(metrics_port)
        assert metric(text, "kubespot_interruptions_total", kind="spot-itn", source="imds") == 1.0
        assert metric(text, "kubespot_actions_total", action="cordon", result="success") == 1.0
        assert metric(text, "kubespot_actions_total", action="drain", result="success") == 1.0
        assert metric(text, "kubespot_drain_duration_seconds_count") == 1.0
        assert metric(text, "kubespot_drain_duration_seconds_count", result="emptied") == 1.0
        assert metric(text, "kubespot_evictions_total", result="evicted") == 3.0
        assert metric(text, "kubespot_notice_to_cordon_seconds_count", kind="spot-itn") == 1.0
        assert metric(text, "kubespot_node_interruption_phase", phase="drained") == 1.0
        assert not metric(text, "kubespot_deadline_misses_total")

        async def identified() -> bool:
            # Set by the agent's keep-alive loop once IMDS has named the instance (not instantly).
            text = await scrape(metrics_port)
            return metric(text, "kubespot_info", node=NODE, instance_id=INSTANCE, mode="imds") == 1.0

        await until(identified, within=10)
        assert metric(await scrape(metrics_port), "kubespot_last_success_timestamp_seconds", component="imds")

        # IMDS goes away: once it has been silent for longer than PROBES_STALE_AFTER, the probe fails.
        await world.imds.stop()

        async def imds_stale() -> bool:
            status, checks = await health(probes_port)
            return status == 503 and not checks["imds"]["ok"]

        await until(imds_stale, within=10)
        _, checks = await health(probes_port)
        assert checks["kubernetes"]["ok"] and checks["tasks"]["ok"], checks


async def test_metrics_dry_run(tmp_path: Path) -> None:
    async with agent_world(web("web", 3), tmp=tmp_path) as world:
        metrics_port, probes_port = await start_served(world, DRY_RUN="true")
        spot_itn(world, lead_seconds=15)

        await until(check(lambda: len(node_events(world, "DryRun")) >= 2), within=15)

        async def counted() -> bool:
            text = await scrape(metrics_port)
            return metric(text, "kubespot_actions_total", action="drain", result="dry_run") == 1.0

        await until(counted, within=5)
        await stays_false(lambda: not untouched(world), during=0.3)
        text = await scrape(metrics_port)
        assert metric(text, "kubespot_interruptions_total", kind="spot-itn", source="imds") == 1.0
        assert metric(text, "kubespot_actions_total", action="cordon", result="dry_run") == 1.0
        assert not metric(text, "kubespot_actions_total", action="cordon", result="success")
        assert not metric(text, "kubespot_drain_duration_seconds_count")
        assert not metric(text, "kubespot_evictions_total", result="evicted")
        assert (await health(probes_port))[0] == 200
