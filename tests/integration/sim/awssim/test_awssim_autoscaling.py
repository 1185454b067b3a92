"""Auto Scaling groups and lifecycle hooks, with kubespot's ``lifecycle`` extension.

What stock moto does (5.2.5): CreateAutoScalingGroup from a launch template launches the desired
instances (tagged ``aws:autoscaling:groupName``), DescribeAutoScalingGroups/Instances, PutLifecycleHook
and DescribeLifecycleHooks (but it drops NotificationTargetARN/RoleARN/NotificationMetadata and
reports placeholders), TerminateInstanceInAutoScalingGroup. What it does not do: run lifecycle
hooks at all (no wait state, no token, no notification), CompleteLifecycleAction and
RecordLifecycleActionHeartbeat (HTTP 500, not implemented).

The extension adds: lifecycle actions started by the harness (``MotoServer.start_lifecycle_action``
or ``POST /_kubespot/autoscaling/lifecycle-actions``) that put the instance in ``Terminating:Wait``,
issue a token, emit the EventBridge event and the hook's direct notification; the two calls with
AWS's ValidationError texts; termination (and replacement) on completion; heartbeats that extend
the deadline; DefaultResult on timeout; hooks keeping their notification target and metadata.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from botocore.exceptions import ClientError

from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import lifecycle
from support.moto_asg import auto_scaling_group
from support.moto_sqs import sqs_queue

GROUP = "ng-spot"
HOOK = "kubespot-terminate"


def _group(aws: MotoServer, *, desired: int = 2, target_arn: str | None = None, timeout: int = 300) -> Any:
    auto_scaling_group(aws, GROUP, desired=desired, zones=("a", "b"))
    asg = aws.client("autoscaling")
    hook: dict[str, Any] = {
        "LifecycleHookName": HOOK,
        "AutoScalingGroupName": GROUP,
        "LifecycleTransition": lifecycle.TERMINATING,
        "HeartbeatTimeout": timeout,
        "DefaultResult": "CONTINUE",
        "NotificationMetadata": "cluster=demo",
    }
    if target_arn:
        hook["NotificationTargetARN"] = target_arn
        hook["RoleARN"] = "arn:aws:iam::123456789012:role/asg-notify"
    asg.put_lifecycle_hook(**hook)
    return asg


def _instances(asg: Any) -> dict[str, str]:
    group = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[GROUP])["AutoScalingGroups"][0]
    return {i["InstanceId"]: i["LifecycleState"] for i in group["Instances"]}


def _error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    return exc.value.response["Error"]["Code"], exc.value.response["Error"]["Message"]


def test_group_and_hook_are_created(aws: MotoServer) -> None:
    """Group launches its desired instances; the hook keeps target, role and metadata (extension)."""
    _, target = sqs_queue(aws, "asg-notify")
    asg = _group(aws, target_arn=target)
    instances = _instances(asg)
    assert len(instances) == 2
    assert set(instances.values()) == {"InService"}
    hooks = asg.describe_lifecycle_hooks(AutoScalingGroupName=GROUP)["LifecycleHooks"]
    assert len(hooks) == 1
    assert hooks[0]["LifecycleTransition"] == lifecycle.TERMINATING
    assert hooks[0]["HeartbeatTimeout"] == 300
    assert hooks[0]["DefaultResult"] == "CONTINUE"
    assert hooks[0]["NotificationTargetARN"] == target
    assert hooks[0]["NotificationMetadata"] == "cluster=demo"
    tags = aws.client("ec2").describe_tags(
        Filters=[
            {"Name": "resource-id", "Values": list(instances)},
            {"Name": "key", "Values": ["aws:autoscaling:groupName"]},
        ]
    )["Tags"]
    assert {t["Value"] for t in tags} == {GROUP}


def test_lifecycle_action_notifies_heartbeats_and_completes(aws: MotoServer) -> None:
    """Start -> both notifications -> heartbeat -> wrong inputs rejected -> CONTINUE terminates."""
    sqs = aws.client("sqs")
    direct_url, direct_arn = sqs_queue(aws, "asg-notify")
    events_url, events_arn = sqs_queue(aws, "cluster-events")
    events = aws.client("events")
    events.put_rule(
        Name="asg",
        EventPattern=json.dumps(
            {"source": ["aws.autoscaling"], "detail-type": ["EC2 Instance-terminate Lifecycle Action"]}
        ),
    )
    events.put_targets(Rule="asg", Targets=[{"Id": "q", "Arn": events_arn}])
    asg = _group(aws, target_arn=direct_arn)
    victim = sorted(_instances(asg))[0]

    action = aws.start_lifecycle_action(GROUP, victim)
    assert action.lifecycle_hook_name == HOOK
    assert _instances(asg)[victim] == "Terminating:Wait"
    described = asg.describe_auto_scaling_instances(InstanceIds=[victim])["AutoScalingInstances"][0]
    assert described["LifecycleState"] == "Terminating:Wait"

    direct = json.loads(sqs.receive_message(QueueUrl=direct_url)["Messages"][0]["Body"])
    assert direct["LifecycleActionToken"] == action.token
    assert direct["EC2InstanceId"] == victim
    assert direct["LifecycleTransition"] == lifecycle.TERMINATING
    assert direct["NotificationMetadata"] == "cluster=demo"
    assert {
        "Origin",
        "Destination",
        "AccountId",
        "RequestId",
        "Service",
        "Time",
        "AutoScalingGroupName",
    } <= set(direct)
    event = json.loads(sqs.receive_message(QueueUrl=events_url)["Messages"][0]["Body"])
    assert event["source"] == "aws.autoscaling"
    assert event["detail-type"] == "EC2 Instance-terminate Lifecycle Action"
    assert event["account"] == aws.account_id
    assert event["detail"]["LifecycleActionToken"] == action.token
    assert event["detail"]["LifecycleHookName"] == HOOK
    assert event["detail"]["NotificationMetadata"] == "cluster=demo"
    assert event["resources"][0].startswith("arn:aws:autoscaling:")

    asg.record_lifecycle_action_heartbeat(
        AutoScalingGroupName=GROUP, LifecycleHookName=HOOK, LifecycleActionToken=action.token
    )
    asg.record_lifecycle_action_heartbeat(
        AutoScalingGroupName=GROUP, LifecycleHookName=HOOK, InstanceId=victim
    )
    (recorded,) = aws.lifecycle_actions()
    assert len(recorded.heartbeats) == 2
    assert recorded.deadline > recorded.started_at + 299

    with pytest.raises(ClientError) as wrong_token:
        asg.complete_lifecycle_action(
            AutoScalingGroupName=GROUP,
            LifecycleHookName=HOOK,
            LifecycleActionToken="00000000-0000-0000-0000-000000000000",
            LifecycleActionResult="CONTINUE",
        )
    assert _error(wrong_token) == (
        "ValidationError",
        "No active Lifecycle Action found with token 00000000-0000-0000-0000-000000000000",
    )
    with pytest.raises(ClientError) as wrong_hook:
        asg.complete_lifecycle_action(
            AutoScalingGroupName=GROUP,
            LifecycleHookName="other-hook",
            LifecycleActionToken=action.token,
            LifecycleActionResult="CONTINUE",
        )
    assert _error(wrong_hook)[0] == "ValidationError"
    with pytest.raises(ClientError) as wrong_instance:
        asg.record_lifecycle_action_heartbeat(
            AutoScalingGroupName=GROUP, LifecycleHookName=HOOK, InstanceId="i-00000000000000000"
        )
    assert _error(wrong_instance) == (
        "ValidationError",
        "No active Lifecycle Action found with instance ID i-00000000000000000",
    )
    with pytest.raises(ClientError) as bad_result:
        asg.complete_lifecycle_action(
            AutoScalingGroupName=GROUP,
            LifecycleHookName=HOOK,
            LifecycleActionToken=action.token,
            LifecycleActionResult="MAYBE",
        )
    assert _error(bad_result)[0] == "ValidationError"

    asg.complete_lifecycle_action(
        AutoScalingGroupName=GROUP,
        LifecycleHookName=HOOK,
        LifecycleActionToken=action.token,
        LifecycleActionResult="CONTINUE",
    )
    (done,) = aws.lifecycle_actions()
    assert (done.result, done.completed_by, done.active) == ("CONTINUE", "CompleteLifecycleAction", False)
    members = _instances(asg)
    assert victim not in members
    assert len(members) == 2  # the group replaced the terminated instance
    state = aws.client("ec2").describe_instances(InstanceIds=[victim])["Reservations"][0]["Instances"][0][
        "State"
    ]
    assert state["Name"] in ("shutting-down", "terminated")

    with pytest.raises(ClientError) as again:
        asg.complete_lifecycle_action(
            AutoScalingGroupName=GROUP,
            LifecycleHookName=HOOK,
            LifecycleActionToken=action.token,
            LifecycleActionResult="CONTINUE",
        )
    assert _error(again) == ("ValidationError", f"No active Lifecycle Action found with token {action.token}")


def test_complete_by_instance_id_with_scale_in(aws: MotoServer) -> None:
    """Completing by InstanceId works; an action started as a scale-in shrinks the group."""
    asg = _group(aws)
    victim = sorted(_instances(asg))[0]
    aws.start_lifecycle_action(GROUP, victim, emit=False, decrement_desired_capacity=True)
    asg.complete_lifecycle_action(
        AutoScalingGroupName=GROUP, LifecycleHookName=HOOK, InstanceId=victim, LifecycleActionResult="ABANDON"
    )
    assert list(_instances(asg)) != [] and victim not in _instances(asg)
    group = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[GROUP])["AutoScalingGroups"][0]
    assert group["DesiredCapacity"] == 1
    assert len(group["Instances"]) == 1


def test_timeout_applies_default_result(aws: MotoServer) -> None:
    """Past its heartbeat deadline an action completes with the hook's DefaultResult."""
    asg = _group(aws, timeout=30)
    victim = sorted(_instances(asg))[0]
    action = aws.start_lifecycle_action(GROUP, victim, emit=False)
    (expired,) = lifecycle.list_actions(aws.account_id, aws.region, now=action.started_at + 31)
    assert (expired.result, expired.completed_by) == ("CONTINUE", "timeout")
    assert victim not in _instances(asg)
    with pytest.raises(ClientError) as late:
        asg.complete_lifecycle_action(
            AutoScalingGroupName=GROUP,
            LifecycleHookName=HOOK,
            InstanceId=victim,
            LifecycleActionResult="CONTINUE",
        )
    assert _error(late)[0] == "ValidationError"


