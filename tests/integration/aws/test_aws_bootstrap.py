"""``kubespot aws bootstrap`` against moto over HTTP: what it creates, idempotence, event delivery.

The command runs in-process through ``kubespot.cli.main`` with ``--endpoint-url`` pointing at the
session's moto server and moto's fake credentials in the environment (``aws_env``). The expected
event patterns are written out here, independently of the code, from the rules
aws-node-termination-handler documents (FACTS.md).

moto gaps that shape these tests: queue policies are not enforced (delivery is checked, the
policy's contents are asserted instead); nothing is encrypted (SSE attributes are stored and
returned, and a --kms-key queue still receives events); ``aws.*`` sources are accepted from
PutEvents, which is how the sample events are injected.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from kubespot.aws import iam
from kubespot.cli import main
from kubespot.sim.awssim import MotoServer

EVENTS_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "eventbridge"
CLUSTER = "prod"
QUEUE = "prod-kubespot-interruptions"
DLQ = "prod-kubespot-interruptions-dlq"
STEP_LINE = re.compile(r"  (dead-letter queue|queue|rule|target) ")

#: rule name suffix -> (pattern, sample event file)
EXPECTED: dict[str, tuple[dict[str, Any], str]] = {
    "spot-interruption": (
        {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
        "spot-interruption-warning.json",
    ),
    "cr-interruption": (
        {"source": ["aws.ec2"], "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"]},
        "capacity-reservation-interruption-warning.json",
    ),
    "rebalance": (
        {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
        "rebalance-recommendation.json",
    ),
    "state-change": (
        {
            "source": ["aws.ec2"],
            "detail-type": ["EC2 Instance State-change Notification"],
            "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]},
        },
        "instance-state-change.json",
    ),
    "asg-lifecycle": (
        {
            "source": ["aws.autoscaling"],
            "detail-type": [
                "EC2 Instance-terminate Lifecycle Action",
                "EC2 Instance-launch Lifecycle Action",
            ],
        },
        "asg-terminate-lifecycle-action.json",
    ),
    "scheduled-change": (
        {
            "source": ["aws.health"],
            "detail-type": ["AWS Health Event"],
            "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
        },
        "health-scheduled-change.json",
    ),
}


def run(aws: MotoServer, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    argv = [
        "aws",
        "bootstrap",
        "--cluster",
        CLUSTER,
        "--endpoint-url",
        aws.endpoint_url,
        "--region",
        aws.region,
    ]
    code = main([*argv, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def snapshot(aws: MotoServer) -> dict[str, Any]:
    """Everything bootstrap could have touched, as the APIs describe it (timestamps included)."""
    sqs, events = aws.client("sqs"), aws.client("events")
    queues = {}
    for url in sqs.list_queues().get("QueueUrls", []):
        queues[url] = {
            "attributes": sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"],
            "tags": sqs.list_queue_tags(QueueUrl=url).get("Tags", {}),
        }
    rules = {}
    for rule in events.list_rules()["Rules"]:
        described = events.describe_rule(Name=rule["Name"])
        described.pop("ResponseMetadata")
        rules[rule["Name"]] = {
            "rule": described,
            "targets": events.list_targets_by_rule(Rule=rule["Name"])["Targets"],
            "tags": events.list_tags_for_resource(ResourceARN=rule["Arn"])["Tags"],
        }
    return {"queues": queues, "rules": rules}


def queue_attributes(aws: MotoServer, name: str) -> dict[str, str]:
    sqs = aws.client("sqs")
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    return dict(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"])


def arn(aws: MotoServer, service: str, resource: str) -> str:
    return f"arn:aws:{service}:{aws.region}:{aws.account_id}:{resource}"


def put_sample(aws: MotoServer, sample_file: str) -> None:
    sample = json.loads((EVENTS_DIR / sample_file).read_text())
    put = aws.client("events").put_events(
        Entries=[
            {
                "Source": sample["source"],
                "DetailType": sample["detail-type"],
                "Detail": json.dumps(sample["detail"]),
                "Resources": sample["resources"],
                "Time": datetime.fromisoformat(sample["time"]),
            }
        ]
    )
    assert put["FailedEntryCount"] == 0


def drain_queue(aws: MotoServer) -> list[dict[str, Any]]:
    sqs = aws.client("sqs")
    url = sqs.get_queue_url(QueueName=QUEUE)["QueueUrl"]
    bodies: list[dict[str, Any]] = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return bodies
        for m in messages:
            bodies.append(json.loads(m["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def test_bootstrap_creates_queue_dlq_rules_and_targets(
    aws_env: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Queue with SSE, 300 s retention, redrive after 5 receives and a scoped policy; DLQ; 5 rules."""
    aws = aws_env
    code, out, err = run(aws, capsys)
    assert code == 0, err
    queue_arn, dlq_arn = arn(aws, "sqs", QUEUE), arn(aws, "sqs", DLQ)

    queue = queue_attributes(aws, QUEUE)
    assert queue["QueueArn"] == queue_arn
    assert queue["SqsManagedSseEnabled"] == "true"
    assert "KmsMasterKeyId" not in queue
    assert queue["MessageRetentionPeriod"] == "300"
    redrive = json.loads(queue["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == dlq_arn
    assert int(redrive["maxReceiveCount"]) == 5

    dlq = queue_attributes(aws, DLQ)
    assert dlq["SqsManagedSseEnabled"] == "true"
    assert dlq["MessageRetentionPeriod"] == "1209600"  # longer than the source: enqueue time is kept
    assert "RedrivePolicy" not in dlq

    rule_arns = sorted(arn(aws, "events", f"rule/{CLUSTER}-kubespot-{k}") for k in EXPECTED)
    policy = json.loads(queue["Policy"])
    by_principal = {s["Principal"]["Service"]: s for s in policy["Statement"]}
    assert set(by_principal) == {"events.amazonaws.com", "sqs.amazonaws.com"}
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        assert statement["Action"] == "sqs:SendMessage"
        assert statement["Resource"] == queue_arn
    assert (
        sorted(by_principal["events.amazonaws.com"]["Condition"]["ArnEquals"]["aws:SourceArn"]) == rule_arns
    )
    assert by_principal["sqs.amazonaws.com"]["Condition"] == {
        "StringEquals": {"aws:SourceAccount": aws.account_id}
    }

    events = aws.client("events")
    names = {r["Name"] for r in events.list_rules()["Rules"]}
    assert names == {f"{CLUSTER}-kubespot-{k}" for k in EXPECTED}
    for kind, (pattern, _) in EXPECTED.items():
        rule = events.describe_rule(Name=f"{CLUSTER}-kubespot-{kind}")
        assert json.loads(rule["EventPattern"]) == pattern, kind
        assert rule["State"] == "ENABLED"
        targets = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
        assert targets == [{"Id": "kubespot-queue", "Arn": queue_arn}]

    # Printed: every step, the queue URL, the controller's settings and its IAM policy.
    url = aws.client("sqs").get_queue_url(QueueName=QUEUE)["QueueUrl"]
    assert f"Queue URL: {url}" in out
    assert f"KUBESPOT_QUEUE_URL={url}" in out
    assert f"KUBESPOT_AWS_REGION={aws.region}" in out
    assert out.count(" created") == 2 + 2 * len(EXPECTED)
    printed = json.loads(out[out.index("{\n") :])
    assert printed == iam.controller_policy(queue_arn)


def test_second_run_changes_nothing(aws_env: MotoServer, capsys: pytest.CaptureFixture[str]) -> None:
    """Idempotent: the full describe output is identical after a second run, which says so."""
    assert run(aws_env, capsys)[0] == 0
    before = snapshot(aws_env)
    code, out, _ = run(aws_env, capsys)
    assert code == 0
    assert snapshot(aws_env) == before
    assert "Everything was already up to date." in out
    steps = [line for line in out.splitlines() if STEP_LINE.match(line)]
    assert len(steps) == 2 + 2 * len(EXPECTED)
    assert all("up to date" in line for line in steps), steps


def test_drift_is_put_back(aws_env: MotoServer, capsys: pytest.CaptureFixture[str]) -> None:
    """Changed retention, pattern, state and target are reported as updated and restored."""
    aws = aws_env
    assert run(aws, capsys)[0] == 0
    expected = snapshot(aws)
    sqs, events = aws.client("sqs"), aws.client("events")
    url = sqs.get_queue_url(QueueName=QUEUE)["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "3600"})
    events.put_rule(
        Name=f"{CLUSTER}-kubespot-rebalance",
        EventPattern=json.dumps({"source": ["aws.ec2"]}),
        State="DISABLED",
    )
    events.put_targets(
        Rule=f"{CLUSTER}-kubespot-state-change",
        Targets=[{"Id": "kubespot-queue", "Arn": arn(aws, "sqs", "elsewhere")}],
    )

    code, out, _ = run(aws, capsys, "--dry-run")
    assert code == 0
    assert out.count("would update") == 3
    assert queue_attributes(aws, QUEUE)["MessageRetentionPeriod"] == "3600"  # dry run wrote nothing

    code, out, _ = run(aws, capsys)
    assert code == 0
    assert out.count(" updated") == 3
    after = snapshot(aws)
    assert queue_attributes(aws, QUEUE)["MessageRetentionPeriod"] == "300"
    for name, rule in after["rules"].items():
        assert rule["rule"]["EventPattern"] == expected["rules"][name]["rule"]["EventPattern"]
        assert rule["rule"]["State"] == "ENABLED"
        assert rule["targets"] == expected["rules"][name]["targets"]


def test_each_sample_event_arrives_on_the_queue(
    aws_env: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end through moto's EventBridge -> SQS delivery: one message per sample, as sent."""
    aws = aws_env
    assert run(aws, capsys)[0] == 0
    for kind, (_, sample_file) in EXPECTED.items():
        put_sample(aws, sample_file)
        bodies = drain_queue(aws)
        sample = json.loads((EVENTS_DIR / sample_file).read_text())
        assert len(bodies) == 1, kind
        assert bodies[0]["detail-type"] == sample["detail-type"]
        assert bodies[0]["detail"] == sample["detail"]


def test_skipped_kinds_get_no_rule_and_no_events(
    aws_env: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """--no-rebalance --no-scheduled-change: no rules, no deliveries, not in the queue policy."""
    aws = aws_env
    code, _, err = run(aws, capsys, "--no-rebalance", "--no-scheduled-change")
    assert code == 0, err
    kept = {"spot-interruption", "cr-interruption", "state-change", "asg-lifecycle"}
    names = {r["Name"] for r in aws.client("events").list_rules()["Rules"]}
    assert names == {f"{CLUSTER}-kubespot-{k}" for k in kept}
    policy = json.loads(queue_attributes(aws, QUEUE)["Policy"])
    source_arns = next(
        s["Condition"]["ArnEquals"]["aws:SourceArn"]
        for s in policy["Statement"]
        if s["Principal"]["Service"] == "events.amazonaws.com"
    )
    assert sorted(source_arns) == sorted(arn(aws, "events", f"rule/{CLUSTER}-kubespot-{k}") for k in kept)

    for kind, (_, sample_file) in EXPECTED.items():
        put_sample(aws, sample_file)
        assert len(drain_queue(aws)) == (1 if kind in kept else 0), kind


def test_skipping_a_kind_later_leaves_its_rule_and_says_so(
    aws_env: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rule from an earlier run is not deleted by --no-<kind>; the step says 'exists' and why."""
    aws = aws_env
    assert run(aws, capsys)[0] == 0
    code, out, _ = run(aws, capsys, "--no-rebalance")
    assert code == 0
    line = next(line for line in out.splitlines() if f"{CLUSTER}-kubespot-rebalance " in line)
    assert " exists " in line and "--no-rebalance" in line
    assert f"{CLUSTER}-kubespot-rebalance" in {r["Name"] for r in aws.client("events").list_rules()["Rules"]}
    assert "queue policy" in next(line for line in out.splitlines() if f" {QUEUE} " in line)


def test_dry_run_creates_nothing(aws_env: MotoServer, capsys: pytest.CaptureFixture[str]) -> None:
    """--dry-run only reads: nothing exists afterwards, and the plan lists every creation."""
    aws = aws_env
    code, out, err = run(aws, capsys, "--dry-run")
    assert code == 0, err
    assert snapshot(aws) == {"queues": {}, "rules": {}}
    assert out.count("would create") == 2 + 2 * len(EXPECTED)
    assert "nothing created" in out


def test_json_output(aws_env: MotoServer, capsys: pytest.CaptureFixture[str]) -> None:
    """--output json: one object with steps, URLs, controller settings and the policy; nothing else."""
    aws = aws_env
    code, out, _ = run(aws, capsys, "--output", "json")
    assert code == 0
    result = json.loads(out)
    url = aws.client("sqs").get_queue_url(QueueName=QUEUE)["QueueUrl"]
    assert result["changed"] is True
    assert result["queue"] == {"name": QUEUE, "url": url, "arn": arn(aws, "sqs", QUEUE)}
    assert result["dead_letter_queue"]["arn"] == arn(aws, "sqs", DLQ)
    assert result["controller_settings"] == {"KUBESPOT_QUEUE_URL": url, "KUBESPOT_AWS_REGION": aws.region}
    assert result["iam_policy"] == iam.controller_policy(arn(aws, "sqs", QUEUE))
    assert {s["status"] for s in result["steps"]} == {"created"}
    again = json.loads(run(aws, capsys, "--output", "json")[1])
    assert again["changed"] is False
    assert {s["status"] for s in again["steps"]} == {"up to date"}


def test_customer_managed_key(aws_env: MotoServer, capsys: pytest.CaptureFixture[str]) -> None:
    """--kms-key: both queues use the CMK; the controller gets kms:Decrypt on it; events still arrive."""
    aws = aws_env
    key = arn(aws, "kms", "key/1234abcd-12ab-34cd-56ef-1234567890ab")
    code, out, err = run(aws, capsys, "--kms-key", key, "--output", "json")
    assert code == 0, err
    for name in (QUEUE, DLQ):
        attrs = queue_attributes(aws, name)
        assert attrs["KmsMasterKeyId"] == key
        assert attrs.get("SqsManagedSseEnabled", "false") == "false"
    result = json.loads(out)
    kms = [s for s in result["iam_policy"]["Statement"] if s["Resource"] == key]
    assert [s["Action"] for s in kms] == [["kms:Decrypt"]]
    assert any("key policy" in note for note in result["notes"])
    put_sample(aws, "spot-interruption-warning.json")  # moto does not encrypt: delivery only
    assert len(drain_queue(aws)) == 1
    before = snapshot(aws)
    assert run(aws, capsys, "--kms-key", key)[0] == 0
    assert snapshot(aws) == before


def test_existing_customer_key_is_kept(aws_env: MotoServer, capsys: pytest.CaptureFixture[str]) -> None:
    """A queue someone encrypted with a CMK is not switched to SSE-SQS; the policy grants that key."""
    aws = aws_env
    key = arn(aws, "kms", "key/1234abcd-12ab-34cd-56ef-1234567890ab")
    aws.client("sqs").create_queue(QueueName=QUEUE, Attributes={"KmsMasterKeyId": key})
    code, out, _ = run(aws, capsys, "--output", "json")
    assert code == 0
    result = json.loads(out)
    assert queue_attributes(aws, QUEUE)["KmsMasterKeyId"] == key
    assert result["kms_key_arn"] == key
    assert any(f"customer key {key}; kept" in note for note in result["notes"])
    assert any(s["Resource"] == key for s in result["iam_policy"]["Statement"])


def test_asg_arns_scope_the_lifecycle_permissions(
    aws_env: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    aws = aws_env
    group = arn(aws, "autoscaling", "autoScalingGroup:*:autoScalingGroupName/ng-spot")
    result = json.loads(run(aws, capsys, "--asg-arn", group, "--output", "json")[1])
    asg = next(s for s in result["iam_policy"]["Statement"] if s["Sid"] == "CompleteLifecycleActions")
    assert asg["Resource"] == [group]


def test_errors_exit_non_zero(
    aws_env: MotoServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bad input: exit 2 before any call. An unreachable endpoint: exit 1 with the SDK's reason."""
    aws = aws_env
    assert main(["aws", "bootstrap", "--cluster", "bad name!", "--endpoint-url", aws.endpoint_url]) == 2
    assert "cluster name" in capsys.readouterr().err
    assert main(["aws", "bootstrap", "--cluster", "x" * 40, "--endpoint-url", aws.endpoint_url]) == 2
    assert "too long" in capsys.readouterr().err
    assert main(["aws", "bootstrap", "--cluster", "c", "--kms-key", "alias/mine"]) == 2
    assert "not an alias" in capsys.readouterr().err
    assert main(["aws", "bootstrap", "--cluster", "c", "--endpoint-url", "ftp://x"]) == 2
    capsys.readouterr()
    monkeypatch.setenv("KUBESPOT_AWS_MAX_ATTEMPTS", "1")
    assert main(["aws", "bootstrap", "--cluster", "c", "--endpoint-url", "http://127.0.0.1:9"]) == 1
    assert "error:" in capsys.readouterr().err
    assert snapshot(aws) == {"queues": {}, "rules": {}}
