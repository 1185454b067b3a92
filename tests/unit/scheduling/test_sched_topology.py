"""Topology in the scheduling simulation: spread constraints, pod (anti-)affinity and Karpenter's
preference relaxation (kubernetes-sigs/karpenter ``pkg/controllers/provisioning/scheduling``:
``topology.go``, ``topologygroup.go``, ``preferences.go``; KARPENTER.md §2)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kubespot.model.quantity import GIB
from kubespot.scheduling.labels import CAPACITY_TYPE, HOSTNAME, ZONE
from kubespot.scheduling.pods import PodView
from kubespot.scheduling.requirements import Requirements
from kubespot.scheduling.simulate import ExistingNode, Plan, PoolCapacity, group_pods, simulate
from kubespot.scheduling.topology import Spread, relax, spread_quotas
from support.catalog import itype

ZONES3 = ("z1", "z2", "z3")
CATALOG = [
    itype("small", 2, 8, od=0.10, spot=0.04, zones=ZONES3),
    itype("large", 8, 32, od=0.40, spot=0.12, zones=ZONES3),
]
APP = {"app": "web"}


def pod(
    name: str, *, labels: dict[str, str] | None = None, cpu: str = "500m", ns: str = "default", **spec: Any
) -> PodView:
    return PodView.of(
        {
            "metadata": {"name": name, "namespace": ns, "labels": APP if labels is None else labels},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
                **spec,
            },
        }
    )


def spread(key: str, skew: int = 1, **more: Any) -> dict[str, Any]:
    return {
        "topologySpreadConstraints": [
            {
                "topologyKey": key,
                "maxSkew": skew,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": APP},
                **more,
            }
        ]
    }


def term(key: str, selector: dict[str, str] | None = None) -> dict[str, Any]:
    return {"topologyKey": key, "labelSelector": {"matchLabels": selector or APP}}


def affinity(kind: str, key: str, selector: dict[str, str] | None = None) -> dict[str, Any]:
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term(key, selector)]}}}


def pools(catalog: list[Any] = CATALOG, **spec: Any) -> list[PoolCapacity]:
    from kubespot.scheduling.nodepool import NodePool

    pool = NodePool.of({"metadata": {"name": "default"}, "spec": {"template": {"spec": {**spec}}}})
    return [PoolCapacity(pool, catalog)]


def zone_of_pods(plan: Plan) -> Counter[str]:
    """How many pods each zone got (every claim holding a spread pod is narrowed to one zone)."""
    out: Counter[str] = Counter()
    for c in plan.claims:
        assert len(c.zones) == 1, c.zones
        out[c.zones[0]] += len(c.pods)
    return out


def node(name: str, zone: str, pods: list[tuple[str, dict[str, str]]] = (), cpu: int = 8) -> ExistingNode:  # type: ignore[assignment]
    return ExistingNode(
        name,
        Requirements.from_labels({ZONE: zone, HOSTNAME: name, CAPACITY_TYPE: "on-demand"}),
        (),
        {"cpu": cpu * 1000, "memory": 32 * GIB, "pods": 110},
        pods=list(pods),
    )


def _full(name: str, zone: str, ct: str = "on-demand") -> ExistingNode:
    """An existing node with no room left (its labels still make its domains known)."""
    return ExistingNode(
        name,
        Requirements.from_labels({ZONE: zone, HOSTNAME: name, CAPACITY_TYPE: ct}),
        (),
        {"cpu": 0, "memory": 0, "pods": 110},
    )


# -- 1. what PodView carries


def test_podview_reads_spread_and_affinity_with_the_apis_defaults() -> None:
    """kubernetes/kubernetes pkg/apis/core/types.go TopologySpreadConstraint (nodeAffinityPolicy
    Honor, nodeTaintsPolicy Ignore by default; matchLabelKeys ANDs the pod's own values into the
    selector) and PodAffinityTerm (no namespaces nor namespaceSelector: the pod's namespace)."""
    p = pod(
        "a",
        labels={"app": "web", "version": "v2"},
        ns="shop",
        **spread(ZONE, 2, minDomains=3, matchLabelKeys=["version"]),
        affinity={
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 40, "podAffinityTerm": {**term(HOSTNAME), "namespaceSelector": {}}}
                ]
            }
        },
    )
    (s,) = p.topology.spreads
    assert (s.key, s.max_skew, s.min_domains, s.hard, s.honor_node_affinity, s.honor_node_taints) == (
        ZONE,
        2,
        3,
        True,
        True,
        False,
    )
    assert s.scope.namespaces == {"shop"}
    assert s.scope.selector is not None and s.scope.selector.match_labels == (
        ("app", "web"),
        ("version", "v2"),
    )
    (t,) = p.topology.terms
    assert (t.key, t.anti, t.weight) == (HOSTNAME, True, 40)
    assert t.scope.namespaces == frozenset() and t.scope.namespace_selector is not None
    assert t.scope.selects("other", {"app": "web"}, {})  # an empty namespaceSelector: every namespace


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (pod("a"), pod("b"), True),
        (pod("a"), pod("b", labels={"app": "api"}, **spread(ZONE)), False),
        (pod("a", **spread(ZONE)), pod("b", **spread(ZONE, 2)), False),
        (pod("a", **spread(ZONE)), pod("b", labels={"app": "api"}, **spread(ZONE)), False),
        (
            pod("a", **affinity("podAntiAffinity", HOSTNAME)),
            pod("b", **affinity("podAffinity", HOSTNAME)),
            False,
        ),
    ],
)
def test_the_group_key_holds_labels_and_topology(a: PodView, b: PodView, same: bool) -> None:
    """Karpenter ``topology.go`` counts pods by their labels, so pods differing in labels a selector
    reads, or in their rules, are not interchangeable (kubespot's groups, design note decision 3)."""
    assert (len(group_pods([a, b])) == 1) is same


