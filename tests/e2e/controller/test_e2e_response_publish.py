"""The summary of a handled spot notice, published by the real controller: to an SNS topic (read
from a subscribed SQS queue, with the attributes subscriptions filter on) and on an EventBridge bus
(read from a queue a rule targets), once, after the drain, with the message ids in the record."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from controller_world import spot_warning, workload
from response_world import (
    STATE,
    Phase,
    agent_state,
    bus_to_queue,
    finished_record,
    pod_ips,
    received,
    register,
    response_world,
    sns_to_queue,
    target_group,
)

from kubespot.config.kube import KubeSettings
from kubespot.kube import connect
from kubespot.sim.awssim import MotoServer

pytestmark = pytest.mark.slow


async def test_summary_reaches_sns_and_eventbridge_subscribers(aws: MotoServer, tmp_path: Path) -> None:
    async with response_world(aws, workload("web", 2), tmp=tmp_path) as (world, _net):
        target = world.instances[0]
        topic, sns_queue = sns_to_queue(aws, "e2e-summaries", "e2e-sns-subscriber")
        bus_queue = bus_to_queue(aws, "e2e-ops", "e2e-bus-subscriber")
        await world.start_controller(
            KUBESPOT_PUBLISH_SNS_TOPIC_ARN=topic,
            KUBESPOT_PUBLISH_EVENT_BUS="e2e-ops",
            KUBESPOT_LOADBALANCER_ENABLED="true",  # no target group: the summary says so
        )
        world.send(spot_warning(target.instance_id))

        rec = await finished_record(world, target.node_name)
        state = world.state(target.node_name) or {}
        assert state["phase"] == "drained"

        (notification,) = received(aws, sns_queue)
        summary = json.loads(notification["Message"])
        assert notification["Subject"] == f"kubespot: spot-itn on node {target.node_name} done"
        attributes = {k: v["Value"] for k, v in notification["MessageAttributes"].items()}
        assert attributes == {
            "kind": "spot-itn",
            "source": "kubespot",
            "node": target.node_name,
            "outcome": "done",
        }
        assert summary["schema_version"] == 1 and summary["event_id"] == state["event_id"]
        assert (summary["node"], summary["instance_id"]) == (target.node_name, target.instance_id)
        assert (summary["stage"], summary["outcome"], summary["source"]) == ("finished", "done", "sqs")
        assert [(a["name"], a["result"]) for a in summary["actions"]] == [("deregister", "success")]

        (event,) = received(aws, bus_queue)
        assert (event["source"], event["detail-type"]) == ("kubespot", "kubespot Interruption Summary")
        assert event["detail"] == summary

        assert rec["published"]["sns"] == notification["MessageId"]
        assert rec["published"]["eventbridge"] == event["id"]
        await world.assert_node_events(target.node_name, "SummaryPublished", 2)
        # Published once: a later change of the node publishes nothing more.
        kube = connect(KubeSettings(kubeconfig=str(world.kubesim.kubeconfig_path)))
        try:
            await kube.set_labels(target.node_name, {"e2e/touched": "yes"})
        finally:
            await kube.close()
        await asyncio.sleep(1.0)
        assert received(aws, sns_queue) == [] and received(aws, bus_queue) == []


async def test_two_replicas_without_election_publish_once(aws: MotoServer, tmp_path: Path) -> None:
    """Leader election off: both replicas run the actions; the compare-and-set on the record lets
    one deregister and publish, the other follow."""
    async with response_world(aws, workload("web", 1), tmp=tmp_path) as (world, net):
        target = world.instances[0]
        topic, sns_queue = sns_to_queue(aws, "e2e-summaries", "e2e-sns-subscriber")
        pods_tg = target_group(aws, net.vpc, "e2e-pods", target_type="ip")
        register(aws, pods_tg, *pod_ips(world, target.node_name).values())
        for index in range(2):
            await world.start_controller(
                KUBESPOT_QUEUE_URL="",
                KUBESPOT_POD_NAME=f"replica-{index}",
                KUBESPOT_LEADER_ELECTION_ENABLED="false",
                KUBESPOT_LOADBALANCER_ENABLED="true",
                KUBESPOT_PUBLISH_SNS_TOPIC_ARN=topic,
            )
        kube = connect(KubeSettings(kubeconfig=str(world.kubesim.kubeconfig_path)))
        try:
            now = datetime.now(tz=UTC)
            for phase in (Phase.DRAINING, Phase.DRAINED):
                text = agent_state(
                    "spot-itn-e2e-race",
                    target.instance_id,
                    phase,
                    since=now,
                    deadline=now + timedelta(minutes=2),
                )
                await kube.set_annotations(target.node_name, {STATE: text})
                await asyncio.sleep(0.5 if phase is Phase.DRAINING else 0)
        finally:
            await kube.close()

        rec = await finished_record(world, target.node_name)
        await asyncio.sleep(2.0)  # time for a second publish, if there were one
        (notification,) = received(aws, sns_queue)
        assert rec["published"]["sns"] == notification["MessageId"]
        assert rec["runner"].startswith(("replica-0_", "replica-1_"))
        await world.assert_node_events(target.node_name, "LoadBalancerDeregistered", 1)
        await world.assert_node_events(target.node_name, "SummaryPublished", 1)
