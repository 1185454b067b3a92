"""The instance profile made for an EC2NodeClass's ``spec.role``, through boto3 against moto's IAM.

Sources: aws/karpenter-provider-aws ``pkg/providers/instanceprofile/instanceprofile.go``
(``Create``: path ``/karpenter/<region>/<cluster>/<uid>/``, tags; ``ensureRole``: one role, a
changed one swapped, a role's path dropped; ``Delete``: role removed, profile deleted, a missing
one ignored) and ``pkg/apis/v1/ec2nodeclass.go`` (``InstanceProfileName``, ``InstanceProfileTags``).
"""

from __future__ import annotations

import json

from kubespot.aws import AwsClients
from kubespot.aws.instance_profiles import InstanceProfiles, profile_name
from kubespot.sim.awssim import MotoServer

CLUSTER = "prod"
TRUST = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
)


def _roles(aws: MotoServer, *names: str) -> None:
    for name in names:
        aws.client("iam").create_role(RoleName=name, AssumeRolePolicyDocument=TRUST)


async def test_a_role_gets_a_tagged_profile_under_the_cluster_path(
    clients: AwsClients, aws_env: MotoServer
) -> None:
    """``Create``: the profile is made once, at ``/karpenter/<region>/<cluster>/<uid>/``, with the
    class's tags and the cluster's, and holds the role; a second pass changes nothing
    (``ensureRole`` with the role already attached)."""
    _roles(aws_env, "KarpenterNodeRole-prod")
    profiles = InstanceProfiles(clients, CLUSTER, aws_env.region)
    name = await profiles.ensure("default", "uid-1", "KarpenterNodeRole-prod", {"team": "a"})
    assert name == profile_name(CLUSTER, aws_env.region, "default") and name.startswith("prod_")
    got = aws_env.client("iam").get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    assert got["Path"] == f"/karpenter/{aws_env.region}/{CLUSTER}/uid-1/"
    assert [r["RoleName"] for r in got["Roles"]] == ["KarpenterNodeRole-prod"]
    # moto has no ListInstanceProfileTags; GetInstanceProfile answers the tags too (as IAM does).
    tags = {t["Key"]: t["Value"] for t in got.get("Tags", [])}
    assert tags == {
        "team": "a",
        "kubernetes.io/cluster/prod": "owned",
        "eks:eks-cluster-name": "prod",
        "karpenter.k8s.aws/ec2nodeclass": "default",
        "topology.kubernetes.io/region": aws_env.region,
    }
    before = clients.call_count("iam")
    assert await profiles.ensure("default", "uid-1", "KarpenterNodeRole-prod", {}) == name
    assert clients.call_count("iam") == before + 1  # only the GetInstanceProfile


async def test_a_changed_role_is_swapped_and_a_path_dropped(clients: AwsClients, aws_env: MotoServer) -> None:
    """``ensureRole``: a profile holds one role, so a changed ``spec.role`` replaces it; a role
    given with a path is attached by its bare name (AddRoleToInstanceProfile takes no path)."""
    _roles(aws_env, "old-role", "new-role")
    profiles = InstanceProfiles(clients, CLUSTER, aws_env.region)
    name = await profiles.ensure("gpu", "uid-2", "old-role", {})
    assert await profiles.ensure("gpu", "uid-2", "nodes/new-role", {}) == name
    got = aws_env.client("iam").get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    assert [r["RoleName"] for r in got["Roles"]] == ["new-role"]


async def test_delete_detaches_the_role_and_ignores_a_missing_profile(
    clients: AwsClients, aws_env: MotoServer
) -> None:
    """``Delete``: the role is removed, then the profile; none left is not an error."""
    _roles(aws_env, "r")
    profiles = InstanceProfiles(clients, CLUSTER, aws_env.region)
    name = await profiles.ensure("spot", "uid-3", "r", {})
    assert await profiles.delete("spot") is True
    names = [
        p["InstanceProfileName"] for p in aws_env.client("iam").list_instance_profiles()["InstanceProfiles"]
    ]
    assert name not in names
    assert aws_env.client("iam").list_instance_profiles_for_role(RoleName="r")["InstanceProfiles"] == []
    assert await profiles.delete("spot") is False