# -- 2. spread


@pytest.mark.parametrize(
    ("counts", "blocked", "pods", "skew", "min_domains", "expected"),
    [
        ({}, [], 6, 1, None, {"z1": 2, "z2": 2, "z3": 2}),
        ({}, [], 4, 1, None, {"z1": 2, "z2": 1, "z3": 1}),
        ({"z1": 3}, [], 4, 1, None, {"z2": 2, "z3": 2}),
        ({"z1": 3}, [], 9, 1, None, {"z1": 1, "z2": 4, "z3": 4}),
        ({}, ["z3"], 10, 1, None, {"z1": 1, "z2": 1}),
        ({}, ["z3"], 10, 2, None, {"z1": 2, "z2": 2}),
        ({}, [], 10, 1, 4, {"z1": 1, "z2": 1, "z3": 1}),
        ({}, [], 10, 2, 4, {"z1": 2, "z2": 2, "z3": 2}),
        ({"z1": 1, "z2": 1, "z3": 1}, [], 10, 1, 4, {}),
        ({}, [], 10_000, 1, None, {"z1": 3334, "z2": 3333, "z3": 3333}),
    ],
)
def test_spread_quotas_follow_the_min_count_domain(
    counts: dict[str, int],
    blocked: list[str],
    pods: int,
    skew: int,
    min_domains: int | None,
    expected: dict[str, int],
) -> None:
    """Karpenter ``topologygroup.go`` ``nextDomainTopologySpread`` (each pod to the min-count domain
    within maxSkew) and ``domainMinCount`` (minimum 0 below minDomains), batched."""
    s = Spread(ZONE, skew, scope=None, min_domains=min_domains)  # type: ignore[arg-type]
    assert spread_quotas(s, counts, ZONES3, blocked, pods) == expected


def test_zonal_spread_narrows_each_new_nodeclaim_to_one_zone_evenly() -> None:
    """Karpenter ``topologygroup.go`` ``nextDomainTopologySpread``: a new NodeClaim's zone
    requirement is the min-count domain."""
    plan = simulate([pod(f"p{i}", **spread(ZONE)) for i in range(9)], [], pools())
    assert not plan.unschedulable
    assert zone_of_pods(plan) == {"z1": 3, "z2": 3, "z3": 3}


def test_zonal_spread_counts_matching_pods_on_existing_nodes_in_the_namespace() -> None:
    """Karpenter ``topology.go`` ``countDomains``: existing pods the selector matches, same
    namespace only; pods of another namespace do not count."""
    busy = node("n1", "z1", [("default", APP)] * 3 + [("other", APP)] * 9, cpu=0)
    plan = simulate([pod(f"p{i}", **spread(ZONE)) for i in range(4)], [busy], pools())
    assert zone_of_pods(plan) == {"z2": 2, "z3": 2}


def test_min_domains_holds_the_minimum_at_zero_and_the_rest_are_unschedulable_with_the_rule() -> None:
    """Karpenter ``topologygroup.go`` ``domainMinCount``: fewer domains than minDomains, the global
    minimum is 0, so each zone takes maxSkew pods; DoNotSchedule makes it a hard rule."""
    plan = simulate([pod(f"p{i}", **spread(ZONE, minDomains=5)) for i in range(5)], [], pools())
    assert zone_of_pods(plan) == {"z1": 1, "z2": 1, "z3": 1}
    assert len(plan.unschedulable) == 2
    assert next(iter(plan.unschedulable.values())) == [
        f'nodepool "default": topology spread on {ZONE} would exceed maxSkew 1'
    ]


def test_spread_domains_are_what_the_nodepool_allows() -> None:
    """Karpenter ``topology.go`` ``NewTopology``: domains come from the NodePools' requirements and
    offerings (a zone the NodePool excludes is no domain, so it does not hold the minimum down)."""
    only_two = pools(requirements=[{"key": ZONE, "operator": "In", "values": ["z1", "z2"]}])
    plan = simulate([pod(f"p{i}", **spread(ZONE)) for i in range(4)], [], only_two)
    assert zone_of_pods(plan) == {"z1": 2, "z2": 2}


def test_capacity_type_spread_puts_pods_on_spot_and_on_demand() -> None:
    """Karpenter docs (scheduling.md, topology spread on karpenter.sh/capacity-type) and
    ``nextDomainTopologySpread``: the domain chosen becomes the NodeClaim's capacity type."""
    plan = simulate([pod(f"p{i}", **spread(CAPACITY_TYPE)) for i in range(4)], [], pools())
    assert not plan.unschedulable
    by_type: Counter[str] = Counter()
    for c in plan.claims:
        by_type[c.capacity_type] += len(c.pods)
    assert by_type == {"spot": 2, "on-demand": 2}


def test_hostname_spread_caps_each_node_at_max_skew() -> None:
    """Karpenter ``topologygroup.go`` ``domainMinCount``: on kubernetes.io/hostname the minimum is 0
    (a new node is an empty domain), so a node holds at most maxSkew matching pods."""
    plan = simulate([pod(f"p{i}", **spread(HOSTNAME, 2)) for i in range(7)], [], pools())
    assert not plan.unschedulable
    assert sorted(len(c.pods) for c in plan.claims) == [1, 2, 2, 2]


