"""Defects the plan oracle (tests/integration/scheduling/test_plan_oracle.py) found in the simulation,
each pinned by the smallest plan that shows it: fixed ones as tests, open ones as strict xfails that
turn into failures (XPASS) the day they are fixed, so the marker goes with the fix."""

from __future__ import annotations

from typing import Any

import pytest

from kubespot.model.capacity import InstanceTypeInfo
from kubespot.model.quantity import GIB
from kubespot.scheduling import lp_solver
from kubespot.scheduling.allocatable import NodeResources
from kubespot.scheduling.cluster import daemon_overhead, daemon_ports
from kubespot.scheduling.instance_types import InstanceType, Offering, instance_type
from kubespot.scheduling.nodepool import NodePool
from kubespot.scheduling.pods import PodView, node_requirements
from kubespot.scheduling.requirements import Requirements
from kubespot.scheduling.simulate import ExistingNode, PoolCapacity, simulate
from support.catalog import itype

CATALOG = [itype("small", 2, 8, od=0.10, spot=0.04)]


def _no_solver() -> Any:
    raise lp_solver.SolverUnavailable("made unavailable: the greedy packing's defect is pinned")


def _pod(name: str, **spec: Any) -> PodView:
    container = {"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
    return PodView.of(
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [container], **spec}}
    )


def _pool(labels: dict[str, str] | None = None) -> NodePool:
    return NodePool.of(
        {
            "metadata": {"name": "default"},
            "spec": {"template": {"metadata": {"labels": labels or {}}, "spec": {}}},
        }
    )


def _required(*expressions: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]
            }
        }
    }


def test_a_selector_the_affinity_contradicts_matches_no_node() -> None:
    """k8s.io/component-helpers scheduling/corev1/nodeaffinity GetRequiredNodeAffinity: nodeSelector
    and the required term must both match, so ``tier=silver`` with ``tier NotIn [silver]`` matches
    no node, not "a node without tier" (the empty intersection Karpenter's
    pkg/scheduling/requirement.go Intersection reads as DoesNotExist). Found by the oracle."""
    spec = {
        "nodeSelector": {"tier": "silver"},
        "affinity": _required({"key": "tier", "operator": "NotIn", "values": ["silver"]}),
    }
    req = node_requirements(spec)["tier"]
    assert not req.has("silver") and not req.has("gold") and not req.excludes_only
    node = ExistingNode(
        "n1", Requirements.from_labels({"team": "red"}), (), {"cpu": 4000, "memory": 16 * GIB, "pods": 110}
    )
    plan = simulate([_pod("p", **spec)], [node], [PoolCapacity(_pool(), CATALOG)])
    assert plan.existing == {} and plan.claims == []
    assert list(plan.unschedulable) == ["default/p"]


def test_a_label_asked_for_and_forbidden_matches_no_node() -> None:
    """The same for ``team=red`` with ``team DoesNotExist``, and within one term, whose expressions
    are ANDed (nodeaffinity ``nodeSelectorTerm.match``): ``team Exists`` with ``team DoesNotExist``
    matches nothing. Found by the oracle."""
    term = _required({"key": "team", "operator": "Exists"}, {"key": "team", "operator": "DoesNotExist"})
    assert not node_requirements({"affinity": term})["team"].excludes_only
    spec = {
        "nodeSelector": {"team": "red"},
        "affinity": _required({"key": "team", "operator": "DoesNotExist"}),
    }
    plan = simulate([_pod("p", **spec)], [], [PoolCapacity(_pool(), CATALOG)])
    assert plan.claims == [] and list(plan.unschedulable) == ["default/p"]


def test_a_preference_the_selector_contradicts_is_relaxed_not_obeyed() -> None:
    """A preferred term is a requirement until relaxed (Karpenter's
    pkg/controllers/provisioning/scheduling/preferences.go): one that contradicts the selector makes
    the pod fit nowhere, so it is relaxed, and the pod lands where its selector holds, not on the
    first node without the label."""
    spec = {
        "nodeSelector": {"team": "red"},
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]},
                    }
                ]
            }
        },
    }
    room = {"cpu": 4000, "memory": 16 * GIB, "pods": 110}
    plain = ExistingNode("a-plain", Requirements.from_labels({"zone": "z1"}), (), room)
    red = ExistingNode("b-red", Requirements.from_labels({"team": "red"}), (), room)
    plan = simulate([_pod("p", **spec)], [plain, red], [PoolCapacity(_pool(), CATALOG)])
    assert plan.existing == {"default/p": "b-red"}


def _daemonset(port: int) -> dict[str, Any]:
    container = {
        "name": "exporter",
        "resources": {"requests": {"cpu": "100m"}},
        "ports": [{"containerPort": port, "hostPort": port}],
    }
    return {"kind": "DaemonSet", "spec": {"template": {"spec": {"containers": [container]}}}}


