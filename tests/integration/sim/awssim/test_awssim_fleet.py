"""CreateFleet ``instant`` over the spot market's finite pools, through boto3 over HTTP.

What the ``fleet`` extension adds to moto 5.2.5 (which launched every instance from the first
override and never failed): the target split by capacity type, the allocation strategies over
pools per (capacity type, type, zone), EC2's ``Errors`` (HTTP 200, possibly no instances),
``SpotInstanceRequestId``, the ``instance-lifecycle`` filter, ``ClientToken`` idempotence, and pool
capacity given back when an instance terminates. Sources: the EC2 API reference (CreateFleet,
CreateFleetError, FleetLaunchTemplateOverridesRequest, SpotOptionsRequest, OnDemandOptionsRequest),
the EC2 User Guide ("EC2 Fleet instant", "Allocation strategies for Spot Instances") and
docs/designs/launching-research.md §1-§2, which records them with Karpenter's use.
"""

from __future__ import annotations

import concurrent.futures
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import spot_prices

AMI = "ami-12c6146b"  # one of moto's built-in AMIs

_CLIENTS: dict[tuple[int, str], Any] = {}


def _client(aws: MotoServer, service: str) -> Any:
    """One client per service for the session's server: building a boto3 client costs ~50 ms."""
    key = (id(aws), service)
    if key not in _CLIENTS:
        _CLIENTS[key] = aws.client(service)
    return _CLIENTS[key]


TYPES = ("m5.large", "c5.large", "m5.xlarge")
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
NOW = 1_790_000_000.0


@pytest.fixture(autouse=True)
def fixed_prices() -> Iterator[None]:
    """Spot prices move at 6-hour steps: pin "now" so the test and the fleet see the same market."""
    spot_prices.set_clock(lambda: NOW)
    yield
    spot_prices.set_clock(None)


def _subnets(aws: MotoServer) -> dict[str, str]:
    return {s["AvailabilityZone"]: s["SubnetId"] for s in _client(aws, "ec2").describe_subnets()["Subnets"]}


def _overrides(aws: MotoServer, types: tuple[str, ...] = TYPES, zones: tuple[str, ...] = ZONES) -> list[Any]:
    subnets = _subnets(aws)
    return [{"InstanceType": t, "SubnetId": subnets[z], "AvailabilityZone": z} for t in types for z in zones]


def _fleet(
    aws: MotoServer, overrides: list[Any], total: int = 1, capacity_type: str = "spot", **kw: Any
) -> Any:
    ec2 = _client(aws, "ec2")
    if not ec2.describe_launch_templates(Filters=[{"Name": "launch-template-name", "Values": ["nodes"]}])[
        "LaunchTemplates"
    ]:
        ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData={"ImageId": AMI})
    kw.setdefault(
        "SpotOptions" if capacity_type == "spot" else "OnDemandOptions",
        {"AllocationStrategy": "lowest-price"},
    )
    return ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "nodes", "Version": "$Latest"},
                "Overrides": overrides,
            }
        ],
        TargetCapacitySpecification={
            "TotalTargetCapacity": total,
            "DefaultTargetCapacityType": capacity_type,
        },
        **kw,
    )


def _pools(answer: Any) -> list[tuple[str, str, int]]:
    """(type, zone, instances) per Instances entry."""
    return [
        (
            g["InstanceType"],
            g["LaunchTemplateAndOverrides"]["Overrides"]["AvailabilityZone"],
            len(g["InstanceIds"]),
        )
        for g in answer.get("Instances", [])
    ]


def _by_spot_price(types: tuple[str, ...] = TYPES, zones: tuple[str, ...] = ZONES) -> list[tuple[str, str]]:
    pools = [(t, z) for t in types for z in zones]
    return sorted(pools, key=lambda p: spot_prices.price_at(p[0], p[1], NOW) or 0.0)