def test_hostname_spread_counts_existing_pods_on_the_node() -> None:
    """kube-scheduler ``podtopologyspread`` filter: existing matching pods count on their node
    (the minimum is 0 here: a full node without matching pods counts too, nodeTaintsPolicy Ignore)."""
    n1 = node("n1", "z1", [("default", APP)])
    plan = simulate([pod(f"p{i}", **spread(HOSTNAME, 2)) for i in range(3)], [n1, _full("n2", "z1")], pools())
    assert list(plan.existing.values()) == ["n1"]
    assert sorted(len(c.pods) for c in plan.claims) == [2]


def test_hostname_spread_on_existing_nodes_uses_kube_schedulers_minimum() -> None:
    """kubernetes/kubernetes pkg/scheduler/framework/plugins/podtopologyspread/filtering.go
    calPreFilterState and Filter: kube-scheduler, which binds before Karpenter sees a pod, takes
    the minimum over the nodes that exist; with one node that node is the minimum, so the skew
    never exceeds 1 and every pod stacks there (oracle seeds 525, 848); Karpenter's minimum of 0
    only applies to new capacity."""
    n1 = node("n1", "z1", [("default", APP)])
    plan = simulate([pod(f"p{i}", **spread(HOSTNAME, 1)) for i in range(5)], [n1], pools())
    assert plan.existing == {f"default/p{i}": "n1" for i in range(5)}
    assert not plan.claims


def test_hostname_spread_on_existing_nodes_rises_with_the_minimum() -> None:
    """podtopologyspread Filter, pod by pod: with two empty nodes and maxSkew 1 the pods alternate,
    so both nodes fill evenly rather than stopping at one pod each."""
    nodes = [node("n1", "z1", cpu=2), node("n2", "z1", cpu=2)]
    plan = simulate([pod(f"p{i}", **spread(HOSTNAME, 1)) for i in range(6)], nodes, pools())
    assert Counter(plan.existing.values()) == {"n1": 3, "n2": 3}
    assert not plan.claims


# -- 3. pod affinity and anti-affinity


def test_hostname_anti_affinity_puts_one_per_node() -> None:
    """Karpenter ``topologygroup.go`` ``nextDomainAntiAffinity``: only domains with no matching pod."""
    plan = simulate([pod(f"p{i}", **affinity("podAntiAffinity", HOSTNAME)) for i in range(4)], [], pools())
    assert not plan.unschedulable
    assert [len(c.pods) for c in plan.claims] == [1, 1, 1, 1]


def test_zonal_anti_affinity_one_per_zone_the_rest_unschedulable_with_the_rule() -> None:
    """Karpenter ``nextDomainAntiAffinity`` on the zone key: one pod per zone, then no domain."""
    plan = simulate([pod(f"p{i}", **affinity("podAntiAffinity", ZONE)) for i in range(4)], [], pools())
    assert zone_of_pods(plan) == {"z1": 1, "z2": 1, "z3": 1}
    (reasons,) = plan.unschedulable.values()
    assert reasons == [
        f'nodepool "default": pod anti-affinity on {ZONE}: no domain without a pod matching app=web'
    ]


def test_anti_affinity_of_placed_pods_keeps_matching_pods_off_their_node() -> None:
    """kube-scheduler ``interpodaffinity`` filter (satisfyExistingPodsAntiAffinity): a placed pod's
    anti-affinity keeps pods it matches off its node."""
    loner = pod("big", cpu="1", labels={"app": "loner"}, **affinity("podAntiAffinity", HOSTNAME))
    plan = simulate([loner, pod("w0", cpu="100m")], [], pools())
    by_pod = {p: c for c in plan.claims for p in c.pods}
    assert by_pod["default/big"] is not by_pod["default/w0"]


def test_zonal_self_affinity_keeps_the_group_in_one_zone() -> None:
    """Karpenter ``topologygroup.go`` ``nextDomainAffinity``: a self-selecting pod with no match
    yet picks a domain; the rest follow it."""
    plan = simulate([pod(f"p{i}", cpu="3", **affinity("podAffinity", ZONE)) for i in range(6)], [], pools())
    assert not plan.unschedulable
    assert len({c.zones[0] for c in plan.claims}) == 1 and len(plan.claims) > 1


def test_hostname_self_affinity_puts_the_group_on_one_node() -> None:
    """Karpenter ``nextDomainAffinity`` on hostname: every pod on the first pod's node; those that
    do not fit there are unschedulable."""
    plan = simulate(
        [pod(f"p{i}", cpu="3", **affinity("podAffinity", HOSTNAME)) for i in range(3)], [], pools()
    )
    assert len(plan.claims) == 1 and len(plan.claims[0].pods) == 2
    (reasons,) = plan.unschedulable.values()
    assert "pod affinity on kubernetes.io/hostname" in reasons[0]


def test_affinity_to_existing_pods_follows_their_zone() -> None:
    """Karpenter ``nextDomainAffinity``: the domains where matching pods run (existing ones too)."""
    db = node("db-node", "z2", [("default", {"app": "db"})], cpu=0)
    plan = simulate(
        [pod(f"p{i}", **affinity("podAffinity", ZONE, {"app": "db"})) for i in range(3)], [db], pools()
    )
    assert zone_of_pods(plan) == {"z2": 3}


