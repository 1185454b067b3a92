"""The generated controller policies, conditions included, are documents IAM accepts: moto's
CreatePolicy runs IAM's policy grammar checks (condition operators, element shapes). moto does not
evaluate Condition elements when authorizing calls (its access control documents Resource and
Condition support as missing), so what the conditions mean is tested against the generator
(tests/unit/aws/test_aws_iam_policy.py), not here."""

from __future__ import annotations

import json

import pytest

from kubespot.aws import iam
from kubespot.sim.awssim import MotoServer

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:prod-kubespot-interruptions"


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"managed_tag": None},
        {"vpc_ids": ["vpc-0123456789abcdef0", "vpc-0fedcba9876543210"]},
        {"managed_tag": "team/kubespot", "vpc_ids": ["vpc-0123456789abcdef0"]},
    ],
    ids=["default", "no-tag", "vpcs", "own-tag"],
)
def test_every_generated_policy_is_a_valid_iam_document(
    aws_env: MotoServer, kwargs: dict[str, object]
) -> None:
    launch = {"cluster": "prod", "node_roles": ["arn:aws:iam::123456789012:role/KarpenterNodeRole-prod"]}
    policy = iam.controller_policy(QUEUE_ARN, actions=iam.ACTION_GROUPS, **launch, **kwargs)  # type: ignore[arg-type]
    client = aws_env.client("iam")
    name = "kubespot-" + "-".join(sorted(kwargs)) if kwargs else "kubespot"
    created = client.create_policy(PolicyName=name, PolicyDocument=json.dumps(policy))["Policy"]
    version = client.get_policy_version(PolicyArn=created["Arn"], VersionId=created["DefaultVersionId"])
    stored = version["PolicyVersion"]["Document"]
    assert (json.loads(stored) if isinstance(stored, str) else stored) == policy
