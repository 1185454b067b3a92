"""How the controller reaches AWS: region, endpoint, and how much it may ask of the APIs at once.

Read by ``kubespot.aws``; the loader composes this group with the others. Credentials are never
settings: they come from the AWS SDK's usual chain (IRSA web identity, instance profile, env).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import setting
from .loader import InvalidSetting


@dataclass(frozen=True, slots=True, kw_only=True)
class AwsSettings:
    """Region, endpoint override and client concurrency for SQS, EC2 and Auto Scaling."""

    region: str = setting(
        "",
        doc=(
            "AWS region of the queue and the instances. Empty: the SDK's default chain "
            "(AWS_DEFAULT_REGION, the profile, or the queue URL's region)."
        ),
        env="KUBESPOT_AWS_REGION",
        nth="AWS_REGION",
        flag="--region",
    )
    endpoint_url: str = setting(
        "",
        doc=(
            "Endpoint override for every AWS API (e.g. a VPC endpoint, or a local AWS stand-in in "
            "tests). Empty: the SDK's regional endpoints."
        ),
        env="KUBESPOT_AWS_ENDPOINT_URL",
        nth="AWS_ENDPOINT",
        flag="--aws-endpoint-url",
    )
    max_concurrency: int = setting(
        32,
        doc=(
            "AWS calls in flight at once (the SDK is synchronous; calls run on a thread pool of this "
            "size, with as many pooled connections). Long polls take one each. 32 covers the "
            "receivers, batched visibility changes and deletes, and DescribeInstances for a "
            "1 000-node burst without queueing behind one another."
        ),
        env="KUBESPOT_AWS_MAX_CONCURRENCY",
        unit="calls",
    )
    max_attempts: int = setting(
        5,
        doc=(
            "Attempts per AWS call, first included, in the SDK's adaptive retry mode (backs off on "
            "throttling and 5xx)."
        ),
        env="KUBESPOT_AWS_MAX_ATTEMPTS",
        unit="attempts",
    )

    def __post_init__(self) -> None:
        if self.endpoint_url and not self.endpoint_url.startswith(("http://", "https://")):
            raise InvalidSetting("endpoint_url", "must be an http(s) URL")
        if self.max_concurrency < 1:
            raise InvalidSetting("max_concurrency", "must be at least 1")
        if self.max_attempts < 1:
            raise InvalidSetting("max_attempts", "must be at least 1")