def test_affinity_to_pods_placed_later_in_the_pass_is_met_on_a_later_cycle() -> None:
    """Karpenter ``queue.go``: failed pods are retried while a cycle makes progress, so a pod with
    affinity to smaller pods (placed after it) still lands next to them."""
    follower = pod("f", cpu="2", labels={"app": "f"}, **affinity("podAffinity", ZONE, {"app": "db"}))
    plan = simulate(
        [follower, pod("db", cpu="100m", labels={"app": "db"}, nodeSelector={ZONE: "z3"})], [], pools()
    )
    assert not plan.unschedulable
    assert {c.zones[0] for c in plan.claims if "default/f" in c.pods} == {"z3"}


def test_affinity_with_no_matching_pod_is_unschedulable_with_the_rule() -> None:
    """Karpenter ``nextDomainAffinity``: no domain when nothing matches and the pod does not match
    its own term."""
    plan = simulate([pod("p", **affinity("podAffinity", ZONE, {"app": "db"}))], [], pools())
    assert plan.unschedulable["default/p"] == [
        f'nodepool "default": pod affinity on {ZONE}: no domain with a pod matching app=db'
    ]


# -- 4. relaxation


def _node_term(zone: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}


def test_relax_drops_one_preference_at_a_time_in_karpenters_order() -> None:
    """Karpenter ``preferences.go`` ``Relax``: required node-affinity OR term (only if >1), heaviest
    preferred pod affinity, heaviest preferred anti-affinity, heaviest preferred node affinity, one
    ScheduleAnyway spread, then PreferNoSchedule tolerated."""
    weighted = [
        {"weight": 10, "podAffinityTerm": term(ZONE)},
        {"weight": 90, "podAffinityTerm": term(HOSTNAME)},
    ]
    spec: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [_node_term("z1"), _node_term("z2")]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": _node_term("z2")}
                ],
            },
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": weighted},
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": term(ZONE)}
                ]
            },
        },
        "topologySpreadConstraints": [
            {"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}
        ],
    }
    steps = []
    while (step := relax(spec, tolerate_prefer_no_schedule=True)) is not None:
        spec, what = step
        steps.append(what)
    assert steps == [
        "dropped a required node affinity term",
        "dropped the heaviest preferred pod affinity term",
        "dropped the heaviest preferred pod affinity term",
        "dropped the heaviest preferred pod anti-affinity term",
        "dropped the heaviest preferred node affinity term",
        f"dropped the ScheduleAnyway topology spread on {ZONE}",
        "tolerated PreferNoSchedule taints",
    ]
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ] == [_node_term("z2")]


def test_the_heaviest_preferred_pod_affinity_term_goes_first() -> None:
    """Karpenter ``preferences.go`` ``removePreferredPodAffinityTerm``: sorted by weight, the
    heaviest removed."""
    weighted = [
        {"weight": 10, "podAffinityTerm": term(ZONE)},
        {"weight": 90, "podAffinityTerm": term(HOSTNAME)},
    ]
    step = relax(
        {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": weighted}}},
        tolerate_prefer_no_schedule=False,
    )
    assert step is not None
    assert step[0]["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [
        weighted[0]
    ]


def test_a_second_required_node_affinity_term_is_tried_when_the_first_fails() -> None:
    """Karpenter ``preferences.go`` ``removeRequiredNodeAffinityTerm``: ORed terms tried in turn."""
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [_node_term("z9"), _node_term("z2")]
                }
            }
        }
    }
    plan = simulate([pod("p", **spec)], [], pools())
    assert not plan.unschedulable and plan.claims[0].zones == ["z2"]


def test_schedule_anyway_spread_acts_as_required_then_is_dropped() -> None:
    """Karpenter ``preferences.go`` ``removeTopologySpreadScheduleAnyway`` (docs scheduling.md:
    preferences are treated as required first): within the skew first, the rest relaxed."""
    soft = spread(ZONE, minDomains=5)
    soft["topologySpreadConstraints"][0]["whenUnsatisfiable"] = "ScheduleAnyway"
    plan = simulate([pod(f"p{i}", **soft) for i in range(5)], [], pools())
    assert not plan.unschedulable
    assert sum(len(c.pods) for c in plan.claims) == 5


def test_preferred_anti_affinity_is_honoured_before_it_is_relaxed() -> None:
    """Karpenter ``preferences.go``: preferred anti-affinity is required until relaxed, so three
    pods get three zones and a fourth goes anywhere."""
    pref = {
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": term(ZONE)}
                ]
            }
        }
    }
    plan = simulate([pod(f"p{i}", **pref) for i in range(4)], [], pools())
    assert not plan.unschedulable
    assert sorted(c.zones[0] for c in plan.claims) == ["z1", "z2", "z3"]
    assert sum(len(c.pods) for c in plan.claims) == 4


def test_prefer_no_schedule_taints_are_tolerated_last() -> None:
    """Karpenter ``preferences.go`` ``toleratePreferNoScheduleTaints``: offered when a NodePool
    has such a taint; without it the pod did not tolerate the NodePool."""
    tainted = pools(taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}])
    plan = simulate([pod("p")], [], tainted)
    assert not plan.unschedulable and len(plan.claims) == 1


# -- shares, node affinity policy, cordoned nodes