def _admin(aws: MotoServer, route: str, body: Any | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{aws.endpoint_url}/_kubespot/{route}", data=data, method="GET" if body is None else "POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_spot_lowest_price_takes_the_cheapest_pool(aws: MotoServer) -> None:
    """``lowest-price``: the cheapest spot pool (spot price model = DescribeSpotPriceHistory's) wins,
    whatever the override order (SpotOptionsRequest.AllocationStrategy; research §1.4)."""
    answer = _fleet(aws, list(reversed(_overrides(aws))), total=2)
    cheapest = _by_spot_price()[0]
    assert _pools(answer) == [(cheapest[0], cheapest[1], 2)]
    assert answer["Errors"] == []
    ec2 = _client(aws, "ec2")
    history = ec2.describe_spot_price_history(InstanceTypes=[cheapest[0]], AvailabilityZone=cheapest[1])
    assert float(history["SpotPriceHistory"][0]["SpotPrice"]) == pytest.approx(
        spot_prices.price_at(cheapest[0], cheapest[1], NOW)
    )


def test_lowest_price_splits_over_pools_when_the_cheapest_runs_out(aws: MotoServer) -> None:
    """A finite pool fills, the rest goes to the next cheapest ("lowest-price … if that has
    insufficient capacity, the next"; TotalTargetCapacity > 1 as Karpenter's batcher sends it,
    research §1.1); a pool filled by the call is not an error when the request is met."""
    first, second = _by_spot_price()[:2]
    aws.set_pool_capacity(1, capacity_type="spot", instance_type=first[0], zone=first[1])
    answer = _fleet(aws, _overrides(aws), total=3)
    assert sorted(_pools(answer)) == sorted([(first[0], first[1], 1), (second[0], second[1], 2)])
    assert answer["Errors"] == []
    stats = {(p["InstanceType"], p["AvailabilityZone"]): p for p in aws.pool_stats()["Pools"]}
    assert stats[first]["Used"] == 1 and stats[first]["Free"] == 0
    assert stats[second]["Launches"] == 2


def test_empty_pool_is_an_error_alongside_a_success(aws: MotoServer) -> None:
    """An empty pool the strategy preferred is reported in ``Errors`` with EC2's code, message,
    ``Lifecycle`` and the override echoed with its AvailabilityZone, next to the instances launched
    elsewhere (CreateFleetError; research §1.2 "errors arrive also with a successful launch")."""
    first, second = _by_spot_price()[:2]
    aws.set_pool_capacity(0, capacity_type="spot", instance_type=first[0], zone=first[1])
    answer = _fleet(aws, _overrides(aws))
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert _pools(answer) == [(second[0], second[1], 1)]
    assert len(answer["Errors"]) == 1
    error = answer["Errors"][0]
    assert error["ErrorCode"] == "InsufficientInstanceCapacity"
    assert error["ErrorMessage"] == "There is no Spot capacity available that matches your request."
    assert error["Lifecycle"] == "spot"
    overrides = error["LaunchTemplateAndOverrides"]["Overrides"]
    assert (overrides["InstanceType"], overrides["AvailabilityZone"]) == first
    assert overrides["SubnetId"] == _subnets(aws)[first[1]]
    assert error["LaunchTemplateAndOverrides"]["LaunchTemplateSpecification"]["LaunchTemplateName"] == "nodes"


def test_which_empty_pools_a_fleet_reports(aws: MotoServer) -> None:
    """Which overrides get an error beside a launch (our rule, docs/simulators/awssim.md; AWS does
    not document it): ``lowest-price`` walks the pools by price and reports only the empty ones it
    passed; ``price-capacity-optimized`` weighs every pool's capacity and reports every empty one,
    dearer ones included (research §1.4)."""
    ranked = _by_spot_price(types=("m5.large",))
    aws.set_pool_capacity(0, capacity_type="spot", instance_type="m5.large", zone=ranked[2][1])
    overrides = _overrides(aws, types=("m5.large",))
    lowest = _fleet(aws, overrides)
    assert _pools(lowest) == [("m5.large", ranked[0][1], 1)]
    assert lowest["Errors"] == []
    pco = _fleet(aws, overrides, SpotOptions={"AllocationStrategy": "price-capacity-optimized"})
    assert _pools(pco) == [("m5.large", ranked[0][1], 1)]
    assert [e["LaunchTemplateAndOverrides"]["Overrides"]["AvailabilityZone"] for e in pco["Errors"]] == [
        ranked[2][1]
    ]


def test_no_spot_pool_with_room_answers_unfulfillable_capacity_per_override(aws: MotoServer) -> None:
    """Nothing launched: HTTP 200, no instances, one ``UnfulfillableCapacity`` error per override
    (EC2 error codes page via aws-parallelcluster-node PR #673; research §1.2-1.3)."""
    aws.set_pool_capacity(0, capacity_type="spot")
    overrides = _overrides(aws, types=("m5.large",), zones=ZONES[:2])
    answer = _fleet(aws, overrides)
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert answer.get("Instances", []) == []
    assert [e["ErrorCode"] for e in answer["Errors"]] == ["UnfulfillableCapacity"] * 2
    assert answer["Errors"][0]["ErrorMessage"] == (
        "Unable to fulfill capacity due to your request configuration. "
        "Please adjust your request and try again."
    )
    assert {
        e["LaunchTemplateAndOverrides"]["Overrides"]["AvailabilityZone"] for e in answer["Errors"]
    } == set(ZONES[:2])
    assert _client(aws, "ec2").describe_instances()["Reservations"] == []


def test_on_demand_lowest_price_and_insufficient_capacity_message(aws: MotoServer) -> None:
    """On-demand ``lowest-price`` ranks by the on-demand table (what the Pricing extension serves);
    an empty pool answers ``InsufficientInstanceCapacity`` in EC2's wording, naming the zones that
    offer the type and still have room (core issue #2275's log, quoted in research §1.2)."""
    prices = {t: spot_prices.ondemand_price(t) or 0.0 for t in ("m5.large", "c5.large")}
    cheap = min(prices, key=lambda t: prices[t])
    dear = max(prices, key=lambda t: prices[t])
    aws.set_pool_capacity(0, capacity_type="on-demand", instance_type=cheap, zone="us-east-1a")
    aws.set_pool_capacity(0, capacity_type="on-demand", instance_type=cheap, zone="us-east-1c")
    overrides = _overrides(aws, types=(dear, cheap), zones=("us-east-1a",))
    answer = _fleet(aws, overrides, capacity_type="on-demand")
    assert _pools(answer) == [(dear, "us-east-1a", 1)]
    assert answer["Instances"][0]["Lifecycle"] == "on-demand"
    (error,) = answer["Errors"]
    assert error["ErrorCode"] == "InsufficientInstanceCapacity"
    assert error["Lifecycle"] == "on-demand"
    assert error["ErrorMessage"] == (
        f"We currently do not have sufficient {cheap} capacity in the Availability Zone you requested "
        "(us-east-1a). Our system will be working on provisioning additional capacity. You can currently "
        f"get {cheap} capacity by not specifying an Availability Zone in your request or choosing "
        "us-east-1b, us-east-1d, us-east-1f."  # not 1e: c5.large is not offered there
    )


def test_on_demand_prioritized_follows_priority(aws: MotoServer) -> None:
    """``prioritized``: the lowest ``Priority`` number first, price aside; on an empty pool the next
    priority (OnDemandOptionsRequest.AllocationStrategy, FleetLaunchTemplateOverrides.Priority)."""
    subnet = _subnets(aws)["us-east-1a"]
    overrides = [
        {"InstanceType": "m5.xlarge", "SubnetId": subnet, "Priority": 1.0},
        {"InstanceType": "c5.large", "SubnetId": subnet, "Priority": 3.0},
        {"InstanceType": "m5.large", "SubnetId": subnet, "Priority": 2.0},
    ]
    options = {"OnDemandOptions": {"AllocationStrategy": "prioritized"}}
    answer = _fleet(aws, overrides, capacity_type="on-demand", **options)
    assert _pools(answer) == [("m5.xlarge", "us-east-1a", 1)]
    aws.set_pool_capacity(1, capacity_type="on-demand", instance_type="m5.xlarge")
    answer = _fleet(aws, overrides, capacity_type="on-demand", **options)
    assert _pools(answer) == [("m5.large", "us-east-1a", 1)]
    assert [e["LaunchTemplateAndOverrides"]["Overrides"]["InstanceType"] for e in answer["Errors"]] == [
        "m5.xlarge"
    ]


def test_price_capacity_optimized_prefers_deep_pools_then_price(aws: MotoServer) -> None:
    """``price-capacity-optimized``: of the pools with room, those at least half as deep as the
    deepest (our documented cut-off; AWS publishes none, research §1.4), then the cheapest."""
    ranked = _by_spot_price(types=("m5.large",))
    cheap, middle, dear = ranked
    aws.set_pool_capacity(2, capacity_type="spot", instance_type="m5.large", zone=cheap[1])
    aws.set_pool_capacity(8, capacity_type="spot", instance_type="m5.large", zone=middle[1])
    aws.set_pool_capacity(10, capacity_type="spot", instance_type="m5.large", zone=dear[1])
    options = {"SpotOptions": {"AllocationStrategy": "price-capacity-optimized"}}
    answer = _fleet(aws, _overrides(aws, types=("m5.large",)), **options)
    assert _pools(answer) == [("m5.large", middle[1], 1)]
    # Asking for more than the middle pool holds: only the deepest has room for all of it.
    answer = _fleet(aws, _overrides(aws, types=("m5.large",)), total=9, **options)
    assert _pools(answer) == [("m5.large", dear[1], 9)]


def test_capacity_optimized_strategies_and_diversified(aws: MotoServer) -> None:
    """``capacity-optimized``: the deepest pool, price ignored; ``capacity-optimized-prioritized``:
    deep pools by Priority; ``diversified``: spread over the pools (SpotOptionsRequest)."""
    subnets = _subnets(aws)
    aws.set_pool_capacity(3, capacity_type="spot", zone="us-east-1a")
    aws.set_pool_capacity(9, capacity_type="spot", zone="us-east-1b")
    aws.set_pool_capacity(8, capacity_type="spot", zone="us-east-1c")
    overrides = [
        {"InstanceType": "m5.large", "SubnetId": subnets[z], "AvailabilityZone": z, "Priority": p}
        for z, p in (("us-east-1a", 0.0), ("us-east-1b", 2.0), ("us-east-1c", 1.0))
    ]
    answer = _fleet(aws, overrides, SpotOptions={"AllocationStrategy": "capacity-optimized"})
    assert _pools(answer) == [("m5.large", "us-east-1b", 1)]
    answer = _fleet(aws, overrides, SpotOptions={"AllocationStrategy": "capacity-optimized-prioritized"})
    assert _pools(answer) == [("m5.large", "us-east-1c", 1)]  # 1a is shallow, 1c outranks 1b
    answer = _fleet(aws, overrides, total=3, SpotOptions={"AllocationStrategy": "diversified"})
    assert sorted(z for _, z, n in _pools(answer) for _ in range(n)) == [
        "us-east-1a",
        "us-east-1b",
        "us-east-1c",
    ]


def test_target_split_between_spot_and_on_demand(aws: MotoServer) -> None:
    """``OnDemandTargetCapacity`` and ``SpotTargetCapacity`` are launched as such, the rest of
    ``TotalTargetCapacity`` as ``DefaultTargetCapacityType`` (TargetCapacitySpecificationRequest)."""
    ec2 = _client(aws, "ec2")
    ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData={"ImageId": AMI})
    answer = ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "nodes", "Version": "$Latest"},
                "Overrides": _overrides(aws, types=("m5.large",)),  # type: ignore[typeddict-item]
            }
        ],
        TargetCapacitySpecification={
            "TotalTargetCapacity": 4,
            "OnDemandTargetCapacity": 1,
            "SpotTargetCapacity": 1,
            "DefaultTargetCapacityType": "spot",
        },
    )
    lifecycles = sorted(g["Lifecycle"] for g in answer["Instances"] for _ in g["InstanceIds"])
    assert lifecycles == ["on-demand", "spot", "spot", "spot"]


