"""ENABLE_PROMETHEUS_SERVER on a free port: after a spot interruption and a malformed message from
the queue, /metrics counts the interruption by kind and source="sqs", the fence, the drain and
each message's outcome, and the spot pool signal handed to the provisioner."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_world import controller_world, http_get, metric_value, spot_warning, workload

from kubespot.sim.awssim import MotoServer
from support.kubespot_process import free_port

pytestmark = pytest.mark.slow


async def test_metrics_count_queue_interruptions(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target = world.instances[0]
        port = free_port()
        await world.start_controller(
            ENABLE_PROMETHEUS_SERVER="true",
            PROMETHEUS_SERVER_PORT=str(port),
            KUBESPOT_QUEUE_MALFORMED_ACTION="delete",
        )
        world.send("not json")
        world.send(spot_warning(target.instance_id))

        await world.until_handled(target.node_name, within=20)
        text = await http_get(f"http://127.0.0.1:{port}/metrics")
        assert metric_value(text, "kubespot_interruptions_total", kind="spot-itn", source="sqs") == 1
        assert metric_value(text, "kubespot_interruptions_total", source="imds") == 0
        assert metric_value(text, "kubespot_actions_total", action="cordon", result="success") == 1
        assert metric_value(text, "kubespot_actions_total", action="drain", result="success") == 1
        assert metric_value(text, "kubespot_actions_total", action="message", result="done") == 1
        assert metric_value(text, "kubespot_actions_total", action="message", result="malformed") == 1
        assert metric_value(text, "kubespot_notice_to_cordon_seconds_count", kind="spot-itn") == 1
        # the spot node's pool was handed to the provisioner's capacity signals (launching.md §2)
        assert metric_value(text, "kubespot_actions_total", action="capacity_signal", result="spot-itn") == 1
        assert metric_value(text, "kubespot_drain_duration_seconds_count") == 1
        assert metric_value(text, "kubespot_evictions_total", result="evicted") == 2