def test_a_domain_that_runs_out_leaves_the_others_within_the_skew() -> None:
    """Karpenter ``topologygroup.go`` ``nextDomainTopologySpread`` chooses per pod, so a domain
    without capacity (here spot, capped by its NodePool's limits at one node) stops the others at
    its count plus maxSkew; batching must not overshoot them first."""
    from kubespot.scheduling.nodepool import NodePool

    def capacity_pool(name: str, ct: str, **more: Any) -> PoolCapacity:
        reqs = [{"key": CAPACITY_TYPE, "operator": "In", "values": [ct]}]
        obj = {"metadata": {"name": name}, "spec": {"template": {"spec": {"requirements": reqs}}, **more}}
        return PoolCapacity(NodePool.of(obj), [itype("big", 4, 16, od=0.2, spot=0.08, zones=ZONES3)])

    pools_ = [capacity_pool("od", "on-demand"), capacity_pool("sp", "spot", limits={"cpu": "4"})]
    plan = simulate([pod(f"p{i}", cpu="3", **spread(CAPACITY_TYPE)) for i in range(6)], [], pools_)
    by_type = Counter(c.capacity_type for c in plan.claims for _ in c.pods)
    assert by_type == {"spot": 1, "on-demand": 2}
    assert len(plan.unschedulable) == 3


@pytest.mark.parametrize(
    ("policy", "expected"), [("Honor", {"z1": 1, "z2": 1, "z3": 1}), ("Ignore", {"z2": 2, "z3": 1})]
)
def test_node_affinity_policy_decides_which_nodes_pods_count(policy: str, expected: dict[str, int]) -> None:
    """kube-scheduler ``podtopologyspread`` (common.go, nodeAffinityPolicy) and Karpenter
    ``TopologyNodeFilter``: with Honor only pods on nodes the pod's node selector matches count
    (the spot node's two pods do not, for an on-demand pod); with Ignore every node's do."""
    busy = ExistingNode(
        "spot-1",
        Requirements.from_labels({ZONE: "z1", HOSTNAME: "spot-1", CAPACITY_TYPE: "spot"}),
        (),
        {"cpu": 0, "memory": 0, "pods": 110},
        pods=[("default", APP)] * 2,
    )
    rules = spread(ZONE, nodeAffinityPolicy=policy)
    pods = [pod(f"p{i}", nodeSelector={CAPACITY_TYPE: "on-demand"}, **rules) for i in range(3)]
    assert zone_of_pods(simulate(pods, [busy], pools())) == expected


def test_a_cordoned_nodes_pods_still_count_but_it_takes_none() -> None:
    """kube-scheduler counts the matching pods of every node (a cordoned one too,
    ``podtopologyspread`` PreFilter); NodeUnschedulable keeps new pods off it."""
    from kubespot.scheduling.cluster import existing_nodes

    node_obj = {
        "metadata": {"name": "old", "labels": {ZONE: "z1", HOSTNAME: "old"}},
        "spec": {"unschedulable": True},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }
    bound = [
        {"metadata": {"name": f"w{i}", "namespace": "default", "labels": APP}, "spec": {"nodeName": "old"}}
        for i in range(2)
    ]
    nodes = existing_nodes([node_obj], bound)
    plan = simulate([pod(f"p{i}", **spread(ZONE)) for i in range(2)], nodes, pools())
    assert not plan.existing
    assert zone_of_pods(plan) == {"z2": 1, "z3": 1}


def test_a_namespace_selector_by_name_matches_without_the_namespace_objects() -> None:
    """The API server labels every Namespace ``kubernetes.io/metadata.name=<name>`` (Kubernetes
    ``pkg/registry/core/namespace/strategy.go`` PrepareForCreate, immutable since v1.22), so a
    selector on it matches even when no Namespace object was read (``plan --no-cluster``)."""
    scope = {
        "topologyKey": ZONE,
        "labelSelector": {"matchLabels": APP},
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}},
    }
    rule = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [scope]}}
    pending = [pod(f"w{i}", ns="shop", affinity=rule) for i in range(2)]
    plan = simulate(pending, [], pools())
    assert plan.unschedulable == {}
    assert len({c.zones[0] for c in plan.claims}) == 1


def test_terminating_pods_do_not_count_for_topology() -> None:
    """Karpenter ``topology.go`` IgnoredForTopology (terminating pods) and kube-scheduler
    ``podtopologyspread/common.go`` countPodsMatchSelector ("Bypass terminating Pod"): a rollout's
    old pods on a full node in z1 do not push the new spread pods out of z1."""
    from kubespot.scheduling.cluster import existing_nodes

    full = {
        "metadata": {"name": "n1", "labels": {ZONE: "z1", HOSTNAME: "n1", CAPACITY_TYPE: "on-demand"}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "0", "memory": "1Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    old = [
        {
            "metadata": {
                "name": f"old{i}",
                "namespace": "default",
                "labels": APP,
                "deletionTimestamp": "2026-11-26T00:00:00Z",
            },
            "spec": {"nodeName": "n1", "containers": []},
            "status": {"phase": "Running"},
        }
        for i in range(4)
    ]
    nodes = existing_nodes([full], old)
    assert nodes[0].pods == [] and nodes[0].requested["pods"] == 4
    plan = simulate([pod(f"p{i}", **spread(ZONE)) for i in range(6)], nodes, pools())
    assert zone_of_pods(plan) == {"z1": 2, "z2": 2, "z3": 2}


def test_relaxing_a_pod_with_null_tolerations_adds_the_prefer_no_schedule_one() -> None:
    """``tolerations: null`` is a valid pod spec (an empty YAML key); the last relaxation step of
    Karpenter's ``preferences.go`` (toleratePreferNoScheduleTaints) appends to an empty list."""
    relaxed = relax({"tolerations": None}, tolerate_prefer_no_schedule=True)
    assert relaxed is not None
    spec, _ = relaxed
    assert spec["tolerations"] == [{"operator": "Exists", "effect": "PreferNoSchedule"}]


def test_a_preferred_zone_does_not_narrow_a_hard_spreads_domains() -> None:
    """Karpenter ``topology.go`` AddRequirements gets the pod's StrictRequirements as its domains
    (``nodeclaim.go`` CanAdd): the minimum of a DoNotSchedule zone spread counts every zone the pool
    offers, so a preferred zone cannot take all the pods; the preference is relaxed instead."""
    prefer_z1 = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z1"]}]},
                }
            ]
        }
    }
    plan = simulate([pod(f"p{i}", affinity=prefer_z1, **spread(ZONE)) for i in range(6)], [], pools())
    assert zone_of_pods(plan) == {"z1": 2, "z2": 2, "z3": 2}
    assert plan.unschedulable == {}