def test_spot_request_id_and_instance_lifecycle_filter(aws: MotoServer) -> None:
    """Spot instances carry ``SpotInstanceRequestId`` (Karpenter's ``capacityTypeFromInstance`` reads
    it, research §2.2) and the ``instance-lifecycle`` filter selects them; on-demand ones have
    neither (DescribeInstances filters: ``instance-lifecycle - spot | scheduled | capacity-block``)."""
    spot = _fleet(aws, _overrides(aws))["Instances"][0]["InstanceIds"]
    on_demand = _fleet(aws, _overrides(aws), capacity_type="on-demand")["Instances"][0]["InstanceIds"]
    ec2 = _client(aws, "ec2")
    described = {i["InstanceId"]: i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]}
    assert described[spot[0]]["SpotInstanceRequestId"].startswith("sir-")
    assert described[spot[0]]["InstanceLifecycle"] == "spot"
    assert "SpotInstanceRequestId" not in described[on_demand[0]]
    requests = ec2.describe_spot_instance_requests()["SpotInstanceRequests"]
    assert {r["SpotInstanceRequestId"] for r in requests if r["InstanceId"] == spot[0]} == {
        described[spot[0]]["SpotInstanceRequestId"]
    }
    filtered = ec2.describe_instances(Filters=[{"Name": "instance-lifecycle", "Values": ["spot"]}])
    assert [i["InstanceId"] for r in filtered["Reservations"] for i in r["Instances"]] == spot


