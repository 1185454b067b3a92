"""InterPodAffinity: required pod affinity and anti-affinity, and existing pods' anti-affinity.

Upstream (pkg/scheduler/framework/plugins/interpodaffinity, filtering.go) computes in PreFilter,
over every pod bound to a node:

- ``existingAntiAffinityCounts``: for each existing pod's required anti-affinity term that matches
  the incoming pod, the topology pair (key, the existing pod's node's value) is taken;
- ``affinityCounts``: existing pods matching *all* the incoming pod's affinity terms, per term's
  topology pair;
- ``antiAffinityCounts``: existing pods matching each of its anti-affinity terms, per topology pair;

and Filter rejects a node in this order: it has a taken pair -- "node(s) didn't satisfy existing
pods anti-affinity rules"; it lacks a term's topology key or a pair with matching pods -- "node(s)
didn't match pod affinity rules" (UnschedulableAndUnresolvable), except that when no pod matches
anywhere and the pod matches its own terms, any node with the keys will do (the first pod of a
group); it has a pair with pods matching an anti-affinity term -- "node(s) didn't match pod
anti-affinity rules".

A term selects pods by ``labelSelector`` (nil selects none) in ``namespaces`` and the namespaces
``namespaceSelector`` selects (``{}``: all); with neither, the pod's own namespace.
``matchLabelKeys`` / ``mismatchLabelKeys`` add ``key in (value)`` / ``key notin (value)`` with the
pod's own label values (upstream's API server does that at creation).

Instead of scanning every pod per attempt, ``PodIndex`` keeps, per distinct group of terms, how many
bound pods on each node match it, updated as pods are bound and removed (registered on first use
with one scan of the pods of the namespaces concerned).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import orjson

from ...selectors import NOTHING, LabelSelector, SelectorError, label_selector_from_dict
from ...store import Obj, ObjKey
from .nodes import NodeInfo

REASON_EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI = "node(s) didn't match pod anti-affinity rules"

#: Bound on registered term groups; rebuilt on demand.
_MAX_GROUPS = 1024

NamespaceLabels = Callable[[str], Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class Term:
    topology_key: str
    selector: LabelSelector
    namespaces: frozenset[str]
    ns_selector: LabelSelector | None  # None: no namespaceSelector
    key: bytes  # identity (same key, same matching)

    def matches(self, ns: str, labels: Mapping[str, str], ns_labels: NamespaceLabels) -> bool:
        if ns not in self.namespaces and (
            self.ns_selector is None or not self.ns_selector.matches(ns_labels(ns))
        ):
            return False
        return self.selector.matches(labels)


def _selector(
    raw: Obj | None, labels: Mapping[str, str], match: list[str], mismatch: list[str]
) -> LabelSelector:
    if raw is None:
        return NOTHING
    exprs = list(raw.get("matchExpressions") or [])
    for key in match:
        if key in labels:
            exprs.append({"key": key, "operator": "In", "values": [labels[key]]})
    for key in mismatch:
        if key in labels:
            exprs.append({"key": key, "operator": "NotIn", "values": [labels[key]]})
    try:
        return label_selector_from_dict({**raw, "matchExpressions": exprs})
    except SelectorError:
        return NOTHING


def parse_terms(raw_terms: Iterable[Obj], ns: str, labels: Mapping[str, str]) -> tuple[Term, ...]:
    """A pod's required (anti-)affinity terms, as upstream's ``framework.AffinityTerm``."""
    out = []
    for raw in raw_terms:
        match = [str(k) for k in raw.get("matchLabelKeys") or []]
        mismatch = [str(k) for k in raw.get("mismatchLabelKeys") or []]
        selector = _selector(raw.get("labelSelector"), labels, match, mismatch)
        namespaces = frozenset(str(n) for n in raw.get("namespaces") or [])
        raw_ns_sel = raw.get("namespaceSelector")
        ns_selector = None
        if raw_ns_sel is not None:
            try:
                ns_selector = label_selector_from_dict(raw_ns_sel)
            except SelectorError:
                ns_selector = NOTHING
        if not namespaces and raw_ns_sel is None:
            namespaces = frozenset([ns])
        key = orjson.dumps(
            [
                raw.get("topologyKey", ""),
                str(selector),
                sorted(namespaces),
                None if ns_selector is None else str(ns_selector),
            ]
        )
        out.append(Term(str(raw.get("topologyKey", "")), selector, namespaces, ns_selector, key))
    return tuple(out)


def required_terms(spec: Obj, kind: str) -> list[Obj]:
    """``podAffinity`` or ``podAntiAffinity`` required terms of a pod spec."""
    section = (spec.get("affinity") or {}).get(kind) or {}
    return list(section.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


@dataclass(slots=True)
class _Group:
    """Bound pods matching all of ``terms``, per node name."""

    terms: tuple[Term, ...]
    per_node: Counter[str] = field(default_factory=Counter)

    def matches(self, ns: str, labels: Mapping[str, str], ns_labels: NamespaceLabels) -> bool:
        return all(t.matches(ns, labels, ns_labels) for t in self.terms)


@dataclass(slots=True)
class _Bound:
    node: str
    ns: str
    labels: dict[str, str]
    anti: tuple[Term, ...]


class PodIndex:
    """Bound pods by namespace, per-node counts of registered term groups, existing anti-affinity."""

    def __init__(self, ns_labels: NamespaceLabels) -> None:
        self.ns_labels = ns_labels
        self._bound: dict[ObjKey, _Bound] = {}
        self._by_ns: dict[str, set[ObjKey]] = {}
        self._groups: dict[bytes, _Group] = {}
        #: Existing pods' anti-affinity terms: term key -> (term, pods with it per node).
        self._anti: dict[bytes, tuple[Term, Counter[str]]] = {}

    def add(self, key: ObjKey, node: str, ns: str, labels: dict[str, str], anti: tuple[Term, ...]) -> None:
        self._bound[key] = b = _Bound(node, ns, labels, anti)
        self._by_ns.setdefault(ns, set()).add(key)
        for g in self._groups.values():
            if g.matches(ns, labels, self.ns_labels):
                g.per_node[node] += 1
        for t in anti:
            self._anti.setdefault(t.key, (t, Counter()))[1][b.node] += 1

    def remove(self, key: ObjKey) -> None:
        b = self._bound.pop(key, None)
        if b is None:
            return
        keys = self._by_ns.get(b.ns)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_ns[b.ns]
        for g in self._groups.values():
            if g.per_node[b.node] and g.matches(b.ns, b.labels, self.ns_labels):
                _decrement(g.per_node, b.node)
        for t in b.anti:
            entry = self._anti.get(t.key)
            if entry is not None:
                _decrement(entry[1], b.node)
                if not entry[1]:
                    del self._anti[t.key]

    def per_node(self, terms: tuple[Term, ...]) -> Counter[str]:
        """Bound pods matching all ``terms``, per node (registered and kept up to date from now on)."""
        gkey = b"|".join(t.key for t in terms)
        g = self._groups.get(gkey)
        if g is None:
            if len(self._groups) >= _MAX_GROUPS:
                self._groups.clear()
            g = self._groups[gkey] = _Group(terms)
            for ns in self._namespaces(terms):
                for key in self._by_ns.get(ns, ()):
                    b = self._bound[key]
                    if g.matches(b.ns, b.labels, self.ns_labels):
                        g.per_node[b.node] += 1
        return g.per_node

    def _namespaces(self, terms: tuple[Term, ...]) -> Iterable[str]:
        if any(t.ns_selector is not None for t in terms):
            return list(self._by_ns)
        common = frozenset.intersection(*(t.namespaces for t in terms))
        return [ns for ns in common if ns in self._by_ns]

    def existing_anti(self, ns: str, labels: Mapping[str, str]) -> list[tuple[str, Counter[str]]]:
        """(topology key, nodes with pods whose anti-affinity term matches this pod)."""
        return [
            (t.topology_key, nodes)
            for t, nodes in self._anti.values()
            if t.matches(ns, labels, self.ns_labels)
        ]

    @property
    def has_existing_anti(self) -> bool:
        return bool(self._anti)


def _decrement(counter: Counter[str], key: str) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


def _values(nodes: Mapping[str, NodeInfo], per_node: Mapping[str, int], topology_key: str) -> set[str]:
    out = set()
    for name, count in per_node.items():
        n = nodes.get(name)
        if count > 0 and n is not None and topology_key in n.labels:
            out.add(n.labels[topology_key])
    return out


@dataclass(slots=True)
class InterPodState:
    """One pod's PreFilter state: the topology pairs each check needs, as sets of values per key."""

    taken: list[tuple[str, set[str]]]  # existing pods' anti-affinity
    affinity: list[tuple[str, set[str]]]
    any_affinity_match: bool
    self_match: bool
    anti: list[tuple[str, set[str]]]

    def reason(self, n: NodeInfo) -> str | None:
        """Filter for one node: the failure's reason, or None."""
        labels = n.labels
        for key, values in self.taken:
            if labels.get(key) in values:
                return REASON_EXISTING_ANTI
        if self.affinity:
            if any(key not in labels for key, _ in self.affinity):
                return REASON_AFFINITY
            if not all(labels[key] in values for key, values in self.affinity) and (
                self.any_affinity_match or not self.self_match
            ):
                return REASON_AFFINITY
        for key, values in self.anti:
            if key in labels and labels[key] in values:
                return REASON_ANTI
        return None


def pre_filter(
    index: PodIndex,
    nodes: Mapping[str, NodeInfo],
    ns: str,
    labels: Mapping[str, str],
    affinity: tuple[Term, ...],
    anti: tuple[Term, ...],
) -> InterPodState | None:
    """The state for a pod, or None when the plugin has nothing to check for it."""
    taken = [(key, _values(nodes, per_node, key)) for key, per_node in index.existing_anti(ns, labels)]
    taken = [(k, v) for k, v in taken if v]
    if not taken and not affinity and not anti:
        return None
    aff: list[tuple[str, set[str]]] = []
    any_match = False
    if affinity:
        per_node = index.per_node(affinity)
        any_match = any(
            count > 0 and n is not None and any(t.topology_key in n.labels for t in affinity)
            for name, count in per_node.items()
            for n in (nodes.get(name),)
        )
        aff = [(t.topology_key, _values(nodes, per_node, t.topology_key)) for t in affinity]
    self_match = all(t.matches(ns, labels, index.ns_labels) for t in affinity)
    anti_values = [(t.topology_key, _values(nodes, index.per_node((t,)), t.topology_key)) for t in anti]
    return InterPodState(taken, aff, any_match, self_match, [(k, v) for k, v in anti_values if v])
