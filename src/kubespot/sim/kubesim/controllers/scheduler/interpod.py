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

Instead of scanning every pod per attempt, the counts come from ``podindex.PodIndex``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import orjson

from ...selectors import NOTHING, LabelSelector, SelectorError, label_selector_from_dict
from ...store import Obj
from .nodes import NodeInfo
from .podindex import PodIndex, Term

REASON_EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI = "node(s) didn't match pod anti-affinity rules"


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

    def excluded(self) -> list[tuple[str, set[str]]] | None:
        """Without affinity terms the plugin only excludes topology domains: (key, values) of them;
        None when it must be asked per node."""
        return None if self.affinity else self.taken + self.anti

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
    existing: list[tuple[str, Counter[str]]] | None = None,
) -> InterPodState | None:
    """The state for a pod, or None when the plugin has nothing to check for it. ``existing``: the
    result of ``index.existing_anti`` for the pod, if the caller keeps it."""
    if existing is None:
        existing = index.existing_anti(ns, labels)
    taken = [(key, _values(nodes, per_node, key)) for key, per_node in existing]
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