def test_client_token_is_idempotent(aws: MotoServer) -> None:
    """The same ``ClientToken`` answers the first call's fleet and instances without launching; other
    parameters with it are ``IdempotentParameterMismatch`` (EC2 developer guide "Ensuring idempotency
    in Amazon EC2 API requests", wording from runs-on issue #251; launching.md §3 restart safety)."""
    overrides = _overrides(aws)
    first = _fleet(aws, overrides, ClientToken="claim-uid-1")
    again = _fleet(aws, overrides, ClientToken="claim-uid-1")
    assert again["FleetId"] == first["FleetId"]
    assert again["Instances"] == first["Instances"]
    reservations = _client(aws, "ec2").describe_instances()["Reservations"]
    assert sum(len(r["Instances"]) for r in reservations) == 1
    assert aws.pool_stats()["FleetCalls"] == 1
    other = _fleet(aws, overrides, ClientToken="claim-uid-2")
    assert other["FleetId"] != first["FleetId"]
    with pytest.raises(ClientError) as raised:
        _fleet(aws, overrides, total=2, ClientToken="claim-uid-1")
    assert raised.value.response["Error"]["Code"] == "IdempotentParameterMismatch"
    assert raised.value.response["Error"]["Message"] == (
        "Arguments on this idempotent request are inconsistent with arguments used in previous request(s)."
    )


