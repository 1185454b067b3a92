"""EventBridge rules with SQS targets, fed with the sample events of the reference.

What moto does (5.2.5, with kubespot's ``events_account`` extension): PutRule with an event
pattern (prefix/exact/anything-but matching on nested ``detail`` fields), PutTargets to an SQS
queue, PutEvents routing to every matching rule's targets; the delivered body is the full
envelope (version, id, detail-type, source, account, time, region, resources, detail) with the
event's own ``Time``. Stock moto leaves ``account`` out of the delivered body; the extension puts
it back. Gaps: moto does not refuse ``aws.*`` sources from PutEvents (AWS does, so tests can
impersonate AWS services, which is what we want here); queue policies are not enforced, so a
target queue without a policy allowing events.amazonaws.com still receives events; no retries or
target DLQs.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from kubespot.sim.awssim import MotoServer

#: The well-formed samples of shared/reference/events, kept with the tests as fixtures.
EVENTS_DIR = Path(__file__).resolve().parents[3] / "fixtures" / "eventbridge"

#: The rules people configure for one cluster queue (FACTS.md, "EventBridge events").
RULES: dict[str, dict[str, Any]] = {
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "cr-interruption": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"],
    },
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "state-change": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Instance State-change Notification"],
        "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]},
    },
    "asg-terminate": {
        "source": ["aws.autoscaling"],
        "detail-type": ["EC2 Instance-terminate Lifecycle Action"],
    },
    "health": {
        "source": ["aws.health"],
        "detail-type": ["AWS Health Event"],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    },
}

SAMPLES = [
    "spot-interruption-warning.json",
    "capacity-reservation-interruption-warning.json",
    "rebalance-recommendation.json",
    "instance-state-change.json",
    "asg-terminate-lifecycle-action.json",
    "health-scheduled-change.json",
]


def _setup(aws: MotoServer) -> tuple[Any, Any, str]:
    sqs = aws.client("sqs")
    events = aws.client("events")
    url = sqs.create_queue(QueueName="cluster-events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for name, pattern in RULES.items():
        events.put_rule(Name=f"kubespot-{name}", EventPattern=json.dumps(pattern), State="ENABLED")
        events.put_targets(Rule=f"kubespot-{name}", Targets=[{"Id": "queue", "Arn": arn}])
    return sqs, events, url


def _entry(sample: dict[str, Any]) -> dict[str, Any]:
    return {
        "Source": sample["source"],
        "DetailType": sample["detail-type"],
        "Detail": json.dumps(sample["detail"]),
        "Resources": sample["resources"],
        "Time": datetime.fromisoformat(sample["time"]),
    }


@pytest.mark.parametrize("sample_name", SAMPLES)
def test_sample_event_is_delivered_with_full_envelope(aws: MotoServer, sample_name: str) -> None:
    """PutEvents of a sample that a rule matches puts exactly one message with the AWS shape."""
    sqs, events, url = _setup(aws)
    sample = json.loads((EVENTS_DIR / sample_name).read_text())
    put = events.put_events(Entries=[_entry(sample)])
    assert put["FailedEntryCount"] == 0
    event_id = put["Entries"][0]["EventId"]

    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(messages) == 1
    body = json.loads(messages[0]["Body"])
    assert body["id"] == event_id  # EventBridge assigns the id, as in AWS
    assert body["account"] == aws.account_id  # added by the events_account extension
    assert body["region"] == aws.region
    for key in ("version", "detail-type", "source", "time", "resources", "detail"):
        assert body[key] == sample[key], key
    assert set(body) == {
        "version",
        "id",
        "detail-type",
        "source",
        "account",
        "time",
        "region",
        "resources",
        "detail",
    }


def test_unmatched_events_are_not_delivered(aws: MotoServer) -> None:
    """Pattern filtering: a running state change or a non-EC2 Health event reaches no queue."""
    sqs, events, url = _setup(aws)
    state = json.loads((EVENTS_DIR / "instance-state-change.json").read_text())
    state["detail"]["state"] = "running"
    health = json.loads((EVENTS_DIR / "health-scheduled-change.json").read_text())
    health["detail"]["service"] = "RDS"
    other = dict(state, source="aws.s3")
    events.put_events(Entries=[_entry(state), _entry(health), _entry(other)])
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)


def test_rules_and_targets_are_listed(aws: MotoServer) -> None:
    """ListRules / ListTargetsByRule report what was configured (the controller's self-check)."""
    _, events, _ = _setup(aws)
    names = {r["Name"] for r in events.list_rules(NamePrefix="kubespot-")["Rules"]}
    assert names == {f"kubespot-{n}" for n in RULES}
    targets = events.list_targets_by_rule(Rule="kubespot-health")["Targets"]
    assert [t["Id"] for t in targets] == ["queue"]
    rule = events.describe_rule(Name="kubespot-health")
    assert json.loads(rule["EventPattern"]) == RULES["health"]
