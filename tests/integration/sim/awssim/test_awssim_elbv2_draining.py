"""ELBv2 deregistration as AWS does it (extension ``elbv2_draining``), through boto3 over HTTP.

AWS: a deregistered target is ``draining`` (``Target.DeregistrationInProgress``) for the target
group's ``deregistration_delay.timeout_seconds`` (default 300), listed by DescribeTargetHealth
meanwhile, then gone; DeregisterTargets of a target that does not exist succeeds; registering a
draining target registers it again. Stock moto 5.2.5 removed targets at once and answered
``InvalidTarget``. The delays here are set to 1-2 s so the tests see the whole cycle.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal

import pytest

from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import elbv2_draining

if TYPE_CHECKING:
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client

AMI = "ami-12c6146b"


def _group(
    aws: MotoServer, *, target_type: Literal["ip", "instance"] = "ip", delay: int | None = None
) -> tuple[Any, str]:
    ec2 = aws.client("ec2")
    elb = aws.client("elbv2")
    vpc_id = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    protocol: Literal["TCP", "HTTP"] = "TCP" if target_type == "ip" else "HTTP"
    arn = elb.create_target_group(
        Name=f"tg-{target_type}", Protocol=protocol, Port=80, VpcId=vpc_id, TargetType=target_type
    )["TargetGroups"][0]["TargetGroupArn"]
    if delay is not None:
        elb.modify_target_group_attributes(
            TargetGroupArn=arn,
            Attributes=[{"Key": "deregistration_delay.timeout_seconds", "Value": str(delay)}],
        )
    return elb, arn


def _states(elb: ElasticLoadBalancingv2Client, arn: str) -> dict[str, tuple[str, str | None]]:
    health = elb.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
    return {h["Target"]["Id"]: (h["TargetHealth"]["State"], h["TargetHealth"].get("Reason")) for h in health}


def _one_target(elb: ElasticLoadBalancingv2Client, arn: str, target_id: str) -> dict[str, Any]:
    """The health description of ``target_id`` asked for by id (an unlisted target has one too)."""
    [desc] = elb.describe_target_health(TargetGroupArn=arn, Targets=[{"Id": target_id}])[
        "TargetHealthDescriptions"
    ]
    return dict(desc)


def _wait_gone(elb: ElasticLoadBalancingv2Client, arn: str, target_id: str, within: float = 10.0) -> float:
    """Poll until ``target_id`` is no longer listed; return when (monotonic)."""
    deadline = time.monotonic() + within
    while target_id in _states(elb, arn):
        assert time.monotonic() < deadline, f"{target_id} still listed after {within}s"
        time.sleep(0.05)
    return time.monotonic()


def test_deregistered_target_drains_for_the_delay_then_is_gone(aws: MotoServer) -> None:
    elb, arn = _group(aws, delay=1)
    elb.register_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1"}, {"Id": "10.0.0.2"}])
    assert _states(elb, arn) == {"10.0.0.1": ("healthy", None), "10.0.0.2": ("healthy", None)}

    started = time.monotonic()
    elb.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1"}])
    # Listed without asking for it, and when asked for by id.
    assert _states(elb, arn) == {
        "10.0.0.1": ("draining", "Target.DeregistrationInProgress"),
        "10.0.0.2": ("healthy", None),
    }
    desc = _one_target(elb, arn, "10.0.0.1")
    assert desc["TargetHealth"] == {
        "State": "draining",
        "Reason": "Target.DeregistrationInProgress",
        "Description": "Target deregistration is in progress",
    }
    assert desc["Target"] == {"Id": "10.0.0.1", "Port": 80}

    gone_at = _wait_gone(elb, arn, "10.0.0.1")
    assert gone_at - started >= 1.0 - 0.05  # never before the delay (the clock is monotonic)
    assert _states(elb, arn) == {"10.0.0.2": ("healthy", None)}
    after = _one_target(elb, arn, "10.0.0.1")["TargetHealth"]
    assert (after["State"], after["Reason"]) == ("unused", "Target.NotRegistered")


def test_default_delay_is_300_seconds(aws: MotoServer) -> None:
    elb, arn = _group(aws)
    elb.register_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1"}])
    elb.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1"}])
    left = elbv2_draining.draining_targets(aws.account_id, aws.region, arn)
    assert set(left) == {"10.0.0.1"}
    assert 295 < left["10.0.0.1"] <= 300


def test_zero_delay_skips_draining(aws: MotoServer) -> None:
    elb, arn = _group(aws, delay=0)
    elb.register_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1"}])
    elb.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1"}])
    assert _states(elb, arn) == {}


def test_deregistering_a_target_that_is_not_registered_succeeds(aws: MotoServer) -> None:
    """AWS: 'If the specified target does not exist, the action returns successfully'.

    Stock moto answered InvalidTarget.
    """
    elb, arn = _group(aws, delay=30)
    elb.register_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1"}])
    elb.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": "10.9.9.9"}])
    assert _states(elb, arn) == {"10.0.0.1": ("healthy", None)}

    # Twice in a row (a retried call, or two processes acting on one node): the second is a no-op
    # and does not restart the delay.
    elb.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1"}])
    first = elbv2_draining.draining_targets(aws.account_id, aws.region, arn)["10.0.0.1"]
    time.sleep(0.1)
    elb.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1"}])
    second = elbv2_draining.draining_targets(aws.account_id, aws.region, arn)["10.0.0.1"]
    assert second < first
    assert _states(elb, arn) == {"10.0.0.1": ("draining", "Target.DeregistrationInProgress")}


def test_unregistered_ip_target_is_unused(aws: MotoServer) -> None:
    """moto said ``unavailable`` for an ip target it did not know; AWS says ``unused``."""
    elb, arn = _group(aws)
    desc = _one_target(elb, arn, "10.9.9.9")["TargetHealth"]
    assert (desc["State"], desc["Reason"]) == ("unused", "Target.NotRegistered")


def test_port_override_must_be_named_to_deregister(aws: MotoServer) -> None:
    """AWS: a target registered with a port override is deregistered only with that port."""
    elb, arn = _group(aws, delay=30)
    elb.register_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1", "Port": 8080}])
    elb.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1"}])  # means port 80: no such target
    assert _states(elb, arn) == {"10.0.0.1": ("healthy", None)}
    elb.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1", "Port": 9090}])
    assert _states(elb, arn) == {"10.0.0.1": ("healthy", None)}
    elb.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1", "Port": 8080}])
    health = elb.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
    assert [(h["Target"], h["TargetHealth"]["State"]) for h in health] == [
        ({"Id": "10.0.0.1", "Port": 8080}, "draining")
    ]


def test_registering_a_draining_target_registers_it_again(aws: MotoServer) -> None:
    elb, arn = _group(aws, delay=1)
    elb.register_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1"}])
    elb.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1"}])
    assert _states(elb, arn)["10.0.0.1"][0] == "draining"
    elb.register_targets(TargetGroupArn=arn, Targets=[{"Id": "10.0.0.1"}])
    assert _states(elb, arn) == {"10.0.0.1": ("healthy", None)}
    # The cancelled deregistration does not complete later.
    time.sleep(1.2)
    assert _states(elb, arn) == {"10.0.0.1": ("healthy", None)}
    assert elbv2_draining.draining_targets(aws.account_id, aws.region, arn) == {}


def test_terminated_instance_drains_then_is_gone(aws: MotoServer) -> None:
    """moto reported a terminated instance ``draining`` forever; now it drains for the delay."""
    ec2 = aws.client("ec2")
    instances = ec2.run_instances(ImageId=AMI, MinCount=2, MaxCount=2, InstanceType="m5.large")["Instances"]
    ids = [i["InstanceId"] for i in instances]
    elb, arn = _group(aws, target_type="instance", delay=1)
    elb.register_targets(TargetGroupArn=arn, Targets=[{"Id": i} for i in ids])
    ec2.terminate_instances(InstanceIds=[ids[0]])
    assert _states(elb, arn) == {
        ids[0]: ("draining", "Target.DeregistrationInProgress"),
        ids[1]: ("healthy", None),
    }
    _wait_gone(elb, arn, ids[0])
    assert _states(elb, arn) == {ids[1]: ("healthy", None)}


def test_instance_target_drains_and_unknown_group_is_an_error(aws: MotoServer) -> None:
    ec2 = aws.client("ec2")
    [instance] = ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1, InstanceType="m5.large")["Instances"]
    elb, arn = _group(aws, target_type="instance", delay=30)
    elb.register_targets(TargetGroupArn=arn, Targets=[{"Id": instance["InstanceId"]}])
    elb.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": instance["InstanceId"]}])
    assert _states(elb, arn) == {instance["InstanceId"]: ("draining", "Target.DeregistrationInProgress")}

    missing = arn.rsplit("/", 1)[0] + "/0123456789abcdef"
    with pytest.raises(elb.exceptions.TargetGroupNotFoundException):
        elb.describe_target_health(TargetGroupArn=missing)
    with pytest.raises(elb.exceptions.TargetGroupNotFoundException):
        elb.deregister_targets(TargetGroupArn=missing, Targets=[{"Id": "10.0.0.1"}])
