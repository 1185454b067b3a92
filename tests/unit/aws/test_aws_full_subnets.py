"""A zone whose every subnet is out of addresses is unavailable for planning, not only the fleet.

Source: aws/karpenter-provider-aws ``pkg/cache/unavailableofferings.go`` (``MarkSubnetUnavailable``;
``IsUnavailable(instanceType, zone, subnetIDs, capacityType)`` is true when every subnet of the
zone is marked) read by ``pkg/providers/instancetype`` offering availability, so the scheduler and
``getCapacityType`` (``pkg/providers/instance/instance.go``) go elsewhere.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubespot.aws.amis import AmiInfo
from kubespot.aws.cloud import AwsCloud
from kubespot.aws.resolved import ResolvedNodeClass
from kubespot.aws.security_groups import SecurityGroupInfo
from kubespot.aws.subnets import SubnetInfo
from kubespot.cloud import InsufficientCapacityError, fake_type
from kubespot.cloud.candidates import launch_capacity_type, launch_pools
from kubespot.config.launch import LaunchSettings
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec
from kubespot.scheduling.api.template import NodeClassRef, RequirementSpec, TemplateSpec
from kubespot.scheduling.nodepool import NodePool
from kubespot.scheduling.requirements import Requirements
from support.aws_launch import FixedCatalog
from support.clocks import ManualClock

A, B = "us-east-1a", "us-east-1b"
SPEC = EC2NodeClassSpec(name="default", ami_family="AL2023", instance_profile="p")
POOL = NodePool("general", Requirements([]))
CATALOG = FixedCatalog([fake_type("c5.large", 2, 4, 0.085, 0.031, zones=(A, B))])


class _Ec2:
    """Templates exist; every fleet override in subnet-a answers InsufficientFreeAddressesInSubnet."""

    def __init__(self) -> None:
        self.fleets: list[dict[str, Any]] = []

    async def call(self, service: str, operation: str, **kwargs: Any) -> dict[str, Any]:
        if operation == "DescribeInstances":
            return {"Reservations": []}
        if operation == "DescribeLaunchTemplates":
            return {"LaunchTemplates": [{}]}
        assert operation == "CreateFleet"
        self.fleets.append(kwargs)
        overrides = [o for c in kwargs["LaunchTemplateConfigs"] for o in c["Overrides"]]
        errors = [
            {
                "ErrorCode": "InsufficientFreeAddressesInSubnet",
                "ErrorMessage": "no free addresses",
                "LaunchTemplateAndOverrides": {"Overrides": o},
            }
            for o in overrides
            if o["SubnetId"] == "subnet-a"
        ]
        return {"FleetId": "fleet-1", "Instances": [], "Errors": errors}


def _claim(name: str, *reqs: RequirementSpec) -> NodeClaimSpec:
    return NodeClaimSpec(
        name,
        uid=f"uid-{name}",
        labels={"karpenter.sh/nodepool": "general"},
        template=TemplateSpec(requirements=reqs, node_class_ref=NodeClassRef(name="default")),
    )


async def test_a_zone_out_of_addresses_is_unavailable_until_the_ttl() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    settings = LaunchSettings(
        cluster_name="prod",
        cluster_endpoint="https://api",
        cluster_ca_bundle="Q0E=",
        cluster_cidr="10.0.0.0/16",
    )
    cloud = AwsCloud(
        CATALOG,
        _Ec2(),
        launch=settings,
        clock=clock,
    )  # type: ignore[arg-type]
    subnets = [SubnetInfo("subnet-a", A, "", 3), SubnetInfo("subnet-b", B, "", 100)]
    ami = AmiInfo("ami-1", "n", "2026-01-01T00:00:00Z", False, ())
    cloud.set_resolved("default", ResolvedNodeClass(SPEC, subnets, [SecurityGroupInfo("sg-1", "n")], [ami]))
    in_a = RequirementSpec("topology.kubernetes.io/zone", "In", (A,))
    with pytest.raises(InsufficientCapacityError):
        await cloud.create(_claim("c1", in_a))

    (c5,) = await cloud.instance_types(POOL, SPEC)
    assert {(o.zone, o.capacity_type) for o in c5.offerings if not o.available} == {
        (A, "spot"),
        (A, "on-demand"),
    }
    # Planning and the capacity-type choice see it: a claim free to move goes to zone b, one
    # pinned to zone a has no pool (insufficient capacity, re-planned), not a LaunchFailed retry.
    assert {p.offering.zone for p in launch_pools(_claim("c2"), [c5])} == {B}
    assert launch_capacity_type(launch_pools(_claim("c3", in_a), [c5])) is None
    with pytest.raises(InsufficientCapacityError):
        await cloud.create(_claim("c3", in_a))

    await clock.advance(cloud.unavailable.ttl + 1)
    (c5,) = await cloud.instance_types(POOL, SPEC)
    assert all(o.available for o in c5.offerings)