def test_a_daemonsets_host_port_is_taken_on_every_new_node() -> None:
    """Karpenter's scheduler.go getDaemonHostPortUsage: a NodeClaim starts with the host ports of the
    DaemonSet pods that will run on it, and a pod wanting one of them does not fit it (kube-scheduler's
    NodePorts would refuse it next to the DaemonSet pod). Found by the oracle."""
    pool = _pool()
    daemonsets = [_daemonset(9100)]
    assert daemon_ports(daemonsets, pool) == {("0.0.0.0", "TCP", 9100)}
    capacity = PoolCapacity(
        pool, CATALOG, daemon_overhead(daemonsets, pool), {}, daemon_ports(daemonsets, pool)
    )
    ports = {"containerPort": 9100, "hostPort": 9100}
    clash = PodView.of(
        {"metadata": {"name": "clash"}, "spec": {"containers": [{"name": "c", "ports": [ports]}]}}
    )
    plan = simulate([clash, _pod("free")], [], [capacity])
    assert [c.pods for c in plan.claims] == [["default/free"]]
    assert list(plan.unschedulable) == ["default/clash"]


def test_a_pod_may_select_the_aws_instance_labels_a_pool_does_not_mention() -> None:
    """The AWS provider registers its instance labels as well-known (aws pkg/apis/v1/labels.go, into
    core's WellKnownLabels), so ``karpenter.k8s.aws/instance-family: m5`` on a pod is met by the m5
    types of a pool that does not mention families (core pkg/scheduling/requirements.go Compatible,
    AllowUndefinedWellKnownLabels), instead of the pool being "incompatible". Found by the oracle."""
    catalog = [itype("c5.large", 2, 4, od=0.085), itype("m5.large", 2, 8, od=0.096)]
    spec = {"nodeSelector": {"karpenter.k8s.aws/instance-family": "m5"}}
    plan = simulate([_pod("p", **spec)], [], [PoolCapacity(_pool(), catalog)])
    assert [(c.instance_types, c.pods) for c in plan.claims] == [(["m5.large"], ["default/p"])]


# -- the packing path (review findings 1, 2, 3, 6), minimised from the oracle's seeds and the review


def _zonal(name: str, cpu: int, od: dict[str, float], spot: dict[str, float]) -> InstanceType:
    """A type with on-demand and spot offerings only in the zones given (allocatable exact)."""
    alloc = {"cpu": cpu * 1000, "memory": 4 * cpu * GIB, "pods": 110}
    offerings = [Offering(z, "on-demand", p) for z, p in od.items()] + [
        Offering(z, "spot", p) for z, p in spot.items()
    ]
    return instance_type(
        InstanceTypeInfo(name, cpu, 4 * cpu * 1024), NodeResources(alloc, {}, {}, {}, alloc), offerings
    )


def test_a_pod_needing_on_demand_is_not_packed_into_a_spot_claim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Karpenter's nodeclaim.go CanAdd (filterInstanceTypesByRequirements): a pod joins a NodeClaim
    only while some option keeps an available offering of its capacity type. Here ``b``
    (on-demand only) joined ``a``'s claim, which then became spot: capacity type In [] and no
    instance type left (oracle seed 16; 119 before the generator drew topology rules; with a
    limit it crashed in _charge, review finding 1). The LP packing takes only pods with the
    opening pod's requirements, so the solver is made unavailable to reach the greedy."""
    monkeypatch.setattr(lp_solver, "new_solver", _no_solver)
    big = itype("big", 8, 32, od=0.40, spot=0.12)
    a = _pod(
        "a",
        containers=[
            {
                "name": "c",
                "resources": {"requests": {"cpu": "4"}},
                "ports": [{"containerPort": 80, "hostPort": 8080}],
            }
        ],
    )
    b = _pod("b", nodeSelector={"karpenter.sh/capacity-type": "on-demand"})
    for limits in ({}, {"cpu": "100"}):
        pool = NodePool.of(
            {"metadata": {"name": "default"}, "spec": {"limits": limits, "template": {"spec": {}}}}
        )
        plan = simulate([a, b], [], [PoolCapacity(pool, [big])])
        assert sorted((c.capacity_type, c.pods) for c in plan.claims) == [
            ("on-demand", ["default/b"]),
            ("spot", ["default/a"]),
        ]
        assert all(c.instance_types == ["big"] for c in plan.claims)


