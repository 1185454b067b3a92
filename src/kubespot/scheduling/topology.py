"""Topology rules of a pod and the counts they are checked against: spread constraints, pod
affinity and anti-affinity, and Karpenter's preference relaxation.

Semantics (Karpenter ``pkg/controllers/provisioning/scheduling``: ``topology.go``,
``topologygroup.go``, ``preferences.go``; kube-scheduler's ``podtopologyspread`` and
``interpodaffinity`` plugins for the API's meaning):

- A spread constraint counts the pods its selector matches in the pod's namespace, per domain of its
  key; a pod may go to a domain when that domain's count (plus one if the pod matches itself) minus
  the smallest count over the domains the pod may use is at most ``maxSkew``. The smallest count is
  0 on ``kubernetes.io/hostname`` (a new node is always a new, empty domain) and when fewer than
  ``minDomains`` domains exist. ``matchLabelKeys`` add the pod's own values to the selector.
- Pod affinity: the domains where a matching pod runs; a pod matching its own term may start a
  domain when none runs yet. Anti-affinity: the domains where none runs.
- Preferences (preferred terms, ``ScheduleAnyway`` spreads) act as required until relaxed, one step
  at a time in ``preferences.go``'s order (``relax``).

Pure: dicts and values in, values out; the simulation owns where pods go.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .labels import HOSTNAME

Obj = Mapping[str, Any]
Labels = Mapping[str, str]
#: As many as anyone could place: no cap.
UNLIMITED = 1 << 30


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector``: every ``matchLabels`` pair and every expression must hold."""

    match_labels: tuple[tuple[str, str], ...] = ()
    #: (key, operator, values) with operator In, NotIn, Exists or DoesNotExist.
    expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    @classmethod
    def of(cls, obj: Obj | None, extra: Iterable[tuple[str, str]] = ()) -> LabelSelector | None:
        """None for an absent selector (it matches nothing, as the API's nil selector)."""
        if obj is None:
            return None
        pairs = {**{str(k): str(v) for k, v in (obj.get("matchLabels") or {}).items()}, **dict(extra)}
        exprs = tuple(
            sorted(
                (str(e["key"]), str(e["operator"]), tuple(sorted(str(v) for v in e.get("values") or ())))
                for e in obj.get("matchExpressions") or ()
            )
        )
        return cls(tuple(sorted(pairs.items())), exprs)

    def matches(self, labels: Labels) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        for key, op, values in self.expressions:
            present = key in labels
            if op == "In" and not (present and labels[key] in values):
                return False
            if op == "NotIn" and present and labels[key] in values:
                return False
            if op == "Exists" and not present:
                return False
            if op == "DoesNotExist" and present:
                return False
        return True

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in self.match_labels]
        parts += [f"{k} {op} ({','.join(v)})" if v else f"{k} {op}" for k, op, v in self.expressions]
        return ",".join(parts) or "everything"


#: The label the API server puts on every Namespace: its own name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True, slots=True)
class Scope:
    """Which pods a term counts: its selector over the namespaces it names or selects."""

    selector: LabelSelector | None
    namespaces: frozenset[str]
    #: Namespaces by their labels (``namespaceSelector``); with ``namespaces``, either may match.
    namespace_selector: LabelSelector | None = None

    def selects(self, namespace: str, labels: Labels, namespace_labels: Mapping[str, Labels]) -> bool:
        if self.selector is None:
            return False
        in_scope = namespace in self.namespaces or (
            self.namespace_selector is not None
            and self.namespace_selector.matches(
                # The API server sets this label on every Namespace (immutable since v1.22), so it
                # holds even when the Namespace objects were not read (``plan --no-cluster``).
                {**(namespace_labels.get(namespace) or {}), NAMESPACE_NAME_LABEL: namespace}
            )
        )
        return in_scope and self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class Spread:
    """One topology spread constraint (``whenUnsatisfiable: ScheduleAnyway`` is ``hard=False``)."""

    key: str
    max_skew: int
    scope: Scope
    hard: bool = True
    min_domains: int | None = None
    #: ``Honor``: only the domains the pod's node affinity allows count (the API's default).
    honor_node_affinity: bool = True
    #: ``Ignore`` (the default): tainted nodes' domains count too; kept for the group key only.
    honor_node_taints: bool = False

    def describe(self) -> str:
        return f"topology spread on {self.key} would exceed maxSkew {self.max_skew}"


