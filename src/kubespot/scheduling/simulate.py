"""The scheduling simulation: where pending pods go, and which new capacity is the cheapest that fits.

Karpenter's rules (``pkg/controllers/provisioning/scheduling``; docs/designs/provisioning.md):
pods in order of CPU then memory requests, largest first; each tries the existing nodes (initialized
ones first, then by name), then the NodeClaims this simulation already made (fewest pods first),
then a new NodeClaim from the NodePools in weight order. A NodeClaim may use spot when its
requirements allow it and one of its types has an available spot offering; spot offerings dearer
than the cheapest on-demand one are left out; limits are counted pessimistically (the largest
capacity among the types a NodeClaim offers); minValues keeps that many distinct values among them
(``minvalues.py``). Every NodeClaim and pod group records why, counted (``explain.py``).
Topology spread and pod (anti-)affinity (``topology.py``): a group with such rules is placed a
domain at a time (its share of each zone, capacity type or custom value, as a requirement) and
capped per node on hostname rules; preferences act as required and are relaxed one step at a time
in Karpenter's order when a group does not fully place.

What differs is how a new NodeClaim is chosen (decision 3 of the design note). Identical pods form
a group and are placed a group at a time. A new NodeClaim is packed at once, largest pods first,
from every pending pod that may share it, and its instance type is the one whose node holds the
most of the pending requests (each resource as a share of the pending total) per dollar. A packing
that can be repeated (the same pods again) is repeated without searching again. The NodeClaim then
offers every type that holds its pods within ``flexibility`` of that price, cheapest first, so the
fleet request keeps room to choose by capacity. The first time a pool's new capacity is packed
for pods that may all share any of its types (``packing.lp_eligible``, the same requirements), the
configuration LP packs them all at once (``packing``: whole nodes of the LP's solution); the greedy
above packs what it leaves, and everything when the LP solver cannot be used (the claims say so).

Pure: pods, nodes, pools and the catalog in; a ``Plan`` out.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from . import explain, minvalues
from .explain import GroupStory, count
from .instance_types import InstanceType, Offering
from .labels import CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, ON_DEMAND, SPOT, WELL_KNOWN, ZONE
from .lp_solver import SolverUnavailable
from .nodepool import NodePool, by_weight
from .packing import EXACT_ROUNDS, NodeType, Packing, lp_eligible, pack
from .pods import PodView
from .requirements import Requirement, Requirements
from .taints import Taint, untolerated
from .topology import UNLIMITED, PodTerm, Scope, Spread, Tallies, min_count, relax, spread_quotas

#: The best packing per capacity type: (score, type, pods per group, requirements).
_Best = dict[str, tuple[tuple[float, float, str], InstanceType, dict[int, int], Requirements]]

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
    #: (namespace, labels) of the pods bound to it: what topology rules count.
    pods: list[tuple[str, Mapping[str, str]]] = field(default_factory=list)
    #: Required anti-affinity terms (key, scope) of its pods: the pods they select stay out of
    #: its domain of that key.
    anti: list[tuple[str, Scope]] = field(default_factory=list)
    #: Being deleted: takes no pod, but its pods still count for topology (a cordoned node is
    #: tainted ``node.kubernetes.io/unschedulable`` instead: tolerating pods still go there).
    closed: bool = False

    @property
    def hostname(self) -> str:
        req = self.requirements.get(HOSTNAME)
        return next(iter(req.values)) if req is not None and not req.complement and req.values else self.name


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
    #: The pool's instance types, and why each one not offered was left out (counted by reason,
    #: ``explain.TYPE_REASONS``): ``considered == len(instance_types) + sum(dropped.values())``.
    considered: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    #: Per key with ``minValues``: the distinct values the offered types carry.
    min_values: dict[str, int] = field(default_factory=dict)
    #: What this NodeClaim counts against its pool's limits: the largest capacity among its types
    #: (Karpenter's ``subtractMax``), per limited resource (``nodes``: 1).
    limits_charged: dict[str, int] = field(default_factory=dict)


@dataclass
class Plan:
    existing: dict[str, str] = field(default_factory=dict)
    claims: list[PlannedClaim] = field(default_factory=list)
    unschedulable: dict[str, list[str]] = field(default_factory=dict)
    #: Each pending pod's group story (``explain.GroupStory``, shared by the group's pods).
    stories: dict[str, GroupStory] = field(default_factory=dict)

    @property
    def cost_per_hour(self) -> float:
        return sum(c.price_per_hour for c in self.claims)


@dataclass
class _Group:
    """Pending pods of one scheduling shape, in the order they are placed."""

    exemplar: PodView
    pods: list[PodView]
    placed: int = 0
    story: GroupStory = field(default_factory=GroupStory)
    #: The group this one places a slice of (narrowed to a topology domain), if any.
    origin: _Group | None = None

    @property
    def left(self) -> int:
        return len(self.pods) - self.placed

    def take(self, n: int) -> list[PodView]:
        out = self.pods[self.placed : self.placed + n]
        self.placed += n
        return out


def _shape(pod: PodView, label_keys: frozenset[str]) -> tuple[object, ...]:
    return (
        tuple(sorted(pod.requests.items())),
        str(pod.requirements),
        str(pod.strict_requirements),
        pod.tolerations,
        pod.ports,
        pod.topology,
        # Other pods' selectors read these; a label no selector mentions changes nothing.
        tuple(sorted((k, v) for k, v in pod.labels.items() if k in label_keys)),
        pod.namespace if label_keys or pod.topology else "",
    )


def _selector_keys(pods: Sequence[PodView]) -> frozenset[str]:
    keys: set[str] = set()
    for shape in {p.topology for p in pods if p.topology}:
        for scope in [*(s.scope for s in shape.spreads), *(t.scope for t in shape.terms)]:
            if scope.selector is not None:
                keys.update(k for k, _ in scope.selector.match_labels)
                keys.update(k for k, _, _ in scope.selector.expressions)
    return frozenset(keys)


def group_pods(pods: Sequence[PodView]) -> list[_Group]:
    """Identical pods together, groups largest first (CPU, then memory), pods by name."""
    groups: dict[tuple[object, ...], _Group] = {}
    label_keys = _selector_keys(pods)
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name, p.uid)):
        key = _shape(pod, label_keys)
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


def _short_of(free: Mapping[str, int], need: Mapping[str, int]) -> str:
    """The kube-scheduler's words for the first resource a node lacks for one more pod."""
    for name, amount in need.items():
        if amount > free.get(name, 0):
            return "Too many pods" if name == "pods" else f"Insufficient {name}"
    return explain.NODE_FULL


def _clash(a: tuple[str, str, int], b: tuple[str, str, int]) -> bool:
    """Two host ports clash on one node: same protocol and port, and the same or a wildcard IP."""
    return a[1:] == b[1:] and (a[0] == b[0] or "0.0.0.0" in (a[0], b[0]))


def _ports_allow(pod: PodView, used: set[tuple[str, str, int]]) -> int:
    """How many pods of this shape a node with ``used`` ports takes: one at most with host ports."""
    if not pod.ports:
        return 1 << 30
    return 0 if any(_clash(p, u) for p in pod.ports for u in used) else 1


@dataclass(frozen=True)
class _Opening:
    """The candidates a new NodeClaim was opened with (``Simulation._candidates``)."""

    types: list[InstanceType]
    dropped: dict[str, int]


@dataclass(frozen=True)
class _Offer:
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
class _OfferBase:
    """A NodeClaim family's candidate types, classified once (see ``Simulation._offer_base``)."""

    #: (type, price of the claim's capacity type, cheapest on-demand offering in its zones).
    candidates: list[tuple[InstanceType, float, float]] = field(default_factory=list)
    incompatible: int = 0
    #: Types offered only as another capacity type (counted as lacking an offering).
    other_capacity_count: int = 0
    other_capacity_od: float = float("inf")


