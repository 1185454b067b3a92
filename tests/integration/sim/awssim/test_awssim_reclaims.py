"""Spot reclaims and interruption bands of the spot market, observed through EventBridge → SQS.

What the ``reclaims`` extension plays (EC2 User Guide "Spot Instance interruption notices" and "EC2
instance rebalance recommendations"; shapes in docs/designs/launching-research.md §5.1 and
tests/fixtures/eventbridge/): a rebalance recommendation (optional), an interruption warning per
instance, the instance terminated two minutes (scaled) later with state-change notifications, and
the reclaimed pool empty for new launches until restored. Interruption rates come in the Spot
Instance Advisor's bands (research §5.3). Delays here are a fraction of a second.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import market

AMI = "ami-12c6146b"

_CLIENTS: dict[tuple[int, str], Any] = {}


def _client(aws: MotoServer, service: str) -> Any:
    """One client per service for the session's server: building a boto3 client costs ~50 ms."""
    key = (id(aws), service)
    if key not in _CLIENTS:
        _CLIENTS[key] = aws.client(service)
    return _CLIENTS[key]


EVENTS_DIR = Path(__file__).resolve().parents[3] / "fixtures" / "eventbridge"
RULES = {
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "state-change": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Instance State-change Notification"],
        "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]},
    },
}


class Clock:
    """The market's "now", moved by the test: timed steps run when it passes them, not before."""

    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Iterator[Clock]:
    fake = Clock()
    market.set_clock(fake)
    yield fake
    market.set_clock(None)


def _queue(aws: MotoServer) -> str:
    sqs, events = _client(aws, "sqs"), _client(aws, "events")
    url = sqs.create_queue(QueueName="cluster-events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for name, pattern in RULES.items():
        events.put_rule(Name=name, EventPattern=json.dumps(pattern), State="ENABLED")
        events.put_targets(Rule=name, Targets=[{"Id": "queue", "Arn": arn}])
    return url


def _drain(aws: MotoServer, url: str) -> list[dict[str, Any]]:
    sqs = _client(aws, "sqs")
    bodies = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return bodies
        for message in messages:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def _launch(
    aws: MotoServer, instance_type: str, zone: str, count: int = 1, capacity_type: str = "spot"
) -> list[str]:
    ec2 = _client(aws, "ec2")
    if not ec2.describe_launch_templates()["LaunchTemplates"]:
        ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData={"ImageId": AMI})
    subnet = next(s["SubnetId"] for s in ec2.describe_subnets()["Subnets"] if s["AvailabilityZone"] == zone)
    answer = ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "nodes", "Version": "$Latest"},
                "Overrides": [{"InstanceType": instance_type, "SubnetId": subnet, "AvailabilityZone": zone}],
            }
        ],
        TargetCapacitySpecification={
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": capacity_type,
        },
    )
    return [i for group in answer.get("Instances", []) for i in group["InstanceIds"]]


def _state(aws: MotoServer, instance_id: str) -> dict[str, Any]:
    described = _client(aws, "ec2").describe_instances(InstanceIds=[instance_id])
    instance: dict[str, Any] = described["Reservations"][0]["Instances"][0]
    return instance


