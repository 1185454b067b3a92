"""How an EC2 Fleet allocation strategy spreads a request over capacity pools (pure, no moto).

The rules follow the AWS documentation as summarised in docs/designs/launching-research.md §1.4
(``SpotOptionsRequest.AllocationStrategy``, ``OnDemandOptionsRequest.AllocationStrategy``,
``FleetLaunchTemplateOverrides.Priority``); where AWS does not publish its rule, ours is named:

- ``lowest-price`` (spot and on-demand): the cheapest pool with room, then the next cheapest.
- ``prioritized`` (on-demand): by ``Priority`` (lower first, unset last), then price.
- ``capacity-optimized`` (spot): the deepest pool first; price ignored.
- ``capacity-optimized-prioritized`` (spot): of the pools with room, those at least half as deep as
  the deepest (our cut-off), then by ``Priority``.
- ``price-capacity-optimized`` (spot): of the pools with room for the whole remaining request
  (else any with room), those at least half as deep as the deepest (our cut-off: AWS does not
  publish one), then the cheapest; ``Priority`` ignored.
- ``diversified`` (spot): one instance per pool in turn, cheapest first.

Several overrides may share a pool (two subnets of a zone, two launch templates): capacity is
counted per pool, launches per override. ``rank`` is the order a strategy would try the overrides
in, capacity aside: the fleet reports the empty pools it would have preferred as errors.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

__all__ = [
    "CAPACITY_AWARE",
    "ON_DEMAND_STRATEGIES",
    "SPOT_STRATEGIES",
    "Candidate",
    "Placement",
    "allocate",
    "rank",
]

SPOT_STRATEGIES = (
    "lowest-price",
    "diversified",
    "capacity-optimized",
    "capacity-optimized-prioritized",
    "price-capacity-optimized",
)
ON_DEMAND_STRATEGIES = ("lowest-price", "prioritized")
#: Strategies that weigh every pool's free capacity (the rest walk the pools in price/priority order).
CAPACITY_AWARE = frozenset(
    ("price-capacity-optimized", "capacity-optimized", "capacity-optimized-prioritized", "diversified")
)
_INF = math.inf


@dataclass(frozen=True)
class Candidate:
    """One override of the request, as the strategy sees it."""

    #: Position of the override in the request (ties keep the request's order).
    index: int
    #: The pool it launches into (capacity is shared by the overrides of one pool).
    pool: Hashable
    price: float = _INF
    priority: float = _INF


@dataclass(frozen=True)
class Placement:
    index: int
    count: int


def rank(candidates: Sequence[Candidate], strategy: str) -> list[Candidate]:
    """The overrides in the order ``strategy`` prefers them when capacity is no object."""
    if strategy in ("prioritized", "capacity-optimized-prioritized"):
        return sorted(candidates, key=lambda c: (c.priority, c.price, c.index))
    if strategy == "capacity-optimized":
        return sorted(candidates, key=lambda c: c.index)
    return sorted(candidates, key=lambda c: (c.price, c.index))


def _deep_enough(with_room: list[Candidate], free: dict[Hashable, float]) -> list[Candidate]:
    deepest = max(free[c.pool] for c in with_room)
    return [c for c in with_room if free[c.pool] >= deepest / 2]


def _next(
    strategy: str, with_room: list[Candidate], free: dict[Hashable, float], remaining: int
) -> Candidate:
    if strategy == "capacity-optimized":
        return min(with_room, key=lambda c: (-free[c.pool], c.index))
    if strategy == "capacity-optimized-prioritized":
        return min(_deep_enough(with_room, free), key=lambda c: (c.priority, c.price, c.index))
    if strategy == "price-capacity-optimized":
        whole = [c for c in with_room if free[c.pool] >= remaining]
        return min(_deep_enough(whole or with_room, free), key=lambda c: (c.price, c.index))
    return rank(with_room, strategy)[0]


def allocate(
    candidates: Sequence[Candidate], free: dict[Hashable, float], count: int, strategy: str
) -> list[Placement]:
    """Spread ``count`` instances over ``candidates`` by ``strategy``; ``free`` (instances each pool
    can still take, ``inf`` for unlimited) is updated. Fewer than ``count`` when pools run out."""
    placed: dict[int, int] = {}
    remaining = count
    order = rank(candidates, strategy)
    turn = 0
    while remaining > 0:
        with_room = [c for c in order if free.get(c.pool, 0) >= 1]
        if not with_room:
            break
        if strategy == "diversified":
            chosen = with_room[turn % len(with_room)]
            turn += 1
            take = 1
        else:
            chosen = _next(strategy, with_room, free, remaining)
            take = int(min(remaining, free[chosen.pool]))
        placed[chosen.index] = placed.get(chosen.index, 0) + take
        free[chosen.pool] -= take
        remaining -= take
    return [Placement(i, n) for i, n in placed.items()]
