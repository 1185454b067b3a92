"""The capacity catalog and its prices through boto3 against moto with kubespot's extensions.

Follows aws/karpenter-provider-aws: ``pkg/providers/instancetype/instancetype.go`` (types and zonal
offerings), ``types.go`` (capacity, ENI-limited pods, accelerators as extended resources; m5.large's
allocatable as its generated ``website/.../reference/instance-types.md`` lists it: 1930m, 6903Mi,
29 pods), ``pkg/providers/pricing/pricing.go`` (GetProducts, the static fallback, spot history,
no spot price → no spot offering). The catalog is read once per module: DescribeInstanceTypes of
~1 400 types takes seconds to serialise and parse, so the tests share it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import boto3
import pytest

from kubespot.aws import AwsClients
from kubespot.aws.catalog import Catalog
from kubespot.aws.ondemand_prices import ONDEMAND_PRICES
from kubespot.aws.pricing import Prices
from kubespot.config.aws import AwsSettings
from kubespot.config.pricing import PricingSettings
from kubespot.model.quantity import MIB
from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import pricing as sim_pricing
from kubespot.sim.awssim.extensions import spot_prices

TABLE = ONDEMAND_PRICES["us-east-1"]


def _clients(server: MotoServer, attempts: int = 2) -> AwsClients:
    session = boto3.session.Session(
        aws_access_key_id=server.access_key_id,
        aws_secret_access_key=server.secret_access_key,
        region_name=server.region,
    )
    settings = AwsSettings(region=server.region, endpoint_url=server.endpoint_url, max_attempts=attempts)
    return AwsClients(settings, session=session)


@pytest.fixture(scope="module")
def catalog(moto_server: MotoServer) -> Iterator[Catalog]:
    async def build() -> Catalog:
        clients = _clients(moto_server)
        built = Catalog(clients, moto_server.region)
        await built.refresh()
        await clients.close()
        return built

    yield asyncio.run(build())


def test_catalog_has_hundreds_of_types_in_the_regions_zones(
    catalog: Catalog, moto_server: MotoServer
) -> None:
    """≥ 400 types, each with an offering per (zone, capacity type) in the zones it is sold in."""
    zones = {f"{moto_server.region}{z}" for z in "abcdef"}
    assert catalog.zones() == zones
    types = catalog.instance_types(zones)
    assert len(types) >= 400
    assert catalog.errors == {} and catalog.prices.errors == {}
    m5 = next(t for t in types if t.name == "m5.large")
    assert {(o.zone, o.capacity_type) for o in m5.offerings} >= {
        (z, c) for z in zones - {"us-east-1e"} for c in ("spot", "on-demand")
    }
    only_a = catalog.instance_types(["us-east-1a"])
    assert all({o.zone for o in t.offerings} == {"us-east-1a"} for t in only_a)


def test_m5_large_allocatable_matches_karpenters_published_figure(catalog: Catalog) -> None:
    """types.go computeCapacity + kubeReservedResources + evictionThreshold, AL2023: 1930m, 6903Mi, 29."""
    (m5,) = [t for t in catalog.instance_types() if t.name == "m5.large"]
    assert m5.allocatable["cpu"] == 1930
    assert m5.allocatable["memory"] == 6903 * MIB
    assert m5.allocatable["pods"] == 29


def test_accelerators_are_extended_resources(catalog: Catalog) -> None:
    """types.go nvidiaGPUs / awsNeuronDevices / awsNeuronCores / efas; arm64 from the processor info."""
    infos = catalog.infos()
    assert infos["g4dn.12xlarge"].extended["nvidia.com/gpu"] == 4
    assert infos["inf2.xlarge"].extended["aws.amazon.com/neuron"] == 1
    assert infos["inf2.xlarge"].extended["aws.amazon.com/neuroncore"] == 2
    assert infos["p4d.24xlarge"].extended["vpc.amazonaws.com/efa"] == 4
    assert infos["p4d.24xlarge"].max_enis == 15  # the default card's, not the instance's 60
    assert infos["m5.large"].extended == {}
    assert infos["c6g.xlarge"].architecture == "arm64"
    assert infos["m5d.large"].local_storage_gb == 75


def test_ondemand_prices_come_from_getproducts_and_equal_the_shared_data(catalog: Catalog) -> None:
    """pricing.go fetchOnDemandPricing: every type of the table, at its price, from the Pricing API."""
    assert catalog.prices.ondemand_source == "pricing-api"
    assert {name: catalog.prices.list_price(name) for name in TABLE} == TABLE
    (m5,) = [t for t in catalog.instance_types(["us-east-1a"]) if t.name == "m5.large"]
    (ondemand,) = [o for o in m5.offerings if o.capacity_type == "on-demand"]
    assert ondemand.available and ondemand.price == TABLE["m5.large"]


def test_spot_prices_come_from_the_history(catalog: Catalog) -> None:
    """pricing.go UpdateSpotPricing: the latest price per type and zone, below on-demand."""
    (m5,) = [t for t in catalog.instance_types() if t.name == "m5.large"]
    for offering in m5.offerings:
        if offering.capacity_type == "spot":
            assert offering.available
            assert offering.price == spot_prices.price_for("m5.large", offering.zone)
            assert offering.price < TABLE["m5.large"]


async def test_fallback_table_when_pricing_fails_and_no_spot_price_no_spot_offering(aws: MotoServer) -> None:
    """pricing.go: a failed GetProducts keeps the static table; before any spot price is known a
    spot offering is unavailable (offering/base_resolver.go: no price, not available)."""
    sim_pricing.inject_fault("AccessDeniedException", times=5)
    clients = _clients(aws, attempts=1)
    try:
        prices = Prices(clients, aws.region)
        assert await prices.refresh_ondemand() is False
        assert prices.errors["ondemand"].code == "AccessDeniedException"
        assert prices.ondemand_source == "static"
        assert prices.list_price("m5.large") == TABLE["m5.large"]
        assert prices.spot_price("m5.large", "us-east-1a") is None
        catalog = Catalog(clients, aws.region, prices=prices)
        catalog._types = {}  # no DescribeInstanceTypes needed: offerings come from the prices
        assert catalog.instance_types() == []
    finally:
        sim_pricing.clear_faults()
        await clients.close()


def test_no_spot_price_makes_the_spot_offering_unavailable(catalog: Catalog, moto_server: MotoServer) -> None:
    """A catalog whose prices never read the spot history offers on-demand only."""
    fresh = Prices(_clients(moto_server), moto_server.region)
    original = catalog.prices
    try:
        catalog.prices = fresh
        (m5,) = [t for t in catalog.instance_types(["us-east-1a"]) if t.name == "m5.large"]
        by_kind = {o.capacity_type: o for o in m5.offerings}
        assert not by_kind["spot"].available
        assert by_kind["on-demand"].available
    finally:
        catalog.prices = original


def test_discounts_apply_to_ondemand_only(catalog: Catalog, moto_server: MotoServer) -> None:
    """Beyond Karpenter (aws #2259): a type's discount wins over its family's; spot is untouched."""
    settings = PricingSettings(ondemand_discounts=(("m5", "0.3"), ("m5.large", "0.5")))
    original = catalog.prices.settings
    try:
        catalog.prices.settings = settings
        prices = catalog.prices
        assert prices.ondemand_price("m5.large") == pytest.approx(TABLE["m5.large"] * 0.5)
        assert prices.ondemand_price("m5.xlarge") == pytest.approx(TABLE["m5.xlarge"] * 0.7)
        assert prices.ondemand_price("c5.large") == TABLE["c5.large"]
        (m5,) = [t for t in catalog.instance_types(["us-east-1a"]) if t.name == "m5.large"]
        by_kind = {o.capacity_type: o for o in m5.offerings}
        assert by_kind["on-demand"].price == pytest.approx(TABLE["m5.large"] * 0.5)
        assert by_kind["spot"].price == spot_prices.price_for("m5.large", "us-east-1a")
    finally:
        catalog.prices.settings = original


def test_the_types_are_built_once_per_refresh(catalog: Catalog) -> None:
    """aws/karpenter-provider-aws pkg/providers/instancetype/instancetype.go ``List``: the types are
    cached, keyed by the class and the versions of the caches they come from, not built again for
    every scheduling pass; a refresh of what they come from builds them again."""
    first = catalog.instance_types(["us-east-1a"])
    again = catalog.instance_types(["us-east-1a"])
    assert again == first and all(a is b for a, b in zip(again, first, strict=True))
    assert catalog.instance_types(["us-east-1b"])[0] is not first[0]  # another zone, its own answer
    asyncio.run(catalog.refresh())
    rebuilt = catalog.instance_types(["us-east-1a"])
    assert rebuilt[0] is not first[0] and [t.name for t in rebuilt] == [t.name for t in first]
