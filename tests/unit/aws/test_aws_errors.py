"""AwsError mapping from botocore exceptions, credential scrubbing, and the CALLS guard (no sockets)."""

from __future__ import annotations

import asyncio
from typing import Any

import botocore.exceptions
import pytest

from kubespot.aws import CALLS, AwsClients, AwsError, LifecycleActionGone
from kubespot.aws.autoscaling import LifecycleActions
from kubespot.aws.sqs import region_of
from kubespot.config.aws import AwsSettings


def _client_error(code: str, message: str, status: int = 400) -> botocore.exceptions.ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return botocore.exceptions.ClientError(response, "ReceiveMessage")


@pytest.mark.parametrize(
    ("code", "status", "throttled", "retryable"),
    [
        ("ThrottlingException", 400, True, True),
        ("RequestLimitExceeded", 503, True, True),
        ("Whatever", 429, True, True),
        ("InternalError", 500, False, True),
        ("ServiceUnavailable", 503, False, True),
        ("AWS.SimpleQueueService.NonExistentQueue", 400, False, False),
        ("AccessDenied", 403, False, False),
    ],
)
def test_client_errors_are_classified(code: str, status: int, throttled: bool, retryable: bool) -> None:
    err = AwsError.from_exception(
        _client_error(code, "text", status), service="sqs", operation="ReceiveMessage"
    )
    assert (err.code, err.status, err.throttled, err.retryable) == (code, status, throttled, retryable)
    assert str(err) == f"sqs:ReceiveMessage: {code}: text"


def test_transport_errors() -> None:
    for exc in (
        botocore.exceptions.EndpointConnectionError(endpoint_url="https://sqs.us-east-1.amazonaws.com"),
        botocore.exceptions.ReadTimeoutError(endpoint_url="https://sqs.us-east-1.amazonaws.com"),
        botocore.exceptions.ConnectTimeoutError(endpoint_url="https://x"),
    ):
        err = AwsError.from_exception(exc)
        assert err.code == "Transport" and err.retryable and not err.throttled


def test_other_sdk_errors_are_named_and_final() -> None:
    err = AwsError.from_exception(botocore.exceptions.NoCredentialsError())
    assert err.code == "NoCredentialsError" and not err.retryable


def test_messages_never_carry_credentials() -> None:
    text = (
        "The request signature we calculated does not match the signature you provided.\n\n"
        "The Canonical String for this request should have been\n'POST\n/\n\n"
        "x-amz-security-token:IQoJb3JpZ2luX2VjEXAMPLETOKEN'"
    )
    err = AwsError.from_exception(_client_error("SignatureDoesNotMatch", text, 403))
    assert "IQoJ" not in str(err) and "Canonical" not in str(err)
    err = AwsError("X", "key AKIAIOSFODNN7EXAMPLE used; X-Amz-Security-Token=abc123&Signature=deadbeef")
    assert "AKIAIOSFODNN7EXAMPLE" not in err.message
    assert "abc123" not in err.message and "deadbeef" not in err.message
    assert len(AwsError("X", "y" * 5000).message) <= 500


def test_lifecycle_gone_is_recognised() -> None:
    class Fake:
        async def call(self, service: str, operation: str, **kwargs: Any) -> dict[str, Any]:
            raise AwsError(
                "ValidationError",
                f"No active Lifecycle Action found with instance ID {kwargs['InstanceId']}",
                service=service,
                operation=operation,
                status=400,
            )

    hooks = LifecycleActions(Fake())  # type: ignore[arg-type]
    with pytest.raises(LifecycleActionGone) as caught:
        asyncio.run(hooks.complete_lifecycle_action("g", "h", "i-0123456789abcdef0"))
    assert caught.value.code == "ValidationError" and not caught.value.retryable


def test_calls_is_the_only_door() -> None:
    assert ("sqs", "ReceiveMessage") in CALLS
    assert all(
        service
        in ("sqs", "ec2", "autoscaling", "elbv2", "elb", "sns", "events", "pricing", "ssm", "eks", "iam")
        for service, _ in CALLS
    )

    async def attempt() -> None:
        async with AwsClients(AwsSettings(region="us-east-1")) as clients:
            # The launch path calls CreateFleet, never RunInstances directly.
            await clients.call("ec2", "RunInstances", MinCount=1, MaxCount=1)

    with pytest.raises(ValueError, match="not in"):
        asyncio.run(attempt())


def test_region_of_queue_url() -> None:
    assert region_of("https://sqs.eu-west-1.amazonaws.com/123456789012/q") == "eu-west-1"
    assert region_of("https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q") == "cn-north-1"
    assert region_of("http://127.0.0.1:5000/123456789012/q") is None
