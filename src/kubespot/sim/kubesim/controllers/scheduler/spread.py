"""PodTopologySpread: ``topologySpreadConstraints`` as a filter (DoNotSchedule) and a score
(ScheduleAnyway), after upstream's pkg/scheduler/framework/plugins/podtopologyspread.

Constraints (common.go ``filterTopologySpreadConstraints``): the selector is ``labelSelector`` (nil
selects none) plus ``key in (own value)`` for each ``matchLabelKeys`` key the pod has; minDomains
defaults to 1, nodeAffinityPolicy to Honor, nodeTaintsPolicy to Ignore. Pods counted are the
non-terminating pods of the pod's namespace that the selector matches, on nodes that have every
topology key of the constraints and pass the inclusion policies (the pod's node selector and
required node affinity when Honor; its tolerations of NoSchedule/NoExecute taints when Honor).

Filter (filtering.go): a node without the topology key fails "node(s) didn't match pod topology
spread constraints (missing required label)" (UnschedulableAndUnresolvable); otherwise, with
``min`` the smallest count over the domains (0 when there are fewer domains than minDomains), the
node fails "node(s) didn't match pod topology spread constraints" when its domain's count, plus 1
if the pod matches the selector itself, minus ``min`` exceeds maxSkew.

Score (scoring.go): for each ScheduleAnyway constraint, a node's domain count (for
``kubernetes.io/hostname`` the node's own count) times log(domains + 2), plus maxSkew - 1; summed,
rounded, and normalized over the candidate nodes as ``100 * (max + min - score) / max`` (nodes
without a key get 0). A pod with no constraints at all gets the system defaults
(``defaultingType: System``, the 1.32 default): zone maxSkew 5 and hostname maxSkew 3,
ScheduleAnyway, with the selector of the Services, ReplicaSets and StatefulSets that select it
(``helper.DefaultSelector``), when there is one.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import orjson

from ...selectors import NOTHING, LabelSelector, SelectorError, label_selector_from_dict
from ...store import Obj
from .nodes import NodeInfo, first_untolerated, matches_node_affinity
from .podindex import PodIndex, Term

REASON_SKEW = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL = REASON_SKEW + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
#: PodTopologySpread's weight in the default scheduler profile (NodeResourcesFit's is 1).
SCORE_WEIGHT = 2


@dataclass(frozen=True, slots=True)
class Constraint:
    max_skew: int
    topology_key: str
    hard: bool  # DoNotSchedule
    selector: LabelSelector
    min_domains: int
    honor_affinity: bool
    honor_taints: bool
    term: Term  # the pods it counts, for the index


def _term(ns: str, selector: LabelSelector) -> Term:
    return Term("", selector, frozenset([ns]), None, orjson.dumps(["spread", ns, str(selector)]))


def parse_constraints(raw_list: list[Obj], ns: str, labels: Mapping[str, str]) -> tuple[Constraint, ...]:
    out = []
    for raw in raw_list:
        raw_sel = raw.get("labelSelector")
        selector = NOTHING
        if raw_sel is not None:
            exprs = list(raw_sel.get("matchExpressions") or [])
            for key in raw.get("matchLabelKeys") or []:
                if key in labels:
                    exprs.append({"key": key, "operator": "In", "values": [labels[key]]})
            try:
                selector = label_selector_from_dict({**raw_sel, "matchExpressions": exprs})
            except SelectorError:
                selector = NOTHING
        out.append(
            Constraint(
                max_skew=int(raw.get("maxSkew") or 1),
                topology_key=str(raw.get("topologyKey", "")),
                hard=raw.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule",
                selector=selector,
                min_domains=int(raw.get("minDomains") or 1),
                honor_affinity=(raw.get("nodeAffinityPolicy") or "Honor") == "Honor",
                honor_taints=(raw.get("nodeTaintsPolicy") or "Ignore") == "Honor",
                term=_term(ns, selector),
            )
        )
    return tuple(out)


def default_selector(
    services: Iterable[Obj], controller: Obj | None, labels: Mapping[str, str]
) -> LabelSelector:
    """``helper.DefaultSelector`` (pkg/scheduler/framework/plugins/helper/spread.go): the selectors of
    the Services that select the pod, and of its controlling ReplicaSet or StatefulSet."""
    merged: dict[str, str] = {}
    for svc in services:
        sel = (svc.get("spec") or {}).get("selector")
        if sel is not None and all(labels.get(k) == v for k, v in sel.items()):
            merged.update(sel)
    reqs = list(label_selector_from_dict({"matchLabels": merged}).requirements) if merged else []
    if controller is not None:
        with contextlib.suppress(SelectorError):
            reqs += label_selector_from_dict((controller.get("spec") or {}).get("selector")).requirements
    return LabelSelector(tuple(reqs))


def default_constraints(ns: str, selector: LabelSelector | None) -> tuple[Constraint, ...]:
    """The system default constraints (``systemDefaultConstraints`` in plugin.go) for a selector."""
    if selector is None or selector.is_empty():
        return ()
    term = _term(ns, selector)
    return (
        Constraint(3, HOSTNAME, False, selector, 1, True, False, term),
        Constraint(5, ZONE, False, selector, 1, True, False, term),
    )


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What inclusion policies look at: the pod's node selector, required terms and tolerations."""

    node_selector: dict[str, str]
    terms: list[Obj] | None
    tolerations: list[Obj]
    key: bytes  # identity for the eligibility cache


def _included(c: Constraint, n: NodeInfo, pod: PodFacts) -> bool:
    if c.honor_affinity and not matches_node_affinity(pod.node_selector, pod.terms, n.name, n.labels):
        return False
    return not (c.honor_taints and n.taints and first_untolerated(n.taints, pod.tolerations) is not None)


