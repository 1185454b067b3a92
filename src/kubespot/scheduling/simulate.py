"""The scheduling simulation: where pending pods go, and which new capacity is the cheapest that fits.

Karpenter's rules (``pkg/controllers/provisioning/scheduling``; docs/designs/provisioning.md):
pods in order of CPU then memory requests, largest first; each tries the existing nodes (initialized
ones first, then by name), then the NodeClaims this simulation already made (fewest pods first),
then a new NodeClaim from the NodePools in weight order. A NodeClaim may use spot when its
requirements allow it and one of its types has an available spot offering; spot offerings dearer
than the cheapest on-demand one are left out; limits are counted pessimistically (the largest
candidate type's capacity).

What differs is how a new NodeClaim is chosen (decision 3 of the design note). Identical pods form
a group and are placed a group at a time. A new NodeClaim is packed at once, largest pods first,
from every pending pod that may share it, and its instance type is the one whose node holds the
most of the pending requests (each resource as a share of the pending total) per dollar. A packing
that can be repeated (the same pods again) is repeated without searching again. The NodeClaim then
offers every type that holds its pods within ``flexibility`` of that price, cheapest first, so the
fleet request keeps room to choose by capacity.

Pure: pods, nodes, pools and the catalog in; a ``Plan`` out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from .instance_types import InstanceType, Offering
from .labels import CAPACITY_TYPE, INSTANCE_TYPE, ON_DEMAND, SPOT, WELL_KNOWN, ZONE
from .nodepool import NodePool, by_weight
from .pods import PodView
from .requirements import Requirement, Requirements
from .taints import Taint, untolerated

#: Most instance types one NodeClaim carries (the AWS provider's CreateFleet cut).
MAX_INSTANCE_TYPES = 60


@dataclass
class ExistingNode:
    """A node already in the cluster (or a NodeClaim launched but not registered yet)."""

    name: str
    requirements: Requirements
    taints: tuple[Taint, ...]
    allocatable: Mapping[str, int]
    #: What its pods request already (``pods`` counts them).
    requested: dict[str, int] = field(default_factory=dict)
    ports: set[tuple[str, str, int]] = field(default_factory=set)
    initialized: bool = True


@dataclass(frozen=True)
class PoolCapacity:
    """A NodePool with the instance types its EC2NodeClass allows and what its DaemonSets take."""

    pool: NodePool
    instance_types: Sequence[InstanceType]
    daemon_overhead: Mapping[str, int] = field(default_factory=dict)
    #: What the pool's existing nodes have already (counted against its limits).
    in_use: Mapping[str, int] = field(default_factory=dict)
    #: Host ports its DaemonSet pods bind on every new node, (hostIP, protocol, port).
    daemon_ports: frozenset[tuple[str, str, int]] = frozenset()


@dataclass
class PlannedClaim:
    pool: str
    capacity_type: str
    #: Cheapest first; the first is the type the packing was chosen for.
    instance_types: list[str]
    #: The first type's cheapest offering of ``capacity_type``, US dollars per hour.
    price_per_hour: float
    zones: list[str]
    pods: list[str]
    requests: dict[str, int]
    requirements: Requirements
    why: str = ""


@dataclass
class Plan:
    existing: dict[str, str] = field(default_factory=dict)
    claims: list[PlannedClaim] = field(default_factory=list)
    unschedulable: dict[str, list[str]] = field(default_factory=dict)

    @property
    def cost_per_hour(self) -> float:
        return sum(c.price_per_hour for c in self.claims)


@dataclass
class _Group:
    """Pending pods of one scheduling shape, in the order they are placed."""

    exemplar: PodView
    pods: list[PodView]
    placed: int = 0

    @property
    def left(self) -> int:
        return len(self.pods) - self.placed

    def take(self, n: int) -> list[PodView]:
        out = self.pods[self.placed : self.placed + n]
        self.placed += n
        return out


def _shape(pod: PodView) -> tuple[object, ...]:
    return (
        tuple(sorted(pod.requests.items())),
        str(pod.requirements),
        str(pod.strict_requirements),
        pod.tolerations,
        pod.ports,
    )


def group_pods(pods: Sequence[PodView]) -> list[_Group]:
    """Identical pods together, groups largest first (CPU, then memory), pods by name."""
    groups: dict[tuple[object, ...], _Group] = {}
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name, p.uid)):
        key = _shape(pod)
        if key in groups:
            groups[key].pods.append(pod)
        else:
            groups[key] = _Group(pod, [pod])
    return sorted(
        groups.values(),
        key=lambda g: (-g.exemplar.requests.get("cpu", 0), -g.exemplar.requests.get("memory", 0)),
    )


def _needs(requests: Mapping[str, int]) -> dict[str, int]:
    return {**requests, "pods": requests.get("pods", 0) + 1}


def how_many_fit(free: Mapping[str, int], need: Mapping[str, int], limit: int) -> int:
    """How many pods needing ``need`` fit in ``free`` (at most ``limit``)."""
    n = limit
    for name, amount in need.items():
        if amount > 0:
            n = min(n, free.get(name, 0) // amount)
            if n <= 0:
                return 0
    return n


def _clash(a: tuple[str, str, int], b: tuple[str, str, int]) -> bool:
    """Two host ports clash on one node: same protocol and port, and the same or a wildcard IP."""
    return a[1:] == b[1:] and (a[0] == b[0] or "0.0.0.0" in (a[0], b[0]))


def _ports_allow(pod: PodView, used: set[tuple[str, str, int]]) -> int:
    """How many pods of this shape a node with ``used`` ports takes: one at most with host ports."""
    if not pod.ports:
        return 1 << 30
    return 0 if any(_clash(p, u) for p in pod.ports for u in used) else 1


class _Claim:
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

    def add(self, pods: list[PodView], need: Mapping[str, int], reqs: Requirements) -> None:
        for name, amount in need.items():
            self.free[name] = self.free.get(name, 0) - amount * len(pods)
            self.requested[name] = self.requested.get(name, 0) + amount * len(pods)
        self.pods.extend(p.key for p in pods)
        for p in pods:
            self.ports |= p.ports
        self.reqs = reqs


class Simulation:
    """One scheduling pass. ``run()`` once; the result is a ``Plan``."""

    def __init__(
        self,
        pods: Sequence[PodView],
        nodes: Sequence[ExistingNode],
        pools: Sequence[PoolCapacity],
        *,
        flexibility: float = 0.10,
    ) -> None:
        self.groups = group_pods(pods)
        self.nodes = sorted(nodes, key=lambda n: (not n.initialized, n.name))
        self.pools = [next(pc for pc in pools if pc.pool is p) for p in by_weight([pc.pool for pc in pools])]
        self.flexibility = flexibility
        self.plan = Plan()
        self.claims: list[_Claim] = []
        self.usage = {pc.pool.name: dict(pc.in_use) for pc in pools}
        self._merged: dict[tuple[str, str], Requirements | None] = {}
        self._merged_ids: dict[tuple[int, int], tuple[Requirements, Requirements, Requirements | None]] = {}
        # Memos keyed by the identity of a Requirements object; each entry keeps its object alive so
        # an id is never reused for another one while the simulation runs.
        self._conflicts: dict[tuple[str, int], tuple[Requirements, bool]] = {}
        self._prices: dict[tuple[str, int, str], tuple[Requirements, float]] = {}
        self._offered: dict[tuple[str, int], tuple[Requirements, list[Offering]]] = {}
        self._frontiers: dict[tuple[str, int, int], tuple[Requirements, list[InstanceType]]] = {}
        self._finished: dict[tuple[object, ...], tuple[Requirements, list[InstanceType], float]] = {}

    # -- requirements, cached by their text (the same few shapes recur thousands of times)

    def _merge(self, base: Requirements, pod: PodView) -> Requirements | None:
        """``base`` narrowed by the pod's requirements; None when they conflict. Equal inputs give
        the same object (keyed by text), so the memos keyed by identity below hit across groups."""
        fast = (id(base), id(pod.requirements))
        hit = self._merged_ids.get(fast)
        if hit is not None:
            return hit[2]
        key = (str(base), str(pod.requirements))
        if key not in self._merged:
            if base.compatibility(pod.requirements, WELL_KNOWN):
                self._merged[key] = None
            else:
                merged = base.copy()
                merged.add(*pod.requirements.values())
                self._merged[key] = merged
        self._merged_ids[fast] = (base, pod.requirements, self._merged[key])
        return self._merged[key]

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

    # -- the pass

    def run(self) -> Plan:
        # Existing capacity first for every pod, largest first: a pod only goes to new capacity
        # when no existing node takes it, whatever new capacity larger pods caused.
        for group in self.groups:
            self._on_existing(group)
        for group in list(self.groups):
            reasons = self._place(group, existing=False)
            if group.left and group.exemplar.requirements != group.exemplar.strict_requirements:
                # Preferences first act as requirements; the pods they leave unplaced try without.
                relaxed = _Group(
                    replace(group.exemplar, requirements=group.exemplar.strict_requirements),
                    [replace(p, requirements=p.strict_requirements) for p in group.pods[group.placed :]],
                )
                group.placed = len(group.pods)
                self.groups.insert(self.groups.index(group) + 1, relaxed)
                group, reasons = relaxed, self._place(relaxed, existing=True)
            for p in group.take(group.left):
                self.plan.unschedulable[p.key] = reasons or ["no NodePool"]
        for claim in self.claims:
            self._finish(claim)
        return self.plan

    def _place(self, group: _Group, *, existing: bool) -> list[str]:
        """Place what fits of ``group``; the reasons the rest does not fit new capacity."""
        if existing:
            self._on_existing(group)
        if group.left:
            self._on_claims(group)
        reasons: list[str] = []
        while group.left and not reasons:
            reasons = self._new_claims(group)
        return reasons

    def _on_existing(self, group: _Group) -> None:
        pod = group.exemplar
        need = _needs(pod.requests)
        for node in self.nodes:
            if not group.left:
                return
            if untolerated(node.taints, pod.tolerations):
                continue
            if node.requirements.compatibility(pod.requirements, frozenset()):
                continue
            free = {k: v - node.requested.get(k, 0) for k, v in node.allocatable.items()}
            n = how_many_fit(free, need, min(group.left, _ports_allow(pod, node.ports)))
            if n <= 0:
                continue
            for p in group.take(n):
                self.plan.existing[p.key] = node.name
                node.ports |= p.ports
            for name, amount in need.items():
                node.requested[name] = node.requested.get(name, 0) + amount * n

    def _on_claims(self, group: _Group) -> None:
        pod = group.exemplar
        need = _needs(pod.requests)
        for claim in sorted(self.claims, key=lambda c: len(c.pods)):
            if not group.left:
                return
            if untolerated(claim.pc.pool.taints, pod.tolerations):
                continue
            merged = self._merge(claim.reqs, pod)
            if merged is None or self._conflict(claim.target, merged):
                continue
            n = how_many_fit(claim.free, need, min(group.left, _ports_allow(pod, claim.ports)))
            if n > 0:
                claim.add(group.take(n), need, merged)

    # -- new capacity

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

    def _candidates(
        self, pc: PoolCapacity, reqs: Requirements, need: Mapping[str, int]
    ) -> tuple[list[InstanceType], dict[str, int]]:
        """Types of the pool compatible with ``reqs`` that hold one pod; and why others do not."""
        dropped: dict[str, int] = {}
        out = []
        limits = pc.pool.limits
        used = self.usage[pc.pool.name]
        for it in pc.instance_types:
            if it.requirements.conflicts(reqs):
                dropped["incompatible requirements"] = dropped.get("incompatible requirements", 0) + 1
                continue
            free = {k: v - pc.daemon_overhead.get(k, 0) for k, v in it.allocatable.items()}
            if how_many_fit(free, need, 1) < 1:
                dropped["too small"] = dropped.get("too small", 0) + 1
                continue
            if not self._offerings(it, reqs):
                dropped["no available offering"] = dropped.get("no available offering", 0) + 1
                continue
            if any(
                name != "nodes" and used.get(name, 0) + it.resources.capacity.get(name, 0) > cap
                for name, cap in limits.items()
            ) or ("nodes" in limits and used.get("nodes", 0) + 1 > limits["nodes"]):
                dropped["would exceed the NodePool's limits"] = (
                    dropped.get("would exceed the NodePool's limits", 0) + 1
                )
                continue
            out.append(it)
        return out, dropped

    def _new_claims(self, group: _Group) -> list[str]:
        """Open new NodeClaims for ``group`` (and what may share them); why not, when none fits."""
        pod = group.exemplar
        need = _needs(pod.requests)
        reasons: list[str] = []
        for pc in self.pools:
            pool = pc.pool
            bad = untolerated(pool.taints, pod.tolerations)
            if bad:
                reasons.append(f'nodepool "{pool.name}": did not tolerate taint {bad[0]}')
                continue
            conflict = pool.requirements.compatibility(pod.requirements, WELL_KNOWN)
            if conflict:
                reasons.append(f'nodepool "{pool.name}": incompatible requirements, {conflict[0]}')
                continue
            reqs = self._merge(pool.requirements, pod)
            assert reqs is not None
            types, dropped = self._candidates(pc, reqs, need)
            books = self._price_books(types, reqs) if types else {}
            if not books:
                detail = ", ".join(f"{n} {why}" for why, n in sorted(dropped.items())) or "none offered"
                reasons.append(f'nodepool "{pool.name}": no instance type fits ({detail})')
                continue
            if self._pack(group, pc, reqs, types, books):
                return []
            reasons.append(f'nodepool "{pool.name}": no instance type holds the pod with a price')
        return reasons or ["no NodePool"]

    def _cohort(self, first: _Group, pc: PoolCapacity) -> list[_Group]:
        """The pending groups that may share a new NodeClaim of ``pc`` with ``first``'s pods."""
        out = [first]
        start = self.groups.index(first)
        for g in self.groups[start + 1 :]:
            if g.left and not untolerated(pc.pool.taints, g.exemplar.tolerations):
                out.append(g)
        return out

    def _fill(
        self,
        cohort: Sequence[_Group],
        it: InstanceType,
        pc: PoolCapacity,
        reqs: Requirements,
        left: Mapping[int, int],
        order: Sequence[int],
    ) -> tuple[dict[int, int], Requirements]:
        """How many of each group one node of ``it`` holds, filled in ``order`` (and the final
        reqs); the first group (the pods that opened the claim) always goes first."""
        free = {k: v - pc.daemon_overhead.get(k, 0) for k, v in it.allocatable.items()}
        pattern: dict[int, int] = {}
        ports: set[tuple[str, str, int]] = set(pc.daemon_ports)
        for i in order:
            g = cohort[i]
            n = left[i]
            if n <= 0:
                continue
            merged = self._merge(reqs, g.exemplar) if i else reqs
            if merged is None or self._conflict(it, merged):
                if i == 0:
                    return {}, reqs
                continue
            need = _needs(g.exemplar.requests)
            k = how_many_fit(free, need, min(n, _ports_allow(g.exemplar, ports)))
            if i == 0 and k == 0:
                return {}, reqs
            if k <= 0:
                continue
            pattern[i] = k
            reqs = merged
            ports |= g.exemplar.ports
            for name, amount in need.items():
                free[name] = free.get(name, 0) - amount * k
        return pattern, reqs

    def _pack(
        self,
        first: _Group,
        pc: PoolCapacity,
        reqs: Requirements,
        types: Sequence[InstanceType],
        books: Mapping[str, Mapping[str, float]],
    ) -> bool:
        cohort = self._cohort(first, pc)
        left = {i: g.left for i, g in enumerate(cohort)}
        weights = market_prices(types, books) or share_weights(cohort, left)
        # Two fills per type, largest CPU first and largest memory first: which packs a node best
        # depends on the type's shape (on Karpenter's generic mix the better of the two saved 3 %).
        by_cpu = list(range(len(cohort)))
        by_memory = [
            0,
            *sorted(
                range(1, len(cohort)),
                key=lambda j: (
                    -cohort[j].exemplar.requests.get("memory", 0),
                    -cohort[j].exemplar.requests.get("cpu", 0),
                ),
            ),
        ]
        if len({str(g.exemplar.requirements) for g in cohort}) == 1:
            # Safe: every pod may go to every candidate. The same pool and requirements come back
            # for every new NodeClaim of a workload, with the same candidates.
            key = (pc.pool.name, id(reqs), len(types))
            hit = self._frontiers.get(key)
            if hit is None:
                hit = self._frontiers[key] = (reqs, undominated(types, books))
            types = hit[1]

        def value(pattern: Mapping[int, int]) -> float:
            return sum(
                cohort[i].exemplar.requests.get(name, 0) * n * w
                for i, n in pattern.items()
                for name, w in weights.items()
            )

        # The best packing per capacity type, by pending requests held per dollar.
        best: dict[str, tuple[tuple[float, float, str], InstanceType, dict[int, int], Requirements]] = {}
        for it in types:
            fills = [self._fill(cohort, it, pc, reqs, left, order) for order in (by_cpu, by_memory)]
            held, (pattern, final) = max(((value(f[0]), f) for f in fills), key=lambda vf: vf[0])
            if not pattern:
                continue
            for ct, book in books.items():
                price = book.get(it.name)
                if price is None:
                    continue
                score = (-held / price if price > 0 else float("-inf"), price, it.name)
                if ct not in best or score < best[ct][0]:
                    best[ct] = (score, it, pattern, final)
        # Spot first, unless an on-demand packing holds more per dollar (Karpenter drops spot
        # offerings dearer than the cheapest on-demand one; here the comparison is per packing).
        if not best:
            return False
        if SPOT in best and (ON_DEMAND not in best or best[SPOT][0] <= best[ON_DEMAND][0]):
            capacity_type = SPOT
        else:
            capacity_type = ON_DEMAND
        _, it, pattern, final = best[capacity_type]
        final = final.copy()
        final.add(Requirement.of(CAPACITY_TYPE, "In", [capacity_type]))
        # Repeat the packing while every group in it has that many pods left.
        repeat = min(left[i] // n for i, n in pattern.items())
        limits = pc.pool.limits
        used = self.usage[pc.pool.name]
        for name, cap in limits.items():
            per = 1 if name == "nodes" else it.resources.capacity.get(name, 0)
            if per > 0:
                repeat = min(repeat, max((cap - used.get(name, 0)) // per, 1))
        why = (
            f"{it.name} holds the most pending requests per dollar "
            f"({len(types)} types considered, {capacity_type})"
        )
        for _ in range(repeat):
            claim = _Claim(pc, final, it, capacity_type)
            claim.why = why
            for i, n in pattern.items():
                g = cohort[i]
                claim.add(g.take(n), _needs(g.exemplar.requests), claim.reqs)
            self.claims.append(claim)
            for name, amount in it.resources.capacity.items():
                used[name] = used.get(name, 0) + amount
            used["nodes"] = used.get("nodes", 0) + 1
        return True

    def _finish(self, claim: _Claim) -> None:
        """The NodeClaim's types: all that hold its pods within the flexibility band."""
        pc, reqs = claim.pc, claim.reqs
        key = (
            pc.pool.name,
            id(reqs),
            claim.target.name,
            claim.capacity_type,
            tuple(sorted(claim.requested.items())),
        )
        hit = self._finished.get(key)
        if hit is None:
            hit = self._finished[key] = (reqs, *self._offer(claim))
        _, chosen, target_price = hit
        zones = sorted(
            {
                o.zone
                for it in chosen
                for o in self._offerings(it, reqs)
                if o.capacity_type == claim.capacity_type
            }
        )
        final = reqs.copy()
        final.add(Requirement.of(INSTANCE_TYPE, "In", [it.name for it in chosen]))
        final.add(Requirement.of(ZONE, "In", zones))
        self.plan.claims.append(
            PlannedClaim(
                pool=pc.pool.name,
                capacity_type=claim.capacity_type,
                instance_types=[it.name for it in chosen],
                price_per_hour=target_price,
                zones=zones,
                pods=list(claim.pods),
                requests=claim.requested,
                requirements=final,
                why=claim.why,
            )
        )

    def _offer(self, claim: _Claim) -> tuple[list[InstanceType], float]:
        """The types a NodeClaim offers (its target first, then the rest of the band, cheapest
        first) and the target's price."""
        reqs = claim.reqs
        target_price = self._price(claim.target, reqs, claim.capacity_type)
        ceiling = target_price * (1 + self.flexibility)
        options: list[tuple[float, str, InstanceType]] = []
        for it in claim.pc.instance_types:
            if self._conflict(it, reqs):
                continue
            if any(amount > it.allocatable.get(k, 0) for k, amount in claim.requested.items()):
                continue
            price = self._price(it, reqs, claim.capacity_type)
            if price <= ceiling or it is claim.target:
                options.append((0.0 if it is claim.target else price, it.name, it))
        options.sort()
        return [it for _, _, it in options[:MAX_INSTANCE_TYPES]], target_price


def undominated(
    types: Sequence[InstanceType], books: Mapping[str, Mapping[str, float]]
) -> list[InstanceType]:
    """The types no other type beats: one as cheap or cheaper with at least as much of everything.

    A dominated type never holds a packing a dominating one cannot hold for less, so leaving it
    out changes no decision and shortens the search (most of a real catalog is dominated).
    """
    kept: dict[str, InstanceType] = {}
    for book in books.values():
        frontier: list[Mapping[str, int]] = []
        for it in sorted((t for t in types if t.name in book), key=lambda t: (book[t.name], t.name)):
            alloc = it.allocatable
            if any(all(other.get(k, 0) >= v for k, v in alloc.items()) for other in frontier):
                continue
            frontier.append(alloc)
            kept.setdefault(it.name, it)
    return [it for it in types if it.name in kept]


def market_prices(
    types: Sequence[InstanceType], books: Mapping[str, Mapping[str, float]]
) -> dict[str, float] | None:
    """Dollars per millicore and per byte that best explain the candidates' prices (least squares
    over price ~ a * cpu + b * memory), so a packing is valued at what its requests cost on this
    catalog; None when the fit is degenerate or gives a resource no worth."""
    rows = [
        (float(it.allocatable.get("cpu", 0)), float(it.allocatable.get("memory", 0)), price)
        for it in types
        for book in books.values()
        if (price := book.get(it.name)) is not None
    ]
    scc = sum(c * c for c, _, _ in rows)
    smm = sum(m * m for _, m, _ in rows)
    scm = sum(c * m for c, m, _ in rows)
    scp = sum(c * p for c, _, p in rows)
    smp = sum(m * p for _, m, p in rows)
    det = scc * smm - scm * scm
    if not rows or det <= 0 or abs(det) < 1e-12 * scc * smm:
        return None
    per_cpu = (scp * smm - smp * scm) / det
    per_byte = (smp * scc - scp * scm) / det
    if per_cpu <= 0 or per_byte <= 0:
        return None
    return {"cpu": per_cpu, "memory": per_byte}


def share_weights(cohort: Sequence[_Group], left: Mapping[int, int]) -> dict[str, float]:
    """Each resource weighted by the inverse of what the pending pods request of it in total."""
    totals: dict[str, float] = {}
    for i, g in enumerate(cohort):
        for name, amount in g.exemplar.requests.items():
            totals[name] = totals.get(name, 0) + amount * left[i]
    return {name: 1.0 / total for name, total in totals.items() if total > 0}


def simulate(
    pods: Sequence[PodView],
    nodes: Sequence[ExistingNode],
    pools: Sequence[PoolCapacity],
    *,
    flexibility: float = 0.10,
) -> Plan:
    """Where ``pods`` go: existing ``nodes`` first, then new NodeClaims from ``pools``."""
    return Simulation(pods, nodes, pools, flexibility=flexibility).run()
