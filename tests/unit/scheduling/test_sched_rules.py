"""minValues, pessimistic limits and the explanations of the scheduling simulation, each rule a table
test citing the Karpenter source it follows (kubernetes-sigs/karpenter unless said otherwise;
shared/reference/KARPENTER.md §2, §4; docs/designs/provisioning.md decisions 3 and 4)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kubespot.scheduling import explain, minvalues
from kubespot.scheduling.instance_types import InstanceType
from kubespot.scheduling.labels import INSTANCE_TYPE, SPOT, ZONE
from kubespot.scheduling.nodepool import NodePool
from kubespot.scheduling.pods import PodView
from kubespot.scheduling.report import plan_json, pod_story, pod_story_json
from kubespot.scheduling.requirements import Requirement, Requirements
from kubespot.scheduling.simulate import (
    MAX_INSTANCE_TYPES,
    ExistingNode,
    PlannedClaim,
    PoolCapacity,
    simulate,
)
from kubespot.scheduling.taints import Taint
from support.catalog import itype

FAMILY = "karpenter.k8s.aws/instance-family"


def pod(name: str, cpu: str = "1", memory: str = "1Gi", **spec: Any) -> PodView:
    return PodView.of(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
                **spec,
            },
        }
    )


def pool(name: str = "default", limits: dict[str, str] | None = None, **spec: Any) -> NodePool:
    return NodePool.of(
        {
            "metadata": {"name": name},
            "spec": {"template": {"spec": spec}, **({"limits": limits} if limits else {})},
        }
    )


def min_values(key: str, n: int) -> list[dict[str, Any]]:
    return [{"key": key, "operator": "Exists", "minValues": n}]


def accounted(claim: PlannedClaim) -> None:
    """Every type of the pool is offered or dropped for one reason, once."""
    assert claim.considered == len(claim.instance_types) + sum(claim.dropped.values())
    assert set(claim.dropped) <= set(explain.TYPE_REASONS)


# -- minValues: core pkg/cloudprovider/types.go SatisfiesMinValues / Truncate,
#    pkg/controllers/provisioning/scheduling/nodeclaim.go filterInstanceTypesByRequirements

# m5.large is the cheapest by far; the band (10 %) holds it alone.
MV_CATALOG = [
    itype("m5.large", 2, 8, od=0.10, spot=0.030),
    itype("m5.xlarge", 4, 16, od=0.20, spot=0.050),
    itype("c5.large", 2, 4, od=0.09, spot=0.040),
    itype("c5.xlarge", 4, 8, od=0.17, spot=0.045),
    itype("r5.large", 2, 16, od=0.13, spot=0.060),
]


@pytest.mark.parametrize(
    ("key", "n", "offered"),
    [
        # No minValues: the band alone.
        (INSTANCE_TYPE, None, ["m5.large"]),
        # Three instance types: the two cheapest beyond the band join (price order after the target).
        (INSTANCE_TYPE, 3, ["m5.large", "c5.large", "c5.xlarge"]),
        # Two families: the cheapest type of another family joins, not a second m5.
        (FAMILY, 2, ["m5.large", "c5.large"]),
        # Three families: c5 and r5 each bring one.
        (FAMILY, 3, ["m5.large", "c5.large", "r5.large"]),
    ],
)
def test_min_values_widens_the_claim_past_the_band(key: str, n: int | None, offered: list[str]) -> None:
    """core types.go SatisfiesMinValues: the offered types carry at least N distinct values of the key;
    kubespot widens its flexibility band with the cheapest types that bring a missing value."""
    reqs = min_values(key, n) if n else []
    plan = simulate([pod("p")], [], [PoolCapacity(pool(requirements=reqs), MV_CATALOG)])
    (claim,) = plan.claims
    assert (claim.capacity_type, claim.instance_types) == (SPOT, offered)
    accounted(claim)
    if n:
        assert claim.min_values == {key: n}
        assert "widened past the flexibility band to meet minValues" in claim.why
        assert claim.requirements[INSTANCE_TYPE].values == frozenset(offered)
    else:
        assert "widened" not in claim.why and claim.dropped[explain.OUTSIDE_BAND] == 4


def test_a_pool_whose_types_cannot_reach_min_values_is_unschedulable_with_karpenters_words() -> None:
    """core nodeclaim.go filterInstanceTypesByRequirements (Strict policy): the compatible types that fit
    carry fewer than N values, so the pool cannot take the pod; types.go SatisfiesMinValues' message."""
    # Four families in the catalog, but the pod fits only on the 4-core types (two families).
    reqs = min_values(FAMILY, 3)
    plan = simulate([pod("p", cpu="3")], [], [PoolCapacity(pool(requirements=reqs), MV_CATALOG)])
    assert plan.claims == []
    (reason,) = plan.unschedulable["default/p"]
    karpenter = "minValues requirement is not met for label(s)"
    assert reason.startswith(f'nodepool "default": {karpenter} (label(s)=[{FAMILY}]; {FAMILY}: 2 of 3)')
    assert "3 too small" in reason


