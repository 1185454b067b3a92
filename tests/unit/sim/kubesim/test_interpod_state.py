"""The InterPodAffinity index and PreFilter state (controllers/scheduler/interpod.py), pure."""

from __future__ import annotations

from kubespot.sim.kubesim.controllers.scheduler.interpod import (
    REASON_AFFINITY,
    REASON_EXISTING_ANTI,
    parse_terms,
    pre_filter,
)
from kubespot.sim.kubesim.controllers.scheduler.nodes import NodeInfo, Usage, node_info
from kubespot.sim.kubesim.controllers.scheduler.podindex import PodIndex
from kubespot.sim.kubesim.testing import node

ZONE = "topology.kubernetes.io/zone"


def _nodes() -> dict[str, NodeInfo]:
    return {
        name: node_info(node(name, labels={ZONE: zone}, ready=True), Usage())
        for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b"))
    }


def test_counts_follow_binds_and_removals_and_match_label_keys_narrow_the_selector() -> None:
    """pkg/scheduler/framework/plugins/interpodaffinity/filtering.go PreFilter counts, kept up to date
    like its AddPod/RemovePod extensions; matchLabelKeys adds `key in (own value)` as the API server
    does at creation (pkg/registry/core/pod/strategy.go applyMatchLabelKeysAndMismatchLabelKeys)."""
    nodes = _nodes()
    index = PodIndex(lambda ns: {})
    own = {"app": "web", "pod-template-hash": "v2"}
    raw = [
        {
            "labelSelector": {"matchLabels": {"app": "web"}},
            "topologyKey": ZONE,
            "matchLabelKeys": ["pod-template-hash"],
        }
    ]
    anti = parse_terms(raw, "default", own)
    index.add(("default", "old"), "a1", "default", {"app": "web", "pod-template-hash": "v1"}, ())
    state = pre_filter(index, nodes, "default", own, (), anti)
    assert state is not None and state.anti == []  # the old revision does not count
    index.add(("default", "new"), "a1", "default", dict(own), anti)
    state = pre_filter(index, nodes, "default", own, (), anti)
    assert state is not None
    assert [state.reason(nodes[n]) for n in ("a2", "b1")] == [REASON_EXISTING_ANTI, None]
    index.remove(("default", "new"))
    state = pre_filter(index, nodes, "default", own, (), anti)
    assert state is not None and state.reason(nodes["a2"]) is None


def test_affinity_of_the_first_pod_of_a_group_and_of_a_pod_that_matches_nothing() -> None:
    """filtering.go satisfyPodAffinity: no pod matches yet -- allowed only if the pod matches its own
    terms; a term in another namespace (namespaces: [other]) is not matched by the pod itself."""
    nodes = _nodes()
    index = PodIndex(lambda ns: {})
    labels = {"app": "grp"}
    own = parse_terms([{"labelSelector": {"matchLabels": labels}, "topologyKey": ZONE}], "default", labels)
    state = pre_filter(index, nodes, "default", labels, own, ())
    assert state is not None and state.reason(nodes["b1"]) is None
    elsewhere = parse_terms(
        [{"labelSelector": {"matchLabels": labels}, "topologyKey": ZONE, "namespaces": ["other"]}],
        "default",
        labels,
    )
    state = pre_filter(index, nodes, "default", labels, elsewhere, ())
    assert state is not None and state.reason(nodes["b1"]) == REASON_AFFINITY
    index.add(("other", "p"), "b1", "other", dict(labels), ())
    state = pre_filter(index, nodes, "default", labels, elsewhere, ())
    assert state is not None
    assert [state.reason(nodes[n]) for n in ("a1", "b1")] == [REASON_AFFINITY, None]
