"""The response-action adapters when AWS says no: AccessDenied, throttling, failed entries, vanished
targets (no sockets: botocore's Stubber answers for AWS, through the real ``AwsClients.call``).

moto cannot refuse a call for lack of permission or throttle it, so these paths are tested here;
the happy paths run against moto in tests/integration/aws/.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from kubespot.aws import (
    AwsClients,
    AwsError,
    EventBridgePublisher,
    NetworkIsolation,
    PublishError,
    Registration,
    SnsPublisher,
    TargetDirectory,
)
from kubespot.aws.publish import MAX_SUBJECT, entry_size, sns_subject
from kubespot.aws.snapshot import Snapshot
from kubespot.config.aws import AwsSettings

REGION = "eu-west-1"
TG = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/web/0123456789abcdef"
TG2 = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/api/fedcba9876543210"
TOPIC = "arn:aws:sns:eu-west-1:123456789012:kubespot"
I1, I2 = "i-0123456789abcdef0", "i-0fedcba9876543210"


@pytest.fixture
async def clients() -> AsyncIterator[AwsClients]:
    session = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
    )
    async with AwsClients(AwsSettings(region=REGION, max_attempts=1), session=session) as c:
        yield c


@pytest.fixture
def stub(clients: AwsClients) -> Iterator[Any]:
    """stub(service) -> an active Stubber on that service's client; each is checked at the end."""
    stubbers: list[Stubber] = []

    def make(service: str) -> Stubber:
        stubber = Stubber(clients.client(service))  # type: ignore[call-overload]
        stubber.activate()
        stubbers.append(stubber)
        return stubber

    yield make
    for stubber in stubbers:
        stubber.assert_no_pending_responses()
        stubber.deactivate()


def _denied(stubber: Stubber, method: str, code: str = "AccessDenied", status: int = 403) -> None:
    stubber.add_client_error(
        method,
        service_error_code=code,
        service_message=f"User: arn:aws:sts::123456789012:assumed-role/kubespot is not authorized ({code})",
        http_status_code=status,
    )


def _health(*targets: tuple[str, int, str]) -> dict[str, Any]:
    return {
        "TargetHealthDescriptions": [
            {"Target": {"Id": i, "Port": p}, "TargetHealth": {"State": s}} for i, p, s in targets
        ]
    }


def _groups(*arns: str) -> dict[str, Any]:
    return {"TargetGroups": [{"TargetGroupArn": a, "TargetType": "instance"} for a in arns]}


# -- ELBv2 -----------------------------------------------------------------------------------------


async def test_deregister_access_denied_is_a_failure_naming_the_operation(
    clients: AwsClients, stub: Any
) -> None:
    elbv2 = stub("elbv2")
    _denied(elbv2, "deregister_targets")
    reg = Registration(TG, I1, 80)
    outcome = await TargetDirectory(clients).deregister([reg])
    assert not outcome.ok and outcome.deregistered == () and outcome.gone == ()
    err = outcome.failed[reg]
    assert (err.code, err.status, err.retryable, err.throttled) == ("AccessDenied", 403, False, False)
    assert str(err).startswith("elbv2:DeregisterTargets: AccessDenied: ")


async def test_deregister_throttled_is_retryable(clients: AwsClients, stub: Any) -> None:
    elbv2 = stub("elbv2")
    _denied(elbv2, "deregister_targets", code="Throttling", status=400)
    reg = Registration(TG, I1, 80)
    err = (await TargetDirectory(clients).deregister([reg])).failed[reg]
    assert err.throttled and err.retryable
    assert "elbv2:DeregisterTargets" in str(err)


async def test_invalid_target_in_a_batch_is_retried_one_by_one(clients: AwsClients, stub: Any) -> None:
    elbv2 = stub("elbv2")
    first, second = Registration(TG, I1, 80), Registration(TG, I2, 80)
    _denied(elbv2, "deregister_targets", code="InvalidTarget", status=400)
    elbv2.add_response("deregister_targets", {}, {"TargetGroupArn": TG, "Targets": [{"Id": I1, "Port": 80}]})
    _denied(elbv2, "deregister_targets", code="InvalidTarget", status=400)
    outcome = await TargetDirectory(clients).deregister([first, second])
    assert outcome.ok
    assert outcome.deregistered == (first,) and outcome.gone == (second,)
    assert clients.counts[("elbv2", "DeregisterTargets")] == 3