@dataclass(frozen=True, slots=True)
class PodTerm:
    """One pod affinity or anti-affinity term (``weight`` 0: required)."""

    key: str
    scope: Scope
    anti: bool
    weight: int = 0

    def describe(self) -> str:
        kind = "pod anti-affinity" if self.anti else "pod affinity"
        where = "no domain without" if self.anti else "no domain with"
        return f"{kind} on {self.key}: {where} a pod matching {self.scope.selector}"


@dataclass(frozen=True, slots=True)
class PodTopology:
    """A pod's topology rules as they stand (preferences included until relaxed)."""

    spreads: tuple[Spread, ...] = ()
    terms: tuple[PodTerm, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.spreads or self.terms)

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(s.key for s in self.spreads) | frozenset(t.key for t in self.terms)

    @property
    def required(self) -> PodTopology:
        """The rules kube-scheduler's Filter reads: ``DoNotSchedule`` spreads and required terms
        (``podtopologyspread/filtering.go``, ``interpodaffinity/filtering.go``); the others only
        score, so they do not keep a pod off an existing node."""
        if all(s.hard for s in self.spreads) and not any(t.weight for t in self.terms):
            return self
        return PodTopology(
            tuple(s for s in self.spreads if s.hard), tuple(t for t in self.terms if not t.weight)
        )


NO_TOPOLOGY = PodTopology()


def _scope(term: Obj, namespace: str, labels: Labels, match_label_keys: Iterable[str] = ()) -> Scope:
    extra = [(k, labels[k]) for k in match_label_keys if k in labels]
    selector = LabelSelector.of(term.get("labelSelector"), extra)
    names = frozenset(str(n) for n in term.get("namespaces") or ())
    ns_selector = LabelSelector.of(term.get("namespaceSelector"))
    if not names and ns_selector is None:
        names = frozenset({namespace})  # neither given: the pod's own namespace
    return Scope(selector, names, ns_selector)


def pod_topology(spec: Obj, namespace: str, labels: Labels) -> PodTopology:
    """The spread constraints and pod (anti-)affinity terms of a pod with ``spec``."""
    spreads = []
    for c in spec.get("topologySpreadConstraints") or ():
        min_domains = c.get("minDomains")
        spreads.append(
            Spread(
                key=str(c.get("topologyKey") or ""),
                max_skew=int(c.get("maxSkew") or 1),
                scope=_scope(c, namespace, labels, c.get("matchLabelKeys") or ()),
                hard=c.get("whenUnsatisfiable", "DoNotSchedule") != "ScheduleAnyway",
                min_domains=int(min_domains) if min_domains is not None else None,
                honor_node_affinity=c.get("nodeAffinityPolicy", "Honor") == "Honor",
                honor_node_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor",
            )
        )
    terms = []
    affinity = spec.get("affinity") or {}
    for kind, anti in (("podAffinity", False), ("podAntiAffinity", True)):
        block = affinity.get(kind) or {}
        for t in block.get("requiredDuringSchedulingIgnoredDuringExecution") or ():
            terms.append(PodTerm(str(t.get("topologyKey") or ""), _scope(t, namespace, labels), anti))
        for w in block.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
            t = w.get("podAffinityTerm") or {}
            terms.append(
                PodTerm(
                    str(t.get("topologyKey") or ""),
                    _scope(t, namespace, labels),
                    anti,
                    int(w.get("weight") or 1),
                )
            )
    return PodTopology(tuple(spreads), tuple(terms))


def required_anti_terms(spec: Obj, namespace: str, labels: Labels) -> list[tuple[str, Scope]]:
    """A bound pod's required anti-affinity terms as (key, scope): what keeps the pods they select
    out of its domain (kube-scheduler ``interpodaffinity`` satisfyExistingPodsAntiAffinity)."""
    return [(t.key, t.scope) for t in pod_topology(spec, namespace, labels).terms if t.anti and not t.weight]


# -- preference relaxation (preferences.go ``Relax``): one step per failed attempt


