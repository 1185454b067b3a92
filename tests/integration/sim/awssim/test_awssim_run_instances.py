"""RunInstances and CreateFleet ``request``/``maintain`` on the spot market's pools, over HTTP.

Sources: the EC2 API reference: "Error codes for the Amazon EC2 API" (``InsufficientInstanceCapacity``:
not enough capacity for the request; ``SpotMaxPriceTooLow``: the request's maximum price is below
the fulfillment price), RunInstances (``MinCount``, ``InstanceMarketOptions.SpotOptions.MaxPrice``),
CreateFleet (``Type``: ``request`` places a one-time asynchronous request, ``maintain`` keeps the
target; ``Instances`` and ``Errors`` "supported only for fleets of type instant") and DescribeFleets
(``FulfilledCapacity``). IAM API reference, ListInstanceProfiles (``PathPrefix``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import spot_prices

AMI = "ami-12c6146b"
NOW = 1_790_000_000.0


@pytest.fixture(autouse=True)
def fixed_prices() -> Iterator[None]:
    spot_prices.set_clock(lambda: NOW)
    yield
    spot_prices.set_clock(None)


def _pool(aws: MotoServer, capacity_type: str, instance_type: str, zone: str) -> dict[str, Any]:
    for p in aws.pool_stats()["Pools"]:
        if (p["CapacityType"], p["InstanceType"], p["AvailabilityZone"]) == (
            capacity_type,
            instance_type,
            zone,
        ):
            return dict(p)
    raise AssertionError(f"no pool {capacity_type}/{instance_type}/{zone}")


def _run(ec2: Any, *, spot: bool = False, n: int = 1, **kw: Any) -> list[str]:
    if spot:
        kw.setdefault("InstanceMarketOptions", {"MarketType": "spot"})
    answer = ec2.run_instances(ImageId=AMI, MinCount=n, MaxCount=n, InstanceType="m5.large", **kw)
    return [i["InstanceId"] for i in answer["Instances"]]


def test_run_instances_draws_from_the_pools_and_gives_back_on_termination(aws: MotoServer) -> None:
    """RunInstances takes slots of its pool (the subnet's zone, else the placement, else the
    region's first zone); an empty on-demand pool is ``InsufficientInstanceCapacity`` with the
    zones that have room, an empty spot pool the spot wording; nothing launches then; a terminated
    instance gives its slot back."""
    ec2 = aws.client("ec2")
    subnet_b = next(
        s["SubnetId"] for s in ec2.describe_subnets()["Subnets"] if s["AvailabilityZone"] == "us-east-1b"
    )
    aws.set_pool_capacity(2, capacity_type="on-demand", instance_type="m5.large", zone="us-east-1b")
    aws.set_pool_capacity(0, capacity_type="spot", instance_type="m5.large", zone="us-east-1a")
    ids = _run(ec2, n=2, SubnetId=subnet_b)
    with pytest.raises(ClientError) as err:
        _run(ec2, Placement={"AvailabilityZone": "us-east-1b"})
    assert err.value.response["Error"]["Code"] == "InsufficientInstanceCapacity"
    message = err.value.response["Error"]["Message"]
    assert "sufficient m5.large capacity in the Availability Zone you requested (us-east-1b)" in message
    assert "us-east-1a" in message  # a zone with room is suggested
    pool = _pool(aws, "on-demand", "m5.large", "us-east-1b")
    assert (pool["Used"], pool["Free"], pool["Launches"], pool["Errors"]) == (2, 0, 2, 1)
    with pytest.raises(ClientError) as err:
        _run(ec2, spot=True)  # no subnet, no placement: moto's us-east-1a
    assert err.value.response["Error"]["Code"] == "InsufficientInstanceCapacity"
    assert (
        err.value.response["Error"]["Message"]
        == "There is no Spot capacity available that matches your request."
    )
    running = ec2.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )
    assert sum(len(r["Instances"]) for r in running["Reservations"]) == 2
    ec2.terminate_instances(InstanceIds=ids[:1])
    assert _pool(aws, "on-demand", "m5.large", "us-east-1b")["Used"] == 1
    assert len(_run(ec2, SubnetId=subnet_b)) == 1


def test_a_spot_max_price_below_the_market_is_refused(aws: MotoServer) -> None:
    """``SpotMaxPriceTooLow``: a spot request whose MaxPrice is under the pool's spot price
    launches nothing; one at or above it launches, as spot, into the pool."""
    ec2 = aws.client("ec2")
    price = spot_prices.price_for("m5.large", "us-east-1a")
    assert price is not None
    low = {"MarketType": "spot", "SpotOptions": {"MaxPrice": f"{price / 2:.6f}"}}
    with pytest.raises(ClientError) as err:
        _run(ec2, InstanceMarketOptions=low)
    assert err.value.response["Error"]["Code"] == "SpotMaxPriceTooLow"
    assert (
        "lower than the minimum required Spot request fulfillment price"
        in err.value.response["Error"]["Message"]
    )
    high = {"MarketType": "spot", "SpotOptions": {"MaxPrice": f"{price * 2:.6f}"}}
    (instance,) = _run(ec2, InstanceMarketOptions=high)
    got = ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]
    assert got["InstanceLifecycle"] == "spot"
    assert _pool(aws, "spot", "m5.large", "us-east-1a")["Used"] == 1


def test_unconfigured_pools_launch_as_stock_moto(aws: MotoServer) -> None:
    """Pools default to unlimited: many instances launch, from a template's type too."""
    ec2 = aws.client("ec2")
    assert len(_run(ec2, n=20)) == 20
    ec2.create_launch_template(
        LaunchTemplateName="t", LaunchTemplateData={"ImageId": AMI, "InstanceType": "c5.large"}
    )
    answer = ec2.run_instances(MinCount=1, MaxCount=1, LaunchTemplate={"LaunchTemplateName": "t"})
    assert answer["Instances"][0]["InstanceType"] == "c5.large"
    assert _pool(aws, "on-demand", "c5.large", "us-east-1a")["Used"] == 1


@pytest.mark.parametrize("fleet_type", ["request", "maintain"])
def test_request_and_maintain_fleets_are_placed_on_the_pools(aws: MotoServer, fleet_type: str) -> None:
    """CreateFleet ``request``/``maintain``: the same pools and placement as ``instant``; the answer
    is the FleetId alone; what did not fit is not launched (DescribeFleets' fulfilled capacity
    falls short of the target); the call log of ``instant`` fleets is not touched."""
    ec2 = aws.client("ec2")
    subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in ec2.describe_subnets()["Subnets"]}
    ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData={"ImageId": AMI})
    aws.set_pool_capacity(0, capacity_type="spot")
    aws.set_pool_capacity(2, capacity_type="spot", instance_type="m5.large", zone="us-east-1b")
    answer = ec2.create_fleet(
        Type=fleet_type,
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "nodes", "Version": "$Latest"},
                "Overrides": [
                    {"InstanceType": t, "SubnetId": subnets[z]}
                    for t in ("m5.large", "c5.large")
                    for z in subnets
                ],
            }
        ],
        TargetCapacitySpecification={"TotalTargetCapacity": 3, "DefaultTargetCapacityType": "spot"},
        SpotOptions={"AllocationStrategy": "lowest-price"},
    )
    assert "Instances" not in answer and "Errors" not in answer
    pool = _pool(aws, "spot", "m5.large", "us-east-1b")
    assert (pool["Used"], pool["Free"]) == (2, 0)
    assert sum(p["Used"] for p in aws.pool_stats()["Pools"]) == 2
    (fleet,) = ec2.describe_fleets(FleetIds=[answer["FleetId"]])["Fleets"]
    assert (
        fleet["FulfilledCapacity"] == 2 and fleet["TargetCapacitySpecification"]["TotalTargetCapacity"] == 3
    )
    assert aws.fleet_call_log() == [] and aws.pool_stats()["FleetCalls"] == 0


def test_list_instance_profiles_honours_the_path_prefix(aws: MotoServer) -> None:
    """ListInstanceProfiles ``PathPrefix``: only the profiles under it (default ``/``: all)."""
    iam = aws.client("iam")
    iam.create_instance_profile(InstanceProfileName="a", Path="/karpenter/us-east-1/prod/u1/")
    iam.create_instance_profile(InstanceProfileName="b", Path="/karpenter/us-east-1/staging/u2/")
    iam.create_instance_profile(InstanceProfileName="c")
    listed = iam.list_instance_profiles(PathPrefix="/karpenter/us-east-1/prod/")["InstanceProfiles"]
    assert [p["InstanceProfileName"] for p in listed] == ["a"]
    assert {p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]} == {
        "a",
        "b",
        "c",
    }
