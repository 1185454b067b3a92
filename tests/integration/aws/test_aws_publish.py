"""kubespot.aws.publish against moto over HTTP: the summary reaches an SQS queue subscribed to the
SNS topic (and only the subscriptions whose filter matches its kind), and an SQS queue targeted by
an EventBridge rule on a custom bus."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from kubespot.aws import AwsClients, EventBridgePublisher, SnsPublisher
from kubespot.aws.publish import DEFAULT_DETAIL_TYPE
from kubespot.sim.awssim import MotoServer
from support.moto_sqs import received, sqs_queue

SUMMARY: dict[str, Any] = {
    "event": {"kind": "spot-itn", "instance_id": "i-0123456789abcdef0", "node": "ip-10-0-1-15"},
    "actions": [{"action": "deregister", "result": "ok", "targets": 3}, {"action": "drain", "result": "ok"}],
    "finished_at": datetime(2025, 3, 1, 12, 0, 5, tzinfo=UTC),
}


async def test_sns_summary_reaches_subscribers_filtered_by_kind(aws: MotoServer, clients: AwsClients) -> None:
    sns = aws.client("sns")
    topic = sns.create_topic(Name="kubespot-summaries")["TopicArn"]
    everything_url, everything_arn = sqs_queue(aws, "everything")
    spot_url, spot_arn = sqs_queue(aws, "spot-only")
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=everything_arn)
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=spot_arn,
        Attributes={"FilterPolicy": json.dumps({"kind": ["spot-itn"]})},
    )

    publisher = SnsPublisher(clients, topic)
    message_id = await publisher.publish(
        SUMMARY,
        subject="kubespot: spot interruption of ip-10-0-1-15 — drained\n3 targets",
        kind="spot-itn",
        attributes={"result": "ok", "node": "ip-10-0-1-15"},
    )
    await publisher.publish(
        {"event": {"kind": "rebalance-recommendation"}}, subject="r", kind="rebalance-recommendation"
    )
    assert message_id
    assert clients.counts[("sns", "Publish")] == 2

    everything = received(aws, everything_url)
    assert [json.loads(n["Message"])["event"]["kind"] for n in everything] == [
        "spot-itn",
        "rebalance-recommendation",
    ]
    (spot,) = received(aws, spot_url)
    assert spot["Type"] == "Notification" and spot["TopicArn"] == topic and spot["MessageId"] == message_id
    assert spot["Subject"] == "kubespot: spot interruption of ip-10-0-1-15 ? drained 3 targets"
    assert json.loads(spot["Message"]) == {**SUMMARY, "finished_at": "2025-03-01 12:00:05+00:00"}
    attributes = {k: v["Value"] for k, v in spot["MessageAttributes"].items()}
    assert attributes == {"kind": "spot-itn", "source": "kubespot", "result": "ok", "node": "ip-10-0-1-15"}


async def test_sns_fifo_topic(aws: MotoServer, clients: AwsClients) -> None:
    sns = aws.client("sns")
    topic = sns.create_topic(Name="kubespot.fifo", Attributes={"FifoTopic": "true"})["TopicArn"]
    url, arn = sqs_queue(aws, "summaries.fifo", FifoQueue="true")
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    publisher = SnsPublisher(clients, topic)
    await publisher.publish(SUMMARY, subject="s", kind="spot-itn")
    await publisher.publish(SUMMARY, subject="s", kind="spot-itn")  # same content: deduplicated
    (delivered,) = received(aws, url)
    assert json.loads(delivered["Message"])["event"]["node"] == "ip-10-0-1-15"


async def test_eventbridge_summary_reaches_a_rule_target(aws: MotoServer, clients: AwsClients) -> None:
    events = aws.client("events")
    bus_arn = events.create_event_bus(Name="ops")["EventBusArn"]
    url, arn = sqs_queue(aws, "ops-events")
    pattern = {
        "source": ["kubespot"],
        "detail-type": [DEFAULT_DETAIL_TYPE],
        "detail": {"event": {"kind": ["spot-itn"]}},
    }
    events.put_rule(Name="kubespot-summaries", EventBusName="ops", EventPattern=json.dumps(pattern))
    events.put_targets(Rule="kubespot-summaries", EventBusName="ops", Targets=[{"Id": "queue", "Arn": arn}])

    instance_arn = f"arn:aws:ec2:{aws.region}:{aws.account_id}:instance/i-0123456789abcdef0"
    event_id = await EventBridgePublisher(clients, "ops").put(SUMMARY, resources=[instance_arn])
    # By ARN too; and a summary of another kind, which the rule does not match.
    await EventBridgePublisher(clients, bus_arn).put({"event": {"kind": "rebalance-recommendation"}})
    assert event_id
    assert clients.counts[("events", "PutEvents")] == 2

    (delivered,) = received(aws, url)
    assert delivered["source"] == "kubespot"
    assert delivered["detail-type"] == "kubespot Interruption Summary"
    assert delivered["resources"] == [instance_arn]
    assert delivered["account"] == aws.account_id
    assert delivered["detail"] == {**SUMMARY, "finished_at": "2025-03-01 12:00:05+00:00"}
    assert delivered["id"] == event_id