def test_admin_route_starts_and_lists_actions(aws: MotoServer) -> None:
    """Over HTTP (for the sandbox's other processes): POST starts an action, GET lists actions."""
    asg = _group(aws)
    victim = sorted(_instances(asg))[0]
    url = f"{aws.endpoint_url}/_kubespot/autoscaling/lifecycle-actions"
    body = json.dumps({"AutoScalingGroupName": GROUP, "InstanceId": victim, "Emit": False}).encode()
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        started = json.loads(response.read())
    assert started["instance_id"] == victim and started["active"] is True
    asg.complete_lifecycle_action(
        AutoScalingGroupName=GROUP,
        LifecycleHookName=HOOK,
        LifecycleActionToken=started["token"],
        LifecycleActionResult="CONTINUE",
    )
    with urllib.request.urlopen(url, timeout=5) as response:
        listed = json.loads(response.read())["LifecycleActions"]
    assert [(a["token"], a["result"]) for a in listed] == [(started["token"], "CONTINUE")]

    bad = urllib.request.Request(
        url, data=json.dumps({"AutoScalingGroupName": "nope", "InstanceId": victim}).encode(), method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(bad, timeout=5)
    assert err.value.code == 400


def test_hook_notification_through_sns(aws: MotoServer) -> None:
    """A hook whose target is an SNS topic: the queue subscribed to it gets the SNS envelope."""
    sns = aws.client("sns")
    sqs = aws.client("sqs")
    topic = sns.create_topic(Name="asg-lifecycle")["TopicArn"]
    url, arn = sqs_queue(aws, "from-sns")
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    asg = _group(aws, target_arn=topic)
    victim = sorted(_instances(asg))[0]
    action = aws.start_lifecycle_action(GROUP, victim)
    envelope = json.loads(sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"])
    assert envelope["Type"] == "Notification"
    assert envelope["TopicArn"] == topic
    assert json.loads(envelope["Message"])["LifecycleActionToken"] == action.token


def test_stock_moto_terminates_without_hooks(aws: MotoServer) -> None:
    """TerminateInstanceInAutoScalingGroup bypasses hooks (moto gap): no wait state, no action."""
    asg = _group(aws)
    victim = sorted(_instances(asg))[0]
    asg.terminate_instance_in_auto_scaling_group(InstanceId=victim, ShouldDecrementDesiredCapacity=False)
    assert victim not in _instances(asg)
    assert aws.lifecycle_actions() == []


def test_injected_faults_fail_the_call_and_leave_the_action(aws: MotoServer) -> None:
    """Throttling and AccessDeniedException (HTTP 400 each, as the Auto Scaling API's Common Errors
    list them) reach boto3 as AWS would send them; the action stays waiting, so a retry completes it."""
    asg = _group(aws)
    once = aws.client("autoscaling")
    victim = sorted(_instances(asg))[0]
    action = aws.start_lifecycle_action(GROUP, victim, emit=False)
    # One each: awssim's clients make a single attempt (no SDK retry hides a fault).
    aws.inject_lifecycle_fault("CompleteLifecycleAction", "Throttling", times=1)
    aws.inject_lifecycle_fault("RecordLifecycleActionHeartbeat", "AccessDeniedException", times=1)
    target = {"AutoScalingGroupName": GROUP, "LifecycleHookName": HOOK, "LifecycleActionToken": action.token}
    with pytest.raises(ClientError) as throttled:
        once.complete_lifecycle_action(**target, LifecycleActionResult="CONTINUE")
    assert _error(throttled) == ("Throttling", "Rate exceeded")
    assert throttled.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as denied:
        once.record_lifecycle_action_heartbeat(**target)
    assert _error(denied)[0] == "AccessDeniedException"
    (waiting,) = aws.lifecycle_actions()
    assert waiting.active and not waiting.heartbeats
    once.complete_lifecycle_action(**target, LifecycleActionResult="CONTINUE")
    (done,) = aws.lifecycle_actions()
    assert (done.result, done.completed_by) == ("CONTINUE", "CompleteLifecycleAction")
