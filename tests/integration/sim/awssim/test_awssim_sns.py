"""SNS -> SQS subscription delivery through boto3 over HTTP, raw and wrapped.

What moto does (5.2.5): CreateTopic, Subscribe with protocol ``sqs`` (confirmed at once),
Publish delivering synchronously to subscribed queues, either wrapped in the SNS JSON envelope
(``Type: Notification``, ``MessageId``, ``TopicArn``, ``Subject``, ``Message``, ``Timestamp``,
``SignatureVersion``, ``Signature``, ``SigningCertURL``, ``UnsubscribeURL``, message attributes)
or raw with ``RawMessageDelivery=true``; subscription filter policies. Gaps: signatures are
placeholders (not verifiable), queue policies are not enforced, no delivery retries.
"""

from __future__ import annotations

import json

from kubespot.sim.awssim import MotoServer


def test_publish_reaches_raw_and_wrapped_subscriptions(aws: MotoServer) -> None:
    """One publish: the raw queue gets the bare message, the other the SNS envelope."""
    sns = aws.client("sns")
    sqs = aws.client("sqs")
    topic = sns.create_topic(Name="interruptions")["TopicArn"]
    queues = {}
    for name in ("raw", "wrapped"):
        url = sqs.create_queue(QueueName=f"sns-{name}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        attributes = {"RawMessageDelivery": "true"} if name == "raw" else {}
        sub = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes=attributes)
        assert sub["SubscriptionArn"].startswith(topic)
        queues[name] = url

    payload = json.dumps({"Event": "autoscaling:TEST_NOTIFICATION", "AutoScalingGroupName": "ng-spot"})
    message_id = sns.publish(
        TopicArn=topic,
        Message=payload,
        Subject="Auto Scaling: test notification",
        MessageAttributes={"cluster": {"DataType": "String", "StringValue": "demo"}},
    )["MessageId"]

    raw = sqs.receive_message(QueueUrl=queues["raw"], MessageAttributeNames=["All"])["Messages"][0]
    assert raw["Body"] == payload
    assert raw["MessageAttributes"]["cluster"]["StringValue"] == "demo"

    wrapped = json.loads(sqs.receive_message(QueueUrl=queues["wrapped"])["Messages"][0]["Body"])
    assert wrapped["Type"] == "Notification"
    assert wrapped["MessageId"] == message_id
    assert wrapped["TopicArn"] == topic
    assert wrapped["Subject"] == "Auto Scaling: test notification"
    assert wrapped["Message"] == payload
    assert wrapped["MessageAttributes"]["cluster"] == {"Type": "String", "Value": "demo"}
    assert {"Timestamp", "SignatureVersion", "Signature", "SigningCertURL", "UnsubscribeURL"} <= set(wrapped)


def test_filter_policy_drops_unmatched_messages(aws: MotoServer) -> None:
    """A subscription filter policy on message attributes is honoured."""
    sns = aws.client("sns")
    sqs = aws.client("sqs")
    topic = sns.create_topic(Name="filtered")["TopicArn"]
    url = sqs.create_queue(QueueName="only-demo")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"FilterPolicy": json.dumps({"cluster": ["demo"]}), "RawMessageDelivery": "true"},
    )
    for cluster in ("other", "demo"):
        sns.publish(
            TopicArn=topic,
            Message=cluster,
            MessageAttributes={"cluster": {"DataType": "String", "StringValue": cluster}},
        )
    bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]]
    assert bodies == ["demo"]
