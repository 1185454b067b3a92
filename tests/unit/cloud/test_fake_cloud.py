"""The shipped fake cloud: a configurable catalog narrowed to the class's zones, and launches.

Sources: kubernetes-sigs/karpenter ``pkg/cloudprovider/types.go`` (``CloudProvider``:
GetInstanceTypes, Create, Delete, Get, List; ``NodeClaimNotFoundError``) and
``pkg/cloudprovider/fake/cloudprovider.go`` (a fake with configurable instance types whose Create
picks an offering and records the claim).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kubespot.aws.cloud import AwsCloud
from kubespot.cloud import (
    CloudProvider,
    CreateError,
    FakeCloud,
    InsufficientCapacityError,
    NodeClaimNotFound,
    UnavailableOfferings,
    fake_type,
)
from kubespot.cloud.candidates import launch_pools
from kubespot.cloud.pool_risk import PoolRisk
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec
from kubespot.scheduling.api.template import RequirementSpec, TemplateSpec
from kubespot.scheduling.nodepool import NodePool
from kubespot.scheduling.requirements import Requirements
from support.clocks import ManualClock

POOL = NodePool("default", Requirements([]))
CLASS = EC2NodeClassSpec(name="default")


async def test_instance_types_narrowed_to_the_class_zones() -> None:
    cloud: CloudProvider = FakeCloud(
        [fake_type("a", 2, 4, 0.1, 0.03), fake_type("b", 4, 8, 0.2, zones=("z2",))], zones={"z1"}
    )
    types = await cloud.instance_types(POOL, CLASS)
    assert [t.name for t in types] == ["a"]
    assert {o.zone for o in types[0].offerings} == {"z1"}


async def test_create_takes_the_cheapest_offering_and_can_be_listed_and_deleted() -> None:
    cloud = FakeCloud([fake_type("a", 2, 4, 0.1, 0.03), fake_type("b", 4, 8, 0.2, 0.05)])
    req = RequirementSpec("node.kubernetes.io/instance-type", "In", ("b",))
    launched = await cloud.create(NodeClaimSpec("claim-1", template=TemplateSpec(requirements=(req,))))
    assert (launched.instance_type, launched.capacity_type) == ("b", "spot")
    assert await cloud.get(launched.provider_id) == launched
    assert await cloud.list() == [launched]
    await cloud.delete(launched.provider_id)
    with pytest.raises(NodeClaimNotFound):
        await cloud.get(launched.provider_id)
    cloud.fail_create = 1
    with pytest.raises(CreateError):
        await cloud.create(NodeClaimSpec("claim-2"))


async def test_aws_cloud_without_clients_only_plans() -> None:
    """``kubespot plan`` builds the AWS provider over the catalog alone: asked to launch, it says
    so as a ``CreateError`` (the lifecycle controller's retried kind) instead of pretending."""
    cloud = AwsCloud(catalog=None)  # type: ignore[arg-type]
    with pytest.raises(CreateError, match="only plans"):
        await cloud.create(NodeClaimSpec("c"))
    with pytest.raises(CreateError, match="only plans"):
        await cloud.list()


class _Ec2:
    """The catalog's calls answered for one type sold in two zones."""

    async def call(self, service: str, operation: str, **kwargs: object) -> dict[str, object]:
        if operation == "DescribeInstanceTypes":
            info = {
                "InstanceType": "m5.large",
                "VCpuInfo": {"DefaultVCpus": 2},
                "MemoryInfo": {"SizeInMiB": 8192},
                "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
                "NetworkInfo": {"MaximumNetworkInterfaces": 3, "Ipv4AddressesPerInterface": 10},
            }
            return {"InstanceTypes": [info]}
        if operation == "DescribeInstanceTypeOfferings":
            offers = [{"InstanceType": "m5.large", "Location": z} for z in ("us-east-1a", "us-east-1b")]
            return {"InstanceTypeOfferings": offers}
        return {}


async def test_aws_cloud_offers_the_zones_of_the_class_subnets() -> None:
    """aws/karpenter-provider-aws pkg/providers/instancetype/instancetype.go List and
    offering/base_resolver.go: offerings only in the zones of the EC2NodeClass's subnets
    (``ZoneInfo()``, its status.subnets). Karpenter fails with "no subnets found" before they are
    known; kubespot offers every zone then (kubespot plan reads classes nobody resolved)."""
    from kubespot.aws.catalog import Catalog
    from kubespot.aws.resolved import ResolvedNodeClass
    from kubespot.aws.subnets import SubnetInfo
    from kubespot.config.pricing import PricingSettings

    catalog = Catalog(_Ec2(), "us-east-1", PricingSettings(use_pricing_api=False))  # type: ignore[arg-type]
    cloud = AwsCloud(catalog)
    (before,) = await cloud.instance_types(POOL, CLASS)
    assert {o.zone for o in before.offerings} == {"us-east-1a", "us-east-1b"}
    subnet = SubnetInfo("subnet-1", "us-east-1b", "use1-az2")
    cloud.set_resolved("default", ResolvedNodeClass(subnets=[subnet]))
    (after,) = await cloud.instance_types(POOL, CLASS)
    assert {o.zone for o in after.offerings} == {"us-east-1b"}
    cloud.set_resolved("default", None)
    assert len((await cloud.instance_types(POOL, CLASS))[0].offerings) == 4


async def test_an_exhausted_pool_fails_over_to_the_next_and_is_cached() -> None:
    """aws/karpenter-provider-aws ``pkg/providers/instance/instance.go`` ``launchInstance`` and
    ``updateUnavailableOfferingsCache``: every insufficient-capacity error of a fleet marks its
    (capacity type, type, zone) for the cache's TTL; when every pool failed, the launch raises
    ``InsufficientCapacityError`` and the next launch (after re-simulation) leaves those pools out,
    down to on-demand (``getCapacityType``: spot while any spot pool is left). Launches are
    idempotent per claim name (docs/designs/launching.md)."""
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    cache = UnavailableOfferings(clock, ttl=180)
    cloud = FakeCloud([fake_type("a", 2, 4, 0.1, 0.03)], unavailable=cache)
    cloud.capacity[("spot", "a", "z1")] = 0
    cloud.capacity[("spot", "a", "z2")] = 1
    first = await cloud.create(NodeClaimSpec("claim-1"))
    assert (first.capacity_type, first.zone) == ("spot", "z2")
    assert [(f.zone, f.code) for f in first.failed_offerings] == [("z1", "InsufficientInstanceCapacity")]
    assert cache.is_unavailable("spot", "a", "z1")
    assert await cloud.create(NodeClaimSpec("claim-1")) == first
    with pytest.raises(InsufficientCapacityError) as ice:
        await cloud.create(NodeClaimSpec("claim-2"))
    assert [(f.capacity_type, f.zone) for f in ice.value.offerings] == [("spot", "z2")]
    third = await cloud.create(NodeClaimSpec("claim-3"))
    assert third.capacity_type == "on-demand"
    assert len(cache) == 2
    await clock.advance(181)
    assert len(cache) == 0
    assert cache.generation == 3  # two marks, one expiry pass


async def test_launch_pools_order_by_risk_and_leave_out_risky_spot_pools() -> None:
    """kubespot's own rule (docs/designs/launching.md §2): spot pools ordered by price times their
    reclaim-risk factor; a pool at ``avoid_at`` is left out while another spot pool remains (EC2's
    price-capacity-optimized ignores priorities, aws docs ``FleetLaunchTemplateOverrides``)."""
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    types = [fake_type("a", 2, 4, 0.1, 0.03), fake_type("b", 2, 4, 0.1, 0.04)]
    claim = NodeClaimSpec("c")

    def spot(risk: PoolRisk | None, avoid_at: float = 1.5) -> list[tuple[str, str]]:
        pools = launch_pools(claim, types, risk=risk, avoid_at=avoid_at)
        return [(p.instance_type.name, p.offering.zone) for p in pools if p.capacity_type == "spot"]

    assert spot(None) == [("a", "z1"), ("a", "z2"), ("b", "z1"), ("b", "z2")]
    risk = PoolRisk(clock, weight=1.0, zone_weight=0.25)
    risk.interruption_warning("a", "z1")
    # a/z1: 0.03 x (1 + 1 + 0.25) = 0.0675, b/z1: 0.04 x 1.25 = 0.05, b/z2 0.04, a/z2 0.03
    assert spot(risk, avoid_at=10) == [("a", "z2"), ("b", "z2"), ("b", "z1"), ("a", "z1")]
    assert spot(risk) == [("a", "z2"), ("b", "z2"), ("b", "z1")]  # a/z1's factor 2.25 >= 1.5
    for zone in ("z1", "z2"):
        for t in ("a", "b"):
            for _ in range(3):
                risk.interruption_warning(t, zone)
    # every pool at the cap (factor 3): none is calmer, all kept, by price
    assert spot(risk) == [("a", "z1"), ("a", "z2"), ("b", "z1"), ("b", "z2")]


async def test_a_lingering_delete_is_shutting_down_until_finished() -> None:
    """As ``AwsCloud.delete`` (aws ``pkg/providers/instance/instance.go`` ``Delete``): while the
    instance shuts down ``delete`` returns without error and ``get``/``list`` still see it;
    ``NodeClaimNotFound`` only once it is terminated."""
    cloud = FakeCloud([fake_type("a", 2, 4, 0.1, 0.03)])
    cloud.linger = True
    launched = await cloud.create(NodeClaimSpec("claim-1"))
    await cloud.delete(launched.provider_id)
    await cloud.delete(launched.provider_id)
    assert (await cloud.get(launched.provider_id)).state == "shutting-down"
    assert [c.state for c in await cloud.list()] == ["shutting-down"]
    cloud.finish_shutdown()
    with pytest.raises(NodeClaimNotFound):
        await cloud.delete(launched.provider_id)
    assert await cloud.list() == []
