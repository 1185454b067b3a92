"""What the scheduler knows of a node: taints and tolerations, node affinity terms, allocatable.

Pure helpers shared by the scheduler's filters (and, for taints, by the taint manager in
``nodelifecycle.py``), plus ``NodeInfo``: one node's scheduling-relevant facts and the usage of the
pods bound to it (upstream's ``framework.NodeInfo``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from ...store import Obj
from .resources import Allocatable, allocatable_of

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT_KEY = "node.kubernetes.io/unreachable"

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
#: The status of nodes a PreFilterResult left out (schedule_one.go findNodesThatFitPod).
REASON_NOT_IN_PRE_FILTER = "node(s) didn't satisfy plugin(s) [NodeAffinity]"


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """Upstream's ``Toleration.ToleratesTaint``: empty effect/key match any; Exists ignores the value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    return op == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def first_untolerated(taints: Iterable[Obj], tolerations: list[Obj]) -> Obj | None:
    for taint in taints:
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_reason(taint: Obj) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


def ready_status(node: Obj) -> str | None:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status"))
    return None


def _match_expr(expr: Obj, values_of: dict[str, str]) -> bool:
    key = expr.get("key", "")
    op = expr.get("operator")
    values = expr.get("values") or []
    present = key in values_of
    value = values_of.get(key)
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            have, want = int(str(value)), int(str(values[0]))
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: Obj, name: str, labels: dict[str, str]) -> bool:
    """One nodeSelectorTerm; an empty term matches no node, as upstream."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    if not all(_match_expr(e, labels) for e in exprs):
        return False
    return all(f.get("key") == "metadata.name" and _match_expr(f, {"metadata.name": name}) for f in fields)


def required_node_terms(spec: Obj) -> list[Obj] | None:
    """The pod's required nodeSelectorTerms; None when it has no required node affinity."""
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return None if affinity is None else list(affinity.get("nodeSelectorTerms") or [])


def pre_filter_node_names(terms: list[Obj] | None) -> frozenset[str] | None:
    """NodeAffinity's PreFilterResult: when every required term names nodes (``matchFields``
    ``metadata.name`` ``In``, as a DaemonSet pod's does), only those nodes are filtered; None: all."""
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("operator") == "In":
                values = {str(v) for v in f.get("values") or []}
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None  # this term does not name nodes: the terms are ORed, so every node may do
        names |= term_names
    return frozenset(names)


def matches_node_affinity(
    selector: dict[str, str], terms: list[Obj] | None, name: str, labels: dict[str, str]
) -> bool:
    """NodeAffinity's filter: ``nodeSelector`` AND (any of the required terms)."""
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    return terms is None or any(term_matches(t, name, labels) for t in terms)


@dataclass(slots=True)
class Usage:
    """Requests and host ports of the non-terminal pods bound to one node name."""

    cpu: int = 0
    mem: int = 0
    eph: int = 0
    pods: int = 0
    nz_cpu: int = 0
    nz_mem: int = 0
    scalars: Counter[str] = field(default_factory=Counter)
    #: (protocol, host IP, host port) -> how many pods use it.
    ports: Counter[tuple[str, str, int]] = field(default_factory=Counter)


@dataclass(slots=True)
class NodeInfo:
    name: str
    labels: dict[str, str]
    taints: list[Obj]  # NoSchedule and NoExecute only, plus the synthetic not-ready taint
    unschedulable: bool
    alloc: Allocatable
    usage: Usage

    def same_shape(self, other: NodeInfo) -> bool:
        return (
            self.labels == other.labels
            and self.taints == other.taints
            and self.unschedulable == other.unschedulable
            and self.alloc == other.alloc
        )


def node_info(node: Obj, usage: Usage) -> NodeInfo:
    meta, spec = node["metadata"], node.get("spec") or {}
    taints = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
    ready = ready_status(node)
    if ready != "True":
        key = UNREACHABLE_TAINT_KEY if ready == "Unknown" else NOT_READY_TAINT_KEY
        if not any(t.get("key") == key and t.get("effect") == "NoSchedule" for t in taints):
            taints.append({"key": key, "effect": "NoSchedule"})
    return NodeInfo(
        name=meta["name"],
        labels=dict(meta.get("labels") or {}),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
        alloc=allocatable_of((node.get("status") or {}).get("allocatable") or {}),
        usage=usage,
    )


def static_reason(
    n: NodeInfo, tolerations: list[Obj], selector: dict[str, str], terms: list[Obj] | None
) -> str | None:
    """Filters 1-3 (NodeUnschedulable, TaintToleration, NodeAffinity) for one node: the first
    failure's reason, or None when the node passes them."""
    if n.unschedulable and not any(tolerates(t, UNSCHEDULABLE_TAINT) for t in tolerations):
        return REASON_UNSCHEDULABLE
    taint = first_untolerated(n.taints, tolerations) if n.taints else None
    if taint is not None:
        return taint_reason(taint)
    if not matches_node_affinity(selector, terms, n.name, n.labels):
        return REASON_AFFINITY
    return None