@pytest.mark.parametrize("order", ["opener first", "narrower first"])
def test_a_pod_that_would_narrow_a_claim_below_min_values_does_not_join_it(order: str) -> None:
    """core nodeclaim.go CanAdd / filterInstanceTypesByRequirements: a pod whose requirements leave the
    NodeClaim's types short of minValues cannot join it; alone, it cannot open one either."""
    reqs = min_values(FAMILY, 2)
    wide, narrow = pod("a-wide"), pod("b-narrow", nodeSelector={FAMILY: "m5"})
    pods = [wide, narrow] if order == "opener first" else [narrow, wide]
    plan = simulate(pods, [], [PoolCapacity(pool(requirements=reqs), MV_CATALOG)])
    assert [c.pods for c in plan.claims] == [["default/a-wide"]]
    assert plan.claims[0].min_values == {FAMILY: 2} and "not met" not in plan.claims[0].why
    assert "minValues requirement is not met" in plan.unschedulable["default/b-narrow"][0]


def test_truncation_to_sixty_keeps_min_values() -> None:
    """core types.go Truncate / aws instance.go maxInstanceTypes=60: the cut to 60 must still satisfy
    minValues; kubespot keeps the types that bring the values, then the cheapest."""
    same = [itype(f"a.s{i}", 2, 8, od=0.10, spot=0.040 + i * 0.00001) for i in range(70)]
    other = itype("b.s1", 2, 8, od=0.10, spot=0.0439)  # in the band, but the dearest of it
    reqs = min_values(FAMILY, 2)
    plan = simulate([pod("p")], [], [PoolCapacity(pool(requirements=reqs), [*same, other])])
    (claim,) = plan.claims
    assert len(claim.instance_types) == MAX_INSTANCE_TYPES
    assert "b.s1" in claim.instance_types and claim.instance_types[0] == "a.s0"
    assert claim.min_values == {FAMILY: 2}
    assert claim.dropped == {explain.BEYOND_CUT: 11}
    accounted(claim)
    # Without minValues the cut is by price alone: the b1 type is past it.
    plan = simulate([pod("p")], [], [PoolCapacity(pool(), [*same, other])])
    assert "b.s1" not in plan.claims[0].instance_types


def test_truncate_alone_keeps_the_list_order_and_the_values() -> None:
    """core types.go Truncate: at most N types, minValues still met."""
    types = [itype(f"a.s{i}", 2, 8, od=0.1) for i in range(5)] + [itype("b.s1", 2, 8, od=0.2)]
    reqs = Requirements([Requirement.of(FAMILY, "Exists", min_values=2)])
    assert [t.name for t in minvalues.truncate(types, reqs, 3)] == ["a.s0", "a.s1", "b.s1"]
    assert [t.name for t in minvalues.truncate(types, Requirements(), 3)] == ["a.s0", "a.s1", "a.s2"]


# -- limits: core pkg/controllers/provisioning/scheduling/scheduler.go subtractMax, filterByRemainingResources