def test_termination_gives_pool_capacity_back(aws: MotoServer) -> None:
    """A pool holds ``capacity`` instances at once: full until one of them terminates."""
    overrides = _overrides(aws, types=("m5.large",), zones=("us-east-1a",))
    aws.set_pool_capacity(1, capacity_type="spot", instance_type="m5.large", zone="us-east-1a")
    launched = _fleet(aws, overrides)["Instances"][0]["InstanceIds"]
    assert _fleet(aws, overrides)["Errors"][0]["ErrorCode"] == "UnfulfillableCapacity"
    _client(aws, "ec2").terminate_instances(InstanceIds=launched)
    assert _pools(_fleet(aws, overrides)) == [("m5.large", "us-east-1a", 1)]


def test_concurrent_calls_never_overbook_a_pool(aws: MotoServer) -> None:
    """Launches arrive concurrently (one CreateFleet per NodeClaim, launching.md §3): a pool of 4
    serves exactly 4 of 8 simultaneous one-instance fleets, the others get the capacity error."""
    overrides = _overrides(aws, types=("m5.large",), zones=("us-east-1a",))
    aws.set_pool_capacity(4, capacity_type="spot")
    ec2 = _client(aws, "ec2")  # 10 connections: the 8 calls run at once
    ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData={"ImageId": AMI})

    def launch(_: int) -> Any:
        return ec2.create_fleet(
            Type="instant",
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {"LaunchTemplateName": "nodes", "Version": "$Latest"},
                    "Overrides": overrides,
                }
            ],
            TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "spot"},
        )

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(launch, range(8)))
    launched = [a for a in answers if a.get("Instances")]
    refused = [a for a in answers if not a.get("Instances")]
    assert len(launched) == 4
    assert {e["ErrorCode"] for a in refused for e in a["Errors"]} == {"UnfulfillableCapacity"}
    (pool_stats,) = aws.pool_stats()["Pools"]
    assert (pool_stats["Used"], pool_stats["Launches"], pool_stats["Errors"]) == (4, 4, 4)


def test_override_image_and_zone_without_subnet(aws: MotoServer) -> None:
    """``ImageId`` of an override replaces the template's; an ``AvailabilityZone`` without
    ``SubnetId`` launches into that zone (FleetLaunchTemplateOverridesRequest)."""
    ec2 = _client(aws, "ec2")
    other_ami = "ami-1812c061"  # another of moto's built-in AMIs
    overrides = [{"InstanceType": "c5.large", "AvailabilityZone": "us-east-1d", "ImageId": other_ami}]
    answer = _fleet(aws, overrides)
    (instance_id,) = answer["Instances"][0]["InstanceIds"]
    instance = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    assert instance["ImageId"] == other_ami
    assert instance["Placement"]["AvailabilityZone"] == "us-east-1d"


