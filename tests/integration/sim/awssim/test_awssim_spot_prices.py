"""DescribeSpotPriceHistory from awssim's synthetic spot market (``spot_prices`` extension).

Semantics per the EC2 API reference, DescribeSpotPriceHistory: records within
``[StartTime, EndTime]`` plus the last change before ``StartTime`` (the price in effect then);
``ProductDescriptions``, ``AvailabilityZone`` and ``MaxResults``/``NextToken`` paging. The model
(a stable discount per type and zone, drifting slowly) is the one
``docs/designs/provisioning.md`` decision 2 names; Karpenter reads it with ``StartTime=now``
(aws/karpenter-provider-aws ``pkg/providers/pricing/pricing.go`` ``UpdateSpotPricing``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError

from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import spot_prices
from kubespot.sim.awssim.price_data import ONDEMAND_PRICES

NOW = datetime(2026, 11, 20, 13, 30, tzinfo=UTC)
M5 = ONDEMAND_PRICES["us-east-1"]["m5.large"]


@pytest.fixture
def frozen(aws: MotoServer) -> Iterator[MotoServer]:
    spot_prices.set_clock(NOW.timestamp)
    yield aws
    spot_prices.set_clock(None)


def test_history_in_a_window_drifts_slowly_within_the_discount_range(frozen: MotoServer) -> None:
    """Three days of one type and zone: a record per 6-hour step, oldest first, starting with the
    price in effect at StartTime; each within 56-80 % off on-demand; moving, but by little per step."""
    ec2 = frozen.client("ec2")
    start = NOW - timedelta(days=3)
    history = ec2.describe_spot_price_history(
        InstanceTypes=["m5.large"], AvailabilityZone="us-east-1a", StartTime=start, EndTime=NOW
    )["SpotPriceHistory"]
    stamps = [h["Timestamp"] for h in history]
    assert stamps == sorted(stamps)
    assert stamps[0] <= start < stamps[1]
    assert len(history) == 13  # 12 steps in 3 days, plus the one in effect at the start
    prices = [float(h["SpotPrice"]) for h in history]
    assert all(0.198 * M5 <= p <= 0.44 * M5 for p in prices)
    assert len(set(prices)) > 1
    assert all(abs(b - a) / a < 0.015 for a, b in itertools.pairwise(prices))
    assert prices[-1] == spot_prices.price_for("m5.large", "us-east-1a")


def test_a_type_without_an_on_demand_price_has_no_spot_history(frozen: MotoServer) -> None:
    """The model derives spot from on-demand; a type the table lacks (newer than the data) gets no
    records rather than moto's ``0.00001`` placeholder, which a provisioner would take for the
    cheapest capacity there is (Karpenter: no spot price, no spot offering)."""
    ec2 = frozen.client("ec2")
    offered = {
        o["InstanceType"]
        for page in ec2.get_paginator("describe_instance_type_offerings").paginate()
        for o in page["InstanceTypeOfferings"]
    }
    missing = sorted(offered - set(ONDEMAND_PRICES["us-east-1"]))
    assert missing, "the catalog has types newer than the price table"
    history = ec2.describe_spot_price_history(InstanceTypes=missing[:5], StartTime=NOW)["SpotPriceHistory"]
    assert history == []
    both = ec2.describe_spot_price_history(InstanceTypes=[missing[0], "m5.large"], StartTime=NOW)
    assert {h["InstanceType"] for h in both["SpotPriceHistory"]} == {"m5.large"}


def test_start_time_now_gives_the_price_in_effect_and_future_means_now(frozen: MotoServer) -> None:
    """StartTime=now (Karpenter's query) lists one record per zone: the current price; a StartTime
    ahead of the server's clock and an EndTime in the future change nothing."""
    ec2 = frozen.client("ec2")
    now = ec2.describe_spot_price_history(InstanceTypes=["m5.large"], StartTime=NOW)["SpotPriceHistory"]
    ahead = ec2.describe_spot_price_history(
        InstanceTypes=["m5.large"], StartTime=NOW + timedelta(hours=1), EndTime=NOW + timedelta(days=2)
    )["SpotPriceHistory"]
    assert now == ahead
    assert len({h["AvailabilityZone"] for h in now}) == len(now) >= 3
    for h in now:
        expected = spot_prices.price_at("m5.large", h["AvailabilityZone"], NOW.timestamp())
        assert float(h["SpotPrice"]) == expected


def test_product_descriptions_and_paging(frozen: MotoServer) -> None:
    """Only ``Linux/UNIX (Amazon VPC)`` records exist; MaxResults pages are disjoint and complete;
    a garbage NextToken is InvalidNextToken."""
    ec2 = frozen.client("ec2")
    kinds = ["m5.large", "c5.large", "r5.large"]
    windows = ec2.describe_spot_price_history(InstanceTypes=kinds, ProductDescriptions=["Windows"])
    assert windows["SpotPriceHistory"] == []
    whole = ec2.describe_spot_price_history(
        InstanceTypes=kinds, ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"]
    )["SpotPriceHistory"]
    paged = [
        h
        for page in ec2.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=kinds, PaginationConfig={"PageSize": 5}
        )
        for h in page["SpotPriceHistory"]
    ]
    assert len(whole) > 5 and paged == whole
    with pytest.raises(ClientError) as bad:
        ec2.describe_spot_price_history(InstanceTypes=kinds, NextToken="not-a-token")
    assert bad.value.response["Error"]["Code"] == "InvalidNextToken"


def test_model_is_deterministic_given_the_time() -> None:
    """Same (type, zone, time) → same price in any process; a week later it has moved."""
    later = NOW + timedelta(days=7)
    a = spot_prices.price_at("m5.large", "us-east-1b", NOW.timestamp())
    assert a == spot_prices.price_at("m5.large", "us-east-1b", NOW.timestamp() + 60)
    assert a != spot_prices.price_at("m5.large", "us-east-1b", later.timestamp())
    assert spot_prices.price_at("no.such-type", "us-east-1b", NOW.timestamp()) is None


def test_pinned_prices_hold_in_history_and_in_the_fleet(frozen: MotoServer) -> None:
    """``pin_prices`` holds chosen pools at a constant price, which DescribeSpotPriceHistory answers
    and the spot market's CreateFleet ranks by (one price source, as on AWS); the model's price
    comes back after the block."""
    ec2 = frozen.client("ec2")
    model = spot_prices.price_for("m5.large", "us-east-1b")
    pins = {("m5.large", "us-east-1a"): 0.5, ("m5.large", "us-east-1b"): 0.001}
    with spot_prices.pin_prices(pins):
        history = ec2.describe_spot_price_history(
            InstanceTypes=["m5.large"], AvailabilityZone="us-east-1b", StartTime=NOW - timedelta(days=1)
        )["SpotPriceHistory"]
        assert {h["SpotPrice"] for h in history} == {"0.001000"}
        ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData={"ImageId": "ami-12c6146b"})
        fleet = ec2.create_fleet(
            Type="instant",
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {"LaunchTemplateName": "nodes", "Version": "$Latest"},
                    "Overrides": [
                        {"InstanceType": "m5.large", "AvailabilityZone": zone}
                        for zone in ("us-east-1a", "us-east-1b", "us-east-1c")
                    ],
                }
            ],
            TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "spot"},
            SpotOptions={"AllocationStrategy": "price-capacity-optimized"},
        )
        assert (
            fleet["Instances"][0]["LaunchTemplateAndOverrides"]["Overrides"]["AvailabilityZone"]
            == "us-east-1b"
        )
    assert spot_prices.price_for("m5.large", "us-east-1b") == model