def test_a_relaxed_preferred_anti_affinity_does_not_bar_the_pods_that_dropped_it() -> None:
    """Karpenter ``topology.go`` updateInverseAntiAffinity records required terms only ("we
    intentionally don't track inverse anti-affinity preferences"): with room for two nodes, five pods
    preferring hostname anti-affinity share them once the preference is dropped."""
    from kubespot.scheduling.nodepool import NodePool

    preferred = {
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 50, "podAffinityTerm": term(HOSTNAME)}
                ]
            }
        }
    }
    pool = NodePool.of(
        {"metadata": {"name": "default"}, "spec": {"limits": {"nodes": "2"}, "template": {"spec": {}}}}
    )
    plan = simulate([pod(f"p{i}", **preferred) for i in range(5)], [], [PoolCapacity(pool, CATALOG)])
    assert plan.unschedulable == {}
    assert sum(len(c.pods) for c in plan.claims) == 5 and len(plan.claims) == 2


def test_a_pod_on_a_node_without_the_key_is_in_no_domain_of_it() -> None:
    """Karpenter ``topology.go`` countDomains skips nodes without the topology label, as
    kube-scheduler's interpodaffinity does: a matching pod on a node with no zone label bars no zone."""
    unlabelled = ExistingNode(
        "fargate-1",
        Requirements.from_labels({HOSTNAME: "fargate-1"}),
        (),
        {"cpu": 0, "memory": 0, "pods": 110},
        pods=[("default", {"app": "db"})],
    )
    pending = [
        pod(f"w{i}", labels={"app": "w"}, **affinity("podAntiAffinity", ZONE, {"app": "db"}))
        for i in range(2)
    ]
    plan = simulate(pending, [unlabelled], pools())
    assert plan.unschedulable == {}
    assert sum(len(c.pods) for c in plan.claims) == 2


def test_a_cordoned_node_takes_the_pods_that_tolerate_its_unschedulable_taint() -> None:
    """kube-scheduler pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go
    Filter: a node with ``spec.unschedulable`` refuses only pods that do not tolerate
    ``node.kubernetes.io/unschedulable:NoSchedule`` (an ``operator: Exists`` toleration without a
    key tolerates it), so such pods bind there before Karpenter sees them (oracle seeds 572, 818)."""
    from kubespot.scheduling.cluster import existing_nodes

    node_obj = {
        "metadata": {"name": "old", "labels": {ZONE: "z1", HOSTNAME: "old"}},
        "spec": {"unschedulable": True},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }
    tolerant = pod("t", tolerations=[{"operator": "Exists"}])
    plain = pod("p")
    plan = simulate([tolerant, plain], existing_nodes([node_obj], []), pools())
    assert plan.existing == {"default/t": "old"}
    assert [c.pods for c in plan.claims] == [["default/p"]]


def test_a_self_affinity_first_pod_takes_any_existing_node_when_no_pod_matches() -> None:
    """kube-scheduler pkg/scheduler/framework/plugins/interpodaffinity/filtering.go
    satisfyPodAffinity: when no pod anywhere matches the term and the pod matches its own term,
    every node passes; the rest then follow the first one's domain (oracle seed 889: the first
    capacity type in order had no node with room)."""
    spot = ExistingNode(
        "spot-1",
        Requirements.from_labels({ZONE: "z1", HOSTNAME: "spot-1", CAPACITY_TYPE: "spot"}),
        (),
        {"cpu": 8000, "memory": 32 * GIB, "pods": 110},
    )
    pods = [pod(f"p{i}", **affinity("podAffinity", CAPACITY_TYPE)) for i in range(3)]
    plan = simulate(pods, [_full("od-1", "z1"), spot], pools())
    assert plan.existing == {f"default/p{i}": "spot-1" for i in range(3)}


def test_a_self_affinity_first_pod_tries_the_next_domain_when_the_first_has_no_capacity() -> None:
    """Karpenter pkg/controllers/provisioning/scheduling/topologygroup.go nextDomainAffinity
    (no matching pod and the pod selects itself: any domain the pod allows) and scheduler.go
    (a NodeClaim is only made where an instance type is offered): z1 is known from a full
    existing node but the NodePool's types are not offered there, so the group starts in z2."""
    catalog = [itype("small", 2, 8, od=0.10, spot=0.04, zones=("z2", "z3"))]
    pods = [pod(f"p{i}", **affinity("podAffinity", ZONE)) for i in range(3)]
    plan = simulate(pods, [_full("old", "z1")], pools(catalog))
    assert not plan.unschedulable
    assert {z for c in plan.claims for z in c.zones} == {"z2"}


# -- anti-affinity both ways: placed and bound pods' terms keep the pods they select out