def test_capacity_rules_and_stats_over_http(aws: MotoServer) -> None:
    """The admin routes a child process (the sandbox) uses: capacity by zone pattern, pool stats."""
    changed = _admin(
        aws, "ec2/pool-capacity", {"Capacity": 0, "CapacityType": "spot", "AvailabilityZone": "us-east-1[ab]"}
    )
    assert changed == {"Pools": []}  # no pool seen yet: the rule waits for them
    answer = _fleet(aws, _overrides(aws, types=("m5.large",)))
    assert _pools(answer) == [("m5.large", "us-east-1c", 1)]
    stats = {(p["CapacityType"], p["AvailabilityZone"]): p for p in _admin(aws, "ec2/pools")["Pools"]}
    assert stats[("spot", "us-east-1a")]["Free"] == 0
    assert stats[("spot", "us-east-1c")]["Used"] == 1
    assert stats[("spot", "us-east-1c")]["Capacity"] is None
    assert stats[("spot", "us-east-1c")]["InterruptionBand"] in ("<5%", "5-10%", "10-15%", "15-20%", ">20%")
    assert _admin(aws, "ec2/pools")["FleetCalls"] == 1


def test_fleet_call_log_times_launches_and_errors(aws: MotoServer) -> None:
    """The call log (kubespot's own: EC2 has none; the sandbox and the benchmark time the fallback
    from an insufficient-capacity answer to the next launch with it): one record per answered call,
    with its times, what it launched and the errors; an idempotent replay is no call, as in
    ``FleetCalls``."""
    aws.set_pool_capacity(0, capacity_type="spot", zone="us-east-1[ab]")
    overrides = _overrides(aws, types=("m5.large",))
    pco = {"AllocationStrategy": "price-capacity-optimized"}  # reports every empty pool
    _fleet(aws, overrides, ClientToken="t-1", SpotOptions=pco)
    _fleet(aws, overrides, ClientToken="t-1", SpotOptions=pco)  # a replay
    _fleet(aws, _overrides(aws, types=("m5.large",), zones=("us-east-1a",)))
    calls = aws.fleet_call_log()
    assert [len(c["Launched"]) for c in calls] == [1, 0]
    first, second = calls
    assert first["Launched"] == [
        {"CapacityType": "spot", "InstanceType": "m5.large", "AvailabilityZone": "us-east-1c", "Count": 1}
    ]
    assert {e["AvailabilityZone"] for e in first["Errors"]} == {"us-east-1a", "us-east-1b"}
    assert second["Errors"] == [
        {
            "CapacityType": "spot",
            "InstanceType": "m5.large",
            "AvailabilityZone": "us-east-1a",
            "ErrorCode": "UnfulfillableCapacity",
        }
    ]
    assert first["Start"] <= first["End"] <= second["Start"] <= second["End"]
    # What was asked, so an end-to-end test can check the provisioner's request without a proxy.
    assert first["Request"] == {
        "Type": "instant",
        "DefaultTargetCapacityType": "spot",
        "TotalTargetCapacity": 1,
        "SpotAllocationStrategy": "price-capacity-optimized",
        "OnDemandAllocationStrategy": None,
        "Overrides": 3,
    }
    assert second["Request"]["SpotAllocationStrategy"] == "lowest-price"
    assert second["Request"]["Overrides"] == 1
    assert _admin(aws, "ec2/fleet-calls") == {"FleetCalls": calls}


def test_reset_forgets_the_market(aws: MotoServer) -> None:
    """``reset()`` wipes pools, rules and counters with the instances (they live on moto's backend),
    so every test starts from an unlimited market."""
    aws.set_pool_capacity(0, capacity_type="spot")
    _fleet(aws, _overrides(aws, types=("m5.large",), zones=("us-east-1a",)))
    assert aws.pool_stats()["Pools"]
    aws.reset()
    assert aws.pool_stats() == {"Pools": [], "FleetCalls": 0, "TimeScale": 1.0}
    assert len(_fleet(aws, _overrides(aws, types=("m5.large",), zones=("us-east-1a",)))["Instances"]) == 1


def test_invalid_requests(aws: MotoServer) -> None:
    """An unknown allocation strategy or a zero target is ``InvalidParameterValue`` (HTTP 400);
    ``SpotOptions`` without a strategy means ``lowest-price``, the API reference's default (stock
    moto answered 500, research §2.1)."""
    answer = _fleet(aws, _overrides(aws), SpotOptions={})
    cheapest = _by_spot_price()[0]
    assert _pools(answer) == [(cheapest[0], cheapest[1], 1)]
    with pytest.raises(ClientError) as raised:
        _fleet(aws, _overrides(aws), SpotOptions={"AllocationStrategy": "cheapest-please"})
    assert raised.value.response["Error"]["Code"] == "InvalidParameterValue"
    with pytest.raises(ClientError) as raised:
        _fleet(aws, _overrides(aws), total=0)
    assert raised.value.response["Error"]["Code"] == "InvalidParameterValue"
