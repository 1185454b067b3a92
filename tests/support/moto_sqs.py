"""SQS queues on moto (``kubespot.sim.awssim.MotoServer``) as the end of a publishing path: a queue
made with its ARN (for SNS subscriptions and EventBridge targets), and what reached it."""

from __future__ import annotations

import json
from typing import Any

from kubespot.sim.awssim import MotoServer


def sqs_queue(aws: MotoServer, name: str, **attributes: str) -> tuple[str, str]:
    """(queue URL, queue ARN) of a new queue ``name``, with ``attributes`` (e.g. ``FifoQueue="true"``)."""
    sqs = aws.client("sqs")
    extra: dict[str, Any] = {"Attributes": attributes} if attributes else {}
    url = sqs.create_queue(QueueName=name, **extra)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return str(url), str(arn)


def received(aws: MotoServer, url: str) -> list[dict[str, Any]]:
    """Every message body on the queue, parsed (and deleted)."""
    sqs = aws.client("sqs")
    bodies: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
        if not got:
            return bodies
        for message in got:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
