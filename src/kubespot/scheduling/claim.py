"""A NodeClaim being packed (its pool, requirements, target type, pods) and what it is offered."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .explain import GroupStory
from .instance_types import InstanceType
from .labels import CAPACITY_TYPE, ON_DEMAND, SPOT
from .plan import PoolCapacity
from .pods import PodView
from .requirements import Requirements


@dataclass(frozen=True)
class Opening:
    """The candidates a new NodeClaim was opened with (``Simulation._candidates``)."""

    types: list[InstanceType]
    dropped: dict[str, int]


@dataclass(frozen=True)
class Offer:
    """What ``Simulation._offer`` decided for a NodeClaim."""

    types: list[InstanceType]
    #: The target's price (the NodeClaim's price).
    price: float
    dropped: dict[str, int]
    #: Types added past the flexibility band for minValues.
    widened: int
    #: minValues keys still short (a claim narrowed by pods that joined it), with their counts.
    short: dict[str, int]
    #: Per key with ``minValues``: the distinct values ``types`` carry.
    values: dict[str, int]


@dataclass
class OfferBase:
    """A NodeClaim family's candidate types, classified once (see ``Simulation._offer_base``)."""

    incompatible: int = 0
    #: Types offered only as another capacity type (counted as lacking an offering).
    other_capacity_count: int = 0
    #: Those of them with an on-demand offering in the claim's zones (the spot filter's bar, once
    #: they are known to hold the claim's requests), with that offering's price.
    other_capacity_od: list[tuple[InstanceType, float]] = field(default_factory=list)
    #: The candidates in the order an offer lists them: the target first, then by price and name.
    types: list[InstanceType] = field(default_factory=list)
    #: Per candidate: the price an offer sorts by (0 for the target), whether it lacks an offering
    #: of the claim's capacity type (never the target), its cheapest on-demand offering in the
    #: claim's zones, whether it is the target. Arrays, so a claim's offer is a few vector tests.
    prices: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    no_offering: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    on_demand: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    target: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    _allocatable: dict[str, npt.NDArray[np.int64]] = field(default_factory=dict)

    def set_candidates(
        self, target: InstanceType, candidates: list[tuple[InstanceType, float, float]]
    ) -> None:
        """The candidates as (type, price of the claim's capacity type, cheapest on-demand)."""
        ordered = sorted(candidates, key=lambda c: (0.0 if c[0] is target else c[1], c[0].name))
        self.types = [it for it, _, _ in ordered]
        self.target = np.array([it is target for it in self.types], dtype=bool)
        raw = np.array([price for _, price, _ in ordered], dtype=np.float64)
        self.prices = np.where(self.target, 0.0, raw)
        self.no_offering = np.isinf(raw) & ~self.target
        self.on_demand = np.array([od for _, _, od in ordered], dtype=np.float64)

    def other_capacity_bar(self, requested: Mapping[str, int]) -> float:
        """The cheapest on-demand offering among the types offered only on demand that hold
        ``requested`` (infinite when none): aws ``filter.go`` ``CompatibleAvailableFilter`` drops
        a type that cannot hold the NodeClaim's requests before ``SpotInstanceFilter`` takes its
        bar, so a type too small never lowers it."""
        return min(
            (
                od
                for it, od in self.other_capacity_od
                if all(it.allocatable.get(k, 0) >= amount for k, amount in requested.items())
            ),
            default=float("inf"),
        )

    def allocatable(self, resource: str) -> npt.NDArray[np.int64]:
        """Each candidate's allocatable ``resource`` (0 where it has none)."""
        hit = self._allocatable.get(resource)
        if hit is None:
            hit = self._allocatable[resource] = np.array(
                [it.allocatable.get(resource, 0) for it in self.types], dtype=np.int64
            )
        return hit


def allows_both(reqs: Requirements) -> bool:
    allowed = reqs.get_or_any(CAPACITY_TYPE)
    return allowed.has(SPOT) and allowed.has(ON_DEMAND)


class Claim:
    """A NodeClaim being packed: its pool, requirements, the type it is sized for, its pods."""

    def __init__(self, pc: PoolCapacity, reqs: Requirements, target: InstanceType, capacity_type: str):
        self.pc = pc
        self.reqs = reqs
        self.target = target
        self.capacity_type = capacity_type
        self.free = {k: v - pc.daemon_overhead.get(k, 0) for k, v in target.allocatable.items()}
        self.requested: dict[str, int] = dict(pc.daemon_overhead)
        self.pods: list[str] = []
        self.ports: set[tuple[str, str, int]] = set(pc.daemon_ports)
        self.why = ""
        #: The pool's types that passed the filters when the claim was opened, and the rest by reason.
        self.opening = Opening(list(pc.instance_types), {})
        self.charged: dict[str, int] = {}
        #: Its placeholder hostname: each NodeClaim is a domain of its own.
        self.name = ""
        #: The stories of the groups whose pods it was opened with (by identity).
        self.stories: dict[int, GroupStory] = {}
        #: Whether its pool and pods allow both capacity types (its ``reqs`` pin the one chosen).
        self.both = allows_both(pc.pool.requirements)

    def add(self, pods: list[PodView], need: Mapping[str, int], reqs: Requirements) -> None:
        if pods and self.both:
            self.both = allows_both(pods[0].requirements)
        for name, amount in need.items():
            self.free[name] = self.free.get(name, 0) - amount * len(pods)
            self.requested[name] = self.requested.get(name, 0) + amount * len(pods)
        self.pods.extend(p.key for p in pods)
        for p in pods:
            self.ports |= p.ports
        self.reqs = reqs