async def test_states_of_vanished_targets_and_groups(clients: AwsClients, stub: Any) -> None:
    elbv2 = stub("elbv2")
    _denied(elbv2, "describe_target_health", code="InvalidTarget", status=400)
    states = await TargetDirectory(clients).target_states([Registration(TG, I1, 80)])
    (state,) = states.values()
    assert state.gone and state.reason == "InvalidTarget" and state.draining_started

    _denied(elbv2, "describe_target_health", code="AccessDenied")
    with pytest.raises(AwsError, match="elbv2:DescribeTargetHealth: AccessDenied"):
        await TargetDirectory(clients).target_states([Registration(TG, I1, 80)])


async def test_wait_draining_polls_through_errors(clients: AwsClients, stub: Any) -> None:
    elbv2 = stub("elbv2")
    reg = Registration(TG, I1, 80)
    elbv2.add_response("describe_target_health", _health((I1, 80, "healthy")))
    _denied(elbv2, "describe_target_health", code="Throttling", status=400)
    elbv2.add_response("describe_target_health", _health((I1, 80, "draining")))
    assert await TargetDirectory(clients).wait_draining([reg], max_wait=5, interval=0.01)


async def test_first_refresh_denied_raises_and_is_not_retried_at_once(clients: AwsClients, stub: Any) -> None:
    elbv2 = stub("elbv2")
    _denied(elbv2, "describe_target_groups")
    directory = TargetDirectory(clients)
    for _ in range(3):  # a burst after the failure asks AWS nothing more
        with pytest.raises(AwsError, match="elbv2:DescribeTargetGroups: AccessDenied"):
            await directory.lookup([I1])
    assert clients.counts[("elbv2", "DescribeTargetGroups")] == 1


async def test_one_group_failing_keeps_the_others(
    clients: AwsClients, stub: Any, caplog: pytest.LogCaptureFixture
) -> None:
    elbv2 = stub("elbv2")
    elbv2.add_response("describe_target_groups", _groups(TG, TG2))
    # Groups are described concurrently: whichever asks first gets the error.
    elbv2.add_response("describe_target_health", _health((I1, 80, "healthy")))
    _denied(elbv2, "describe_target_health", code="Throttling", status=400)
    with caplog.at_level(logging.WARNING, logger="kubespot.aws.elbv2"):
        found = await TargetDirectory(clients, concurrency=1).lookup([I1])
    assert list(found) == [I1] and found[I1][0].target_group_arn == TG
    assert "1 of 2 target groups could not be described" in caplog.text


async def test_every_group_failing_fails_the_refresh(clients: AwsClients, stub: Any) -> None:
    elbv2 = stub("elbv2")
    elbv2.add_response("describe_target_groups", _groups(TG))
    _denied(elbv2, "describe_target_health")
    with pytest.raises(AwsError, match="DescribeTargetHealth: AccessDenied"):
        await TargetDirectory(clients).lookup([I1])


# -- isolation -------------------------------------------------------------------------------------


def _interfaces(*ids: str) -> dict[str, Any]:
    return {
        "NetworkInterfaces": [
            {
                "NetworkInterfaceId": eni,
                "VpcId": "vpc-0123456789abcdef0",
                "Groups": [{"GroupId": "sg-0aaaaaaaaaaaaaaaa", "GroupName": "nodes"}],
                "Attachment": {"DeviceIndex": n, "InstanceId": I1},
            }
            for n, eni in enumerate(ids)
        ]
    }


async def test_isolation_errors(clients: AwsClients, stub: Any) -> None:
    ec2 = stub("ec2")
    _denied(ec2, "describe_network_interfaces", code="UnauthorizedOperation")
    isolation = NetworkIsolation(clients)
    with pytest.raises(AwsError, match="ec2:DescribeNetworkInterfaces: UnauthorizedOperation"):
        await isolation.isolate(I1, "sg-0bbbbbbbbbbbbbbbb")

    ec2.add_response(
        "describe_network_interfaces", _interfaces("eni-0000000000000000a", "eni-0000000000000000b")
    )
    ec2.add_response(
        "describe_security_groups",
        {
            "SecurityGroups": [
                {"GroupId": "sg-0bbbbbbbbbbbbbbbb", "GroupName": "q", "VpcId": "vpc-0123456789abcdef0"}
            ]
        },
    )
    ec2.add_response("modify_network_interface_attribute", {})
    _denied(ec2, "modify_network_interface_attribute", code="UnauthorizedOperation")
    outcome = await NetworkIsolation(clients).isolate(I1, "sg-0bbbbbbbbbbbbbbbb")
    assert not outcome.ok
    assert len(outcome.interfaces) == 1 and len(outcome.failed) == 1
    (err,) = outcome.failed.values()
    assert str(err).startswith("ec2:ModifyNetworkInterfaceAttribute: UnauthorizedOperation")


