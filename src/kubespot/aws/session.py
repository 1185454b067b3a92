"""AWS clients and the thread pool their calls run on, and the one error type the adapter raises.

boto3 is synchronous. ``AwsClients`` builds one client per service (SQS, EC2, Auto Scaling, and for
the response actions ELB, ELBv2, SNS and EventBridge) on first use, with as many pooled connections
as there are threads, and runs every call on a bounded
``ThreadPoolExecutor`` so the event loop never blocks. Every call goes through ``AwsClients.call``,
which refuses operations missing from ``CALLS`` (the list the least-privilege IAM policy is
generated from) and counts what it sends.

Errors come out as ``AwsError`` (AWS's error code, or ``"Transport"`` when no answer came back),
never as botocore exceptions, with messages scrubbed of anything that looks like a credential.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, overload

import boto3
import botocore.exceptions
from botocore import xform_name
from botocore.config import Config

from kubespot.config.aws import AwsSettings

if TYPE_CHECKING:
    from mypy_boto3_autoscaling import AutoScalingClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_elb import ElasticLoadBalancingClient
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

__all__ = ["CALLS", "CALL_GROUPS", "AwsClients", "AwsError", "Service", "pricing_endpoint_region"]

Service = Literal[
    "sqs", "ec2", "autoscaling", "elbv2", "elb", "sns", "events", "pricing", "ssm", "eks", "iam"
]
_T = TypeVar("_T")

#: The operations each part of the controller makes, as (service, OperationName): ``queue`` is the
#: queue processor (receive, instance facts, lifecycle hooks); the others are the response actions
#: of issue 5, which a cluster enables one by one. ``kubespot aws policy --actions`` grants only the
#: groups asked for.
CALL_GROUPS: Final[Mapping[str, frozenset[tuple[str, str]]]] = MappingProxyType(
    {
        "queue": frozenset(
            {
                ("sqs", "ReceiveMessage"),
                ("sqs", "DeleteMessageBatch"),
                ("sqs", "ChangeMessageVisibilityBatch"),
                ("ec2", "DescribeInstances"),
                ("autoscaling", "CompleteLifecycleAction"),
                ("autoscaling", "RecordLifecycleActionHeartbeat"),
                # A hook's timeouts: how long a launch action can still wait for its node.
                ("autoscaling", "DescribeLifecycleHooks"),
            }
        ),
        # kubespot.aws.elbv2: the target index, deregistration and its progress.
        "loadbalancer": frozenset(
            {
                ("elbv2", "DescribeTargetGroups"),
                ("elbv2", "DescribeTags"),
                ("elbv2", "DescribeTargetHealth"),
                ("elbv2", "DeregisterTargets"),
            }
        ),
        # kubespot.aws.classic_elb: instances behind Classic Load Balancers.
        "classic-loadbalancer": frozenset(
            {
                ("elb", "DescribeLoadBalancers"),
                ("elb", "DeregisterInstancesFromLoadBalancer"),
            }
        ),
        # kubespot.aws.isolation: swap an instance's security groups for a quarantine group;
        # DescribeInstances checks first that the instance carries the managed tag.
        "isolate": frozenset(
            {
                ("ec2", "DescribeInstances"),
                ("ec2", "DescribeNetworkInterfaces"),
                ("ec2", "DescribeSecurityGroups"),
                ("ec2", "ModifyNetworkInterfaceAttribute"),
            }
        ),
        # kubespot.aws.publish: the interruption summary.
        "sns": frozenset({("sns", "Publish")}),
        "eventbridge": frozenset({("events", "PutEvents")}),
        # kubespot.aws.catalog and kubespot.aws.pricing: instance types, zonal offerings, prices.
        "catalog": frozenset(
            {
                ("ec2", "DescribeInstanceTypes"),
                ("ec2", "DescribeInstanceTypeOfferings"),
                ("ec2", "DescribeSpotPriceHistory"),
                ("pricing", "GetProducts"),
            }
        ),
        # kubespot.aws.cloud, fleet, launch_templates and instances: NodeClaims launched as
        # instances (CreateFleet over launch templates), found again by tags, terminated.
        "launch": frozenset(
            {
                ("ec2", "CreateFleet"),
                ("ec2", "DescribeLaunchTemplates"),
                ("ec2", "CreateLaunchTemplate"),
                # The templates of a deleted class, and those unused for a minute.
                ("ec2", "DeleteLaunchTemplate"),
                ("ec2", "DescribeInstances"),
                ("ec2", "TerminateInstances"),
                # kubespot.aws.eks: the endpoint, CA and service CIDR the settings leave empty.
                ("eks", "DescribeCluster"),
            }
        ),
        # kubespot.aws.subnets, security_groups and amis: an EC2NodeClass's selector terms resolved
        # (its status), AMI aliases through the public SSM parameters of each image family.
        "nodeclass": frozenset(
            {
                ("ec2", "DescribeSubnets"),
                ("ec2", "DescribeSecurityGroups"),
                ("ec2", "DescribeImages"),
                ("ssm", "GetParameter"),
            }
        ),
        # kubespot.aws.instance_profiles: the profile made for an EC2NodeClass's spec.role; the
        # cluster's profiles listed (by path) to collect those no class or instance uses; under
        # dry run, the role checked (GetRole) instead of attached.
        "instance-profile": frozenset(
            {
                ("iam", "GetInstanceProfile"),
                ("iam", "GetRole"),
                ("iam", "ListInstanceProfiles"),
                ("ec2", "DescribeInstances"),
                ("iam", "CreateInstanceProfile"),
                ("iam", "AddRoleToInstanceProfile"),
                ("iam", "RemoveRoleFromInstanceProfile"),
                ("iam", "DeleteInstanceProfile"),
            }
        ),
    }
)

#: Every AWS operation the adapter makes, as (service, OperationName). The IAM policy is generated
#: from this; ``AwsClients.call`` refuses anything else, so the policy cannot fall behind the code.
CALLS: Final[frozenset[tuple[str, str]]] = frozenset().union(*CALL_GROUPS.values())

#: Error codes AWS uses for "slow down" across its services (HTTP 400 or 429 or 503).
_THROTTLING_CODES: Final = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "EC2ThrottledException",
        "SlowDown",
        "Rate exceeded",
    }
)
#: Codes that mean "try again later" without being throttling.
_TRANSIENT_CODES: Final = frozenset(
    {
        "InternalError",
        "InternalFailure",
        "InternalServerError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "Unavailable",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "KMS.ThrottlingException",
    }
)

# Credential-looking text: access key ids, session tokens and signatures in query strings or
# headers, and the canonical request AWS echoes back in SignatureDoesNotMatch (it lists the signed
# headers, which include the session token).
_SECRET_PATTERNS: Final = (
    re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA)[A-Z0-9]{12,}\b"),
    re.compile(
        r"(?i)(x-amz-security-token|x-amz-signature|x-amz-credential|signature|credential|"
        r"aws_secret_access_key|aws_session_token|security-token)([=:]\s*)[^\s&,;'\"]+"
    ),
)
_MAX_MESSAGE = 500


def pricing_endpoint_region(region: str | None) -> str:
    """The region whose Pricing API endpoint serves ``region``'s prices.

    The Price List Service answers in a few regions only; like Karpenter's pricing provider
    (``pkg/providers/pricing/pricing.go`` ``NewAPI``), Asia Pacific asks Mumbai, China Ningxia,
    Europe Frankfurt and everything else N. Virginia. The region whose prices are wanted is a
    filter of the query (``regionCode``), not the endpoint.
    """
    region = region or ""
    for prefix, endpoint in (("ap-", "ap-south-1"), ("cn-", "cn-northwest-1"), ("eu-", "eu-central-1")):
        if region.startswith(prefix):
            return endpoint
    return "us-east-1"


def _scrub(text: str) -> str:
    # AWS appends the canonical request and string-to-sign after a blank line; none of it helps an
    # operator and it can carry the token, so it is cut rather than redacted piecemeal.
    text = text.split("\n\n", 1)[0]
    text = _SECRET_PATTERNS[0].sub("<redacted>", text)
    text = _SECRET_PATTERNS[1].sub(r"\1\2<redacted>", text)
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


class AwsError(Exception):
    """An AWS call that failed after the SDK's own retries.

    ``code`` is AWS's error code (``"InvalidInstanceID.NotFound"``, ``"ValidationError"``,
    ``"AWS.SimpleQueueService.NonExistentQueue"`` …) or ``"Transport"`` when no answer came back
    (connection refused, timeout, reset). ``throttled``: AWS said slow down. ``retryable``: the
    same call may succeed later (throttling, 5xx, transport); anything else is a bad request that
    will fail again the same way.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        service: str = "",
        operation: str = "",
        status: int | None = None,
        throttled: bool = False,
        retryable: bool = False,
    ) -> None:
        self.code = code
        self.message = _scrub(message)
        self.service = service
        self.operation = operation
        self.status = status
        self.throttled = throttled
        self.retryable = retryable or throttled
        where = f"{service}:{operation}: " if operation else ""
        super().__init__(f"{where}{code}: {self.message}")

    @classmethod
    def from_code(cls, code: str, message: str, *, service: str = "", operation: str = "") -> AwsError:
        """An error AWS reported inside a successful answer (a failed entry of a batch call),
        classified like a failed call with the same code."""
        throttled = code in _THROTTLING_CODES
        retryable = throttled or code in _TRANSIENT_CODES
        return cls(
            code or "Unknown",
            message,
            service=service,
            operation=operation,
            throttled=throttled,
            retryable=retryable,
        )

    @classmethod
    def from_exception(cls, exc: BaseException, *, service: str = "", operation: str = "") -> AwsError:
        """Map a botocore exception (or any exception a boto call raised) to an ``AwsError``."""
        if isinstance(exc, botocore.exceptions.ClientError):
            error: Mapping[str, Any] = exc.response.get("Error", {})
            meta: Mapping[str, Any] = exc.response.get("ResponseMetadata", {})
            code = str(error.get("Code") or "Unknown")
            status = meta.get("HTTPStatusCode")
            status = int(status) if isinstance(status, int) else None
            throttled = code in _THROTTLING_CODES or status == 429
            retryable = throttled or code in _TRANSIENT_CODES or (status is not None and status >= 500)
            return cls(
                code,
                str(error.get("Message") or ""),
                service=service,
                operation=operation,
                status=status,
                throttled=throttled,
                retryable=retryable,
            )
        if isinstance(
            exc,
            botocore.exceptions.ConnectionError
            | botocore.exceptions.HTTPClientError
            | ConnectionError
            | TimeoutError,
        ):
            return cls("Transport", str(exc), service=service, operation=operation, retryable=True)
        # NoCredentialsError, ParamValidationError, ResponseParserError …: named after the class,
        # not retryable (the same request fails the same way).
        return cls(type(exc).__name__, str(exc), service=service, operation=operation)


