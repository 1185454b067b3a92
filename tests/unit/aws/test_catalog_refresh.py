"""The catalog's refresh: on a schedule (12 h, Karpenter's pricing and instance type controllers,
aws/karpenter-provider-aws ``pkg/controllers/providers/pricing/controller.go``), on demand, shared by
concurrent callers, and keeping what it knew when a read fails."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from kubespot.aws.catalog import Catalog
from kubespot.aws.session import pricing_endpoint_region
from kubespot.config.pricing import PricingSettings
from support.catalog_aws import CatalogAws
from support.clocks import StillClock


async def test_refresh_is_due_after_the_interval_and_shared_by_concurrent_callers() -> None:
    clock = StillClock(datetime(2026, 1, 1, tzinfo=UTC), mono=1000.0)
    clients = CatalogAws()
    catalog = Catalog(clients, "us-east-1", PricingSettings(refresh_interval=600), clock=clock)  # type: ignore[arg-type]
    assert catalog.due()
    await asyncio.gather(catalog.refresh(), catalog.refresh())
    assert clients.count("DescribeInstanceTypes") == 1
    assert not catalog.due() and await catalog.refresh_if_due() is False
    clock.mono += 600
    assert await catalog.refresh_if_due() is True
    assert clients.count("DescribeInstanceTypes") == 2
    (m5,) = catalog.instance_types()
    kinds = {o.capacity_type: o for o in m5.offerings}
    # No SupportedUsageClasses spot: no spot offering; GetProducts empty: the shipped table's price.
    assert not kinds["spot"].available and kinds["on-demand"].available


async def test_a_failed_refresh_keeps_what_was_known() -> None:
    clock = StillClock(datetime(2026, 1, 1, tzinfo=UTC))
    clients = CatalogAws()
    catalog = Catalog(clients, "us-east-1", clock=clock)  # type: ignore[arg-type]
    await catalog.refresh()
    clients.fail = True
    await catalog.refresh()
    assert catalog.errors["instance-types"].code == "RequestLimitExceeded"
    assert [t.name for t in catalog.instance_types()] == ["m5.large"]


def test_pricing_endpoint_region_as_karpenter_picks_it() -> None:
    """pkg/providers/pricing/pricing.go NewAPI: the Pricing API answers in a few regions only."""
    assert pricing_endpoint_region("us-west-2") == "us-east-1"
    assert pricing_endpoint_region("ap-northeast-1") == "ap-south-1"
    assert pricing_endpoint_region("eu-west-1") == "eu-central-1"
    assert pricing_endpoint_region("cn-north-1") == "cn-northwest-1"
    assert pricing_endpoint_region(None) == "us-east-1"