# -- publishing ------------------------------------------------------------------------------------


async def test_sns_refusal_names_the_operation(clients: AwsClients, stub: Any) -> None:
    sns = stub("sns")
    _denied(sns, "publish", code="AuthorizationError")
    with pytest.raises(AwsError, match="sns:Publish: AuthorizationError") as caught:
        await SnsPublisher(clients, TOPIC).publish({"a": 1}, subject="s", kind="spot-itn")
    assert not caught.value.retryable


async def test_failed_event_entry_is_an_error(clients: AwsClients, stub: Any) -> None:
    events = stub("events")
    events.add_response(
        "put_events",
        {
            "FailedEntryCount": 1,
            "Entries": [{"ErrorCode": "ThrottlingException", "ErrorMessage": "Rate exceeded"}],
        },
    )
    events.add_response(
        "put_events",
        {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "AccessDeniedException", "ErrorMessage": "no"}]},
    )
    publisher = EventBridgePublisher(clients, "ops")
    with pytest.raises(AwsError) as caught:
        await publisher.put({"a": 1})
    assert caught.value.code == "ThrottlingException" and caught.value.throttled and caught.value.retryable
    assert str(caught.value) == "events:PutEvents: ThrottlingException: Rate exceeded"
    with pytest.raises(AwsError) as caught:
        await publisher.put({"a": 1})
    assert caught.value.code == "AccessDeniedException" and not caught.value.retryable


async def test_oversized_messages_are_refused_before_sending(clients: AwsClients) -> None:
    big = {"pods": ["x" * 1000] * 300}  # ~300 KB of JSON
    with pytest.raises(PublishError, match="SNS message is"):
        await SnsPublisher(clients, TOPIC).publish(big, subject="s", kind="spot-itn")
    with pytest.raises(PublishError, match="EventBridge entry is"):
        await EventBridgePublisher(clients).put(big)
    with pytest.raises(PublishError, match="message attributes"):
        await SnsPublisher(clients, TOPIC).publish(
            {}, subject="s", kind="k", attributes={f"a{n}": "v" for n in range(9)}
        )
    assert clients.counts == {}
    with pytest.raises(ValueError, match="aws\\."):
        EventBridgePublisher(clients, source="aws.ec2")
    with pytest.raises(ValueError, match="SNS topic ARN"):
        SnsPublisher(clients, "kubespot")


def test_subject_and_entry_size_rules() -> None:
    assert sns_subject("Spot interruption: node ip-10-0-1-15\n(2 pods)") == (
        "Spot interruption: node ip-10-0-1-15 (2 pods)"
    )
    assert sns_subject("naïve — ünïcode\ttabs") == "na?ve ? ?n?code tabs"
    long = sns_subject("x" * 300)
    assert len(long) == MAX_SUBJECT and long.endswith("...")
    assert sns_subject(" \n ") == "kubespot"
    entry = {"Source": "kubespot", "DetailType": "t", "Detail": '{"é":1}', "Resources": ["arn:a"], "Time": 1}
    assert entry_size(entry) == 14 + 8 + 1 + 8 + 5  # "é" is two bytes


# -- the shared rebuild -----------------------------------------------------------------------------


async def test_snapshot_rebuild_survives_a_cancelled_waiter() -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    calls = 0

    async def build(previous: int | None) -> int:
        nonlocal calls
        calls += 1
        started.set()
        await release.wait()
        return (previous or 0) + 1

    snap: Snapshot[int] = Snapshot(build, ttl=60, retry_after=5, name="test")
    first = asyncio.create_task(snap.get())
    await started.wait()
    second = asyncio.create_task(snap.get())
    await asyncio.sleep(0)
    first.cancel()
    release.set()
    assert await second == 1
    assert first.cancelled()
    assert calls == 1 and snap.builds == 1
    assert await snap.get() == 1  # fresh: no rebuild
    snap.invalidate()
    assert await snap.get() == 2 and calls == 2