class AwsClients:
    """One boto3 client per service and the thread pool their calls run on.

    ``settings.max_concurrency`` threads and as many pooled connections per client; the SDK's
    adaptive retry mode with ``settings.max_attempts`` attempts. Region and endpoint come from the
    settings when set, else from the SDK's chain; credentials always from the SDK's chain.

    Use from one event loop. ``counts`` holds how many calls were made per (service, operation),
    for tests and benchmarks that check batching.
    """

    def __init__(
        self,
        settings: AwsSettings,
        *,
        session: boto3.session.Session | None = None,
        fallback_region: str | None = None,
    ) -> None:
        """``fallback_region`` is used when neither the settings nor the SDK's chain name a region
        (the controller passes the queue URL's region, see ``kubespot.aws.sqs.region_of``)."""
        self.settings = settings
        self._fallback_region = fallback_region or None
        self.counts: Counter[tuple[str, str]] = Counter()
        self._session = session
        self._clients: dict[str, Any] = {}
        # Client construction is not thread-safe on a shared session; it happens on a pool thread
        # (it reads service models from disk, ~100 ms) under this lock.
        self._build_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(
            max_workers=settings.max_concurrency, thread_name_prefix="kubespot-aws"
        )
        self._config = Config(
            max_pool_connections=settings.max_concurrency,
            # botocore reads a client config's "max_attempts" as retries after the first call;
            # "total_max_attempts" is the setting's meaning (attempts, first included).
            retries={"mode": "adaptive", "total_max_attempts": settings.max_attempts},
            # A long poll holds a connection 20 s; the read timeout must exceed it.
            connect_timeout=10,
            read_timeout=60,
        )
        self._closed = False

    # -- clients ---------------------------------------------------------------------------------

    @property
    def region(self) -> str | None:
        """The region calls go to: the settings', else the SDK chain's, else the fallback."""
        session = self._session or boto3.session.Session()
        self._session = session
        return self.settings.region or session.region_name or self._fallback_region

    @overload
    def client(self, service: Literal["sqs"]) -> SQSClient: ...
    @overload
    def client(self, service: Literal["ec2"]) -> EC2Client: ...
    @overload
    def client(self, service: Literal["autoscaling"]) -> AutoScalingClient: ...
    @overload
    def client(self, service: Literal["elbv2"]) -> ElasticLoadBalancingv2Client: ...
    @overload
    def client(self, service: Literal["elb"]) -> ElasticLoadBalancingClient: ...
    @overload
    def client(self, service: Literal["sns"]) -> SNSClient: ...
    @overload
    def client(self, service: Literal["events"]) -> EventBridgeClient: ...
    @overload
    def client(self, service: Literal["pricing"]) -> Any: ...
    @overload
    def client(self, service: Literal["ssm"]) -> Any: ...
    @overload
    def client(self, service: Literal["eks"]) -> Any: ...
    @overload
    def client(self, service: Literal["iam"]) -> Any: ...

    def client(self, service: Service) -> Any:
        """The (blocking) boto3 client for ``service``, built on first use. Call from a pool thread."""
        existing = self._clients.get(service)
        if existing is not None:
            return existing
        with self._build_lock:
            existing = self._clients.get(service)
            if existing is None:
                region = self.region
                session = self._session
                assert session is not None  # set by ``region``
                if service == "pricing":
                    region = pricing_endpoint_region(region)
                existing = session.client(
                    service,
                    region_name=region,
                    endpoint_url=self.settings.endpoint_url or None,
                    config=self._config,
                )
                self._clients[service] = existing
            return existing

    # -- calls -----------------------------------------------------------------------------------

    async def call(self, service: Service, operation: str, **kwargs: Any) -> dict[str, Any]:
        """Run AWS ``operation`` (its API name, e.g. ``"ReceiveMessage"``) with ``kwargs``.

        Raises ``AwsError`` for anything that goes wrong on the wire or at AWS, ``ValueError`` for an
        operation not in ``CALLS`` (a programming error: the IAM policy would not allow it).
        """
        if (service, operation) not in CALLS:
            raise ValueError(f"{service}:{operation} is not in kubespot.aws.CALLS")
        method = xform_name(operation)

        def invoke() -> dict[str, Any]:
            result: dict[str, Any] = getattr(self.client(service), method)(**kwargs)
            return result

        self.counts[(service, operation)] += 1
        return await self.run(invoke, service=service, operation=operation)

    async def run(self, fn: Callable[[], _T], *, service: str = "", operation: str = "") -> _T:
        """Run blocking ``fn`` on the pool; botocore exceptions come out as ``AwsError``.

        Cancelling the awaiting task does not stop the call already running on its thread (boto
        cannot be interrupted); its result is dropped.
        """
        if self._closed:
            raise AwsError("Closed", "the AWS clients are closed", service=service, operation=operation)
        loop = asyncio.get_running_loop()

        def guarded() -> _T:
            try:
                return fn()
            except AwsError:
                raise
            except Exception as exc:  # boto raises a wide family; each is mapped, none escapes raw
                raise AwsError.from_exception(exc, service=service, operation=operation) from None

        return await loop.run_in_executor(self._executor, guarded)

    def call_count(self, service: str, operation: str | None = None) -> int:
        """Calls made so far to ``service`` (and ``operation``, when given)."""
        return sum(n for (s, op), n in self.counts.items() if s == service and operation in (None, op))

    # -- shutdown --------------------------------------------------------------------------------

    async def close(self) -> None:
        """Refuse further calls, drop queued ones, close the clients' connection pools.

        Calls already running (a long poll) finish on their threads in the background.
        """
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)
        for client in list(self._clients.values()):
            # Best effort: a half-closed pool is not worth a crash at shutdown.
            with contextlib.suppress(Exception):
                client.close()
        self._clients.clear()

    async def __aenter__(self) -> AwsClients:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
