"""AWS failures around the response actions never cost the drain: a target group deleted after the
controller indexed it, and an SNS topic that does not exist, are logged and recorded while the node
is still drained and the summary still reaches EventBridge. A quarantine group that exists nowhere
stops the controller at start-up (exit 2), naming the setting."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from controller_world import spot_warning, workload
from response_world import (
    bus_to_queue,
    finished_record,
    pod_ips,
    received,
    register,
    response_world,
    target_group,
    target_states,
)

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until
from support.kubespot_process import spawn_kubespot

pytestmark = pytest.mark.slow

MISSING_TOPIC = "arn:aws:sns:us-east-1:123456789012:e2e-no-such-topic"


async def test_aws_failures_are_recorded_and_the_drain_completes(aws: MotoServer, tmp_path: Path) -> None:
    async with response_world(aws, workload("web", 2, shutdown=2.0), tmp=tmp_path) as (world, net):
        target = world.instances[0]
        ips = pod_ips(world, target.node_name)
        pods_tg = target_group(aws, net.vpc, "e2e-pods", target_type="ip")
        nodes_tg = target_group(aws, net.vpc, "e2e-nodes", target_type="instance")
        register(aws, pods_tg, *ips.values())
        register(aws, nodes_tg, target.instance_id)
        bus_queue = bus_to_queue(aws, "e2e-ops", "e2e-bus-subscriber")
        await world.start_controller(
            KUBESPOT_LOADBALANCER_ENABLED="true",
            KUBESPOT_PUBLISH_SNS_TOPIC_ARN=MISSING_TOPIC,
            KUBESPOT_PUBLISH_EVENT_BUS="e2e-ops",
        )

        async def indexed() -> bool:
            return "load balancer target index refreshed" in world.log_text()

        await until(indexed, within=20)
        # Deleted after the controller indexed it: deregistration finds it gone.
        aws.client("elbv2").delete_target_group(TargetGroupArn=pods_tg)
        world.send(spot_warning(target.instance_id))

        rec = await finished_record(world, target.node_name)
        state = world.state(target.node_name) or {}
        assert state["phase"] == "drained" and world.queue_depth() == 0
        assert not world.pods_on(target.node_name)
        # The remaining group's target drains; the deleted group's targets were simply gone.
        assert rec["loadbalancer"]["state"] == "draining"
        assert {t["tg"] for t in rec["loadbalancer"]["targets"]} == {pods_tg, nodes_tg}
        assert target_states(aws, nodes_tg) == {target.instance_id: "draining"}
        # SNS refused: recorded, logged, an event; EventBridge still got the summary.
        assert rec["published"]["sns"].startswith("error: ")
        assert rec["published"]["eventbridge"]
        (event,) = received(aws, bus_queue)
        summary = event["detail"]
        assert summary["outcome"] == "done" and summary["event_id"] == state["event_id"]
        await world.assert_node_events(target.node_name, "SummaryPublishError", 1)
        warnings = [
            r["message"]
            for r in world.log_records()
            if r.get("level") in ("warning", "WARNING")
            and "cannot publish the summary to sns" in r["message"]
        ]
        assert warnings, "the SNS failure was not logged as a warning"


async def test_a_quarantine_group_that_exists_nowhere_stops_the_start(
    aws: MotoServer, tmp_path: Path
) -> None:
    async with response_world(aws, tmp=tmp_path, instances=1) as (world, _net):
        log_path = tmp_path / "controller-bad-group.log"
        env = world.env(
            KUBESPOT_ISOLATION_ENABLED="true", KUBESPOT_ISOLATION_QUARANTINE_GROUP="sg-0000000000000dead"
        )
        with log_path.open("wb") as log:
            proc = await spawn_kubespot("controller", env=env, stdout=log, stderr=log)
        assert await asyncio.wait_for(proc.wait(), 30) == 2
        text = log_path.read_text(errors="replace")
        assert (
            "isolation.quarantine_group: quarantine security group 'sg-0000000000000dead' does not exist"
            in text
        )