def _guard(name: str, zone: str, key: str = ZONE) -> dict[str, Any]:
    """A node in ``zone`` with room, running a pod whose required anti-affinity selects app=web."""
    return {
        "metadata": {"name": name, "labels": {ZONE: zone, HOSTNAME: name, CAPACITY_TYPE: "on-demand"}},
        "spec": {},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }, {
        "metadata": {"name": f"{name}-guard", "namespace": "default", "labels": {"app": "guard"}},
        "spec": {"nodeName": name, **affinity("podAntiAffinity", key)},
    }


def test_a_bound_pods_zone_anti_affinity_keeps_the_pods_it_selects_out_of_its_zone() -> None:
    """kube-scheduler pkg/scheduler/framework/plugins/interpodaffinity/filtering.go
    satisfyExistingPodsAntiAffinity (an existing pod's required anti-affinity term refuses the
    incoming pod it matches in the existing pod's domain) and Karpenter topology.go's inverse
    anti-affinity groups: web pods, with no rules of their own, neither use the z1 node nor get
    a NodeClaim in z1."""
    from kubespot.scheduling.cluster import existing_nodes

    node_obj, guard = _guard("old", "z1")
    plan = simulate([pod(f"p{i}") for i in range(3)], existing_nodes([node_obj], [guard]), pools())
    assert not plan.existing and not plan.unschedulable
    assert plan.claims and all("z1" not in c.zones for c in plan.claims)


def test_a_bound_pods_hostname_anti_affinity_keeps_the_pods_it_selects_off_its_node() -> None:
    """satisfyExistingPodsAntiAffinity on kubernetes.io/hostname: only that node is refused."""
    from kubespot.scheduling.cluster import existing_nodes

    node_obj, guard = _guard("a-guarded", "z1", HOSTNAME)  # tried first (nodes go by name)
    other = {**node_obj, "metadata": {"name": "b-free", "labels": {ZONE: "z1", HOSTNAME: "b-free"}}}
    plan = simulate([pod("p")], existing_nodes([node_obj, other], [guard]), pools())
    assert plan.existing == {"default/p": "b-free"}


def test_a_placed_pods_zone_anti_affinity_keeps_later_pods_it_selects_out_of_its_zone() -> None:
    """Karpenter topology.go Record with inverse anti-affinity (a pod placed in this pass keeps the
    pods its required term selects out of its domain, as kube-scheduler will when it binds them):
    the large guard pod goes first (largest first), then the small web pods avoid its zone."""
    guard = pod(
        "guard",
        labels={"app": "guard"},
        cpu="6",
        nodeSelector={ZONE: "z2"},
        **affinity("podAntiAffinity", ZONE),
    )
    plan = simulate([guard, *(pod(f"p{i}") for i in range(3))], [], pools())
    assert not plan.unschedulable
    web = [c for c in plan.claims if "default/guard" not in c.pods]
    assert web and all("z2" not in c.zones for c in web)
    assert not any("default/p0" in c.pods for c in plan.claims if "default/guard" in c.pods)


def test_several_rules_on_existing_nodes_take_any_node_every_rule_allows() -> None:
    """kube-scheduler Filter (podtopologyspread and interpodaffinity together) pod by pod: a pod
    with a capacity-type spread and anti-affinity goes to any existing node both allow, not only
    to the first domain in order (oracle seed 1152: the on-demand node was full)."""
    spot = ExistingNode(
        "spot-1",
        Requirements.from_labels({ZONE: "z1", HOSTNAME: "spot-1", CAPACITY_TYPE: "spot"}),
        (),
        {"cpu": 8000, "memory": 32 * GIB, "pods": 110},
    )
    rules = {**spread(CAPACITY_TYPE), **affinity("podAntiAffinity", CAPACITY_TYPE)}
    plan = simulate([pod("p0", **rules)], [_full("od-1", "z1"), spot], pools())
    assert plan.existing == {"default/p0": "spot-1"}


def test_hostname_affinity_reason_says_the_matching_pods_node_is_full() -> None:
    """kube-scheduler interpodaffinity Filter (the pod may only go where a matching pod runs) and
    noderesources fit: the node with the db pod is full, which is why the web pods wait, not a
    missing db pod; with no db pod anywhere the reason says so (Karpenter topologygroup.go
    nextDomainAffinity finds no domain)."""
    full_db = ExistingNode(
        "db-1",
        Requirements.from_labels({ZONE: "z1", HOSTNAME: "db-1", CAPACITY_TYPE: "on-demand"}),
        (),
        {"cpu": 0, "memory": 0, "pods": 110},
        pods=[("default", {"app": "db"})],
    )
    web = [pod(f"p{i}", **affinity("podAffinity", HOSTNAME, {"app": "db"})) for i in range(2)]
    plan = simulate(web, [full_db], pools())
    assert not plan.claims and not plan.existing
    assert plan.unschedulable["default/p0"] == [
        f'nodepool "default": pod affinity on {HOSTNAME}: db-1, running a pod matching app=db, '
        "has no room for it"
    ]
    alone = simulate(web, [], pools())
    assert alone.unschedulable["default/p0"] == [
        f'nodepool "default": pod affinity on {HOSTNAME}: no domain with a pod matching app=db'
    ]


def test_zone_spread_fills_existing_nodes_pod_by_pod_before_new_capacity() -> None:
    """kubernetes/kubernetes podtopologyspread/filtering.go Filter, pod by pod: with an empty node
    in each of two zones (the only zones kube-scheduler knows) and maxSkew 1, the pods alternate
    and all bind there; Karpenter only sees pods kube-scheduler could not bind (provisioner.go
    GetPendingPods), so no NodeClaim is needed."""
    nodes = [node("n1", "z1"), node("n2", "z2")]
    plan = simulate([pod(f"p{i}", **spread(ZONE)) for i in range(6)], nodes, pools())
    assert Counter(plan.existing.values()) == {"n1": 3, "n2": 3}
    assert not plan.claims