@dataclass(slots=True)
class EligibleCache:
    """Per (pod facts, constraint set): which nodes count and each constraint's domains, rebuilt when
    the node set's version moves."""

    entries: dict[bytes, tuple[int, list[set[str]], list[set[str]]]] = field(default_factory=dict)

    def get(
        self, nodes: Mapping[str, NodeInfo], version: int, pod: PodFacts, cs: tuple[Constraint, ...]
    ) -> tuple[list[set[str]], list[set[str]]]:
        """(names of the nodes each constraint counts, the domains among them)."""
        key = pod.key + orjson.dumps([[c.topology_key, c.honor_affinity, c.honor_taints] for c in cs])
        hit = self.entries.get(key)
        if hit is not None and hit[0] == version:
            return hit[1], hit[2]
        if len(self.entries) >= 1024:
            self.entries.clear()
        keys = [c.topology_key for c in cs]
        names: list[set[str]] = [set() for _ in cs]
        domains: list[set[str]] = [set() for _ in cs]
        for n in nodes.values():
            if not all(k in n.labels for k in keys):
                continue
            for i, c in enumerate(cs):
                if _included(c, n, pod):
                    names[i].add(n.name)
                    domains[i].add(n.labels[c.topology_key])
        self.entries[key] = (version, names, domains)
        return names, domains


def _domain_counts(
    index: PodIndex, nodes: Mapping[str, NodeInfo], c: Constraint, names: set[str]
) -> Counter[str]:
    counts: Counter[str] = Counter()
    for name, count in index.per_node((c.term,), live_only=True).items():
        if count > 0 and name in names:
            counts[nodes[name].labels[c.topology_key]] += count
    return counts


@dataclass(slots=True)
class SpreadFilter:
    """Per constraint, its topology key and the domains over maxSkew: count + self - min only
    exceeds maxSkew (>= 1) where the count is positive, so every other value passes."""

    skewed: list[tuple[str, set[str]]]

    def reason(self, n: NodeInfo) -> str | None:
        labels = n.labels
        for key, skewed in self.skewed:
            value = labels.get(key)
            if value is None:
                return REASON_MISSING_LABEL
            if value in skewed:
                return REASON_SKEW
        return None


def pre_filter(
    index: PodIndex,
    nodes: Mapping[str, NodeInfo],
    version: int,
    cache: EligibleCache,
    pod: PodFacts,
    labels: Mapping[str, str],
    constraints: tuple[Constraint, ...],
) -> SpreadFilter | None:
    hard = tuple(c for c in constraints if c.hard)
    if not hard:
        return None
    names, domains = cache.get(nodes, version, pod, hard)
    counts = [_domain_counts(index, nodes, c, names[i]) for i, c in enumerate(hard)]
    mins = []
    for i, c in enumerate(hard):
        if len(domains[i]) < c.min_domains or len(counts[i]) < len(domains[i]):
            mins.append(0)  # too few domains, or one without matching pods
        else:
            mins.append(min(counts[i].values()))
    skewed = []
    for i, c in enumerate(hard):
        own = int(c.selector.matches(labels))
        skewed.append((c.topology_key, {v for v, n in counts[i].items() if n + own - mins[i] > c.max_skew}))
    return SpreadFilter(skewed)


def scores(
    index: PodIndex,
    nodes: Mapping[str, NodeInfo],
    version: int,
    cache: EligibleCache,
    pod: PodFacts,
    constraints: tuple[Constraint, ...],
    candidates: list[NodeInfo],
    *,
    system: bool = False,
) -> list[int] | None:
    """Normalized scores (0-100) of ``candidates``, or None without ScheduleAnyway constraints.

    ``system``: the constraints are the system defaults, so a node lacking a topology key is still
    scored (on the constraints whose key it has), as upstream's ``requireAllTopologies`` is false.
    """
    soft = tuple(c for c in constraints if not c.hard)
    if not soft:
        return None
    keys = [c.topology_key for c in soft]
    if system:
        scored = candidates
    elif len(keys) == 1:
        scored = [n for n in candidates if keys[0] in n.labels]
    else:
        scored = [n for n in candidates if all(k in n.labels for k in keys)]
    names, _ = cache.get(nodes, version, pod, soft)
    # Per constraint: its key, log(domains + 2), maxSkew - 1, and the count of a node's domain (for
    # the hostname key, the node's own pods: upstream counts those in Score).
    terms: list[tuple[str, float, int, Mapping[str, int], bool]] = []
    for i, c in enumerate(soft):
        if c.topology_key == HOSTNAME:
            per_host = index.per_node((c.term,), live_only=True)
            terms.append((c.topology_key, math.log(len(scored) + 2), c.max_skew - 1, per_host, True))
            continue
        present = {n.labels.get(c.topology_key, "") for n in scored}
        domains = _domain_counts(index, nodes, c, names[i])
        terms.append((c.topology_key, math.log(len(present) + 2), c.max_skew - 1, domains, False))
    raw: dict[str, int] = {}
    for n in scored:
        labels, total = n.labels, 0.0
        for key, weight, extra, counts, by_node in terms:
            value = labels.get(key)
            if value is not None:
                total += counts.get(n.name if by_node else value, 0) * weight + extra
        raw[n.name] = math.floor(total + 0.5)  # Go's math.Round: halves away from zero
    if not raw:
        return [0] * len(candidates)
    hi, lo = max(raw.values()), min(raw.values())
    out = []
    for n in candidates:
        score = raw.get(n.name)
        out.append(0 if score is None else 100 if hi == 0 else 100 * (hi + lo - score) // hi)
    return out
