"""``AwsCloud.create``'s ClientToken across retries of one NodeClaim.

Sources: the EC2 API reference, "Ensuring idempotency" (the same ``ClientToken`` with the same
parameters returns the first request's answer, with other parameters
``IdempotentParameterMismatch``); Karpenter sends none (aws/karpenter-provider-aws
``pkg/providers/instance/types.go`` ``CreateFleetInputBuilder.Build``), so a failed launch is simply
made again: kubespot's token must not replay a fleet that answered, while an identical retry
after no answer (a transport error) keeps its token (docs/designs/launching.md §3).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubespot.aws.amis import AmiInfo
from kubespot.aws.cloud import AwsCloud
from kubespot.aws.resolved import ResolvedNodeClass
from kubespot.aws.security_groups import SecurityGroupInfo
from kubespot.aws.session import AwsError
from kubespot.aws.subnets import SubnetInfo
from kubespot.cloud import CreateError, fake_type
from kubespot.config.launch import LaunchSettings
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec
from kubespot.scheduling.api.template import NodeClassRef, TemplateSpec
from support.aws_launch import FixedCatalog

ZONE = "us-east-1a"
CATALOG = FixedCatalog([fake_type("c5.large", 2, 4, 0.085, 0.031, zones=(ZONE,))])
UID = "0b7c1c1e-5d2a-4c52-9d0e-1f2a3b4c5d6e"


class _Ec2:
    """CreateFleet answers from ``answers`` in turn: an ``AwsError`` is raised, a string is an
    error code every override fails with (no instance launched)."""

    def __init__(self, *answers: str | AwsError) -> None:
        self.answers = list(answers)
        self.tokens: list[str] = []

    async def call(self, service: str, operation: str, **kwargs: Any) -> dict[str, Any]:
        if operation == "DescribeInstances":
            return {"Reservations": []}
        if operation == "DescribeLaunchTemplates":
            return {"LaunchTemplates": [{}]}
        assert operation == "CreateFleet"
        self.tokens.append(kwargs["ClientToken"])
        answer = self.answers.pop(0)
        if isinstance(answer, AwsError):
            raise answer
        overrides = [o for c in kwargs["LaunchTemplateConfigs"] for o in c["Overrides"]]
        errors = [
            {"ErrorCode": answer, "ErrorMessage": "try later", "LaunchTemplateAndOverrides": {"Overrides": o}}
            for o in overrides
        ]
        return {"FleetId": "fleet-1", "Instances": [], "Errors": errors}


def _cloud(ec2: _Ec2) -> AwsCloud:
    settings = LaunchSettings(
        cluster_name="prod",
        cluster_endpoint="https://api",
        cluster_ca_bundle="Q0E=",
        cluster_cidr="10.0.0.0/16",
    )
    cloud = AwsCloud(CATALOG, ec2, launch=settings)  # type: ignore[arg-type]
    spec = EC2NodeClassSpec(name="default", ami_family="AL2023", instance_profile="p")
    ami = AmiInfo("ami-1", "n", "2026-01-01T00:00:00Z", False, ())
    subnets = [SubnetInfo("subnet-a", ZONE, "", 100)]
    cloud.set_resolved("default", ResolvedNodeClass(spec, subnets, [SecurityGroupInfo("sg-1", "n")], [ami]))
    return cloud


CLAIM = NodeClaimSpec(
    "general-aaaaa",
    uid=UID,
    labels={"karpenter.sh/nodepool": "general"},
    template=TemplateSpec(node_class_ref=NodeClassRef(name="default")),
)


async def test_a_fleet_that_answered_is_not_replayed() -> None:
    """An ``InternalError`` fleet marks nothing, so the retried request is identical: its token
    still changes, or EC2 would hand back the failed fleet on every retry. A refused token
    (``IdempotentParameterMismatch``) also moves to a new one."""
    mismatch = AwsError("IdempotentParameterMismatch", "token reused", service="ec2", operation="CreateFleet")
    ec2 = _Ec2("InternalError", mismatch, "InternalError")
    cloud = _cloud(ec2)
    for reason in ("InternalError", "IdempotentParameterMismatch", "InternalError"):
        with pytest.raises(CreateError) as caught:
            await cloud.create(CLAIM)
        assert caught.value.reason == reason
    assert len(set(ec2.tokens)) == 3
    assert all(t.startswith(UID + "-") and len(t) <= 64 for t in ec2.tokens)


async def test_a_retry_after_no_answer_keeps_its_token() -> None:
    """A transport error says nothing of whether the fleet was made: the identical retry carries
    the same token, so EC2 answers with that fleet instead of launching a second one."""
    lost = AwsError("Transport", "read timeout", service="ec2", operation="CreateFleet", retryable=True)
    ec2 = _Ec2(lost, "InternalError")
    cloud = _cloud(ec2)
    for _ in range(2):
        with pytest.raises(CreateError):
            await cloud.create(CLAIM)
    assert ec2.tokens[0] == ec2.tokens[1]
