"""What launching through ``AwsCloud`` needs in a test: the cluster's launch settings, a catalog
stand-in (``FixedCatalog``; ``Types``, three types) and an EC2NodeClass resolved over a VPC made in
moto (``resolved_nodeclass``). Used by tests/integration/aws/test_aws_launch.py and the NodeClaim
controller's tests over awssim.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubespot.aws.amis import AmiInfo
from kubespot.aws.resolved import ResolvedNodeClass
from kubespot.aws.security_groups import SecurityGroupInfo
from kubespot.aws.subnets import SubnetInfo
from kubespot.cloud import fake_type
from kubespot.config.launch import LaunchSettings
from kubespot.model.capacity import AMIFamily, KubeletConfig
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec
from kubespot.scheduling.instance_types import InstanceType
from kubespot.sim.awssim import MotoServer

CLUSTER = "prod"
SOURCE_AMI = "ami-12c6146b"  # one of moto's stock x86_64 images
SETTINGS = LaunchSettings(
    cluster_name=CLUSTER,
    cluster_endpoint="https://api",
    cluster_ca_bundle="Q0E=",
    cluster_cidr="10.100.0.0/16",
)


class FixedCatalog:
    """The catalog's place (``aws.catalog.Catalog``'s calls): the types it is given, whatever the
    zones, family and kubelet asked."""

    def __init__(self, types: Iterable[InstanceType]) -> None:
        self.types = list(types)

    async def refresh_if_due(self) -> None:
        return None

    def instance_types(
        self,
        zones: Iterable[str] | None = None,
        *,
        family: AMIFamily = AMIFamily.AL2023,
        kubelet: KubeletConfig | None = None,
    ) -> list[InstanceType]:
        return self.types


class Types(FixedCatalog):
    """Three types in zones a and b (cheapest spot: c5.large)."""

    def __init__(self, region: str) -> None:
        zones = (f"{region}a", f"{region}b")
        super().__init__(
            [
                fake_type("c5.large", 2, 4, 0.085, 0.031, zones=zones),
                fake_type("m5.large", 2, 8, 0.096, 0.035, zones=zones),
                fake_type("r5.large", 2, 16, 0.126, 0.040, zones=zones),
            ]
        )


def resolved_nodeclass(aws: MotoServer) -> tuple[ResolvedNodeClass, dict[str, str]]:
    ec2 = aws.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = []
    for cidr, zone in (("10.0.1.0/24", "a"), ("10.0.2.0/24", "b"), ("10.0.3.0/28", "a")):
        raw = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=f"{aws.region}{zone}")["Subnet"]
        subnets.append(
            SubnetInfo(
                raw["SubnetId"],
                raw["AvailabilityZone"],
                raw.get("AvailabilityZoneId", ""),
                raw["AvailableIpAddressCount"],
            )
        )
    group = ec2.create_security_group(GroupName="nodes", Description="nodes", VpcId=vpc)["GroupId"]
    (image,) = ec2.describe_images(ImageIds=[SOURCE_AMI])["Images"]
    ami = AmiInfo(
        image["ImageId"],
        image["Name"],
        "2026-01-01T00:00:00Z",
        False,
        (("kubernetes.io/arch", "In", ("amd64",)),),
    )
    spec = EC2NodeClassSpec(
        name="default",
        ami_family="AL2023",
        instance_profile="KarpenterNodeInstanceProfile",
        tags={"team": "a"},
    )
    resolved = ResolvedNodeClass(spec, subnets, [SecurityGroupInfo(group, "nodes")], [ami])
    return resolved, {s.zone: s.id for s in sorted(subnets, key=lambda s: s.available_ips)}


def spot_pins(types: Types) -> dict[tuple[str, str], float]:
    """The catalog's spot prices per (type, zone), for awssim's ``spot_prices.pin_prices``:
    price-capacity-optimized ranks pools by EC2's prices, so EC2 and kubespot must agree."""
    return {(t.name, o.zone): o.price for t in types.types for o in t.offerings if o.capacity_type == "spot"}
