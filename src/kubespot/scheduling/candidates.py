"""Which of a pool's instance types may hold a new NodeClaim's pods (requirements, size,
offerings, limits, minValues), with their prices per capacity type and the dominated ones pruned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from . import explain, minvalues
from .claim import Claim
from .explain import count
from .fit import how_many_fit
from .instance_types import InstanceType
from .labels import CAPACITY_TYPE, ON_DEMAND, SPOT
from .offers import Offers
from .plan import PoolCapacity
from .requirements import Requirements


class Candidates(Offers):
    """A new NodeClaim's candidate types."""

    def _price_books(self, types: Sequence[InstanceType], reqs: Requirements) -> dict[str, dict[str, float]]:
        """Per allowed capacity type (spot, on-demand), each type's cheapest available offering."""
        allowed = reqs.get_or_any(CAPACITY_TYPE)
        books: dict[str, dict[str, float]] = {ct: {} for ct in (SPOT, ON_DEMAND) if allowed.has(ct)}
        for it in types:
            for offering in self._offerings(it, reqs):
                book = books.get(offering.capacity_type)
                if book is not None and offering.price < book.get(it.name, float("inf")):
                    book[it.name] = offering.price
        return {ct: book for ct, book in books.items() if book}

    def _remaining(self, pc: PoolCapacity) -> dict[str, int]:
        """What the pool's limits leave (each limited resource; ``nodes`` counted exactly)."""
        used = self.usage[pc.pool.name]
        return {name: cap - used.get(name, 0) for name, cap in pc.pool.limits.items()}

    def _candidates(
        self, pc: PoolCapacity, reqs: Requirements, need: Mapping[str, int]
    ) -> tuple[list[InstanceType], dict[str, int], str]:
        """Types of the pool compatible with ``reqs`` that hold one pod; why others do not (counted
        by reason); and, when none is left, Karpenter's words for why, if it has some.

        Limits as Karpenter's scheduler (``scheduler.go`` ``filterByRemainingResources``): a type
        whose capacity exceeds what the limits leave is dropped; no node left is said at once."""
        dropped: dict[str, int] = {}
        out = []
        remaining = self._remaining(pc)
        if remaining.get("nodes", 1) <= 0:
            count(dropped, explain.OVER_LIMITS, len(pc.instance_types))
            return [], dropped, "node limits have been exhausted for nodepool"
        fit_otherwise = 0
        for it in pc.instance_types:
            if self._conflict(it, reqs):
                count(dropped, explain.INCOMPATIBLE)
                continue
            free = {k: v - pc.daemon_overhead.get(k, 0) for k, v in it.allocatable.items()}
            if how_many_fit(free, need, 1) < 1:
                count(dropped, explain.TOO_SMALL)
                continue
            if not self._offerings(it, reqs):
                count(dropped, explain.NO_OFFERING)
                continue
            fit_otherwise += 1
            capacity = it.resources.capacity
            if any(capacity.get(name, 0) > left for name, left in remaining.items() if name != "nodes"):
                count(dropped, explain.OVER_LIMITS)
                continue
            out.append(it)
        if not out:
            over = fit_otherwise and dropped.get(explain.OVER_LIMITS) == fit_otherwise
            return out, dropped, "all available instance types exceed limits for nodepool" if over else ""
        if reqs.has_min_values():
            # Karpenter's ``filterInstanceTypesByRequirements``: the compatible types that fit must
            # carry minValues distinct values, or the pool cannot take the pod (Strict policy).
            missing = minvalues.unmet(out, reqs)
            if missing:
                return [], dropped, minvalues.unmet_message(missing, reqs)
        return out, dropped, ""

    def _min_values_room(
        self,
        pc: PoolCapacity,
        reqs: Requirements,
        requested: Mapping[str, int],
        need: Mapping[str, int],
        k: int,
    ) -> int:
        """How many of ``k`` pods needing ``need`` a new NodeClaim already holding ``requested``
        takes under ``reqs`` while its opening candidates that still hold everything keep every
        minValues (the count only shrinks the list, so the largest such count is searched)."""

        def holds(n: int) -> bool:
            total = {name: requested.get(name, 0) + need.get(name, 0) * n for name in {*requested, *need}}
            left = [
                it
                for it in self._opening.types
                if not self._conflict(it, reqs)
                and all(v <= it.allocatable.get(r, 0) for r, v in total.items())
                and self._offerings(it, reqs)
            ]
            return not minvalues.unmet(left, reqs)

        if holds(k):
            return k
        low, high = 0, k  # 0 stands for "none": the caller refuses the group then
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if holds(mid) else (low, mid)
        return low

    def _min_values_hold(self, claim: Claim, reqs: Requirements, need: Mapping[str, int], n: int) -> bool:
        """Whether the claim's types that would still take it, with ``n`` more pods needing ``need``
        under ``reqs``, keep every minValues (Karpenter's ``nodeclaim.go`` ``CanAdd`` refuses a pod
        that would leave too few)."""
        requested = {k: claim.requested.get(k, 0) + need.get(k, 0) * n for k in {*claim.requested, *need}}
        left = [
            it
            for it in claim.opening.types
            if not self._conflict(it, reqs)
            and all(v <= it.allocatable.get(k, 0) for k, v in requested.items())
            and self._offerings(it, reqs)
            # Its options never grow past what it was charged against the limits at creation.
            and all(it.resources.capacity.get(k, 0) <= v for k, v in claim.charged.items() if k != "nodes")
        ]
        return not minvalues.unmet(left, reqs)


#: Below any allocatable amount (see ``undominated``).
_NONE = int(np.iinfo(np.int64).min)


def undominated(
    types: Sequence[InstanceType], books: Mapping[str, Mapping[str, float]]
) -> list[InstanceType]:
    """The types no other type beats: one as cheap or cheaper with at least as much of everything.

    A dominated type never holds a packing a dominating one cannot hold for less, so leaving it
    out changes no decision and shortens the search (most of a real catalog is dominated).
    """
    kept: set[str] = set()
    for book in books.values():
        ordered = sorted((t for t in types if t.name in book), key=lambda t: (book[t.name], t.name))
        if not ordered:
            continue
        keys = sorted({k for t in ordered for k in t.allocatable})
        # A resource a type does not have never stops another from beating it (its row holds the
        # smallest integer there); one the other lacks counts as none of it.
        own = np.array([[t.allocatable.get(k, _NONE) for k in keys] for t in ordered], dtype=np.int64)
        has = np.array([[t.allocatable.get(k, 0) for k in keys] for t in ordered], dtype=np.int64)
        frontier = np.empty_like(has)
        size = 0
        for i, it in enumerate(ordered):
            # Cheapest first: a type is beaten by one already kept with as much of everything.
            if size and bool((frontier[:size] >= own[i]).all(axis=1).any()):
                continue
            frontier[size] = has[i]
            size += 1
            kept.add(it.name)
    return [it for it in types if it.name in kept]
