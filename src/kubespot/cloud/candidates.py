"""Which offerings a NodeClaim may launch into, cheapest first (pure), shared by every cloud.

Karpenter's AWS ``Create`` (aws/karpenter-provider-aws ``pkg/cloudprovider/cloudprovider.go``
``resolveInstanceTypes``, ``pkg/providers/instance/instance.go`` ``filterInstanceTypes``,
``getOverrides``): the types compatible with the claim's requirements that have an available
offering the claim allows, ordered by their cheapest such offering, cut to the first 60; the
pools to try are those offerings. A pool in the ``UnavailableOfferings`` cache is skipped, and
spot offerings dearer than the cheapest on-demand one are dropped when on-demand is allowed too
(``filterUnwantedSpot``).

Beyond Karpenter: with a ``PoolRisk``, spot pools are ordered by price times their risk factor,
and those at ``avoid_at`` or above are left out while a calmer pool remains (docs/designs/launching.md
§2): EC2's ``price-capacity-optimized`` ignores priorities, so a risky pool must be absent from the
request to be avoided.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.instance_types import InstanceType, Offering
from kubespot.scheduling.labels import CAPACITY_TYPE, ON_DEMAND, SPOT, WELL_KNOWN, ZONE
from kubespot.scheduling.requirements import Requirement, Requirements

from .pool_risk import PoolRisk
from .unavailable import UnavailableOfferings

__all__ = ["MAX_INSTANCE_TYPES", "Pool", "claim_requirements", "launch_capacity_type", "launch_pools"]

#: Karpenter's ``maxInstanceTypes``: at most this many types go into one launch.
MAX_INSTANCE_TYPES = 60


@dataclass(frozen=True, slots=True)
class Pool:
    """One (type, offering) a launch may use."""

    instance_type: InstanceType
    offering: Offering
    #: The reclaim-risk factor of the pool (1: no known risk; on-demand is always 1).
    penalty: float = 1.0

    @property
    def capacity_type(self) -> str:
        return self.offering.capacity_type

    @property
    def weighed_price(self) -> float:
        """The price pools are ordered by: the offering's, times its risk factor."""
        return self.offering.price * self.penalty


def claim_requirements(claim: NodeClaimSpec) -> Requirements:
    """The claim's ``spec.requirements`` as requirements (minValues kept)."""
    return Requirements(
        Requirement.of(r.key, r.operator, r.values, r.min_values) for r in claim.template.requirements
    )


def launch_pools(
    claim: NodeClaimSpec,
    types: Iterable[InstanceType],
    unavailable: UnavailableOfferings | None = None,
    max_types: int = MAX_INSTANCE_TYPES,
    risk: PoolRisk | None = None,
    avoid_at: float = 1.5,
) -> list[Pool]:
    """The pools to try for ``claim``, cheapest first by weighed price (ties by type name, then
    zone): of the ``max_types`` cheapest compatible types, every available, uncached offering the
    claim allows; spot pools whose risk factor reaches ``avoid_at`` only when no other spot pool is
    left."""
    reqs = claim_requirements(claim)
    zones = reqs.get_or_any(ZONE)
    capacity = reqs.get_or_any(CAPACITY_TYPE)
    candidates: list[tuple[float, str, list[Offering], InstanceType]] = []
    for t in types:
        if not reqs.is_compatible(t.requirements, WELL_KNOWN):
            continue
        offers = [
            o
            for o in t.offerings
            if o.available
            and zones.has(o.zone)
            and capacity.has(o.capacity_type)
            and not (unavailable is not None and unavailable.is_unavailable(o.capacity_type, t.name, o.zone))
        ]
        if offers:
            candidates.append((min(o.price for o in offers), t.name, offers, t))
    candidates.sort(key=lambda c: (c[0], c[1]))
    candidates = candidates[:max_types]
    pools = [
        Pool(t, o, risk.penalty(t.name, o.zone) if risk is not None and o.capacity_type == SPOT else 1.0)
        for _, _, offers, t in candidates
        for o in offers
    ]
    on_demand = [p.offering.price for p in pools if p.offering.capacity_type == ON_DEMAND]
    if on_demand and any(p.offering.capacity_type == SPOT for p in pools):
        cheapest_od = min(on_demand)
        pools = [p for p in pools if p.offering.capacity_type != SPOT or p.offering.price <= cheapest_od]
    calm = [p for p in pools if p.capacity_type != SPOT or p.penalty < avoid_at]
    if any(p.capacity_type == SPOT for p in calm):
        pools = calm
    pools.sort(key=lambda p: (p.weighed_price, p.instance_type.name, p.offering.zone))
    return pools


def launch_capacity_type(pools: Iterable[Pool]) -> str | None:
    """Spot when any pool is spot, else on-demand (Karpenter's ``getCapacityType``); None: no pool."""
    kinds = {p.offering.capacity_type for p in pools}
    if SPOT in kinds:
        return SPOT
    return ON_DEMAND if ON_DEMAND in kinds else None
