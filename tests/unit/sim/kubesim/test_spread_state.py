"""PodTopologySpread's constraints and PreFilter state (controllers/scheduler/spread.py), pure."""

from __future__ import annotations

from kubespot.sim.kubesim.controllers.scheduler.nodes import NodeInfo, Usage, node_info
from kubespot.sim.kubesim.controllers.scheduler.podindex import PodIndex
from kubespot.sim.kubesim.controllers.scheduler.spread import (
    REASON_SKEW,
    EligibleCache,
    PodFacts,
    parse_constraints,
    pre_filter,
)
from kubespot.sim.kubesim.testing import node

ZONE = "topology.kubernetes.io/zone"


def _nodes() -> dict[str, NodeInfo]:
    tainted = node("c1", labels={ZONE: "c"}, ready=True, taints=[{"key": "k", "effect": "NoSchedule"}])
    return {
        "a1": node_info(node("a1", labels={ZONE: "a"}, ready=True), Usage()),
        "b1": node_info(node("b1", labels={ZONE: "b"}, ready=True), Usage()),
        "c1": node_info(tainted, Usage()),
    }


def _constraint(**extra: object) -> dict[str, object]:
    return {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
        **extra,
    }


def test_match_label_keys_count_only_the_pods_own_revision() -> None:
    """pkg/scheduler/framework/plugins/podtopologyspread/common.go filterTopologySpreadConstraints:
    matchLabelKeys adds `key in (the pod's value)` to the selector, so the old revision's pods do
    not count; terminating pods never count (filtering.go countPodsMatchSelector)."""
    nodes, index = _nodes(), PodIndex(lambda ns: {})
    index.add(("default", "old-1"), "a1", "default", {"app": "web", "rev": "1"}, ())
    index.add(("default", "old-2"), "a1", "default", {"app": "web", "rev": "1"}, ())
    facts = PodFacts({}, None, [], b"")
    own = {"app": "web", "rev": "2"}
    plain = parse_constraints([_constraint()], "default", own)
    state = pre_filter(index, nodes, 1, EligibleCache(), facts, own, plain)
    assert state is not None and state.reason(nodes["a1"]) == REASON_SKEW
    by_rev = parse_constraints([_constraint(matchLabelKeys=["rev"])], "default", own)
    state = pre_filter(index, nodes, 1, EligibleCache(), facts, own, by_rev)
    assert state is not None and state.reason(nodes["a1"]) is None
    index.terminating(("default", "old-1"))
    index.terminating(("default", "old-2"))
    state = pre_filter(index, nodes, 2, EligibleCache(), facts, own, plain)
    assert state is not None and state.reason(nodes["a1"]) is None


def test_node_taints_policy_honor_drops_tainted_domains() -> None:
    """common.go matchNodeInclusionPolicies: with nodeTaintsPolicy Honor a node whose taints the pod
    does not tolerate is no domain, so the empty zone c no longer holds the minimum at 0."""
    nodes, index = _nodes(), PodIndex(lambda ns: {})
    index.add(("default", "w-a"), "a1", "default", {"app": "web"}, ())
    index.add(("default", "w-b"), "b1", "default", {"app": "web"}, ())
    facts = PodFacts({}, None, [], b"")
    labels = {"app": "web"}
    ignore = parse_constraints([_constraint()], "default", labels)
    state = pre_filter(index, nodes, 1, EligibleCache(), facts, labels, ignore)
    assert state is not None and state.reason(nodes["a1"]) == REASON_SKEW  # 1 + 1 - 0 > 1
    honor = parse_constraints([_constraint(nodeTaintsPolicy="Honor")], "default", labels)
    state = pre_filter(index, nodes, 1, EligibleCache(), facts, labels, honor)
    assert state is not None and state.reason(nodes["a1"]) is None  # 1 + 1 - 1 <= 1
