"""EC2 through boto3 over HTTP: instances, tags, CreateFleet, instance types, spot prices.

What moto does (5.2.5): RunInstances on-demand and spot (``InstanceLifecycle: spot``) with a
default VPC, subnets in every zone, private IP and ``ip-…ec2.internal`` PrivateDnsName;
DescribeInstances by ids and filters (tags, state, and ``instance-lifecycle`` with kubespot's
``fleet`` extension; stock moto answered 500); CreateTags/DeleteTags; DescribeInstanceTypes with
vCPU, memory, network and architecture for ~1 400 types, and per-zone offerings. CreateFleet
``instant`` is kubespot's ``fleet`` extension (stock moto launched every unit from the first
override and never failed for capacity): the spot/on-demand split, allocation strategies over
finite pools and EC2's ``Errors`` are tested in test_awssim_fleet.py, reclaims in
test_awssim_reclaims.py. DescribeSpotPriceHistory returns a constant 0.00001 unless kubespot's
``spot_prices`` extension has an on-demand table (by default: then 20-44 % of on-demand per type
and zone, drifting slowly; see test_awssim_spot_prices.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import spot_prices

AMI = "ami-12c6146b"  # one of moto's built-in AMIs


def _tags(instance: Any) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


def test_run_instances_spot_and_on_demand_describe_and_tags(aws: MotoServer) -> None:
    """Spot vs on-demand lifecycle, tags at launch and later, PrivateDnsName, filters by tag."""
    ec2 = aws.client("ec2")
    tag_spec = [
        {"ResourceType": "instance", "Tags": [{"Key": "kubernetes.io/cluster/demo", "Value": "owned"}]}
    ]
    spot = ec2.run_instances(
        ImageId=AMI,
        MinCount=2,
        MaxCount=2,
        InstanceType="m5.large",
        InstanceMarketOptions={"MarketType": "spot"},
        TagSpecifications=tag_spec,  # type: ignore[arg-type]
    )["Instances"]
    on_demand = ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1, InstanceType="c5.xlarge")["Instances"]
    ids = [i["InstanceId"] for i in spot + on_demand]

    ec2.create_tags(Resources=[ids[0]], Tags=[{"Key": "aws-node-termination-handler/managed", "Value": ""}])
    described = [i for r in ec2.describe_instances(InstanceIds=ids)["Reservations"] for i in r["Instances"]]
    by_id = {i["InstanceId"]: i for i in described}
    assert set(by_id) == set(ids)
    for instance_id in ids[:2]:
        assert by_id[instance_id].get("InstanceLifecycle") == "spot"
        # spot_request_ids extension (stock moto left it out; Karpenter reads the capacity type
        # from it: aws pkg/providers/instance/types.go capacityTypeFromInstance).
        assert by_id[instance_id]["SpotInstanceRequestId"].startswith("sir-")
        assert _tags(by_id[instance_id])["kubernetes.io/cluster/demo"] == "owned"
    assert "InstanceLifecycle" not in by_id[ids[2]]
    assert "SpotInstanceRequestId" not in by_id[ids[2]]
    assert _tags(by_id[ids[0]])["aws-node-termination-handler/managed"] == ""
    for instance in described:
        assert instance["PrivateDnsName"].endswith(".ec2.internal")
        assert instance["PrivateIpAddress"]
        assert instance["Placement"]["AvailabilityZone"].startswith(aws.region)
        assert instance["State"]["Name"] == "running"

    tagged = ec2.describe_instances(
        Filters=[{"Name": "tag-key", "Values": ["aws-node-termination-handler/managed"]}]
    )["Reservations"]
    assert [i["InstanceId"] for r in tagged for i in r["Instances"]] == [ids[0]]
    # EC2's ``instance-lifecycle`` filter (fleet extension; stock moto answered 500): spot ones only,
    # on-demand instances have no lifecycle value (DescribeInstances, Filter.N).
    spot_only = ec2.describe_instances(Filters=[{"Name": "instance-lifecycle", "Values": ["spot"]}])
    assert sorted(i["InstanceId"] for r in spot_only["Reservations"] for i in r["Instances"]) == sorted(
        ids[:2]
    )

    ec2.terminate_instances(InstanceIds=[ids[2]])
    state = ec2.describe_instances(InstanceIds=[ids[2]])["Reservations"][0]["Instances"][0]["State"]
    assert state["Name"] in ("shutting-down", "terminated")


def test_request_spot_instances_links_instance_and_request(aws: MotoServer) -> None:
    """RequestSpotInstances: the instance names its request in ``SpotInstanceRequestId`` and the
    request its instance (DescribeInstances / DescribeSpotInstanceRequests; stock moto only linked
    request → instance)."""
    ec2 = aws.client("ec2")
    (request,) = ec2.request_spot_instances(
        InstanceCount=1, LaunchSpecification={"ImageId": AMI, "InstanceType": "m5.large"}
    )["SpotInstanceRequests"]
    described = ec2.describe_spot_instance_requests(SpotInstanceRequestIds=[request["SpotInstanceRequestId"]])
    instance_id = described["SpotInstanceRequests"][0]["InstanceId"]
    instance = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    assert instance["SpotInstanceRequestId"] == request["SpotInstanceRequestId"]


def test_create_fleet_instant_with_overrides(aws: MotoServer) -> None:
    """CreateFleet instant: the spot/on-demand split honoured, and the override each instance comes
    from chosen by price (``lowest-price`` for both; stock moto took the first override whatever the
    strategy). EC2 API reference CreateFleet, TargetCapacitySpecificationRequest; research §1.4."""
    ec2 = aws.client("ec2")
    template_id = ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData={"ImageId": AMI})[
        "LaunchTemplate"
    ]["LaunchTemplateId"]
    subnets = ec2.describe_subnets()["Subnets"]
    overrides = [
        {"InstanceType": itype, "SubnetId": subnet["SubnetId"]}
        for itype in ("m5.large", "c5.large")
        for subnet in subnets[:2]
    ]
    fleet = ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template_id, "Version": "$Latest"},
                "Overrides": overrides,  # type: ignore[typeddict-item]
            }
        ],
        TargetCapacitySpecification={
            "TotalTargetCapacity": 3,
            "OnDemandTargetCapacity": 1,
            "SpotTargetCapacity": 2,
            "DefaultTargetCapacityType": "spot",
        },
        SpotOptions={"AllocationStrategy": "lowest-price"},
        OnDemandOptions={"AllocationStrategy": "lowest-price"},
    )
    assert fleet["Errors"] == []
    by_lifecycle: dict[str, list[str]] = {}
    for group in fleet["Instances"]:
        by_lifecycle.setdefault(group["Lifecycle"], []).extend(group["InstanceIds"])
        if group["Lifecycle"] == "on-demand":
            # c5.large is the cheaper on-demand type of the two (0.085 vs 0.096 USD/h).
            assert group["InstanceType"] == "c5.large"
    assert len(by_lifecycle["spot"]) == 2
    assert len(by_lifecycle["on-demand"]) == 1
    spot_group = next(g for g in fleet["Instances"] if g["Lifecycle"] == "spot")
    zone = spot_group["LaunchTemplateAndOverrides"]["Overrides"]["AvailabilityZone"]
    cheapest = min(
        ((o["InstanceType"], s["AvailabilityZone"]) for o, s in zip(overrides, subnets[:2] * 2, strict=True)),
        key=lambda pool: spot_prices.price_for(*pool) or 0.0,
    )
    assert (spot_group["InstanceType"], zone) == cheapest
    instance_ids = [i for ids in by_lifecycle.values() for i in ids]
    described = ec2.describe_instances(InstanceIds=instance_ids)["Reservations"]
    assert sum(len(r["Instances"]) for r in described) == 3


def test_instances_take_their_image_facts_from_the_ami(aws: MotoServer) -> None:
    """A launched instance carries its AMI's architecture and root device (moto's ``Instance`` reads
    them from the image; the ``image_lookup`` extension finds it by id instead of filtering every
    image), and an image id filter still filters: DescribeImages ``image-id`` with and without
    wildcards (DescribeImages, Filter.N)."""
    ec2 = aws.client("ec2")
    arm_image = next(
        i for i in ec2.describe_images(Filters=[{"Name": "architecture", "Values": ["arm64"]}])["Images"]
    )
    launched = ec2.run_instances(
        ImageId=arm_image["ImageId"], MinCount=1, MaxCount=1, InstanceType="c6g.large"
    )
    instance = launched["Instances"][0]
    assert instance["Architecture"] == "arm64"
    assert instance["RootDeviceName"] == arm_image["RootDeviceName"]
    exact = ec2.describe_images(Filters=[{"Name": "image-id", "Values": [AMI]}])["Images"]
    assert [i["ImageId"] for i in exact] == [AMI]
    pattern = ec2.describe_images(Filters=[{"Name": "image-id", "Values": [AMI[:-2] + "*"]}])["Images"]
    assert AMI in [i["ImageId"] for i in pattern]


def test_describe_instance_types_and_offerings(aws: MotoServer) -> None:
    """Instance type facts a provisioner needs: vCPU, memory (MiB), ENIs, IPs per ENI, arch."""
    ec2 = aws.client("ec2")
    types = ec2.describe_instance_types(InstanceTypes=["m5.large", "c6g.xlarge"])["InstanceTypes"]
    by_name = {t["InstanceType"]: t for t in types}
    m5 = by_name["m5.large"]
    assert m5["VCpuInfo"]["DefaultVCpus"] == 2
    assert m5["MemoryInfo"]["SizeInMiB"] == 8192
    assert m5["NetworkInfo"]["MaximumNetworkInterfaces"] == 3
    assert m5["NetworkInfo"]["Ipv4AddressesPerInterface"] == 10
    assert "x86_64" in m5["ProcessorInfo"]["SupportedArchitectures"]
    assert "arm64" in by_name["c6g.xlarge"]["ProcessorInfo"]["SupportedArchitectures"]

    offerings = ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["m5.large"]}]
    )["InstanceTypeOfferings"]
    assert {o["Location"] for o in offerings} >= {f"{aws.region}a", f"{aws.region}b"}


@pytest.fixture
def price_table() -> Iterator[dict[str, float]]:
    table = {"m5.large": 0.096, "c5.large": 0.085}
    spot_prices.configure(table)
    yield table
    spot_prices.configure(None)


def test_spot_price_history_placeholder_without_table(aws: MotoServer) -> None:
    """Stock behaviour (no on-demand table): one constant placeholder price for every offering."""
    spot_prices.configure({})
    ec2 = aws.client("ec2")
    try:
        history = ec2.describe_spot_price_history(InstanceTypes=["m5.large"])["SpotPriceHistory"]
    finally:
        spot_prices.configure(None)
    assert history
    assert {h["SpotPrice"] for h in history} == {"0.00001"}


def test_spot_price_history_from_on_demand_table(aws: MotoServer, price_table: dict[str, float]) -> None:
    """With the spot_prices extension: per (type, zone) prices at 20-44 % of on-demand, stable."""
    ec2 = aws.client("ec2")
    history = ec2.describe_spot_price_history(InstanceTypes=["m5.large", "c5.large"])["SpotPriceHistory"]
    zones = {h["AvailabilityZone"] for h in history}
    assert len(zones) >= 3
    for entry in history:
        ondemand = price_table[entry["InstanceType"]]
        assert 0.198 * ondemand <= float(entry["SpotPrice"]) <= 0.44 * ondemand
    again = ec2.describe_spot_price_history(InstanceTypes=["m5.large", "c5.large"])["SpotPriceHistory"]
    assert [h["SpotPrice"] for h in again] == [h["SpotPrice"] for h in history]
    m5_prices = {h["SpotPrice"] for h in history if h["InstanceType"] == "m5.large"}
    assert len(m5_prices) > 1  # zones differ, as they do on AWS