def test_limits_hold_when_a_joining_pod_narrows_the_zones() -> None:
    """Karpenter's scheduler.go addToNewNodeClaim charges the largest option (subtractMax) when a
    NodeClaim is created; CanAdd/Add only narrow its options after. A pod pinned to the dear zone
    z1 joins a claim opened for ``small`` (cheap in z2): the band rebuilt from z1's price must not
    let ``big`` (4 CPU, never charged) in, or the pool's 4-CPU limit could be overrun (review
    finding 2: 6 CPU)."""
    small = _zonal("small", 2, od={"z1": 0.30, "z2": 0.10}, spot={})
    big = _zonal("big", 4, od={"z1": 0.31, "z2": 0.31}, spot={})
    pool = NodePool.of(
        {"metadata": {"name": "default"}, "spec": {"limits": {"cpu": "4"}, "template": {"spec": {}}}}
    )
    pods = [
        _pod("a0", containers=[{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]),
        _pod("a1", containers=[{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]),
        _pod(
            "b",
            containers=[{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            nodeSelector={"topology.kubernetes.io/zone": "z1"},
        ),
    ]
    plan = simulate(pods, [], [PoolCapacity(pool, [small, big])])
    worst = sum(max({"small": 2, "big": 4}[t] for t in c.instance_types) for c in plan.claims)
    assert worst <= 4, [(c.instance_types, c.zones, c.pods) for c in plan.claims]
    assert sum(len(c.pods) for c in plan.claims) == 3


def test_minvalues_bound_how_far_a_new_claim_fills() -> None:
    """Karpenter's nodeclaim.go CanAdd: filterInstanceTypesByRequirements with the summed requests
    must leave minValues distinct types (Strict), so the opening pods too stop where fewer than 3
    types would still hold them (review finding 3: 16 pods on one xlarge, minValues unmet)."""
    types = [
        itype("small", 2, 8, od=0.10),
        itype("medium", 4, 16, od=0.20),
        itype("large", 8, 32, od=0.40),
        itype("xlarge", 16, 64, od=0.70),
    ]
    pool = NodePool.of(
        {
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "requirements": [
                            {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 3}
                        ]
                    }
                }
            },
        }
    )
    pods = [
        _pod(f"p{i}", containers=[{"name": "c", "resources": {"requests": {"cpu": "1"}}}]) for i in range(16)
    ]
    plan = simulate(pods, [], [PoolCapacity(pool, types)])
    assert sum(len(c.pods) for c in plan.claims) == 16
    for c in plan.claims:
        assert len(c.instance_types) >= 3 and "not met" not in c.why, (c.instance_types, c.why)


def test_a_pod_requiring_spot_keeps_spot_types_dearer_than_on_demand() -> None:
    """aws pkg/providers/instance/filter/filter.go SpotOfferingFilter applies only when the
    NodeClaim's capacity-type requirement allows both spot and on-demand: a claim of pods that
    require spot keeps its in-band spot types even when on-demand is cheaper (review finding 6;
    it used to read the pool's requirements)."""
    a = itype("a", 4, 16, od=0.20, spot=0.04)
    b = itype("b", 4, 16, od=0.03, spot=0.043)
    spot_only = {"karpenter.sh/capacity-type": "spot"}
    pods = [
        _pod(
            "p", nodeSelector=spot_only, containers=[{"name": "c", "resources": {"requests": {"cpu": "3"}}}]
        ),
    ]
    plan = simulate(pods, [], [PoolCapacity(_pool(), [a, b])])
    (claim,) = plan.claims
    assert claim.capacity_type == "spot" and sorted(claim.instance_types) == ["a", "b"], (
        claim.instance_types,
        claim.dropped,
    )


def test_a_claims_offerings_are_checked_in_the_zones_its_pods_leave() -> None:
    """Karpenter's nodeclaim.go filterInstanceTypesByRequirements: after ``b`` (zone z1) joins,
    only offerings in z1 count; ``big``'s spot offering is in z2 only, so the claim must be
    on-demand in z1 (or not take ``b``), not spot with no zone (oracle seed 156 before the
    generator drew topology rules). Both where a pod joins a NodeClaim of this pass and in the
    packing's own fill (tests/integration/scheduling/test_plan_oracle.py, seed 124)."""
    big = _zonal("big", 8, od={"z1": 0.40, "z2": 0.40}, spot={"z2": 0.12})
    a = _pod("a", containers=[{"name": "c", "resources": {"requests": {"cpu": "4"}}}])
    b = _pod("b", nodeSelector={"topology.kubernetes.io/zone": "z1"})
    plan = simulate([a, b], [], [PoolCapacity(_pool(), [big])])
    assert all(c.zones for c in plan.claims), [(c.capacity_type, c.zones, c.pods) for c in plan.claims]


def test_limits_count_a_claims_largest_candidate() -> None:
    """Karpenter's scheduler.go filterByRemainingResources and subtractMax: with 3 cores left, a
    4-core type may not be among a NodeClaim's candidates (oracle seed 94; fixed with the
    pessimistic limits, tests/unit/scheduling/test_sched_rules.py)."""
    small, medium = itype("small", 2, 8, od=0.100), itype("medium", 4, 16, od=0.105)
    pool = NodePool.of(
        {"metadata": {"name": "default"}, "spec": {"limits": {"cpu": "3"}, "template": {"spec": {}}}}
    )
    plan = simulate([_pod("p")], [], [PoolCapacity(pool, [small, medium])])
    assert [c.instance_types for c in plan.claims] == [["small"]]


def test_a_later_required_term_is_tried_when_the_first_fits_nowhere() -> None:
    """kube-scheduler ORs a pod's nodeSelectorTerms; Karpenter's preferences.go Relax drops the
    first of several when the pod fits nowhere. ``tier In [gold]`` fits nowhere, ``team In [red]``
    fits node ``red`` (oracle seed 654)."""
    terms = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]},
            {"matchExpressions": [{"key": "team", "operator": "In", "values": ["red"]}]},
        ]
    }
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}}
    red = ExistingNode(
        "red", Requirements.from_labels({"team": "red"}), (), {"cpu": 4000, "memory": 16 * GIB, "pods": 110}
    )
    plan = simulate([_pod("p", **spec)], [red], [PoolCapacity(_pool(), CATALOG)])
    assert plan.existing == {"default/p": "red"}