def _until(predicate: Any, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def _admin(aws: MotoServer, route: str, body: Any | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{aws.endpoint_url}/_kubespot/{route}", data=data, method="GET" if body is None else "POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _sample(name: str) -> dict[str, Any]:
    sample: dict[str, Any] = json.loads((EVENTS_DIR / name).read_text())
    return sample


def test_pool_reclaim_warns_terminates_and_empties_the_pool(aws: MotoServer, clock: Clock) -> None:
    """Reclaiming (spot, m5.large, us-east-1a): a rebalance recommendation and an interruption warning
    per instance, in the reference shapes; the instance runs until the delay is over, then is
    ``terminated`` (reason ``Server.SpotInstanceTermination``) with state-change notifications for
    ``shutting-down`` and ``terminated``; new launches into the pool fail until it is restored
    (User Guide "Spot Instance interruption notices", research §5.1)."""
    url = _queue(aws)
    victims = _launch(aws, "m5.large", "us-east-1a", count=2)
    bystander = _launch(aws, "c5.large", "us-east-1a")[0]
    on_demand = _launch(aws, "m5.large", "us-east-1a", capacity_type="on-demand")[0]

    record = _admin(
        aws,
        "ec2/reclaims",
        {
            "AvailabilityZone": "us-east-1a",
            "InstanceType": "m5.large",
            "Rebalance": True,
            "DelaySeconds": 120,
        },
    )
    assert sorted(record["instances"]) == sorted(victims)
    events = _drain(aws, url)
    kinds = sorted((e["detail-type"], e["detail"]["instance-id"]) for e in events)
    assert kinds == sorted(
        [("EC2 Instance Rebalance Recommendation", i) for i in victims]
        + [("EC2 Spot Instance Interruption Warning", i) for i in victims]
    )
    warning = next(e for e in events if e["detail-type"] == "EC2 Spot Instance Interruption Warning")
    reference = _sample("spot-interruption-warning.json")
    assert set(warning) == set(reference)
    assert set(warning["detail"]) == set(reference["detail"])
    assert warning["detail"]["instance-action"] == "terminate"
    assert warning["source"] == "aws.ec2"
    assert warning["resources"] == [
        f"arn:aws:ec2:us-east-1:{aws.account_id}:instance/{warning['detail']['instance-id']}"
    ]
    rebalance = next(e for e in events if e["detail-type"] == "EC2 Instance Rebalance Recommendation")
    assert set(rebalance["detail"]) == set(_sample("rebalance-recommendation.json")["detail"])
    assert record["terminate_at"] - record["warning_at"] == 120
    clock.now += 119
    assert _state(aws, victims[0])["State"]["Name"] == "running"  # two minutes of notice

    clock.now += 1
    _until(lambda: _state(aws, victims[0])["State"]["Name"] == "terminated")
    _until(lambda: _state(aws, victims[1])["State"]["Name"] == "terminated")
    assert _state(aws, victims[0])["StateReason"]["Code"] == "Server.SpotInstanceTermination"
    changes = sorted(
        (e["detail"]["instance-id"], e["detail"]["state"])
        for e in _drain(aws, url)
        if e["detail-type"] == "EC2 Instance State-change Notification"
    )
    assert changes == sorted((i, s) for i in victims for s in ("shutting-down", "terminated"))
    assert _state(aws, bystander)["State"]["Name"] == "running"
    assert _state(aws, on_demand)["State"]["Name"] == "running"
    requests = _client(aws, "ec2").describe_spot_instance_requests()["SpotInstanceRequests"]
    closed = {r["InstanceId"]: r for r in requests if r["InstanceId"] in victims}
    assert {r["Status"]["Code"] for r in closed.values()} == {"instance-terminated-no-capacity"}

    assert _launch(aws, "m5.large", "us-east-1a") == []  # the pool is empty now
    stats = {(p["CapacityType"], p["InstanceType"]): p for p in aws.pool_stats()["Pools"]}
    assert stats[("spot", "m5.large")]["Reclaimed"] == 2
    assert stats[("spot", "m5.large")]["Capacity"] == 0
    aws.set_pool_capacity(None, capacity_type="spot", instance_type="m5.large", zone="us-east-1a")
    assert len(_launch(aws, "m5.large", "us-east-1a")) == 1


def test_zone_reclaim_takes_every_spot_pool_of_the_zone(aws: MotoServer) -> None:
    """A zone-wide reclaim warns every spot instance of the zone, whatever its type, and empties
    the zone's spot pools, also those of types not launched yet; other zones keep theirs."""
    url = _queue(aws)
    in_zone = _launch(aws, "m5.large", "us-east-1b") + _launch(aws, "c5.large", "us-east-1b")
    elsewhere = _launch(aws, "m5.large", "us-east-1c")
    record = aws.reclaim_spot("us-east-1b", delay_s=0.2)
    assert sorted(record.instances) == sorted(in_zone)
    warned = {e["detail"]["instance-id"] for e in _drain(aws, url)}
    assert warned == set(in_zone)
    _until(lambda: all(_state(aws, i)["State"]["Name"] == "terminated" for i in in_zone))
    assert _state(aws, elsewhere[0])["State"]["Name"] == "running"
    assert _launch(aws, "r5.large", "us-east-1b") == []
    assert len(_launch(aws, "r5.large", "us-east-1c")) == 1
    assert aws.spot_reclaims()[0]["terminated"] == record.instances


def test_time_scale_shortens_the_two_minute_notice(aws: MotoServer, clock: Clock) -> None:
    """Without an explicit delay the warning leads termination by 120 s times the market's time scale
    (the sandbox runs AWS's timeline faster); the record says when each step is due. The market's
    clock is the test's, so a busy machine cannot run the notice out before the first look."""
    (instance,) = _launch(aws, "m5.large", "us-east-1a")
    _admin(aws, "ec2/market-settings", {"TimeScale": 0.002})  # 120 s -> 0.24 s
    record = aws.reclaim_spot("us-east-1a", "m5.large")
    assert record.terminate_at - record.warning_at == pytest.approx(0.24)
    clock.now += 0.2
    time.sleep(0.1)  # two ticks of the reclaim thread
    assert _state(aws, instance)["State"]["Name"] == "running"
    clock.now += 0.05
    _until(lambda: _state(aws, instance)["State"]["Name"] == "terminated")


def test_rebalance_recommendation_ahead_of_the_warning(aws: MotoServer, clock: Clock) -> None:
    """With a lead, the rebalance recommendation comes first and the interruption warning that much
    later ("EC2 instance rebalance recommendations": it may come before the warning), then the
    two-minute notice runs from the warning."""
    url = _queue(aws)
    (instance,) = _launch(aws, "m5.large", "us-east-1a")
    record = aws.reclaim_spot("us-east-1a", "m5.large", rebalance=True, rebalance_lead_s=30)
    assert [e["detail-type"] for e in _drain(aws, url)] == ["EC2 Instance Rebalance Recommendation"]
    assert record.terminate_at - record.started_at == 150
    clock.now += 30
    _until(lambda: bool(aws.spot_reclaims()[0]["warned"]))
    assert [e["detail-type"] for e in _drain(aws, url)] == ["EC2 Spot Instance Interruption Warning"]
    clock.now += 119
    assert _state(aws, instance)["State"]["Name"] == "running"
    clock.now += 1
    _until(lambda: _state(aws, instance)["State"]["Name"] == "terminated")


def test_instance_terminated_by_its_owner_is_left_alone(aws: MotoServer, clock: Clock) -> None:
    """An instance its owner terminates after the warning (as an interruption handler may) gets no
    spot termination and no further notifications from the reclaim."""
    url = _queue(aws)
    (instance,) = _launch(aws, "m5.large", "us-east-1a")
    aws.reclaim_spot("us-east-1a", "m5.large")
    assert [e["detail-type"] for e in _drain(aws, url)] == ["EC2 Spot Instance Interruption Warning"]
    _client(aws, "ec2").terminate_instances(InstanceIds=[instance])
    clock.now += 121
    time.sleep(0.1)  # two ticks of the reclaim thread
    assert _drain(aws, url) == []
    assert aws.spot_reclaims()[0]["terminated"] == []
    assert _state(aws, instance)["StateReason"]["Code"] == "Client.UserInitiatedShutdown"


def test_interruption_bands_default_configurable_and_readable(aws: MotoServer) -> None:
    """Each spot pool has an interruption band in the Spot Instance Advisor's labels (research §5.3);
    the default is stable per (type, zone), a rule changes it, the admin route reads it."""
    query = (
        "ec2/interruption-rates?instance_type=m5.large&instance_type=c5.large&zone=us-east-1a&zone=us-east-1b"
    )
    before = _admin(aws, query)
    assert before["Bands"] == ["<5%", "5-10%", "10-15%", "15-20%", ">20%"]
    assert len(before["InterruptionRates"]) == 4
    assert _admin(aws, query) == before  # stable
    _admin(
        aws,
        "ec2/interruption-rates",
        {"Band": ">20%", "InstanceType": "m5.*", "AvailabilityZone": "us-east-1a"},
    )
    after = {
        (r["InstanceType"], r["AvailabilityZone"]): r["Band"] for r in _admin(aws, query)["InterruptionRates"]
    }
    assert after[("m5.large", "us-east-1a")] == ">20%"
    untouched = {(r["InstanceType"], r["AvailabilityZone"]): r["Band"] for r in before["InterruptionRates"]}
    assert after[("c5.large", "us-east-1b")] == untouched[("c5.large", "us-east-1b")]
    aws.set_interruption_band(0, instance_type="c5.large")
    assert {r["Band"] for r in aws.interruption_rates(["c5.large"], ["us-east-1a", "us-east-1b"])} == {"<5%"}
    # Without a query: the spot pools the market has seen.
    _launch(aws, "m5.large", "us-east-1a")
    assert [(r["InstanceType"], r["AvailabilityZone"], r["Band"]) for r in aws.interruption_rates()] == [
        ("m5.large", "us-east-1a", ">20%")
    ]


def test_admin_routes_reject_bad_requests(aws: MotoServer) -> None:
    """Bad bodies are 400 with a reason, unknown market routes 404 (as the other admin routes)."""
    for route, body in (
        ("ec2/pool-capacity", {"Capacity": -1}),
        ("ec2/interruption-rates", {"Band": "30%"}),
        ("ec2/market-settings", {"TimeScale": 0}),
        ("ec2/reclaims", {}),
    ):
        with pytest.raises(urllib.error.HTTPError) as raised:
            _admin(aws, route, body)
        assert raised.value.code == 400, route
    with pytest.raises(urllib.error.HTTPError) as raised:
        _admin(aws, "ec2/nothing-here")
    assert raised.value.code == 404
