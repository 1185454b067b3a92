"""Which offerings a NodeClaim may launch into, cheapest first (pure), shared by every cloud.

Karpenter's AWS ``Create`` (aws/karpenter-provider-aws ``pkg/cloudprovider/cloudprovider.go``
``resolveInstanceTypes``, ``pkg/providers/instance/instance.go`` ``filterInstanceTypes``,
``getOverrides``; the filters of ``pkg/providers/instance/filter/filter.go``), in its order:

1. compatible and available (``CompatibleAvailableFilter``): the types compatible with the claim's
   requirements whose allocatable holds the claim's ``spec.resources.requests`` (``resources.Fits``)
   and that have an available offering the claim allows, not in the ``UnavailableOfferings`` cache;
2. exotic types (``ExoticInstanceTypeFilter``): ``metal`` sizes and types with GPUs or other
   accelerators are dropped while any other type is left (a claim that asks for them has no other);
3. spot dearer than on-demand (``SpotOfferingFilter``): when the claim allows both, spot offerings
   dearer than the cheapest on-demand one are dropped;
4. at most 60 types, cheapest first (``Truncate``), keeping every ``minValues``
   (``scheduling.minvalues.truncate``); a claim whose ``minValues`` the types left cannot meet gets
   no pool (Karpenter's Strict policy: insufficient capacity).

With ``minValues``, steps 2 and 3 are skipped, as Karpenter skips them, so the launch keeps the
flexibility asked for. The pools to try are the kept types' offerings.

Beyond Karpenter: with a ``PoolRisk``, spot pools are ordered by price times their risk factor,
and those at ``avoid_at`` or above are left out while a calmer pool remains (docs/designs/launching.md
§2): EC2's ``price-capacity-optimized`` ignores priorities, so a risky pool must be absent from the
request to be avoided. That thinning is skipped with ``minValues`` too, for the same reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.instance_types import InstanceType, Offering
from kubespot.scheduling.labels import CAPACITY_TYPE, ON_DEMAND, SPOT, WELL_KNOWN, ZONE
from kubespot.scheduling.minvalues import truncate, unmet
from kubespot.scheduling.pods import container_requests
from kubespot.scheduling.requirements import Requirement, Requirements

from .pool_risk import PoolRisk
from .unavailable import UnavailableOfferings

__all__ = [
    "ACCELERATORS",
    "MAX_INSTANCE_TYPES",
    "Pool",
    "claim_requirements",
    "is_exotic",
    "launch_capacity_type",
    "launch_pools",
]

#: Karpenter's ``maxInstanceTypes``: at most this many types go into one launch.
MAX_INSTANCE_TYPES = 60
#: The accelerator resources that make a type exotic (``ExoticInstanceTypeFilter``'s list).
ACCELERATORS = frozenset(
    {"aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "amd.com/gpu", "nvidia.com/gpu", "habana.ai/gaudi"}
)
_SIZE = "karpenter.k8s.aws/instance-size"


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


def is_exotic(t: InstanceType) -> bool:
    """A ``metal`` size or any accelerator in its capacity (``ExoticInstanceTypeFilter``)."""
    size = t.requirements.get(_SIZE)
    if size is not None and not size.complement and any("metal" in v for v in size.values):
        return True
    return any(t.resources.capacity.get(r, 0) > 0 for r in ACCELERATORS)


def _fits(requests: dict[str, int], t: InstanceType) -> bool:
    """``resources.Fits``: every request within the type's allocatable (a resource it lacks is 0)."""
    return all(amount <= t.allocatable.get(name, 0) for name, amount in requests.items())


def launch_pools(
    claim: NodeClaimSpec,
    types: Iterable[InstanceType],
    unavailable: UnavailableOfferings | None = None,
    max_types: int = MAX_INSTANCE_TYPES,
    risk: PoolRisk | None = None,
    avoid_at: float = 1.5,
) -> list[Pool]:
    """The pools to try for ``claim``, cheapest first by weighed price (ties by type name, then
    zone), after the filters of the module docstring; spot pools whose risk factor reaches
    ``avoid_at`` only when no other spot pool is left. Empty: nothing can be launched."""
    reqs = claim_requirements(claim)
    zones = reqs.get_or_any(ZONE)
    capacity = reqs.get_or_any(CAPACITY_TYPE)
    requests = container_requests({"resources": {"requests": dict(claim.requests)}})
    min_values = reqs.has_min_values()
    # 1. CompatibleAvailableFilter: (cheapest offer, name, offers, type) per candidate type.
    candidates: list[tuple[float, str, list[Offering], InstanceType]] = []
    for t in types:
        if not reqs.is_compatible(t.requirements, WELL_KNOWN) or not _fits(requests, t):
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
    if not min_values:
        # 2. ExoticInstanceTypeFilter: exotic types only when nothing else is left.
        generic = [c for c in candidates if not is_exotic(c[3])]
        candidates = generic or candidates
        # 3. SpotOfferingFilter, only when the claim allows both capacity types.
        if capacity.has(SPOT) and capacity.has(ON_DEMAND):
            candidates = _without_dear_spot(candidates)
    # 4. Truncate: the cheapest first, minValues kept.
    candidates.sort(key=lambda c: (c[0], c[1]))
    by_type = {id(c[3]): c for c in candidates}
    kept = truncate([c[3] for c in candidates], reqs, max_types)
    if min_values and unmet(kept, reqs):
        return []
    pools = [
        Pool(t, o, risk.penalty(t.name, o.zone) if risk is not None and o.capacity_type == SPOT else 1.0)
        for t in kept
        for o in by_type[id(t)][2]
    ]
    calm = [p for p in pools if p.capacity_type != SPOT or p.penalty < avoid_at]
    if not min_values and any(p.capacity_type == SPOT for p in calm):
        pools = calm
    pools.sort(key=lambda p: (p.weighed_price, p.instance_type.name, p.offering.zone))
    return pools


def _without_dear_spot(
    candidates: list[tuple[float, str, list[Offering], InstanceType]],
) -> list[tuple[float, str, list[Offering], InstanceType]]:
    """Spot offerings dearer than the cheapest on-demand one left out (types left without any
    offering dropped); unchanged unless both capacity types have an offering."""
    offers = [o for c in candidates for o in c[2]]
    on_demand = [o.price for o in offers if o.capacity_type == ON_DEMAND]
    if not on_demand or not any(o.capacity_type == SPOT for o in offers):
        return candidates
    cheapest_od = min(on_demand)
    out = []
    for _, name, its, t in candidates:
        left = [o for o in its if o.capacity_type != SPOT or o.price <= cheapest_od]
        if left:
            out.append((min(o.price for o in left), name, left, t))
    return out


def launch_capacity_type(pools: Iterable[Pool]) -> str | None:
    """Spot when any pool is spot, else on-demand (Karpenter's ``getCapacityType``); None: no pool."""
    kinds = {p.offering.capacity_type for p in pools}
    if SPOT in kinds:
        return SPOT
    return ON_DEMAND if ON_DEMAND in kinds else None
