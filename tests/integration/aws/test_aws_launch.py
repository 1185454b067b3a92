"""NodeClaims launched, found, listed and terminated through boto3 against moto (``AwsCloud``).

Sources: aws/karpenter-provider-aws ``pkg/cloudprovider/cloudprovider.go`` (``Create``, ``Get``,
``List``, ``Delete``), ``pkg/providers/instance/instance.go`` (``launchInstance``, ``List``: tag
keys nodepool + ec2nodeclass, the EKS cluster-name tag, live states; ``Delete``: terminated or
unknown is ``NodeClaimNotFound``; ``updateUnavailableOfferingsCache``, ``combineFleetErrors``),
``pkg/providers/launchtemplate/launchtemplate.go`` (``ensureLaunchTemplate``: by name, created
when missing, then cached), ``pkg/utils/utils.go`` (``GetTags``), ``pkg/providers/instance/types.go``
(``capacityTypeFromInstance``); kubespot's tag and ClientToken idempotence
(docs/designs/launching.md §3).

CreateFleet is awssim's spot market (docs/simulators/awssim.md, ``fleet``), its spot prices pinned
to the test catalog's; the insufficient-capacity tests put a small stand-in in front of it that
fails chosen overrides with a chosen code (the market itself answers only capacity errors).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest

from kubespot.aws import AwsClients
from kubespot.aws.cloud import AwsCloud
from kubespot.aws.resolved import ResolvedNodeClass
from kubespot.cloud import (
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFound,
    NodeClassNotReadyError,
)
from kubespot.cloud.pool_risk import PoolRisk
from kubespot.config.launch import LaunchSettings
from kubespot.model import SystemClock
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.template import NodeClassRef, RequirementSpec, TemplateSpec
from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import spot_prices
from support.aws_launch import CLUSTER, SETTINGS, Types, resolved_nodeclass, spot_pins


@dataclass
class Env:
    aws: MotoServer
    clients: AwsClients
    cloud: AwsCloud
    subnets: dict[str, str]

    def claim(self, name: str, *reqs: RequirementSpec, uid: str = "") -> NodeClaimSpec:
        return NodeClaimSpec(
            name,
            uid=uid or f"uid-{name}",
            labels={"karpenter.sh/nodepool": "general", "karpenter.k8s.aws/ec2nodeclass": "default"},
            template=TemplateSpec(requirements=reqs, node_class_ref=NodeClassRef(name="default")),
        )

    def describe(self, instance_id: str) -> dict[str, Any]:
        (reservation,) = self.aws.client("ec2").describe_instances(InstanceIds=[instance_id])["Reservations"]
        instance: dict[str, Any] = reservation["Instances"][0]
        return instance


@pytest.fixture
def env(aws_env: MotoServer, clients: AwsClients) -> Iterator[Env]:
    types = Types(aws_env.region)
    cloud = AwsCloud(types, clients, launch=SETTINGS)
    resolved, subnets = resolved_nodeclass(aws_env)
    cloud.set_resolved("default", resolved)
    # awssim's spot market ranks pools by its own spot prices (price-capacity-optimized ignores the
    # overrides' order): give it the catalog's, so that EC2 and kubespot agree, as on AWS.
    with spot_prices.pin_prices(spot_pins(types)):
        yield Env(aws_env, clients, cloud, subnets)


def _tags(raw: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw.get("Tags") or []}


async def test_launch_tags_template_and_idempotence(env: Env) -> None:
    """One CreateFleet for the claim: the cheapest spot override (EC2's price-capacity-optimized over
    unlimited pools), in the
    zone's roomiest subnet, tagged for the cluster, NodePool, class and claim, from a launch
    template ``kubespot.io/<hash>`` created once. Asked again (a lost status write), the claim's
    tagged instance comes back and nothing is launched; a second claim reuses the template, which
    carries the class and cluster tags ``DeleteAll`` finds it by."""
    region = env.aws.region
    first = await env.cloud.create(env.claim("general-aaaaa"))
    instance_id = first.provider_id.rsplit("/", 1)[1]
    assert first.provider_id == f"aws:///{region}a/{instance_id}"
    assert (first.instance_type, first.zone, first.capacity_type) == ("c5.large", f"{region}a", "spot")
    assert first.labels["node.kubernetes.io/instance-type"] == "c5.large"
    assert first.labels["karpenter.sh/capacity-type"] == "spot"
    # The NodeClaim's status.capacity / allocatable from the type (aws cloudprovider.go
    # instanceToNodeClaim): c5.large has 2 vCPUs.
    assert first.capacity["cpu"] == "2" and {"cpu", "memory", "pods"} <= set(first.allocatable)
    assert (first.name, first.nodepool, first.nodeclass) == ("general-aaaaa", "general", "default")
    raw = env.describe(instance_id)
    assert raw["SubnetId"] == env.subnets[f"{region}a"]  # the /24, not the /28
    assert _tags(raw) == {
        "team": "a",
        f"kubernetes.io/cluster/{CLUSTER}": "owned",
        "karpenter.sh/nodepool": "general",
        "eks:eks-cluster-name": CLUSTER,
        "karpenter.k8s.aws/ec2nodeclass": "default",
        "karpenter.sh/nodeclaim": "general-aaaaa",
    }
    templates = env.aws.client("ec2").describe_launch_templates()["LaunchTemplates"]
    assert [t["LaunchTemplateName"].split("/")[0] for t in templates] == ["kubespot.io"]
    assert _tags(templates[0])["karpenter.sh/nodepool"] == "general"
    assert "karpenter.sh/nodeclaim" not in _tags(templates[0])

    again = await env.cloud.create(env.claim("general-aaaaa"))
    assert again.provider_id == first.provider_id
    # Found again, it carries its type's facts as at launch (aws instanceToNodeClaim), and so do
    # Get and List.
    assert (again.labels, again.capacity, again.allocatable) == (
        first.labels,
        first.capacity,
        first.allocatable,
    )
    assert (await env.cloud.get(first.provider_id)).capacity == first.capacity
    assert [c.capacity for c in await env.cloud.list()] == [first.capacity]
    assert env.clients.counts[("ec2", "CreateFleet")] == 1

    second = await env.cloud.create(env.claim("general-bbbbb"))
    assert second.provider_id != first.provider_id
    assert env.clients.counts[("ec2", "CreateFleet")] == 2
    assert env.clients.counts[("ec2", "CreateLaunchTemplate")] == 1
    assert env.clients.counts[("ec2", "DescribeLaunchTemplates")] == 1  # known afterwards
    assert env.cloud.templates is not None and len(env.cloud.templates.created) == 1
    # The template says whose it is, so the class's deletion finds it (launchtemplate.go DeleteAll).
    assert _tags(templates[0])["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert _tags(templates[0])["eks:eks-cluster-name"] == CLUSTER
    assert await env.cloud.templates.delete_all("default") == [templates[0]["LaunchTemplateName"]]
    assert env.aws.client("ec2").describe_launch_templates()["LaunchTemplates"] == []


async def test_a_restarted_cloud_finds_the_instance_and_the_template(env: Env) -> None:
    """After a restart (a new ``AwsCloud``, nothing in memory) the claim's instance is found by
    its tag and the template by its name: no second launch, no second template."""
    first = await env.cloud.create(env.claim("general-aaaaa"))
    restarted = AwsCloud(Types(env.aws.region), env.clients, launch=SETTINGS)
    restarted.set_resolved("default", env.cloud.resolved("default"))
    assert (await restarted.create(env.claim("general-aaaaa"))).provider_id == first.provider_id
    await restarted.create(env.claim("general-ccccc"))
    assert env.clients.counts[("ec2", "CreateFleet")] == 2
    assert env.clients.counts[("ec2", "CreateLaunchTemplate")] == 1


async def test_list_get_delete(env: Env) -> None:
    """``List`` is this cluster's NodePool instances only (another cluster's and untagged ones are
    not); ``Get`` and ``Delete`` raise ``NodeClaimNotFound`` once the instance is terminated, and
    for an id EC2 does not know."""
    spot = await env.cloud.create(env.claim("general-aaaaa"))
    od_req = RequirementSpec("karpenter.sh/capacity-type", "In", ("on-demand",))
    on_demand = await env.cloud.create(env.claim("general-bbbbb", od_req))
    assert on_demand.capacity_type == "on-demand"
    ec2 = env.aws.client("ec2")
    image = env.cloud.resolved("default").amis[0].id  # type: ignore[union-attr, index]
    ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)  # not ours
    ec2.run_instances(
        ImageId=image,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": "karpenter.sh/nodepool", "Value": "general"},
                    {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": "default"},
                    {"Key": "eks:eks-cluster-name", "Value": "other-cluster"},
                ],
            }
        ],
    )
    listed = {c.provider_id: c for c in await env.cloud.list()}
    assert set(listed) == {spot.provider_id, on_demand.provider_id}
    assert listed[spot.provider_id].capacity_type == "spot"  # InstanceLifecycle read back
    assert listed[on_demand.provider_id].capacity_type == "on-demand"
    assert listed[spot.provider_id].name == "general-aaaaa"
    got = await env.cloud.get(spot.provider_id)
    assert (got.name, got.state, got.instance_type) == ("general-aaaaa", "running", "c5.large")

    await env.cloud.delete(spot.provider_id)
    assert env.clients.counts[("ec2", "TerminateInstances")] == 1
    with pytest.raises(NodeClaimNotFound):
        await env.cloud.get(spot.provider_id)
    with pytest.raises(NodeClaimNotFound):
        await env.cloud.delete(spot.provider_id)
    assert env.clients.counts[("ec2", "TerminateInstances")] == 1
    assert [c.provider_id for c in await env.cloud.list()] == [on_demand.provider_id]
    with pytest.raises(NodeClaimNotFound):
        await env.cloud.get(f"aws:///{env.aws.region}a/i-0123456789abcdef0")
    with pytest.raises(NodeClaimNotFound):
        await env.cloud.delete("kind://not-aws")


async def test_a_class_not_ready_launches_nothing(env: Env) -> None:
    """``NodeClassNotReadyError`` (the claim is deleted, Karpenter's ``nodeclass_not_ready``) when
    the class is unknown, or resolved without what a launch needs."""
    with pytest.raises(NodeClassNotReadyError, match="not resolved"):
        await env.cloud.create(
            NodeClaimSpec("x", template=TemplateSpec(node_class_ref=NodeClassRef(name="missing")))
        )
    resolved = env.cloud.resolved("default")
    assert resolved is not None
    env.cloud.set_resolved("default", None)
    env.cloud.set_resolved(
        "default", ResolvedNodeClass(resolved.spec, resolved.subnets, resolved.security_groups, [])
    )
    with pytest.raises(NodeClassNotReadyError, match="AMISelector"):
        await env.cloud.create(env.claim("general-aaaaa"))
    # AL2023 needs the service CIDR (nodeadm's cluster.cidr; Karpenter: "resolving cluster CIDR").
    no_cidr = AwsCloud(Types(env.aws.region), env.clients, launch=LaunchSettings(cluster_name=CLUSTER))
    no_cidr.set_resolved("default", resolved)
    with pytest.raises(NodeClassNotReadyError):
        await no_cidr.create(env.claim("general-aaaaa"))
    # User data that cannot be merged: Karpenter's CreateError LaunchFailed, retried.
    assert resolved.spec is not None
    broken = replace(resolved.spec, ami_family="Bottlerocket", user_data="[settings\nnot toml")
    env.cloud.set_resolved("default", replace(resolved, spec=broken))
    with pytest.raises(CreateError) as caught:
        await env.cloud.create(env.claim("general-aaaaa"))
    assert caught.value.reason == "LaunchFailed"
    assert env.clients.counts[("ec2", "CreateFleet")] == 0


class Ice:
    """CreateFleet's answer replaced for the pools in ``out`` (capacity type, type, zone): their
    overrides fail with ``code``, the other overrides go to awssim's market."""

    def __init__(self, clients: AwsClients, out: set[tuple[str, str, str]], code: str) -> None:
        self.clients, self.out, self.code = clients, out, code
        self.requests: list[dict[str, Any]] = []

    async def call(self, service: str, operation: str, **kwargs: Any) -> dict[str, Any]:
        if operation != "CreateFleet":
            return await self.clients.call(service, operation, **kwargs)  # type: ignore[arg-type]
        self.requests.append(kwargs)
        capacity = kwargs["TargetCapacitySpecification"]["DefaultTargetCapacityType"]
        errors, left = [], []
        for config in kwargs["LaunchTemplateConfigs"]:
            kept = []
            for o in config["Overrides"]:
                if (capacity, o["InstanceType"], o["AvailabilityZone"]) in self.out:
                    errors.append(
                        {
                            "ErrorCode": self.code,
                            "ErrorMessage": f"no {o['InstanceType']} capacity in {o['AvailabilityZone']}",
                            "Lifecycle": capacity,
                            "LaunchTemplateAndOverrides": {
                                "LaunchTemplateSpecification": config["LaunchTemplateSpecification"],
                                "Overrides": o,
                            },
                        }
                    )
                else:
                    kept.append(o)
            if kept:
                left.append({**config, "Overrides": kept})
        if not left:
            return {"FleetId": "fleet-ice", "Instances": [], "Errors": errors}
        answer = await self.clients.call("ec2", "CreateFleet", **{**kwargs, "LaunchTemplateConfigs": left})
        return {**answer, "Errors": errors}


def _ice_cloud(
    env: Env, out: set[tuple[str, str, str]], code: str = "InsufficientInstanceCapacity"
) -> tuple[AwsCloud, Ice]:
    ice = Ice(env.clients, out, code)
    cloud = AwsCloud(Types(env.aws.region), ice, launch=SETTINGS)  # type: ignore[arg-type]
    cloud.set_resolved("default", env.cloud.resolved("default"))
    return cloud, ice


async def test_insufficient_capacity_marks_pools_then_falls_back_to_on_demand(env: Env) -> None:
    """Every pool an error names is cached (the request's capacity type, the echoed zone); pools
    EC2 tried before launching elsewhere are cached too; when every spot pool failed the launch is
    an ``InsufficientCapacityError`` and the next one goes on-demand (``getCapacityType``) without
    the cached pools."""
    region = env.aws.region
    spot_pools = {("spot", t, f"{region}{z}") for t in ("c5.large", "m5.large", "r5.large") for z in "ab"}
    cloud, ice = _ice_cloud(env, {("spot", "c5.large", f"{region}a")})
    partial = await cloud.create(env.claim("general-aaaaa"))
    assert (partial.capacity_type, partial.instance_type, partial.zone) == ("spot", "c5.large", f"{region}b")
    assert [(o.instance_type, o.zone) for o in partial.failed_offerings] == [("c5.large", f"{region}a")]
    assert cloud.unavailable.is_unavailable("spot", "c5.large", f"{region}a")

    cloud, ice = _ice_cloud(env, spot_pools)
    with pytest.raises(InsufficientCapacityError) as caught:
        await cloud.create(env.claim("general-bbbbb"))
    assert {(o.capacity_type, o.instance_type, o.zone) for o in caught.value.offerings} == spot_pools
    assert all(cloud.unavailable.is_unavailable(*pool) for pool in spot_pools)
    fallback = await cloud.create(env.claim("general-bbbbb"))
    assert (fallback.capacity_type, fallback.instance_type) == ("on-demand", "c5.large")
    last = ice.requests[-1]
    assert last["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    # The retry changed the request (on-demand now): a new token, not EC2's
    # IdempotentParameterMismatch; both carry the claim's UID (fleet.client_token).
    tokens = [r["ClientToken"] for r in ice.requests[-2:]]
    assert tokens[0] != tokens[1] and all(t.startswith("uid-general-bbbbb-") for t in tokens)
    assert env.describe(fallback.provider_id.rsplit("/", 1)[1]).get("InstanceLifecycle") is None


async def test_other_fleet_errors_are_a_create_error_and_cache_nothing(env: Env) -> None:
    """``combineFleetErrors``: errors that are not all insufficient capacity → ``CreateError`` with
    ``ToReasonMessage``'s reason (the NodeClaim keeps ``Launched=Unknown`` and is retried);
    only ICE codes mark pools (``IsUnfulfillableCapacity``)."""
    region = env.aws.region
    every = {
        (ct, t, f"{region}{z}")
        for ct in ("spot", "on-demand")
        for t in ("c5.large", "m5.large", "r5.large")
        for z in "ab"
    }
    cloud, _ = _ice_cloud(env, every, code="UnauthorizedOperation")
    with pytest.raises(CreateError) as caught:
        await cloud.create(env.claim("general-aaaaa"))
    assert caught.value.reason == "Unauthorized"
    assert len(cloud.unavailable) == 0


async def test_a_reclaimed_pool_is_weighed_and_the_launch_counts_during_a_storm(env: Env) -> None:
    """kubespot's reclaim risk (docs/designs/launching.md §2, ``cloud.pool_risk``; no Karpenter
    counterpart, aws #6425): the fleet's spot overrides come in the order of price weighed by
    risk, so after a warning in zone a the same type in zone b leads, and during the storm the
    launch counts against its own pool, spreading the next replacement."""
    region = env.aws.region
    risk = PoolRisk(SystemClock())
    risk.interruption_warning("c5.large", f"{region}a")
    recorder = Ice(env.clients, set(), "unused")  # fails nothing: records the requests
    cloud = AwsCloud(Types(region), recorder, launch=SETTINGS, risk=risk)  # type: ignore[arg-type]
    cloud.set_resolved("default", env.cloud.resolved("default"))
    launched = await cloud.create(env.claim("general-aaaaa"))
    lead = recorder.requests[0]["LaunchTemplateConfigs"][0]["Overrides"][0]
    assert (lead["InstanceType"], lead["AvailabilityZone"]) == ("c5.large", f"{region}b")
    # EC2's price-capacity-optimized ignores the order; c5.large costs the same in both zones here
    # and the pools are unlimited, so awssim's market keeps the request's order on the tie.
    assert (launched.instance_type, launched.zone) == ("c5.large", f"{region}b")
    assert risk.score("c5.large", f"{region}b") > 0


async def test_a_subnet_out_of_addresses_is_skipped_for_a_while(env: Env) -> None:
    """``updateUnavailableOfferingsCache``: ``InsufficientFreeAddressesInSubnet`` marks the pool
    and the subnet (``MarkSubnetUnavailable``); the next launch in that zone goes through the
    zone's other subnet (``ZonalSubnetsForLaunch`` skips the marked one)."""
    region = env.aws.region
    cloud, ice = _ice_cloud(
        env, {("spot", "c5.large", f"{region}a")}, code="InsufficientFreeAddressesInSubnet"
    )
    await cloud.create(env.claim("general-aaaaa"))
    first = {
        o["AvailabilityZone"]: o["SubnetId"] for o in ice.requests[0]["LaunchTemplateConfigs"][0]["Overrides"]
    }
    assert first[f"{region}a"] == env.subnets[f"{region}a"]
    await cloud.create(env.claim("general-bbbbb"))
    second = {
        o["AvailabilityZone"]: o["SubnetId"] for o in ice.requests[1]["LaunchTemplateConfigs"][0]["Overrides"]
    }
    assert second[f"{region}a"] not in (first[f"{region}a"], "")
    assert second[f"{region}b"] == first[f"{region}b"]


async def test_cluster_facts_the_settings_leave_empty_come_from_eks(env: Env) -> None:
    """Karpenter reads the endpoint and the service CIDR from EKS when they are not configured
    (aws/karpenter-provider-aws ``pkg/operator/operator.go`` ``ResolveClusterEndpoint``,
    ``ResolveClusterCIDR``); the EKS API reference documents ``DescribeCluster``'s ``endpoint``,
    ``certificateAuthority.data`` and ``kubernetesNetworkConfig.serviceIpv4Cidr``. Read once."""
    eks = env.aws.client("eks")
    created = eks.create_cluster(
        name=CLUSTER,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": list(env.subnets.values())},
        kubernetesNetworkConfig={"serviceIpv4Cidr": "10.100.0.0/16"},
    )["cluster"]
    bare = AwsCloud(Types(env.aws.region), env.clients, launch=LaunchSettings(cluster_name=CLUSTER))
    resolved = env.cloud.resolved("default")
    assert resolved is not None
    bare.set_resolved("default", resolved)
    await bare.create(env.claim("general-aaaaa"))
    await bare.create(env.claim("general-bbbbb"))
    assert env.clients.counts[("eks", "DescribeCluster")] == 1
    (template,) = env.aws.client("ec2").describe_launch_templates()["LaunchTemplates"]
    data = env.aws.client("ec2").describe_launch_template_versions(
        LaunchTemplateId=template["LaunchTemplateId"]
    )["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    text = base64.b64decode(data["UserData"]).decode()
    assert f"apiServerEndpoint: {created['endpoint']}" in text
    assert "cidr: 10.100.0.0/16" in text


async def test_a_role_only_class_launches_with_the_profile_made_for_it(env: Env) -> None:
    """A class naming ``spec.role`` launches with the profile the status loop made for the role
    (aws/karpenter-provider-aws ``pkg/providers/launchtemplate/launchtemplate.go``
    ``createLaunchTemplate``: ``IamInstanceProfile`` is ``status.instanceProfile``); without one it
    is not ready (``NodeClassNotReadyError``)."""
    resolved = env.cloud.resolved("default")
    assert resolved is not None and resolved.spec is not None
    role_only = replace(resolved.spec, instance_profile=None, role="KarpenterNodeRole-prod")
    env.cloud.set_resolved("default", replace(resolved, spec=role_only))
    with pytest.raises(NodeClassNotReadyError, match="KarpenterNodeRole-prod"):
        await env.cloud.create(env.claim("general-aaaaa"))
    env.cloud.set_resolved("default", replace(resolved, spec=role_only, instance_profile="prod_42"))
    await env.cloud.create(env.claim("general-aaaaa"))
    ec2 = env.aws.client("ec2")
    (template,) = ec2.describe_launch_templates()["LaunchTemplates"]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    assert data["IamInstanceProfile"]["Name"] == "prod_42"


async def test_a_cluster_eks_does_not_know_is_not_asked_about_at_every_launch(env: Env) -> None:
    """A failed DescribeCluster (no such cluster, or not allowed) is tried again only after a
    while: each launch of a class that then cannot launch must not cost one more EKS call."""
    lost = AwsCloud(Types(env.aws.region), env.clients, launch=LaunchSettings(cluster_name="nope"))
    resolved = env.cloud.resolved("default")
    assert resolved is not None
    lost.set_resolved("default", resolved)
    before = env.clients.counts.get(("eks", "DescribeCluster"), 0)
    for name in ("general-aaaaa", "general-bbbbb", "general-ccccc"):
        with pytest.raises(NodeClassNotReadyError):  # AL2023 without a service CIDR
            await lost.create(env.claim(name))
    assert env.clients.counts[("eks", "DescribeCluster")] == before + 1