# -- review speed13 (issue 13 close-out)


def _affine(name: str, types: list[str], cpu: str) -> PodView:
    return _pod(
        name,
        affinity=_required({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types}),
        containers=[{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    )


@pytest.mark.parametrize("cpus", [("2", "2"), ("3", "2")], ids=["one-group", "two-groups"])
def test_pods_whose_long_type_lists_differ_keep_their_own_types(cpus: tuple[str, str]) -> None:
    """kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/nodeclaim.go CanAdd checks
    each pod's own requirements (Requirements.Compatible, then filterInstanceTypesByRequirements):
    ``pb`` forbids ``b6``. Its six allowed types share their first five and their count with
    ``pa``'s, so their shortened texts were equal and ``pb`` was planned with ``pa``'s
    requirements onto ``b6`` (as one group, and through the merge memo as two; review speed13,
    finding 1)."""
    small = ["a1", "a2", "a3", "a4", "a5"]
    catalog = [itype(n, 1, 2, od=0.05, spot=0.02) for n in small] + [
        itype("b6", 4, 16, od=0.20, spot=0.07),
        itype("c7", 4, 16, od=0.21, spot=0.08),
    ]
    pods = [_affine("pa", [*small, "b6"], cpus[0]), _affine("pb", [*small, "c7"], cpus[1])]
    plan = simulate(pods, [], [PoolCapacity(_pool(), catalog)])
    assert plan.unschedulable == {}
    placed = {p: c.instance_types for c in plan.claims for p in c.pods}
    assert placed == {"default/pa": ["b6"], "default/pb": ["c7"]}


def test_an_on_demand_type_too_small_for_the_pods_does_not_set_the_spot_bar() -> None:
    """aws/karpenter-provider-aws pkg/providers/instance/instance.go filterInstanceTypes runs
    filter/filter.go CompatibleAvailableFilter (requirements, ``resources.Fits`` of the NodeClaim's
    requests, an available offering) before SpotInstanceFilter takes the cheapest on-demand price:
    ``tiny`` (1 CPU, on demand only, $0.01) cannot hold the 6-CPU pod, so it must not cut the spot
    claim's 8-CPU types down to its target (review speed13, finding 2). A type offered only on
    demand that does hold the pod still sets the bar."""
    big = [
        itype("big-a", 8, 32, od=0.40, spot=0.12),
        itype("big-b", 8, 32, od=0.41, spot=0.125),
        itype("big-c", 8, 32, od=0.42, spot=0.13),
    ]
    pod = _pod("p", containers=[{"name": "c", "resources": {"requests": {"cpu": "6", "memory": "1Gi"}}}])
    tiny = itype("tiny", 1, 1, od=0.01)
    plan = simulate([pod], [], [PoolCapacity(_pool(), [*big, tiny])])
    (claim,) = plan.claims
    assert (claim.capacity_type, claim.instance_types) == ("spot", ["big-a", "big-b", "big-c"]), claim.dropped
    assert "spot dearer than on-demand" not in claim.dropped
    roomy = itype("roomy", 8, 32, od=0.122)
    plan = simulate([pod], [], [PoolCapacity(_pool(), [*big, roomy])])
    (claim,) = plan.claims
    assert (claim.capacity_type, claim.instance_types) == ("spot", ["big-a"]), claim.dropped
    assert claim.dropped.get("spot dearer than on-demand") == 2