def test_zone_spread_on_existing_nodes_stops_at_the_skew_when_a_zone_is_full() -> None:
    """podtopologyspread Filter, pod by pod: z1's node holds two pods, so z2's may only reach
    2 + maxSkew = 3 (even rounds at once must not overshoot it); the rest is Karpenter's."""
    nodes = [node("n1", "z1", cpu=1), node("n2", "z2", cpu=16)]
    plan = simulate([pod(f"p{i}", **spread(ZONE)) for i in range(10)], nodes, pools())
    assert Counter(plan.existing.values()) == {"n1": 2, "n2": 3}
    assert sum(len(c.pods) for c in plan.claims) + len(plan.unschedulable) == 5


# -- soft rules on existing nodes; one NodeClaim for a hostname self-affinity


def test_hostname_self_affinity_takes_the_cheapest_type_holding_the_whole_group() -> None:
    """Karpenter ``scheduler.go`` add and ``nodeclaim.go`` CanAdd: the later pods of a hostname
    self-affinity join the first pod's NodeClaim, whose instance types narrow to those that hold
    them all; so 10 pods of 500m land on one ``large``, not 4 on a ``small`` (cheaper per
    request) and 6 nowhere. Five pods: still the cheapest type that holds all five."""
    for n in (10, 5):
        plan = simulate([pod(f"h{i}", **affinity("podAffinity", HOSTNAME)) for i in range(n)], [], pools())
        assert not plan.unschedulable
        assert [(c.instance_types[0], len(c.pods)) for c in plan.claims] == [("large", n)]
    # Without the rule the same pods still pack by requests per dollar.
    plain = simulate([pod(f"h{i}") for i in range(10)], [], pools())
    assert {c.instance_types[0] for c in plain.claims} == {"small"}


def _preferred(kind: str, key: str, selector: dict[str, str] | None = None) -> dict[str, Any]:
    weighted = {"weight": 100, "podAffinityTerm": term(key, selector)}
    return {"affinity": {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [weighted]}}}


def test_preferred_hostname_anti_affinity_does_not_keep_pods_off_existing_nodes() -> None:
    """kubernetes/kubernetes pkg/scheduler/framework/plugins/interpodaffinity/filtering.go
    Filter reads only required terms (preferred ones only score, scoring.go): kube-scheduler binds
    all 6 pods to the 2 existing nodes, so Karpenter sees none and opens no NodeClaim. The
    ScheduleAnyway zone spread alike (podtopologyspread/filtering.go reads only DoNotSchedule
    constraints), still spread as its score favours."""
    nodes = [node("n1", "z1"), node("n2", "z2")]
    plan = simulate(
        [pod(f"p{i}", **_preferred("podAntiAffinity", HOSTNAME)) for i in range(6)], nodes, pools()
    )
    assert len(plan.existing) == 6 and set(plan.existing.values()) == {"n1", "n2"}
    assert not plan.claims and not plan.unschedulable
    soft = {
        "topologySpreadConstraints": [
            {**spread(ZONE)["topologySpreadConstraints"][0], "whenUnsatisfiable": "ScheduleAnyway"}
        ]
    }
    plan = simulate([pod(f"q{i}", **soft) for i in range(6)], nodes, pools())
    assert Counter(plan.existing.values()) == {"n1": 3, "n2": 3} and not plan.claims


def test_preferred_zone_affinity_does_not_keep_pods_off_existing_nodes() -> None:
    """interpodaffinity/filtering.go Filter (satisfyPodAffinity reads required terms only): the
    db pod's zone z2 has no room, but the preferred affinity does not filter n1 out, so the pods
    bind there. With no existing room the preference acts as required for new capacity
    (Karpenter preferences.go Relax: dropped only when it cannot be met), so the claim is in z2."""
    db = node("db-node", "z2", [("default", {"app": "db"})], cpu=0)
    pods = [pod(f"p{i}", **_preferred("podAffinity", ZONE, {"app": "db"})) for i in range(3)]
    plan = simulate(pods, [db, node("n1", "z1")], pools())
    assert Counter(plan.existing.values()) == {"n1": 3} and not plan.claims
    plan = simulate(pods, [db], pools())
    assert zone_of_pods(plan) == {"z2": 3}


def test_preferred_node_affinity_does_not_keep_pods_off_existing_nodes() -> None:
    """kubernetes/kubernetes pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go Filter
    reads nodeSelector and the required terms only (the preferred ones score): a pod preferring z2
    binds to the existing z1 node rather than waiting for a new z2 node. Without existing nodes
    Karpenter treats the preference as required (preferences.go), so the new claim is in z2."""
    prefer = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z2"]}]
                        },
                    }
                ]
            }
        }
    }
    pods = [pod(f"p{i}", **prefer) for i in range(3)]
    plan = simulate(pods, [node("n1", "z1")], pools())
    assert Counter(plan.existing.values()) == {"n1": 3} and not plan.claims
    plan = simulate(pods, [], pools())
    assert [c.zones for c in plan.claims] == [["z2"]]
    # With a spread too (the topology path), the preference still does not filter n1 out.
    plan = simulate(
        [pod(f"s{i}", **prefer, **spread(HOSTNAME, 3)) for i in range(3)], [node("n1", "z1")], pools()
    )
    assert Counter(plan.existing.values()) == {"n1": 3} and not plan.claims