LIMIT_CATALOG = [
    itype("small", 2, 8, od=0.100, spot=0.040),
    # As dear as "small" (within the band) and eight times the CPU: a pessimist counts it.
    itype("huge", 16, 64, od=0.105, spot=0.042),
]


@pytest.mark.parametrize(
    ("limits", "claims", "charged", "reason"),
    [
        # 16 CPUs: the first claim may become "huge", so it counts 16 and nothing is left.
        ({"cpu": "16"}, 1, {"cpu": 16000}, "all available instance types exceed limits for nodepool"),
        # 10 CPUs: "huge" exceeds what is left and is filtered; each claim counts 2, five fit.
        ({"cpu": "10"}, 5, {"cpu": 2000}, "all available instance types exceed limits for nodepool"),
        # Nodes are counted exactly, one per claim.
        ({"nodes": "3"}, 3, {"nodes": 1}, "node limits have been exhausted for nodepool"),
    ],
)
def test_limits_are_counted_pessimistically(
    limits: dict[str, str], claims: int, charged: dict[str, int], reason: str
) -> None:
    """scheduler.go: each new NodeClaim subtracts the largest capacity among its instance types
    (subtractMax); types whose capacity exceeds the remainder are filtered (filterByRemainingResources);
    an exhausted ``nodes`` limit is said at once; a pod the pool cannot take says so."""
    # A host port each: one pod per NodeClaim, so every claim is sized for (and targets) "small".
    port = [{"containerPort": 80, "hostPort": 80}]
    container = {"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}, "ports": port}
    pods = [
        PodView.of({"metadata": {"name": f"p{i}"}, "spec": {"containers": [container]}}) for i in range(8)
    ]
    plan = simulate(pods, [], [PoolCapacity(pool(limits=limits), LIMIT_CATALOG)])
    assert len(plan.claims) == claims
    assert all(c.limits_charged == charged for c in plan.claims)
    assert len(plan.unschedulable) == 8 - claims
    for reasons in plan.unschedulable.values():
        assert reasons[0].startswith(f'nodepool "default": {reason} (')
    # The group's story: the claims it opened over its passes, then why the pool stopped.
    ((name, outcome),) = plan.stories["default/p7"].outcomes()
    assert name == "default" and outcome.startswith(f"opened {claims} NodeClaim(s); {reason} (")
    for c in plan.claims:
        accounted(c)
        assert c.instance_types == (
            ["small", "huge"] if limits == {"cpu": "16"} or "nodes" in limits else ["small"]
        )


def test_existing_nodes_count_against_the_limits() -> None:
    """scheduler.go calculateExistingNodeClaims/updateRemainingResources: the pool's nodes' capacity
    is subtracted from its limits before any new NodeClaim."""
    capacity = PoolCapacity(pool(limits={"cpu": "6"}), LIMIT_CATALOG, in_use={"cpu": 4000, "nodes": 1})
    plan = simulate([pod(f"p{i}", cpu="2") for i in range(3)], [], [capacity])
    assert len(plan.claims) == 1 and len(plan.unschedulable) == 2


# -- explanations (design note decision 4)


def unavailable(it: InstanceType) -> InstanceType:
    return dataclasses.replace(
        it, offerings=tuple(dataclasses.replace(o, available=False) for o in it.offerings)
    )


def test_every_type_of_the_pool_is_offered_or_dropped_for_one_counted_reason() -> None:
    """Decision 4; the filters are Karpenter's nodeclaim.go filterInstanceTypesByRequirements
    (requirements, fits, offering), scheduler.go filterByRemainingResources (limits), aws instance.go
    (spot dearer than the cheapest on-demand), and kubespot's band and the 60-type cut."""
    catalog = [
        itype("a1", 2, 8, od=0.10, spot=0.040),  # the target
        itype("a2", 2, 8, od=0.11, spot=0.043),  # in the band
        itype("a3", 2, 8, od=0.12, spot=0.050),  # past the band (0.044)
        itype("a4", 2, 8, od=0.13, spot=0.070),  # spot dearer than od-only's on-demand 0.06
        itype("od-only", 2, 8, od=0.06),  # no spot offering
        unavailable(itype("gone", 2, 8, od=0.05, spot=0.01)),  # nothing available
        itype("tiny", 0, 8, od=0.01, spot=0.005),  # too small
        itype("arm", 2, 8, od=0.05, spot=0.01, arch="arm64"),  # the pod wants amd64
    ]
    plan = simulate(
        [pod("p", nodeSelector={"kubernetes.io/arch": "amd64"})], [], [PoolCapacity(pool(), catalog)]
    )
    (claim,) = plan.claims
    assert claim.instance_types == ["a1", "a2"] and claim.considered == 8
    assert claim.dropped == {
        explain.INCOMPATIBLE: 1,
        explain.TOO_SMALL: 1,
        explain.NO_OFFERING: 2,
        explain.SPOT_DEARER: 1,
        explain.OUTSIDE_BAND: 1,
    }
    assert plan_json(plan)["nodeclaims"][0]["types"] == {
        "considered": 8,
        "offered": 2,
        "dropped": {
            "incompatible requirements": 1,
            "no available offering": 2,
            "outside the flexibility band": 1,
            "spot dearer than on-demand": 1,
            "too small": 1,
        },
        "min_values": {},
        "limits_charged": {},
    }


def test_a_groups_story_counts_the_nodes_that_refused_it_and_the_pools_tried() -> None:
    """Decision 4: per group, existing nodes tried and the first filter that refused each (the
    kube-scheduler's words, pkg/scheduler/framework/plugins: TaintToleration, NodeAffinity,
    NodeResourcesFit), the NodePools tried with their outcome."""
    alloc = {"cpu": 4000, "memory": 16 << 30, "pods": 110}
    z1 = Requirements.from_labels({ZONE: "z1"})
    z2 = Requirements.from_labels({ZONE: "z2"})
    nodes = [
        ExistingNode("tainted", z1, (Taint("dedicated", "NoSchedule", "db"),), alloc),
        *(ExistingNode(f"elsewhere-{i}", z2, (), alloc) for i in range(3)),
        ExistingNode("full", z1, (), alloc, requested={"cpu": 3500}),
        ExistingNode("roomy", z1, (), alloc),
    ]
    gpu = pool("gpu", taints=[{"key": "gpu", "effect": "NoSchedule"}])
    pools = [PoolCapacity(gpu, LIMIT_CATALOG), PoolCapacity(pool("default"), LIMIT_CATALOG)]
    pods = [pod(f"p{i}", nodeSelector={ZONE: "z1"}) for i in range(6)]
    plan = simulate(pods, nodes, pools)
    assert sorted(plan.existing.values()) == ["roomy"] * 4
    story = plan.stories["default/p5"]
    assert story is plan.stories["default/p0"] and story.pods == 6
    assert story.nodes_tried == 6
    assert story.nodes_refused == {
        explain.NODE_TAINT: 1,
        explain.NODE_AFFINITY: 3,
        "Insufficient cpu": 1,
    }
    assert story.outcomes() == [
        ("gpu", "did not tolerate taint gpu:NoSchedule"),
        ("default", "opened 1 NodeClaim(s)"),
    ]
    text = pod_story(plan, "default/p5")
    assert text is not None
    assert "Existing nodes: 6 tried, 5 refused (3 node(s) didn't match Pod's node affinity/selector" in text
    assert "NodePool gpu: did not tolerate taint gpu:NoSchedule." in text
    assert "Instance types: 2 in the pool, 2 offered." in text
    told = pod_story_json(plan, "default/p5")
    assert told is not None and told["outcome"] == "nodeclaim"
    assert told["story"]["existing_nodes"] == {
        "tried": 6,
        "refused": {
            "Insufficient cpu": 1,
            "node(s) didn't match Pod's node affinity/selector": 3,
            "node(s) had untolerated taint": 1,
        },
    }
    assert told["nodeclaim"]["types"]["offered"] == 2
    assert pod_story_json(plan, "default/p0") == {
        "pod": "default/p0",
        "outcome": "existing",
        "node": "roomy",
        "story": told["story"],
    }
