"""EC2NodeClass selector terms resolved through boto3 against moto (with kubespot's SSM AMI
parameters): subnets, security groups and AMIs as Karpenter's AWS providers find them.

Sources: aws/karpenter-provider-aws ``pkg/providers/subnet/subnet.go`` ``List`` /
``getFilterSets`` and ``pkg/controllers/nodeclass/subnet.go`` (order: most free IPs, then id);
``pkg/providers/securitygroup/securitygroup.go`` ``List`` (tags, ids, names) and
``pkg/controllers/nodeclass/securitygroup.go`` (by id); ``pkg/providers/amifamily/ami.go``
``DescribeImageQueries`` / ``amis`` (aliases through SSM, ids, ssmParameter, names with owners
self+amazon, tags; one image per requirement set) and ``al2023.go`` (variants).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kubespot.aws import AwsClients, AwsError
from kubespot.aws.amis import AliasNotFound, resolve_amis
from kubespot.aws.security_groups import resolve_security_groups
from kubespot.aws.subnets import resolve_subnets
from kubespot.scheduling.api.nodeclass import SelectorTerm
from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import ssm_amis

NOW = datetime(2026, 11, 1, tzinfo=UTC)
SOURCE_AMI = "ami-12c6146b"  # one of moto's stock x86_64 images


def _tag(aws: MotoServer, resource: str, **tags: str) -> None:
    aws.client("ec2").create_tags(
        Resources=[resource], Tags=[{"Key": k, "Value": v} for k, v in tags.items()]
    )


async def test_subnets_by_tags_wildcard_and_ids_most_free_ips_first(
    clients: AwsClients, aws_env: MotoServer
) -> None:
    ec2 = aws_env.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]

    def subnet(cidr: str, zone: str) -> str:
        return ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=f"{aws_env.region}{zone}")[
            "Subnet"
        ]["SubnetId"]

    small = subnet("10.0.1.0/26", "a")  # 59 free addresses
    large = subnet("10.0.2.0/24", "b")  # 251
    other = subnet("10.0.3.0/24", "c")
    untagged = subnet("10.0.4.0/24", "a")
    _tag(aws_env, small, **{"karpenter.sh/discovery": "prod"})
    _tag(aws_env, large, **{"karpenter.sh/discovery": "prod"})
    _tag(aws_env, other, **{"karpenter.sh/discovery": "staging"})

    found = await resolve_subnets(clients, [SelectorTerm(tags={"karpenter.sh/discovery": "prod"})])
    assert [s.id for s in found] == [large, small]
    assert found[0].zone == f"{aws_env.region}b" and found[0].zone_id  # zoneID as EC2 reports it
    wildcard = await resolve_subnets(clients, [SelectorTerm(tags={"karpenter.sh/discovery": "*"})])
    assert {s.id for s in wildcard} == {small, large, other}
    both = await resolve_subnets(
        clients, [SelectorTerm(tags={"karpenter.sh/discovery": "staging"}), SelectorTerm(id=untagged)]
    )
    assert {s.id for s in both} == {other, untagged}
    assert await resolve_subnets(clients, [SelectorTerm(tags={"karpenter.sh/discovery": "nowhere"})]) == []


async def test_security_groups_by_tags_ids_and_names_sorted_by_id(
    clients: AwsClients, aws_env: MotoServer
) -> None:
    ec2 = aws_env.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]

    def group(name: str) -> str:
        return ec2.create_security_group(GroupName=name, Description=name, VpcId=vpc)["GroupId"]

    nodes, pods, extra = group("nodes"), group("pods"), group("extra")
    _tag(aws_env, nodes, **{"karpenter.sh/discovery": "prod"})
    found = await resolve_security_groups(
        clients,
        [
            SelectorTerm(tags={"karpenter.sh/discovery": "prod"}),
            SelectorTerm(id=pods),
            SelectorTerm(name="extra"),
        ],
    )
    assert [g.id for g in found] == sorted([nodes, pods, extra])
    assert {g.id: g.name for g in found} == {nodes: "nodes", pods: "pods", extra: "extra"}


async def test_al2023_alias_resolves_through_ssm_with_variant_requirements(
    clients: AwsClients, aws_env: MotoServer
) -> None:
    amis = await resolve_amis(clients, [SelectorTerm(alias="al2023@latest")], "1.32", now=NOW)
    published = ssm_amis.image_ids(aws_env.region)
    base = "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023"
    assert {a.id for a in amis} == {
        published[f"{base}/{arch}/{variant}/recommended/image_id"]
        for arch, variant in [
            ("x86_64", "standard"),
            ("x86_64", "nvidia"),
            ("x86_64", "neuron"),
            ("arm64", "standard"),
            ("arm64", "nvidia"),
        ]
    }
    by_id = {a.id: a.status() for a in amis}
    nvidia_arm = by_id[published[f"{base}/arm64/nvidia/recommended/image_id"]]
    assert nvidia_arm["requirements"] == [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Exists"},
    ]
    assert nvidia_arm["name"].startswith("amazon-eks-node-al2023-arm64-nvidia-1.32-")


async def test_alias_without_parameters_is_an_error(clients: AwsClients) -> None:
    with pytest.raises(AliasNotFound):
        await resolve_amis(clients, [SelectorTerm(alias="al2023@v19990101")], "1.32", now=NOW)


async def test_amis_by_id_ssm_parameter_name_owner_and_tags(clients: AwsClients, aws_env: MotoServer) -> None:
    ec2 = aws_env.client("ec2")
    (instance,) = ec2.run_instances(ImageId=SOURCE_AMI, MinCount=1, MaxCount=1)["Instances"]
    mine = ec2.create_image(InstanceId=instance["InstanceId"], Name="team-node-v1")["ImageId"]
    _tag(aws_env, mine, team="platform")
    published = ssm_amis.image_ids(aws_env.region)
    bottlerocket = published["/aws/service/bottlerocket/aws-k8s-1.32/arm64/latest/image_id"]

    by_name = await resolve_amis(clients, [SelectorTerm(name="team-node-*")], "1.32", now=NOW)
    assert [a.id for a in by_name] == [mine]  # owners self+amazon: ours
    assert (
        await resolve_amis(clients, [SelectorTerm(name="team-node-*", owner="602401143452")], "1.32", now=NOW)
        == []
    )
    by_tag = await resolve_amis(clients, [SelectorTerm(tags={"team": "*"})], "1.32", now=NOW)
    assert [a.id for a in by_tag] == [mine]
    by_param = await resolve_amis(
        clients,
        [
            SelectorTerm(ssm_parameter="/aws/service/bottlerocket/aws-k8s-1.32/arm64/latest/image_id"),
            SelectorTerm(id=mine),
        ],
        "1.32",
        now=NOW,
    )
    assert {a.id for a in by_param} == {bottlerocket, mine}
    missing = await resolve_amis(clients, [SelectorTerm(ssm_parameter="/nowhere/image_id")], "1.32", now=NOW)
    assert missing == []


async def test_aws_errors_come_out_as_aws_error(aws_env: MotoServer) -> None:
    """A call that fails (here: no endpoint answering) is an AwsError the controller retries."""
    from kubespot.config.aws import AwsSettings

    async with AwsClients(
        AwsSettings(region=aws_env.region, endpoint_url="http://127.0.0.1:9", max_attempts=1)
    ) as dead:
        with pytest.raises(AwsError) as caught:
            await resolve_subnets(dead, [SelectorTerm(id="subnet-1")])
    assert caught.value.retryable
