"""One scheduling pass's state and its memos: requirements merged and narrowed, type conflicts,
offerings and prices, each keyed by text or by object identity (the same few shapes recur
thousands of times in a pass).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .claim import Claim, Offer, OfferBase, Opening
from .groups import group_pods
from .instance_types import InstanceType, Offering
from .labels import WELL_KNOWN
from .nodepool import by_weight
from .open_claims import OpenClaims
from .plan import ExistingNode, Plan, PoolCapacity
from .pods import PodView
from .requirements import Requirement, Requirements
from .topology import Scope, Tallies

#: The best packing per capacity type: (score, type, pods per group, requirements).
Best = dict[str, tuple[tuple[float, float, str], InstanceType, dict[int, int], Requirements]]


class PassState:
    """What one pass holds: the groups, nodes and pools, the NodeClaims so far, the counts and memos."""

    def __init__(
        self,
        pods: Sequence[PodView],
        nodes: Sequence[ExistingNode],
        pools: Sequence[PoolCapacity],
        *,
        flexibility: float = 0.10,
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.groups = group_pods(pods)
        self.nodes = sorted(nodes, key=lambda n: (not n.initialized, n.name))
        self.pools = [next(pc for pc in pools if pc.pool is p) for p in by_weight([pc.pool for pc in pools])]
        self.flexibility = flexibility
        self.plan = Plan()
        self.claims: list[Claim] = []
        self.usage = {pc.pool.name: dict(pc.in_use) for pc in pools}
        self._merged: dict[tuple[tuple[object, ...], tuple[object, ...]], Requirements | None] = {}
        self._merged_ids: dict[tuple[int, int], tuple[Requirements, Requirements, Requirements | None]] = {}
        # Memos keyed by the identity of a Requirements object; each entry keeps its object alive so
        # an id is never reused for another one while the simulation runs.
        self._conflicts: dict[tuple[str, int], tuple[Requirements, bool]] = {}
        self._prices: dict[tuple[str, int, str], tuple[Requirements, float]] = {}
        self._offered: dict[tuple[str, int], tuple[Requirements, list[Offering]]] = {}
        self._frontiers: dict[tuple[str, int, int], tuple[Requirements, list[InstanceType]]] = {}
        self._finished: dict[tuple[object, ...], tuple[Requirements, Offer]] = {}
        self._offer_bases: dict[tuple[object, ...], tuple[Requirements, list[InstanceType], OfferBase]] = {}
        self._opening = Opening([], {})
        self._cheapest_orders: dict[
            tuple[int, int],
            tuple[Sequence[InstanceType], Mapping[str, Mapping[str, float]], list[InstanceType]],
        ] = {}
        #: Per requirements text, capacity type and both-allowed: each type's verdict (``Offers``).
        self._verdicts: dict[tuple[tuple[object, ...], str, bool], dict[str, tuple[int, float, float]]] = {}
        # Only a NodePool's requirements carry minValues (a pod's node selector terms have none),
        # so the packing's hot loops ask a set, not each requirement.
        self._min_values_pools = {pc.pool.name for pc in pools if pc.pool.requirements.has_min_values()}
        # Per (pool, requirements): the LP packed that cohort once (its residue is the greedy's),
        # and why the greedy packs alone when the LP could not be used.
        self._lp_tried: dict[tuple[str, int], tuple[Requirements, str]] = {}
        self._solo: dict[tuple[object, ...], tuple[Requirements, Best]] = {}
        # NodeClaims that may still take a pod (one without room for the smallest is dropped).
        self._open = OpenClaims(
            (p.requests.get("cpu", 0) for p in pods), (p.requests.get("memory", 0) for p in pods)
        )
        self._smallest = {
            "pods": 1,
            **{k: min((p.requests.get(k, 0) for p in pods), default=0) for k in ("cpu", "memory")},
        }
        # Topology: counts per domain of what the pending pods' rules select, kept as pods land.
        self.tallies = Tallies(namespace_labels)
        self._keys = frozenset(k for g in self.groups for k in g.exemplar.topology.keys) | frozenset(
            k for n in nodes for k, _ in n.anti
        )
        self._universes: dict[str, list[str]] = {}
        #: Hostname anti-affinity scopes of the pods on each node or NodeClaim (they keep others off).
        self._anti_at: dict[str, list[Scope]] = {}
        #: The same for the other keys: per key and domain, the scopes kept out of it.
        self._inverse: dict[str, dict[str, list[Scope]]] = {}
        self._narrowed: dict[tuple[tuple[object, ...], tuple[tuple[object, ...], ...]], Requirements] = {}
        #: What each narrowed object was narrowed from, and with what (see _filter_requirements).
        self._narrowings: dict[int, tuple[Requirements, Requirements, tuple[Requirement, ...]]] = {}
        self._plain = [g for g in self.groups if not g.exemplar.topology]
        self._limited = any(pc.pool.limits for pc in self.pools)
        self._candidate_memo: dict[
            tuple[str, int, tuple[tuple[str, int], ...]],
            tuple[Requirements, list[InstanceType], dict[str, int], str, dict[str, dict[str, float]]],
        ] = {}
        self._market: dict[int, tuple[Sequence[InstanceType], dict[str, float] | None]] = {}
        #: "existing" while placing on existing nodes as kube-scheduler would (its domains only).
        self._scope: str | None = None
        self._honored: dict[tuple[str, Scope, tuple[object, ...]], tuple[int, dict[str, int]]] = {}
        self._lows: dict[tuple[Scope, tuple[object, ...]], tuple[int, int]] = {}
        #: Existing nodes by hostname and NodeClaims by name (for the reasons; rebuilt as claims open).
        self._hosts: dict[str, ExistingNode | Claim] = {n.hostname: n for n in nodes}
        self._hosts_seen = 0
        self._running: dict[Scope, tuple[int, list[str]]] = {}
        self._term_reasons: dict[tuple[object, ...], tuple[Requirements, str]] = {}
        self._claim_at: dict[str, int] = {}
        #: Trying existing nodes with kube-scheduler's Filter alone (required rules; see _on_existing).
        self._hard_only = False
        self._filtering: dict[tuple[int, int], tuple[Requirements, Requirements, Requirements]] = {}
        self._positions: dict[int, int] = {}
        self._tolerate_prefer_no_schedule = any(
            t.effect == "PreferNoSchedule" for pc in self.pools for t in pc.pool.taints
        )

    def _merge(self, base: Requirements, pod: PodView) -> Requirements | None:
        """``base`` narrowed by the pod's requirements; None when they conflict. Equal inputs give
        the same object (keyed by ``identity``), so the memos keyed by identity below hit across groups."""
        fast = (id(base), id(pod.requirements))
        hit = self._merged_ids.get(fast)
        if hit is not None:
            return hit[2]
        key = (base.identity(), pod.requirements.identity())
        if key not in self._merged:
            if base.compatibility(pod.requirements, WELL_KNOWN):
                self._merged[key] = None
            else:
                merged = base.copy()
                merged.add(*pod.requirements.values())
                self._merged[key] = merged
        self._merged_ids[fast] = (base, pod.requirements, self._merged[key])
        return self._merged[key]

    def _asks_no_more(self, reqs: Requirements, pod: PodView) -> bool:
        """Whether ``pod``'s requirements leave ``reqs`` as they are (compared in full)."""
        merged = self._merge(reqs, pod)
        return merged is not None and merged.identity() == reqs.identity()

    def _conflict(self, it: InstanceType, reqs: Requirements) -> bool:
        """Whether a node of ``it`` cannot satisfy ``reqs`` (memoised: asked for every type often)."""
        key = (it.name, id(reqs))
        hit = self._conflicts.get(key)
        if hit is None:
            hit = self._conflicts[key] = (reqs, bool(it.requirements.conflicts(reqs)))
        return hit[1]

    def _offerings(self, it: InstanceType, reqs: Requirements) -> list[Offering]:
        """``it``'s available offerings that ``reqs`` allow (memoised like ``_conflict``)."""
        key = (it.name, id(reqs))
        hit = self._offered.get(key)
        if hit is None:
            hit = self._offered[key] = (reqs, it.available_offerings(reqs))
        return hit[1]

    def _price(self, it: InstanceType, reqs: Requirements, capacity_type: str) -> float:
        """The cheapest available offering of ``capacity_type`` allowed by ``reqs`` (inf: none)."""
        key = (it.name, id(reqs), capacity_type)
        hit = self._prices.get(key)
        if hit is None:
            prices = [o.price for o in self._offerings(it, reqs) if o.capacity_type == capacity_type]
            hit = self._prices[key] = (reqs, min(prices) if prices else float("inf"))
        return hit[1]

    def _has_room(self, claim: Claim) -> bool:
        return all(claim.free.get(k, 0) >= v for k, v in self._smallest.items())

    def _narrow(self, reqs: Requirements, extra: Sequence[Requirement]) -> Requirements:
        """``reqs`` with a topology domain added; the same object for the same ``identity`` (memos)."""
        key = (reqs.identity(), tuple(r.identity() for r in extra))
        hit = self._narrowed.get(key)
        if hit is None:
            hit = reqs.copy()
            hit.add(*extra)
            hit = self._narrowed[key] = hit
            self._narrowings[id(hit)] = (hit, reqs, tuple(extra))
        return hit