def _both(reqs: Requirements) -> bool:
    allowed = reqs.get_or_any(CAPACITY_TYPE)
    return allowed.has(SPOT) and allowed.has(ON_DEMAND)


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
        #: The pool's types that passed the filters when the claim was opened, and the rest by reason.
        self.opening = _Opening(list(pc.instance_types), {})
        self.charged: dict[str, int] = {}
        #: Its placeholder hostname: each NodeClaim is a domain of its own.
        self.name = ""
        #: The stories of the groups whose pods it was opened with (by identity).
        self.stories: dict[int, GroupStory] = {}
        #: Whether its pool and pods allow both capacity types (its ``reqs`` pin the one chosen).
        self.both = _both(pc.pool.requirements)

    def add(self, pods: list[PodView], need: Mapping[str, int], reqs: Requirements) -> None:
        if pods and self.both:
            self.both = _both(pods[0].requirements)
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
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
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
        self._finished: dict[tuple[object, ...], tuple[Requirements, _Offer]] = {}
        self._offer_bases: dict[tuple[object, ...], tuple[Requirements, list[InstanceType], _OfferBase]] = {}
        self._opening = _Opening([], {})
        # Only a NodePool's requirements carry minValues (a pod's node selector terms have none),
        # so the packing's hot loops ask a set, not each requirement.
        self._min_values_pools = {pc.pool.name for pc in pools if pc.pool.requirements.has_min_values()}
        # Per (pool, requirements): the LP packed that cohort once (its residue is the greedy's),
        # and why the greedy packs alone when the LP could not be used.
        self._lp_tried: dict[tuple[str, int], tuple[Requirements, str]] = {}
        self._solo: dict[tuple[object, ...], tuple[Requirements, _Best]] = {}
        # NodeClaims that may still take a pod (one without room for the smallest is dropped).
        self._open: list[_Claim] = []
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
        self._narrowed: dict[tuple[str, str], Requirements] = {}
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
        self._honored: dict[tuple[str, Scope, str], tuple[int, dict[str, int]]] = {}
        self._lows: dict[tuple[Scope, str], tuple[int, int]] = {}
        #: Existing nodes by hostname and NodeClaims by name (for the reasons; rebuilt as claims open).
        self._hosts: dict[str, ExistingNode | _Claim] = {n.hostname: n for n in nodes}
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
        if self._keys:
            for node in self.nodes:
                where = self._where(node.requirements, node.hostname, node=True)
                for namespace, labels in node.pods:
                    self.tallies.record(namespace, labels, where, 1, node.requirements)
                self._keep_out(node.anti, where)

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
        # when no existing node takes it, whatever new capacity larger pods caused. (Pods with
        # topology rules choose their domain first, so they take existing nodes in their turn.)
        for group in self.groups:
            if not group.exemplar.topology:
                if self._inverse:
                    self._fence(group)
                self._on_existing(group)
        waiting: list[tuple[_Group, list[str]]] = []
        for group in list(self.groups):
            reasons = self._attempt(group, existing=bool(group.exemplar.topology))
            while group.left:
                # Preferences first act as requirements; the pods they leave unplaced try again
                # with one preference less (Karpenter's preferences.go order).
                step = relax(
                    group.exemplar.spec, tolerate_prefer_no_schedule=self._tolerate_prefer_no_schedule
                )
                if step is None:
                    break
                exemplar = group.exemplar.with_spec(step[0])
                relaxed = _Group(
                    exemplar,
                    [
                        replace(exemplar, namespace=p.namespace, name=p.name, uid=p.uid)
                        for p in group.pods[group.placed :]
                    ],
                    story=group.story,
                )
                group.story.relaxed = True
                group.placed = len(group.pods)
                self.groups.insert(self.groups.index(group) + 1, relaxed)
                if not exemplar.topology:
                    self._plain.append(relaxed)
                group, reasons = relaxed, self._attempt(relaxed, existing=True)
            if group.left:
                waiting.append((group, reasons))
        # Karpenter's queue cycles failed pods while a cycle places something: pod affinity to
        # pods placed after them is met on a later cycle.
        progress = True
        while progress and any(g.exemplar.topology for g, _ in waiting):
            progress = False
            for i, (group, _) in enumerate(waiting):
                if group.exemplar.topology:
                    before = group.left
                    reasons = self._attempt(group, existing=True)
                    progress = progress or group.left < before
                    waiting[i] = (group, reasons)
        for group, reasons in waiting:
            for p in group.take(group.left):
                self.plan.unschedulable[p.key] = reasons or ["no NodePool"]
        for claim in self.claims:
            self._finish(claim)
        stories = self.plan.stories
        for group in self.groups:
            group.story.pods = max(group.story.pods, len(group.pods))
            for p in group.pods:
                stories[p.key] = group.story
        return self.plan

    def _attempt(self, group: _Group, *, existing: bool) -> list[str]:
        if self._inverse:
            self._fence(group)
        return (
            self._place_by_domain(group) if group.exemplar.topology else self._place(group, existing=existing)
        )

    def _place(self, group: _Group, *, existing: bool) -> list[str]:
        """Place what fits of ``group``; the reasons the rest does not fit new capacity."""
        if existing:
            self._on_existing(group)
        if group.left:
            self._on_claims(group)
        if group.left and self._keys and self._new_node_limits(group.exemplar)[0] <= 0:
            return self._hostname_reasons(group.exemplar)
        reasons: list[str] = []
        while group.left and not reasons:
            reasons = self._new_claims(group)
        return reasons

    def _on_existing(self, group: _Group) -> None:
        """Place what existing nodes take of ``group``, as kube-scheduler binds before Karpenter
        sees a pod (design decision 3). Its Filter reads only required rules: preferences (pod
        (anti-)affinity, node affinity, ``ScheduleAnyway`` spreads) only score. So the nodes the
        preferences allow are tried first (what the scores favour) and then, for what is left,
        every node the required rules allow: preferences only act as required for new capacity."""
        self._existing_rounds(group)
        if group.left and not self._hard_only and self._prefers(group.exemplar):
            self._hard_only = True
            try:
                self._existing_rounds(group)
            finally:
                self._hard_only = False

    def _prefers(self, pod: PodView) -> bool:
        """Whether ``pod`` has preferences kube-scheduler's Filter ignores."""
        node_affinity = (pod.spec.get("affinity") or {}).get("nodeAffinity") or {}
        return pod.topology.required is not pod.topology or bool(
            node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
        )

    def _existing_rounds(self, group: _Group) -> None:
        # kube-scheduler's hostname-spread minimum over the existing nodes rises as they fill, so
        # a pass that placed pods may let the next place more (what it does pod by pod).
        again = any(s.key == HOSTNAME for s in group.exemplar.topology.spreads)
        first = True
        while group.left:
            before = group.left
            self._existing_pass(group, group.story if first else GroupStory())
            first = False
            if not again or group.left == before:
                return

    def _existing_pass(self, group: _Group, story: GroupStory) -> None:
        pod = group.exemplar
        need = _needs(pod.requests)
        for node in self.nodes:
            if not group.left:
                return
            story.nodes_tried += 1
            if node.closed:
                continue
            if untolerated(node.taints, pod.tolerations):
                count(story.nodes_refused, explain.NODE_TAINT)
                continue
            reqs = self._filter_requirements(pod) if self._hard_only else pod.requirements
            if node.requirements.compatibility(reqs, frozenset()):
                count(story.nodes_refused, explain.NODE_AFFINITY)
                continue
            free = {k: v - node.requested.get(k, 0) for k, v in node.allocatable.items()}
            ports = _ports_allow(pod, node.ports)
            cap = self._cap(pod, node.hostname, existing=True) if self._keys else UNLIMITED
            n = how_many_fit(free, need, min(group.left, ports, cap))
            if n <= 0:
                if not ports:
                    why = explain.NODE_PORTS
                elif not cap:
                    why = "pod topology rules (spread, affinity, anti-affinity)"
                else:
                    why = _short_of(free, need)
                count(story.nodes_refused, why)
                continue
            for p in group.take(n):
                self.plan.existing[p.key] = node.name
                node.ports |= p.ports
            for name, amount in need.items():
                node.requested[name] = node.requested.get(name, 0) + amount * n
            self._record(pod, n, node.requirements, node.hostname, node=True)

    def _filter_requirements(self, pod: PodView) -> Requirements:
        """What kube-scheduler's NodeAffinity Filter reads of ``pod`` on an existing node: its node
        selector and required terms (``nodeaffinity/node_affinity.go`` Filter; preferred terms only
        score), plus what the simulation narrowed the pod to (a topology domain, a fence)."""
        reqs = pod.requirements
        node_affinity = (pod.spec.get("affinity") or {}).get("nodeAffinity") or {}
        if not node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"):
            return reqs
        memo = (id(reqs), id(pod.strict_requirements))
        hit = self._filtering.get(memo)
        if hit is None:
            # Walk the narrowings back to the pod's own requirements, keeping what they added.
            narrowed: list[Requirement] = []
            at = reqs
            while (step := self._narrowings.get(id(at))) is not None and step[0] is at:
                narrowed += step[2]
                at = step[1]
            out = pod.strict_requirements.copy()
            out.add(*narrowed)
            hit = self._filtering[memo] = (reqs, pod.strict_requirements, out)
        return hit[2]

    def _on_claims(self, group: _Group) -> None:
        pod = group.exemplar
        need = _needs(pod.requests)
        filled: set[int] = set()
        cpu, memory = need.get("cpu", 0), need.get("memory", 0)
        # The cheapest tests first, before the sort (Karpenter tries the NodeClaims with the fewest
        # pods first): most NodeClaims of a pass are nearly full, and a hostname affinity only
        # admits the few where a matching pod runs.
        hosts = self._affinity_hosts(pod) if self._keys else None
        pool = self._open if hosts is None else [c for c in self._claims_named(hosts) if self._has_room(c)]
        fits = [c for c in pool if c.free.get("cpu", 0) >= cpu and c.free.get("memory", 0) >= memory]
        fits.sort(key=lambda c: len(c.pods))
        for claim in fits:
            if not group.left:
                break
            if untolerated(claim.pc.pool.taints, pod.tolerations):
                continue
            merged = self._merge(claim.reqs, pod)
            if merged is None or self._conflict(claim.target, merged):
                continue
            if self._price(claim.target, merged, claim.capacity_type) == float("inf"):
                continue  # it would narrow the claim (a zone, say) to where its type is not offered
            cap = self._cap(pod, claim.name) if self._keys else UNLIMITED
            n = how_many_fit(claim.free, need, min(group.left, _ports_allow(pod, claim.ports), cap))
            if (
                n > 0
                and claim.pc.pool.name in self._min_values_pools
                and not self._min_values_hold(claim, merged, need, n)
            ):
                continue
            if n > 0:
                claim.add(group.take(n), need, merged)
                self._record(pod, n, claim.reqs, claim.name)
                if not self._has_room(claim):
                    filled.add(id(claim))
        if filled:
            self._open = [c for c in self._open if id(c) not in filled]

    def _affinity_hosts(self, pod: PodView) -> set[str] | None:
        """The nodes and NodeClaims ``pod``'s hostname affinity admits (where a matching pod
        runs), or None when it has none or may start its own (no match yet, selects itself)."""
        hosts: set[str] | None = None
        for term in pod.topology.terms:
            if term.anti or term.key != HOSTNAME:
                continue
            tally = self.tallies.tally(HOSTNAME, term.scope, False)
            if tally.total == 0 and self._selects(term.scope, pod):
                continue
            here = set(self._hosts_running(term.scope))
            hosts = here if hosts is None else hosts & here
        return hosts

    def _claims_named(self, names: Iterable[str]) -> list[_Claim]:
        """This pass's NodeClaims among ``names``, in the order they were opened."""
        for claim in self.claims[self._hosts_seen :]:
            self._hosts[claim.name] = claim
            self._claim_at[claim.name] = self._hosts_seen
            self._hosts_seen += 1
        found = [(self._claim_at[n], self._hosts[n]) for n in names if n in self._claim_at]
        return [c for _, c in sorted(found, key=lambda x: x[0]) if isinstance(c, _Claim)]

    def _has_room(self, claim: _Claim) -> bool:
        return all(claim.free.get(k, 0) >= v for k, v in self._smallest.items())

    # -- topology (topology.py holds the rules; here they meet the nodes and NodeClaims)

    def _universe(self, key: str) -> list[str]:
        """A key's domains: what the NodePools' requirements and offerings allow, and the values
        existing nodes have (Karpenter's domain groups, ``topology.go`` ``NewTopology``)."""
        hit = self._universes.get(key)
        if hit is not None:
            return hit
        values: set[str] = set()
        for pc in self.pools:
            reqs = pc.pool.requirements
            allowed = reqs.get_or_any(key)
            if not allowed.complement:
                values.update(allowed.values)
                continue
            for it in pc.instance_types:
                if it.requirements.conflicts(reqs):
                    continue
                if key in (ZONE, CAPACITY_TYPE):
                    values.update(
                        o.zone if key == ZONE else o.capacity_type for o in it.available_offerings(reqs)
                    )
                elif key in it.requirements and not it.requirements[key].complement:
                    values.update(v for v in it.requirements[key].values if allowed.has(v))
        for node in self.nodes:
            req = node.requirements.get(key)
            if req is not None and not req.complement:
                values.update(req.values)
        out = self._universes[key] = sorted(values)
        return out

    def _where(self, reqs: Requirements, hostname: str, *, node: bool = False) -> dict[str, tuple[str, ...]]:
        """The domains a node or NodeClaim with ``reqs`` may be in, per key the rules read. A
        real ``node`` without the key is in no domain of it (Karpenter ``topology.go`` countDomains,
        kube-scheduler alike), where a NodeClaim without it may still land in any."""
        out: dict[str, tuple[str, ...]] = {}
        for key in self._keys:
            if key == HOSTNAME:
                out[key] = (hostname,)
                continue
            req = reqs.get(key)
            if req is None and node:
                out[key] = ()
            elif req is None or req.complement:
                out[key] = tuple(d for d in self._universe(key) if req is None or req.has(d))
            else:
                out[key] = tuple(sorted(req.values))
        return out

    def _record(self, pod: PodView, n: int, reqs: Requirements, hostname: str, *, node: bool = False) -> None:
        if not self._keys or n <= 0:
            return
        where = self._where(reqs, hostname, node=node)
        self.tallies.record(pod.namespace, pod.labels, where, n, reqs)
        # Only required terms keep other pods away (Karpenter topology.go updateInverseAntiAffinity
        # leaves preferences out): a relaxed pod must not stay barred by its own dropped preference.
        self._keep_out([(t.key, t.scope) for t in pod.topology.terms if t.anti and t.weight == 0], where)

    def _keep_out(self, terms: Sequence[tuple[str, Scope]], where: Mapping[str, tuple[str, ...]]) -> None:
        """Anti-affinity terms of pods placed at ``where`` keep the pods they select out of those
        domains (kube-scheduler ``interpodaffinity`` satisfyExistingPodsAntiAffinity; Karpenter's
        inverse anti-affinity groups, ``topology.go``). A NodeClaim whose domain is still open
        keeps them out of every domain it may get, as Karpenter records it."""
        for key, scope in terms:
            if key == HOSTNAME:
                self._anti_at.setdefault(where[key][0], []).append(scope)
                continue
            by_domain = self._inverse.setdefault(key, {})
            for d in where.get(key, ()):
                by_domain.setdefault(d, []).append(scope)

    def _fence(self, group: _Group) -> None:
        """Narrow ``group`` away from the domains placed pods' anti-affinity keeps it out of."""
        pod = group.exemplar
        extra = []
        for key, by_domain in self._inverse.items():
            bad = sorted(d for d, scopes in by_domain.items() if any(self._selects(s, pod) for s in scopes))
            if bad:
                extra.append(Requirement.of(key, "NotIn", bad))
        if extra:
            group.exemplar = replace(pod, requirements=self._narrow(pod.requirements, extra))

    def _selects(self, scope: Scope, pod: PodView) -> bool:
        return self.tallies.selects(scope, pod.namespace, pod.labels)

    def _cap(self, pod: PodView, hostname: str, *, existing: bool = False) -> int:
        """How many of ``pod``'s group the node (or NodeClaim) ``hostname`` may still take under
        the hostname rules: spread caps it at maxSkew over the minimum (Karpenter's 0, a new node
        being an empty domain; on an ``existing`` node kube-scheduler's, which binds first and
        knows only the nodes there are), anti-affinity at one and only where no matching pod
        runs, affinity to where one runs; another pod's anti-affinity there keeps it off
        (kube-scheduler's ``interpodaffinity`` filter checks both ways)."""
        if any(self._selects(scope, pod) for scope in self._anti_at.get(hostname, ())):
            return 0
        cap = UNLIMITED
        topo = pod.topology.required if existing and self._hard_only else pod.topology
        for spread in topo.spreads:
            if spread.key != HOSTNAME:
                continue
            count = self.tallies.tally(HOSTNAME, spread.scope, False).counts.get(hostname, 0)
            low = self._existing_min(spread, pod) if existing else 0
            if self._selects(spread.scope, pod):
                cap = min(cap, max(spread.max_skew + low - count, 0))
            elif count - low > spread.max_skew:
                return 0
        for term in topo.terms:
            if term.key != HOSTNAME:
                continue
            tally = self.tallies.tally(HOSTNAME, term.scope, term.anti)
            count = tally.counts.get(hostname, 0)
            if term.anti:
                if count:
                    return 0
                if self._selects(term.scope, pod):
                    cap = min(cap, 1)
            elif not count and not (tally.total == 0 and self._selects(term.scope, pod)):
                return 0
        return cap

    def _existing_min(self, spread: Spread, pod: PodView) -> int:
        """kube-scheduler's minimum of a hostname spread: the fewest matching pods on an existing
        node the spread counts (``podtopologyspread`` PreFilter: every node with the key and,
        with ``nodeAffinityPolicy: Honor``, that the pod's selector and required affinity match;
        tainted and cordoned nodes too, ``nodeTaintsPolicy`` being Ignore)."""
        strict = pod.strict_requirements
        honor = spread.honor_node_affinity and len(strict) > 0
        key = (spread.scope, str(strict) if honor else "")
        hit = self._lows.get(key)
        if hit is not None and hit[0] == self.tallies.version:
            return hit[1]
        counts = self.tallies.tally(HOSTNAME, spread.scope, False).counts
        low = min(
            (
                counts.get(n.hostname, 0)
                for n in self.nodes
                if not honor or not n.requirements.compatibility(strict, WELL_KNOWN)
            ),
            default=0,
        )
        self._lows[key] = (self.tallies.version, low)
        return low

    def _new_node_limits(self, pod: PodView) -> tuple[int, int]:
        """How many of ``pod``'s group one new NodeClaim takes, and how many such NodeClaims the
        hostname rules allow at once (self-affinity: the first pod's node, so one)."""
        cap = self._cap(pod, "")
        claims = UNLIMITED
        for term in pod.topology.terms:
            if term.key == HOSTNAME and not term.anti:
                claims = 1
        return cap, claims

    def _hostname_scopes(self, pod: PodView) -> list[Scope]:
        return [s.scope for s in pod.topology.spreads if s.key == HOSTNAME] + [
            t.scope for t in pod.topology.terms if t.key == HOSTNAME
        ]

    def _sharing_scopes(self, pod: PodView) -> list[Scope]:
        """The scopes of ``pod``'s rules that a pod sharing its node would break or count for."""
        return self._hostname_scopes(pod) + [
            t.scope for t in pod.topology.terms if t.anti and t.key != HOSTNAME
        ]

    def _narrow(self, reqs: Requirements, extra: Sequence[Requirement]) -> Requirements:
        """``reqs`` with a topology domain added; the same object for the same text (memos)."""
        key = (str(reqs), ";".join(str(r) for r in extra))
        hit = self._narrowed.get(key)
        if hit is None:
            hit = reqs.copy()
            hit.add(*extra)
            hit = self._narrowed[key] = hit
            self._narrowings[id(hit)] = (hit, reqs, tuple(extra))
        return hit

    def _spread_counts(self, spread: Spread, pod: PodView) -> Mapping[str, int]:
        """The pods a spread counts per domain; with ``nodeAffinityPolicy: Honor`` (the default)
        only those on nodes the pod's node selector and required affinity match (kube-scheduler's
        ``podtopologyspread`` PreFilter; Karpenter's ``TopologyNodeFilter``)."""
        strict = pod.strict_requirements
        if not spread.honor_node_affinity or not len(strict):
            return self.tallies.tally(spread.key, spread.scope, False).counts
        key = (spread.key, spread.scope, str(strict))
        hit = self._honored.get(key)
        if hit is None or hit[0] != self.tallies.version:
            counts = self.tallies.counts_where(
                spread.key,
                spread.scope,
                lambda where: isinstance(where, Requirements) and not where.compatibility(strict, WELL_KNOWN),
            )
            hit = self._honored[key] = (self.tallies.version, counts)
        return hit[1]

    def _eligible(self, pod: PodView, key: str, honor: bool = True) -> list[str]:
        """The domains of ``key`` the pod's node requirements allow (``nodeAffinityPolicy: Honor``).
        Its strict requirements: a preference narrowing the domains would let a hard spread count
        its minimum over one zone (Karpenter passes StrictRequirements as the pod's domains)."""
        allowed = pod.strict_requirements.get_or_any(key)
        universe = self._universe(key) if self._scope is None else self._node_domains(key, pod, honor)
        return [d for d in universe if not honor or allowed.has(d)]

    def _node_domains(self, key: str, pod: PodView, honor: bool) -> list[str]:
        """The values existing nodes have for ``key``: the only domains kube-scheduler knows (with
        ``nodeAffinityPolicy: Honor``, of the nodes the pod's selector and affinity match)."""
        values: set[str] = set()
        for node in self.nodes:
            if honor and node.requirements.compatibility(pod.strict_requirements, WELL_KNOWN):
                continue
            req = node.requirements.get(key)
            if req is not None and not req.complement:
                values.update(req.values)
        return sorted(values)

    def _domain_rules(
        self, group: _Group, blocked: set[tuple[str, str]], proven: set[tuple[str, str]] | None = None
    ) -> tuple[list[tuple[list[Requirement], int, tuple[str, str] | None]], str]:
        """Where the next pods of ``group`` go under its zone, capacity-type and custom-label rules:
        (requirements to add, how many, the domain to block when it takes fewer); or why none.

        A spread's shares are only safe if every domain takes its share: one that takes fewer
        would leave the others over the skew. So unless every domain is ``proven`` (took a full
        share of this group before), and no NodePool has limits (capacity may run out half way),
        and the spread is the pod's only domain rule, each domain gets no more than keeps the skew
        whatever the others take."""
        pod = group.exemplar
        topo = pod.topology.required if self._hard_only else pod.topology
        rules: list[tuple[str, dict[str, int], bool]] = []  # (key, quota per domain, one per domain)
        starting: tuple[str, str] | None = None  # the domain a self-affinity's first pod tries
        for spread in topo.spreads:
            if spread.key == HOSTNAME:
                continue
            eligible = self._eligible(pod, spread.key, spread.honor_node_affinity)
            counts = self._spread_counts(spread, pod)
            quotas = spread_quotas(
                spread,
                counts,
                eligible,
                [d for k, d in blocked if k == spread.key],
                group.left,
                self_selecting=self._selects(spread.scope, pod),
            )
            if not quotas:
                return [], spread.describe()
            several = (
                sum(s.key != HOSTNAME for s in topo.spreads) + sum(t.key != HOSTNAME for t in topo.terms) > 1
            )
            if several and self._scope is not None and self._selects(spread.scope, pod):
                # kube-scheduler, pod by pod: every domain within the skew (the others' rules choose).
                low = min_count(spread, counts, eligible)
                quotas = {d: low + spread.max_skew - counts.get(d, 0) for d in eligible}
            cautious = (
                self._limited
                or several
                or proven is None
                or any((spread.key, d) not in proven for d in quotas)
            )
            if cautious and self._selects(spread.scope, pod):
                low = min_count(spread, counts, eligible)
                for d in list(quotas):
                    safe = low + spread.max_skew - counts.get(d, 0)
                    quotas[d] = min(quotas[d], max(safe, 0))
                quotas = {d: n for d, n in quotas.items() if n > 0}
                if not quotas:
                    return [], spread.describe()
            rules.append((spread.key, quotas, True))
        for term in topo.terms:
            if term.key == HOSTNAME:
                continue
            eligible = [d for d in self._eligible(pod, term.key) if (term.key, d) not in blocked]
            tally = self.tallies.tally(term.key, term.scope, term.anti)
            mine = self._selects(term.scope, pod)
            if term.anti:
                empty = [d for d in eligible if not tally.counts.get(d, 0)]
                quotas = dict.fromkeys(empty, 1 if mine else group.left)
                rules.append((term.key, quotas, mine))
            else:
                found = [d for d in eligible if tally.counts.get(d, 0)]
                if not found and mine and tally.total == 0 and eligible:
                    # No matching pod anywhere: the first pod starts the domain, the rest follow
                    # it. kube-scheduler lets it onto any node (``interpodaffinity``
                    # satisfyPodAffinity); Karpenter tries the domains in turn, a domain no
                    # capacity serves being blocked (so one pod, and its domain to block).
                    start = eligible if self._scope is not None else eligible[:1]
                    rules.append((term.key, dict.fromkeys(start, 1), False))
                    starting = (term.key, start[0]) if len(start) == 1 else None
                    continue
                rules.append((term.key, dict.fromkeys(found, group.left), False))
            if not rules[-1][1]:
                return [], term.describe()
        if not rules:
            return [([], group.left, None)], ""
        key, quotas, split = rules[0]
        if len(rules) == 1:
            if split:
                return [
                    ([Requirement.of(key, "In", [d])], n, (key, d)) for d, n in sorted(quotas.items())
                ], ""
            quota = min(group.left, *quotas.values())
            return [([Requirement.of(key, "In", sorted(quotas))], quota, starting)], ""
        # Several rules: one pod at a time, in a domain every rule allows (rare shapes).
        allowed: dict[str, set[str]] = {}
        for k, q, _ in rules:
            allowed[k] = allowed[k] & set(q) if k in allowed else set(q)
        choices = [d for d in sorted(quotas) if d in allowed[key]]
        if not choices or not all(allowed.values()):
            rules_text = [s.describe() for s in topo.spreads if s.key != HOSTNAME]
            rules_text += [t.describe() for t in topo.terms if t.key != HOSTNAME]
            return [], "; ".join(rules_text)
        if self._scope is not None:
            # kube-scheduler takes any node every rule allows (the next pod sees the counts it left).
            extra = [Requirement.of(key, "In", choices)]
            extra += [Requirement.of(k, "In", sorted(v)) for k, v in allowed.items() if k != key]
            return [(extra, 1, None)], ""
        extra = [Requirement.of(key, "In", [choices[0]])]
        extra += [Requirement.of(k, "In", sorted(v)) for k, v in allowed.items() if k != key]
        return [(extra, 1, (key, choices[0]))], ""

    def _place_by_domain(self, group: _Group) -> list[str]:
        """Place ``group`` a slice per domain (existing nodes, this pass's NodeClaims, new ones);
        a domain that takes fewer than its share is blocked and the shares are worked out again."""
        pod = group.exemplar
        if self.nodes and any(k != HOSTNAME for k in pod.topology.keys):
            # kube-scheduler binds what existing nodes take before Karpenter sees a pod, with the
            # domains it knows: the existing nodes' (Karpenter's add what NodePools could launch).
            # Rounds while they place: the counts a round leaves (a self-affinity's first pod,
            # spread shares kept safe) allow the next round more. Only while kube-scheduler's
            # domains differ from Karpenter's: when they are the same, the rounds below try the
            # existing nodes first with the same domains, at a share a round.
            keys = [k for k in pod.topology.keys if k != HOSTNAME]
            differ = any(set(self._eligible(pod, k)) != set(self._node_domains(k, pod, True)) for k in keys)
            self._scope = "existing"
            try:
                # The preferences first (what kube-scheduler's scores favour), then the required
                # rules alone (its Filter): see _on_existing.
                for hard_only in (False, True) if self._prefers(pod) else (False,):
                    self._hard_only = hard_only
                    placed = -1
                    while group.left and group.placed > placed and (placed < 0 or differ):
                        placed = group.placed
                        buckets, _ = self._domain_rules(group, set(), None)
                        for extra, quota, _ in buckets:
                            if not group.left:
                                break
                            exemplar = (
                                replace(pod, requirements=self._narrow(pod.requirements, extra))
                                if extra
                                else pod
                            )
                            part = _Group(
                                exemplar,
                                group.pods[group.placed : group.placed + min(quota, group.left)],
                                origin=group,
                            )
                            self._on_existing(part)
                            group.placed += part.placed
                        if differ and group.left and group.placed > placed:
                            self._even_rounds(group)
            finally:
                self._scope = None
                self._hard_only = False
        blocked: set[tuple[str, str]] = set()
        proven: set[tuple[str, str]] = set()
        reasons: list[str] = []
        while group.left:
            buckets, why = self._domain_rules(group, blocked, proven)
            if not buckets:
                return [f'nodepool "{pc.pool.name}": {why}' for pc in self.pools] or [why]
            progress = grew = False
            for extra, quota, domain in buckets:
                if not group.left:
                    break
                exemplar = replace(pod, requirements=self._narrow(pod.requirements, extra)) if extra else pod
                part = _Group(
                    exemplar, group.pods[group.placed : group.placed + min(quota, group.left)], origin=group
                )
                why_not = self._place(part, existing=True)
                group.placed += part.placed
                progress = progress or part.placed > 0
                if part.left:
                    reasons = why_not or reasons
                    if domain is not None:
                        grew = grew or domain not in blocked
                        blocked.add(domain)
                elif domain is not None:
                    proven.add(domain)
            # A round that placed nothing but blocked a domain tries the others (a self-affinity's
            # first pod, or a one-pod round of several rules, whose first domain had no capacity).
            if not progress and not grew:
                break
        return reasons or (self._hostname_reasons(pod) if group.left else [])

    def _even_rounds(self, group: _Group) -> None:
        """Many rounds of a lone spread on existing nodes at once: adding the same number of pods
        to every domain keeps the skew, so while every domain has room for ``k`` more (resources
        only: identical pods without host ports or hostname rules add up node by node), each
        takes ``k``, as kube-scheduler's pod-by-pod placement would."""
        pod = group.exemplar
        topo = pod.topology.required if self._hard_only else pod.topology
        if len(topo.spreads) != 1 or topo.terms or pod.ports or topo.spreads[0].key == HOSTNAME:
            return
        key = topo.spreads[0].key
        domains = self._eligible(pod, key, topo.spreads[0].honor_node_affinity)
        need = _needs(pod.requests)
        room = dict.fromkeys(domains, 0)
        for node in self.nodes:
            req = node.requirements.get(key)
            if req is None or req.complement or len(req.values) != 1:
                continue
            d = next(iter(req.values))
            if d not in room or node.closed or untolerated(node.taints, pod.tolerations):
                continue
            reqs = self._filter_requirements(pod) if self._hard_only else pod.requirements
            if node.requirements.compatibility(reqs, frozenset()):
                continue
            free = {k: v - node.requested.get(k, 0) for k, v in node.allocatable.items()}
            room[d] += how_many_fit(free, need, self._cap(pod, node.hostname, existing=True))
        k = min(min(room.values(), default=0), group.left // max(len(domains), 1))
        if k <= 0:
            return
        for d in domains:
            exemplar = replace(
                pod, requirements=self._narrow(pod.requirements, [Requirement.of(key, "In", [d])])
            )
            part = _Group(exemplar, group.pods[group.placed : group.placed + k], origin=group)
            self._on_existing(part)
            group.placed += part.placed

    def _hostname_reasons(self, pod: PodView) -> list[str]:
        rules = [s.describe() for s in pod.topology.spreads if s.key == HOSTNAME]
        rules += [self._hostname_term_reason(pod, t) for t in pod.topology.terms if t.key == HOSTNAME]
        return [f'nodepool "{pc.pool.name}": {rules[0]}' for pc in self.pools] if rules else []

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

    def _hostname_term_reason(self, pod: PodView, term: PodTerm) -> str:
        """Why a hostname term stops the pod: for affinity, whether a matching pod runs anywhere
        and, if so, whether the nodes it runs on are only full or refuse the pod outright."""
        if term.anti:
            return term.describe()
        hosts = self._hosts_running(term.scope)
        if not hosts:
            return term.describe()
        memo = (term.scope, self.tallies.version, id(pod.requirements), pod.tolerations, str(pod.requests))
        hit = self._term_reasons.get(memo)
        if hit is not None:
            return hit[1]
        need = _needs(pod.requests)
        full = True
        self._claims_named(())  # brings the index up to date
        for host in hosts:
            place = self._hosts.get(host)
            if isinstance(place, ExistingNode):
                refused = (
                    place.closed
                    or bool(untolerated(place.taints, pod.tolerations))
                    or bool(place.requirements.compatibility(pod.requirements, frozenset()))
                )
                free = {k: v - place.requested.get(k, 0) for k, v in place.allocatable.items()}
            elif place is not None:
                refused = bool(untolerated(place.pc.pool.taints, pod.tolerations)) or (
                    self._merge(place.reqs, pod) is None
                )
                free = place.free
            else:
                continue
            full = not refused and how_many_fit(free, need, 1) == 0
            if not full:
                break
        first = heapq.nsmallest(3, hosts)
        named = ", ".join(first) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")
        why = "has no room for it" if full else "does not take it"
        out = f"pod affinity on {HOSTNAME}: {named}, running a pod matching {term.scope.selector}, {why}"
        self._term_reasons[memo] = (pod.requirements, out)  # keeps the id's object alive
        return out

    def _hosts_running(self, scope: Scope) -> list[str]:
        """The nodes and NodeClaims where a pod ``scope`` selects runs (memoised per count version)."""
        hit = self._running.get(scope)
        if hit is None or hit[0] != self.tallies.version:
            counts = self.tallies.tally(HOSTNAME, scope, False).counts
            hit = self._running[scope] = (self.tallies.version, [h for h, n in counts.items() if n])
        return hit[1]

    def _min_values_hold(self, claim: _Claim, reqs: Requirements, need: Mapping[str, int], n: int) -> bool:
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
            # Without limits the candidates depend on the requirements and the pod alone, and
            # pods with topology rules open many NodeClaims of the same few shapes.
            memo_key = (pool.name, id(reqs), tuple(sorted(need.items())))
            memo = None if pool.limits else self._candidate_memo.get(memo_key)
            if memo is None:
                types, dropped, problem = self._candidates(pc, reqs, need)
                books = self._price_books(types, reqs) if types else {}
                memo = (reqs, types, dropped, problem, books)
                if not pool.limits:
                    self._candidate_memo[memo_key] = memo
            _, types, dropped, problem, books = memo
            if not books:
                detail = ", ".join(f"{n} {why}" for why, n in sorted(dropped.items()))
                if problem:
                    reasons.append(f'nodepool "{pool.name}": {problem}' + (f" ({detail})" if detail else ""))
                else:
                    reasons.append(
                        f'nodepool "{pool.name}": no instance type fits ({detail or "none offered"})'
                    )
                continue
            self._opening = _Opening(types, dropped)
            opened = len(self.claims)
            if self._pack(group, pc, reqs, types, books):
                for r in reasons:
                    group.story.pool(*_split_reason(r))
                # Each group packed here (the opening one and those that shared its NodeClaims)
                # tells of the NodeClaims holding its own pods (decision 4).
                held: dict[int, tuple[GroupStory, int]] = {}
                for claim in self.claims[opened:]:
                    for key, story in claim.stories.items():
                        held[key] = (story, held.get(key, (story, 0))[1] + 1)
                for story, n in held.values():
                    story.opened_claims(pool.name, n)
                return []
            reasons.append(f'nodepool "{pool.name}": no instance type holds the pod with a price')
        for r in reasons:
            group.story.pool(*_split_reason(r))
        return reasons or ["no NodePool"]

    def _cohort(self, first: _Group, pc: PoolCapacity) -> list[_Group]:
        """The pending groups that may share a new NodeClaim of ``pc`` with ``first``'s pods."""
        out = [first]
        start = self._position(first.origin or first)
        # Pods with topology rules place themselves (their domain first); nor may a pod join whose
        # labels the first pods' hostname rules or anti-affinity (any key: a node shares every
        # domain) select (it would count against them).
        scopes = self._sharing_scopes(first.exemplar) if self._keys else []
        if self._keys:
            # Only groups without topology rules may join: keep just those still pending, so the
            # scan does not walk the (many, small) topology groups every time.
            self._plain = [g for g in self._plain if g.left]
            later = [g for g in self._plain if self._position(g) > start]
        else:
            later = self.groups[start + 1 :]
        for g in later:
            if g.left and not untolerated(pc.pool.taints, g.exemplar.tolerations):
                if g.exemplar.topology or any(self._selects(sc, g.exemplar) for sc in scopes):
                    continue
                out.append(g)
        return out

    def _position(self, group: _Group) -> int:
        pos = self._positions.get(id(group))
        if pos is None or self.groups[pos] is not group:
            self._positions = {id(g): i for i, g in enumerate(self.groups)}
            pos = self._positions[id(group)]
        return pos

    def _fill(
        self,
        cohort: Sequence[_Group],
        it: InstanceType,
        pc: PoolCapacity,
        reqs: Requirements,
        left: Mapping[int, int],
        order: Sequence[int],
        first_cap: int = UNLIMITED,
        needs: Sequence[Mapping[str, int]] | None = None,
    ) -> tuple[dict[int, int], Requirements]:
        """How many of each group one node of ``it`` holds, filled in ``order`` (and the final
        reqs); the first group (the pods that opened the claim) always goes first."""
        free = {k: v - pc.daemon_overhead.get(k, 0) for k, v in it.allocatable.items()}
        pattern: dict[int, int] = {}
        ports: set[tuple[str, str, int]] = set(pc.daemon_ports)
        requested = dict(pc.daemon_overhead)
        for i in order:
            g = cohort[i]
            n = min(left[i], first_cap) if i == 0 else left[i]
            if n <= 0:
                continue
            need = needs[i] if needs is not None else _needs(g.exemplar.requests)
            # Room first (cheap, and what stops most groups once a node fills), requirements after.
            if need.get("cpu", 0) > free.get("cpu", 0) or need.get("memory", 0) > free.get("memory", 0):
                if i == 0:
                    return {}, reqs
                continue
            k = how_many_fit(free, need, min(n, _ports_allow(g.exemplar, ports)))
            if k <= 0:
                if i == 0:
                    return {}, reqs
                continue
            merged = self._merge(reqs, g.exemplar) if i else reqs
            if merged is None or self._conflict(it, merged) or (i and not self._offerings(it, merged)):
                # Karpenter's nodeclaim.go CanAdd: a pod that would leave the type no available
                # offering (its zones, its capacity type) does not join.
                if i == 0:
                    return {}, reqs
                continue
            if pc.pool.name in self._min_values_pools:
                # CanAdd again: the claim's types that still hold everything must keep minValues
                # (filterInstanceTypesByRequirements with the summed requests), pod by pod.
                k = self._min_values_room(pc, merged, requested, need, k)
                if k <= 0:
                    if i == 0:
                        return {}, reqs
                    continue
            pattern[i] = k
            reqs = merged
            ports |= g.exemplar.ports
            for name, amount in need.items():
                free[name] = free.get(name, 0) - amount * k
                requested[name] = requested.get(name, 0) + amount * k
            if any(free.get(name, 0) < least for name, least in self._smallest.items()):
                break  # no pending pod fits what is left
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
        lp_key = (pc.pool.name, id(reqs))
        # A pool with minValues keeps the greedy, which checks them pod by pod (Karpenter's CanAdd).
        if (
            lp_key not in self._lp_tried
            and lp_eligible(first.exemplar)
            and pc.pool.name not in self._min_values_pools
        ):
            claims = len(self.claims)
            self._lp_tried[lp_key] = (reqs, self._pack_lp(cohort, pc, reqs))
            if len(self.claims) > claims:
                return True  # the residue is packed next, from candidates within the limits left
        lp_note = self._lp_tried.get(lp_key, (reqs, ""))[1]
        left = {i: g.left for i, g in enumerate(cohort)}
        fitted = self._market.get(id(types))
        if fitted is None or fitted[0] is not types:
            fitted = self._market[id(types)] = (types, market_prices(types, books))
        weights = fitted[1] or share_weights(cohort, left)
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
        needs = [_needs(g.exemplar.requests) for g in cohort]
        first_cap, max_claims = (
            self._new_node_limits(first.exemplar) if self._keys else (UNLIMITED, UNLIMITED)
        )
        others = {str(g.exemplar.requirements) for g in cohort[1:]}
        if len(others) <= 1 and (len(cohort) == 1 or str(self._merge(reqs, cohort[1].exemplar)) == str(reqs)):
            # Safe: every pod may go to every candidate (the others ask for no more than the
            # first). The same pool and requirements come back for every new NodeClaim of a
            # workload, with the same candidates.
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

        # The best packing per capacity type, by pending requests held per dollar. Pods that open a
        # NodeClaim alone (topology rules keep others off) come back in the same shapes often.
        solo = (
            (pc.pool.name, id(reqs), len(types), _shape(first.exemplar, frozenset()), min(left[0], first_cap))
            if len(cohort) == 1 and not pc.pool.limits
            else None
        )
        memo = self._solo.get(solo) if solo else None
        best: _Best = memo[1] if memo else {}
        # A type dearer than one that already held every pending pod of the cohort cannot score
        # better (it holds no more), so types go cheapest first and those are skipped.
        everything = {i: min(n, first_cap) if i == 0 else n for i, n in left.items() if n > 0}
        ceiling = dict.fromkeys(books, float("inf"))
        cheapest_first = sorted(
            types,
            key=lambda t: (min((b[t.name] for b in books.values() if t.name in b), default=0.0), t.name),
        )
        # And a type whose node could not hold more than the best packing per dollar so far, even
        # filled with exactly what it has room for, is not filled at all (an upper bound).
        totals = {
            name: sum(cohort[i].exemplar.requests.get(name, 0) * n for i, n in everything.items())
            for name in weights
        }

        def hopeless(it: InstanceType) -> bool:
            bound = sum(
                w * min(it.allocatable.get(name, 0) - pc.daemon_overhead.get(name, 0), totals[name])
                for name, w in weights.items()
            )
            for ct, book in books.items():
                price = book.get(it.name)
                if price is None:
                    continue
                if ct not in best or price <= 0:
                    return False
                mark = best[ct][0][0]
                if -bound / price <= mark + 1e-9 * abs(mark):
                    return False
            return True

        # minValues count the types with an offering of the claim's capacity type: such a pool's
        # claims are filled with it fixed from the start.
        pinned_only = pc.pool.name in self._min_values_pools
        # The hostname rules allow the group a single new NodeClaim (self-affinity): requests per
        # dollar would pick a small type and leave the rest of the group nowhere to go.
        lone = max_claims == 1 and left[0] > 1
        held: float = 0.0
        pattern: dict[int, int] = {}
        final = reqs
        for it in [] if memo else cheapest_first:
            if all(book.get(it.name, float("inf")) > ceiling[ct] for ct, book in books.items()):
                continue
            if best and not lone and hopeless(it):
                continue
            if not pinned_only:
                fills = [
                    self._fill(cohort, it, pc, reqs, left, order, first_cap, needs)
                    for order in (by_cpu, by_memory)
                ]
                held, (pattern, final) = max(((value(f[0]), f) for f in fills), key=lambda vf: vf[0])
                if not pattern:
                    continue
            for ct, book in books.items():
                if it.name not in book:
                    continue
                ct_held, ct_pattern, ct_final = held, pattern, final
                price = float("inf") if pinned_only else self._price(it, final, ct)
                if price == float("inf"):
                    # The fill's pods left no offering of this capacity type (one needs the other,
                    # or narrowed the zones): Karpenter's CanAdd would refuse them on such a
                    # claim, so fill again with the capacity type fixed first (rare).
                    pinned = self._narrow(reqs, [Requirement.of(CAPACITY_TYPE, "In", [ct])])
                    refills = [
                        self._fill(cohort, it, pc, pinned, left, order, first_cap, needs)
                        for order in (by_cpu, by_memory)
                    ]
                    ct_held, (ct_pattern, ct_final) = max(
                        ((value(f[0]), f) for f in refills), key=lambda vf: vf[0]
                    )
                    price = self._price(it, ct_final, ct) if ct_pattern else float("inf")
                    if price == float("inf"):
                        continue
                if ct_pattern == everything:
                    ceiling[ct] = min(ceiling[ct], book[it.name])
                score = (
                    # One NodeClaim may hold the group: the most of it first, then the cheapest
                    # (Karpenter's later pods join that NodeClaim, its types narrowing to the
                    # ones that fit them all: scheduler.go add, nodeclaim.go CanAdd).
                    (-ct_pattern.get(0, 0), price, it.name)
                    if lone
                    else (-ct_held / price if price > 0 else float("-inf"), price, it.name)
                )
                if ct not in best or score < best[ct][0]:
                    best[ct] = (score, it, ct_pattern, ct_final)
        if solo and not memo:
            self._solo[solo] = (reqs, best)
        # Spot first, unless an on-demand packing holds more per dollar (Karpenter drops spot
        # offerings dearer than the cheapest on-demand one; here the comparison is per packing).
        if not best:
            return False
        if SPOT in best and (ON_DEMAND not in best or best[SPOT][0] <= best[ON_DEMAND][0]):
            capacity_type = SPOT
        else:
            capacity_type = ON_DEMAND
        _, it, pattern, final = best[capacity_type]
        # One object per requirements text, so the memos keyed by identity hit across NodeClaims.
        final = self._narrow(final, [Requirement.of(CAPACITY_TYPE, "In", [capacity_type])])
        # Repeat the packing while every group in it has that many pods left.
        repeat = min(left[i] // n for i, n in pattern.items())
        repeat = min(repeat, max_claims)
        charge = self._charge(pc, final, it, capacity_type, cohort, pattern)
        for name, left_over in self._remaining(pc).items():
            per = charge.get(name, 0)
            if per > 0:
                repeat = min(repeat, max(left_over // per, 1))
        why = (
            f"{it.name} holds the most pending requests per dollar "
            f"({len(types)} types considered, {capacity_type})"
        ) + (f"; {lp_note}" if lp_note else "")
        used = self.usage[pc.pool.name]
        for _ in range(repeat):
            claim = _Claim(pc, final, it, capacity_type)
            claim.why = why
            claim.opening = self._opening
            claim.charged = charge
            claim.name = f"nodeclaim-{len(self.claims)}"
            for i, n in pattern.items():
                g = cohort[i]
                claim.add(g.take(n), _needs(g.exemplar.requests), claim.reqs)
                claim.stories[id(g.story)] = g.story
                self._record(g.exemplar, n, claim.reqs, claim.name)
            self.claims.append(claim)
            if self._has_room(claim):
                self._open.append(claim)
            for name, amount in charge.items():
                used[name] = used.get(name, 0) + amount
        return True

    def _charge(
        self,
        pc: PoolCapacity,
        reqs: Requirements,
        target: InstanceType,
        capacity_type: str,
        cohort: Sequence[_Group],
        pattern: Mapping[int, int],
    ) -> dict[str, int]:
        """What a new NodeClaim counts against its pool's limits: per limited resource the largest
        capacity among the types it would offer (Karpenter's ``scheduler.go`` ``subtractMax``, so
        whichever type EC2 picks the limits hold); ``nodes`` one each."""
        limits = pc.pool.limits
        if not limits:
            return {}
        if set(limits) == {"nodes"}:
            return {"nodes": 1}  # exact: no need to know the types
        probe = _Claim(pc, reqs, target, capacity_type)
        probe.opening = self._opening
        for i, n in pattern.items():
            for name, amount in _needs(cohort[i].exemplar.requests).items():
                probe.requested[name] = probe.requested.get(name, 0) + amount * n
        offered = self._offer(probe).types
        # Nothing offered (the packing left the claim no type, the open capacity-type defect the
        # oracle pins): the target is what would be launched, so it is what counts.
        charge = {
            name: max(
                (it.resources.capacity.get(name, 0) for it in offered),
                default=target.resources.capacity.get(name, 0),
            )
            for name in limits
            if name != "nodes"
        }
        if "nodes" in limits:
            charge["nodes"] = 1
        return charge

    def _pack_lp(self, cohort: Sequence[_Group], pc: PoolCapacity, reqs: Requirements) -> str:
        """NodeClaims from the configuration LP's whole nodes (``packing``) for the groups that may
        share any candidate type with the first; the residue is left to the greedy. Returns why
        the greedy packs alone ("" when the LP ran)."""
        text = str(cohort[0].exemplar.requirements)
        groups = [g for g in cohort if lp_eligible(g.exemplar) and str(g.exemplar.requirements) == text]
        # Every type a pod of the cohort fits, not only those the first (largest) pod fits.
        types, dropped, _ = self._candidates(pc, reqs, {"pods": 1})
        opening = _Opening(types, dropped)
        books = self._price_books(types, reqs)
        frontier = undominated(types, books)
        free = {
            it.name: {k: v - pc.daemon_overhead.get(k, 0) for k, v in it.allocatable.items()}
            for it in frontier
        }
        needs = [_needs(g.exemplar.requests) for g in groups]
        # Only shapes some type of each capacity type holds, so the plans compared hold the same pods.
        fits = [
            all(
                any(how_many_fit(free[it.name], need, 1) for it in frontier if it.name in book)
                for book in books.values()
            )
            for need in needs
        ]
        groups = [g for g, ok in zip(groups, fits, strict=True) if ok]
        needs = [n for n, ok in zip(needs, fits, strict=True) if ok]
        if not groups:
            return ""
        # Groups that differ only in labels (other pods' selectors read them) are one shape to the
        # LP: its size grows with shapes, and a node's pattern is filled from them in order.
        members: dict[tuple[tuple[str, int], ...], list[int]] = {}
        for j, need in enumerate(needs):
            members.setdefault(tuple(sorted(need.items())), []).append(j)
        shapes = list(members.values())
        shape_groups = [groups[js[0]] for js in shapes]
        packed: dict[str, tuple[list[InstanceType], Packing]] = {}
        counts = [sum(groups[j].left for j in js) for js in shapes]
        needs = [needs[js[0]] for js in shapes]
        # Spot first (when allowed), packed to whole nodes; the other capacity type's LP from the
        # greedy pricing alone tells whether its plan is cheaper, at a fraction of the time.
        for ct in sorted(books, key=lambda ct: ct != SPOT):
            its = [it for it in frontier if it.name in books[ct]]
            node_types = [NodeType(it.name, free[it.name], books[ct][it.name]) for it in its]
            try:
                first = not packed
                packing = pack(
                    needs, counts, node_types, exact_rounds=EXACT_ROUNDS if first else 0, whole=first
                )
                if not first and packing.bound < min(p.bound for _, p in packed.values()):
                    packing = pack(needs, counts, node_types)
                    packed.clear()
                packed[ct] = (its, packing)
            except SolverUnavailable as e:
                return f"greedy packing: {e}"
            except ValueError:
                continue  # no pod fits a type with this capacity type: the other one, or the greedy
        # Spot unless the on-demand plan costs less for the same pods (decision 3, per plan).
        whole = [ct for ct, (_, p) in packed.items() if p.nodes]
        if not whole:
            return ""
        ct = whole[0]
        its, packing = packed[ct]
        final = reqs.copy()
        final.add(Requirement.of(CAPACITY_TYPE, "In", [ct]))
        used = self.usage[pc.pool.name]
        pods = sum(g.left for g in groups)
        # The LP's claims may offer any type the cohort fits; _charge sizes the offer from it.
        saved, self._opening = self._opening, opening
        try:
            for nodes in packing.nodes:
                it = its[nodes.type]
                why = (
                    f"{it.name}: {nodes.count} such nodes in the configuration LP's packing of {pods} "
                    f"pods ({len(its)} types considered, {ct}; {packing.note})"
                )
                # Limits as the greedy counts them (the largest capacity the claim may be offered).
                charge = self._charge(pc, final, it, ct, shape_groups, dict(nodes.pattern))
                for _ in range(nodes.count):
                    if any(charge.get(name, 0) > left for name, left in self._remaining(pc).items()):
                        return ""  # the greedy packs the rest and reports the limit
                    claim = _Claim(pc, final, it, ct)
                    claim.why = why
                    claim.opening = opening
                    claim.charged = charge
                    claim.name = f"nodeclaim-{len(self.claims)}"
                    for s, n in nodes.pattern:
                        for j in shapes[s]:
                            k = min(n, groups[j].left)
                            if k:
                                claim.add(groups[j].take(k), needs[s], final)
                                claim.stories[id(groups[j].story)] = groups[j].story
                                # Other pods' topology rules may select these pods' labels.
                                self._record(groups[j].exemplar, k, final, claim.name)
                                n -= k
                    self.claims.append(claim)
                    if self._has_room(claim):
                        self._open.append(claim)
                    for name, amount in charge.items():
                        used[name] = used.get(name, 0) + amount
        finally:
            self._opening = saved
        return ""

    def _finish(self, claim: _Claim) -> None:
        """The NodeClaim's types: all that hold its pods within the flexibility band (wider where
        minValues asks), and the record of why the others are not offered."""
        pc, reqs = claim.pc, claim.reqs
        key = (
            pc.pool.name,
            id(reqs),
            claim.target.name,
            claim.capacity_type,
            tuple(sorted(claim.requested.items())),
            id(claim.opening),
            tuple(sorted(claim.charged.items())),
            claim.both,
        )
        hit = self._finished.get(key)
        if hit is None:
            # The opening is kept alive by the claim; its id is part of the key like the reqs'.
            hit = self._finished[key] = (reqs, self._offer(claim))
        offer = hit[1]
        chosen = offer.types
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
        why = claim.why
        if offer.widened:
            why += f"; widened past the flexibility band to meet minValues ({offer.widened} types added)"
        if offer.short:
            why += "; " + minvalues.unmet_message(offer.short, reqs)
        self.plan.claims.append(
            PlannedClaim(
                pool=pc.pool.name,
                capacity_type=claim.capacity_type,
                instance_types=[it.name for it in chosen],
                price_per_hour=offer.price,
                zones=zones,
                pods=list(claim.pods),
                requests=claim.requested,
                requirements=final,
                why=why,
                considered=len(pc.instance_types),
                dropped=dict(offer.dropped),
                min_values=dict(offer.values),
                limits_charged=dict(claim.charged),
            )
        )

    def _offer_base(self, claim: _Claim) -> _OfferBase:
        """What ``_offer`` needs of each candidate type that does not depend on the claim's
        requests: whether its requirements refuse the claim's, its price, and (for the spot
        filter) its cheapest on-demand offering in the claim's zones. The NodeClaims of a pass
        share a few (requirements, target, capacity type, candidates), so this is worked out once
        for each."""
        reqs, ct, types = claim.reqs, claim.capacity_type, claim.opening.types
        # A memoised opening hands every NodeClaim it makes one candidate list object.
        key = (id(reqs), claim.target.name, ct, id(types), claim.both)
        hit = self._offer_bases.get(key)
        if hit is not None:
            return hit[2]
        zones = reqs.get_or_any(ZONE)
        # Only the spot filter reads the on-demand prices.
        spot_filter = ct == SPOT and claim.both and not reqs.has_min_values()

        def on_demand(it: InstanceType) -> float:
            if not spot_filter:
                return float("inf")
            prices = [
                o.price
                for o in it.offerings
                if o.available and o.capacity_type == ON_DEMAND and zones.has(o.zone)
            ]
            return min(prices, default=float("inf"))

        base = _OfferBase()
        others = (it for it in types if it is not claim.target)
        for it in (claim.target, *others):
            if self._conflict(it, reqs):
                # The claim's requirements pin its capacity type; a type offered only as another
                # one lacks an offering, it is not incompatible with the pods.
                why = it.requirements.conflicts(reqs)
                if all(r.startswith(f"key {CAPACITY_TYPE},") for r in why):
                    base.other_capacity_count += 1
                    base.other_capacity_od = min(base.other_capacity_od, on_demand(it))
                else:
                    base.incompatible += 1
            else:
                base.candidates.append((it, self._price(it, reqs, ct), on_demand(it)))
        # The entry keeps ``reqs`` and the candidate list alive, so their ids are not reused.
        self._offer_bases[key] = (reqs, types, base)
        return base

    def _offer(self, claim: _Claim) -> _Offer:
        """The types a NodeClaim offers: its target first, then the rest of the band, cheapest
        first; past the band, the cheapest types that bring the values minValues still lacks; at
        most ``MAX_INSTANCE_TYPES``, keeping minValues (Karpenter's ``Truncate``)."""
        reqs = claim.reqs
        ct = claim.capacity_type
        target_price = self._price(claim.target, reqs, ct)
        ceiling = target_price * (1 + self.flexibility)
        dropped = dict(claim.opening.dropped)
        has_min_values = reqs.has_min_values()
        base = self._offer_base(claim)
        if base.other_capacity_count:
            count(dropped, explain.NO_OFFERING, base.other_capacity_count)
        if base.incompatible:
            count(dropped, explain.INCOMPATIBLE, base.incompatible)
        requested = list(claim.requested.items())
        priced: list[tuple[float, str, InstanceType]] = []
        cheapest_od = base.other_capacity_od
        for it, price, od in base.candidates:
            allocatable = it.allocatable
            if any(amount > allocatable.get(k, 0) for k, amount in requested):
                count(dropped, explain.TOO_SMALL)
                continue
            cheapest_od = min(cheapest_od, od)
            if price == float("inf") and it is not claim.target:
                count(dropped, explain.NO_OFFERING)
                continue
            priced.append((0.0 if it is claim.target else price, it.name, it))
        priced.sort()
        if ct == SPOT and claim.both and not has_min_values:
            # Karpenter's launch filter (aws ``filter.go`` SpotOfferingFilter, only when the
            # NodeClaim's own requirements allow both capacity types, not merely its pool's): spot
            # offerings dearer than the cheapest on-demand offering of the candidates (those that
            # hold the pods, and those offered only on demand) are left out; skipped when
            # minValues asks for choice, as there.
            kept = [p for p in priced if p[0] <= cheapest_od or p[2] is claim.target]
            count(dropped, explain.SPOT_DEARER, len(priced) - len(kept))
            priced = kept
        band = [it for price, _, it in priced if price <= ceiling]
        if claim.charged:
            # Karpenter's scheduler.go charges the limits once, when the NodeClaim is created
            # (subtractMax); pods joining later only narrow its options. A type larger than that
            # charge (a dearer zone left by a joining pod raises the band) stays out.
            within = [
                it
                for it in band
                if it is claim.target
                or all(it.resources.capacity.get(k, 0) <= v for k, v in claim.charged.items() if k != "nodes")
            ]
            count(dropped, explain.OVER_LIMITS, len(band) - len(within))
            band = within
        beyond = [it for price, _, it in priced if price > ceiling]
        if has_min_values and claim.charged:
            # Widen only within what the claim counted against the limits when it opened (the band
            # then held every type of the band now: same target and ceiling, fewer types fit).
            charged = claim.charged
            more = [t for t in beyond if all(t.resources.capacity.get(k, 0) <= v for k, v in charged.items())]
        else:
            more = beyond
        chosen = minvalues.widen(band, more, reqs) if has_min_values else band
        widened = len(chosen) - len(band)
        count(dropped, explain.OUTSIDE_BAND, len(beyond) - widened)
        if widened:
            # Widened types join the list in price order, after the target.
            chosen = [chosen[0], *sorted(chosen[1:], key=lambda t: (self._price(t, reqs, ct), t.name))]
        cut = minvalues.truncate(chosen, reqs, MAX_INSTANCE_TYPES)
        count(dropped, explain.BEYOND_CUT, len(chosen) - len(cut))
        short = minvalues.unmet(cut, reqs) if has_min_values else {}
        values = minvalues.distinct_values(cut, reqs) if has_min_values else {}
        return _Offer(cut, target_price, {k: v for k, v in dropped.items() if v}, widened, short, values)


def _split_reason(reason: str) -> tuple[str, str]:
    """'nodepool "a": why' as ("a", "why")."""
    head, _, why = reason.partition(": ")
    return head.removeprefix("nodepool ").strip('"'), why


def undominated(
    types: Sequence[InstanceType], books: Mapping[str, Mapping[str, float]]
) -> list[InstanceType]:
    """The types no other type beats: one as cheap or cheaper with at least as much of everything.

    A dominated type never holds a packing a dominating one cannot hold for less, so leaving it
    out changes no decision and shortens the search (most of a real catalog is dominated).
    """
    kept: dict[str, InstanceType] = {}
    for book in books.values():
        frontier: list[tuple[int, int, Mapping[str, int]]] = []
        for it in sorted((t for t in types if t.name in book), key=lambda t: (book[t.name], t.name)):
            alloc = it.allocatable
            cpu, memory = alloc.get("cpu", 0), alloc.get("memory", 0)
            # CPU and memory first: they rule most candidates out before the full comparison.
            if any(
                oc >= cpu and om >= memory and all(other.get(k, 0) >= v for k, v in alloc.items())
                for oc, om, other in frontier
            ):
                continue
            frontier.append((cpu, memory, alloc))
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
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> Plan:
    """Where ``pods`` go: existing ``nodes`` first, then new NodeClaims from ``pools``
    (``namespace_labels``: for pod affinity terms that select namespaces by label)."""
    return Simulation(pods, nodes, pools, flexibility=flexibility, namespace_labels=namespace_labels).run()