def _drop_heaviest(items: list[Any]) -> None:
    heaviest = max(range(len(items)), key=lambda i: (int(items[i].get("weight") or 0), -i))
    del items[heaviest]


def relax(spec: Obj, *, tolerate_prefer_no_schedule: bool) -> tuple[dict[str, Any], str] | None:
    """The pod's spec with one preference less, and what was dropped; None when nothing is left.

    Order (Karpenter ``preferences.go``): a required node-affinity term when several are ORed, the
    heaviest preferred pod-affinity term, the heaviest preferred anti-affinity term, the heaviest
    preferred node-affinity term, a ``ScheduleAnyway`` spread constraint, then (when a NodePool has
    such taints) a toleration of every ``PreferNoSchedule`` taint.
    """
    out: dict[str, Any] = copy.deepcopy(dict(spec))
    affinity = out.get("affinity") or {}
    node = affinity.get("nodeAffinity") or {}
    required = (node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms"
    ) or []
    if len(required) > 1:
        del required[0]
        return out, "dropped a required node affinity term"
    for kind, what in (("podAffinity", "pod affinity"), ("podAntiAffinity", "pod anti-affinity")):
        preferred = (affinity.get(kind) or {}).get("preferredDuringSchedulingIgnoredDuringExecution") or []
        if preferred:
            _drop_heaviest(preferred)
            return out, f"dropped the heaviest preferred {what} term"
    preferred = node.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    if preferred:
        _drop_heaviest(preferred)
        return out, "dropped the heaviest preferred node affinity term"
    spreads = out.get("topologySpreadConstraints") or []
    for i, c in enumerate(spreads):
        if c.get("whenUnsatisfiable") == "ScheduleAnyway":
            del spreads[i]
            return out, f"dropped the ScheduleAnyway topology spread on {c.get('topologyKey')}"
    # ``tolerations: null`` (an empty YAML key) is a valid pod spec: start a fresh list then.
    tolerations = out.get("tolerations") or []
    out["tolerations"] = tolerations
    wildcard = {"operator": "Exists", "effect": "PreferNoSchedule"}
    if tolerate_prefer_no_schedule and wildcard not in tolerations:
        tolerations.append(wildcard)
        return out, "tolerated PreferNoSchedule taints"
    return None


# -- spread arithmetic


def min_count(spread: Spread, counts: Mapping[str, int], domains: Iterable[str]) -> int:
    """The smallest count the skew is measured from (``topologygroup.go`` ``domainMinCount``)."""
    if spread.key == HOSTNAME:
        return 0
    values = [counts.get(d, 0) for d in domains]
    if not values or (spread.min_domains is not None and len(values) < spread.min_domains):
        return 0
    return min(values)


def spread_quotas(
    spread: Spread,
    counts: Mapping[str, int],
    domains: Iterable[str],
    blocked: Iterable[str],
    pods: int,
    *,
    self_selecting: bool = True,
) -> dict[str, int]:
    """How many of ``pods`` each domain takes, placed one at a time into the domain with the fewest
    (``nextDomainTopologySpread``: the min-count domain within the skew), without a loop per pod.

    ``blocked`` domains take no more (no capacity there) but still hold the minimum down.
    """
    eligible = sorted(set(domains))
    shut = set(blocked)
    open_ = [d for d in eligible if d not in shut]
    if not open_ or pods <= 0:
        return {}
    if not self_selecting:
        # Placing them changes no count: every domain within the skew takes them all.
        low = min_count(spread, counts, eligible)
        fits = [d for d in open_ if counts.get(d, 0) - low <= spread.max_skew]
        return {fits[0]: pods} if fits else {}
    # The minimum cannot rise above a blocked domain's count, nor above 0 when it is pinned there.
    pinned = spread.key == HOSTNAME or (spread.min_domains is not None and len(eligible) < spread.min_domains)
    ceiling = UNLIMITED
    if pinned:
        ceiling = spread.max_skew
    elif shut & set(eligible):
        ceiling = min(counts.get(d, 0) for d in eligible if d in shut) + spread.max_skew
    level = {d: counts.get(d, 0) for d in open_}
    quotas = dict.fromkeys(open_, 0)
    left = pods
    while left > 0:
        lowest = min(level.values())
        if lowest + 1 > ceiling:
            break
        at = sorted(d for d in open_ if level[d] == lowest)
        above = [v for v in level.values() if v > lowest]
        # Raise every lowest domain together up to the next level (or the ceiling), a round each.
        rise = min((min(above) if above else UNLIMITED), ceiling) - lowest
        rounds = min(rise, left // len(at)) if left >= len(at) else 0
        if rounds == 0:
            for d in at[:left]:
                quotas[d] += 1
            break
        for d in at:
            quotas[d] += rounds
            level[d] += rounds
        left -= rounds * len(at)
    return {d: n for d, n in quotas.items() if n > 0}


# -- counts of placed pods per domain


@dataclass
class Tally:
    """Pods one scope selects, per domain of one key (anti-affinity: every domain a pod might be in)."""

    key: str
    scope: Scope
    counts: dict[str, int] = field(default_factory=dict)
    total: int = 0
    #: Whether ``scope`` selects a (namespace, sorted labels): placements recur in few label sets.
    selected: dict[tuple[str, tuple[tuple[str, str], ...]], bool] = field(
        default_factory=dict, repr=False, compare=False
    )

    def add(self, domains: Iterable[str], n: int) -> None:
        for d in domains:
            self.counts[d] = self.counts.get(d, 0) + n
        self.total += n


class Tallies:
    """Every tally the pending pods' rules read, kept current as pods are placed."""

    def __init__(self, namespace_labels: Mapping[str, Labels] | None = None) -> None:
        self.namespace_labels = dict(namespace_labels or {})
        self._by_id: dict[tuple[str, Scope, bool], Tally] = {}
        #: Placed pods per label set, to start tallies created late and to answer ``selects``.
        #: (namespace, labels, domains, how many, where: the caller's note of the node).
        self._placed: list[tuple[str, Labels, dict[str, tuple[str, ...]], int, object]] = []
        self._selects: dict[tuple[Scope, str, tuple[tuple[str, str], ...]], bool] = {}

    def selects(self, scope: Scope, namespace: str, labels: Labels) -> bool:
        key = (scope, namespace, tuple(sorted(labels.items())))
        hit = self._selects.get(key)
        if hit is None:
            hit = self._selects[key] = scope.selects(namespace, labels, self.namespace_labels)
        return hit

    def tally(self, key: str, scope: Scope, anti: bool) -> Tally:
        ident = (key, scope, anti)
        t = self._by_id.get(ident)
        if t is None:
            t = self._by_id[ident] = Tally(key, scope)
            for namespace, labels, domains, n, _ in self._placed:
                values = domains.get(key)
                if values and self.selects(scope, namespace, labels) and (anti or len(values) == 1):
                    t.add(values, n)
        return t

    def record(
        self,
        namespace: str,
        labels: Labels,
        domains: Mapping[str, tuple[str, ...]],
        n: int,
        where: object = None,
    ) -> None:
        """``n`` pods with ``labels`` placed where each key may take ``domains[key]`` (one value:
        known; several: a NodeClaim not narrowed yet, counted by anti-affinity only, as Karpenter's
        ``Topology.Record``)."""
        if n <= 0:
            return
        self._placed.append((namespace, labels, dict(domains), n, where))
        label_set = (namespace, tuple(sorted(labels.items())))
        for (key, scope, anti), t in self._by_id.items():
            values = domains.get(key)
            if not values or not (anti or len(values) == 1):
                continue
            selected = t.selected.get(label_set)
            if selected is None:
                selected = t.selected[label_set] = self.selects(scope, namespace, labels)
            if selected:
                t.add(values, n)

    @property
    def version(self) -> int:
        """Grows with every record (for callers caching what they derive from the counts)."""
        return len(self._placed)

    def counts_where(self, key: str, scope: Scope, accept: Callable[[object], bool]) -> dict[str, int]:
        """A spread's counts over the places ``accept`` keeps only (``nodeAffinityPolicy: Honor``:
        the nodes the incoming pod's node selector and required affinity match)."""
        out: dict[str, int] = {}
        for namespace, labels, domains, n, where in self._placed:
            values = domains.get(key)
            if values and len(values) == 1 and self.selects(scope, namespace, labels) and accept(where):
                out[values[0]] = out.get(values[0], 0) + n
        return out
