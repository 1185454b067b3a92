"""The scheduling simulation: Karpenter's rules (each cited from kubernetes-sigs/karpenter
``pkg/controllers/provisioning/scheduling``, shared/reference/KARPENTER.md §2, §4) and kubespot's
price-per-request packing (docs/designs/provisioning.md, decision 3)."""

from __future__ import annotations

from typing import Any

from kubespot.model.quantity import GIB
from kubespot.scheduling.labels import CAPACITY_TYPE, ON_DEMAND, SPOT, ZONE
from kubespot.scheduling.nodepool import NodePool
from kubespot.scheduling.pods import PodView
from kubespot.scheduling.requirements import Requirements
from kubespot.scheduling.simulate import ExistingNode, PoolCapacity, simulate
from support.catalog import ZONES, itype


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


def pool(
    name: str = "default", *, weight: int = 0, taints: list[dict[str, str]] | None = None, **spec: Any
) -> NodePool:
    return NodePool.of(
        {
            "metadata": {"name": name},
            "spec": {
                "weight": weight,
                "template": {"spec": {"taints": taints or [], **spec}},
                **({} if "limits" not in spec else {"limits": spec.pop("limits")}),
            },
        }
    )


CATALOG = [
    itype("small", 2, 8, od=0.10, spot=0.04),
    itype("medium", 4, 16, od=0.20, spot=0.07),
    itype("large", 8, 32, od=0.40, spot=0.12),
]


def test_pods_fill_existing_nodes_before_new_capacity() -> None:
    node = ExistingNode(
        "n1", Requirements.from_labels({ZONE: "z1"}), (), {"cpu": 2000, "memory": 8 * GIB, "pods": 110}
    )
    plan = simulate([pod(f"p{i}") for i in range(3)], [node], [PoolCapacity(pool(), CATALOG)])
    assert sorted(plan.existing) == ["default/p0", "default/p1"]
    assert [c.pods for c in plan.claims] == [["default/p2"]]


def test_a_new_claim_takes_the_type_with_most_requests_per_dollar_and_spot_first() -> None:
    # 8 one-core pods: one "large" spot node (0.12) beats two mediums (0.14) and four smalls (0.16).
    plan = simulate([pod(f"p{i}", memory="1Gi") for i in range(8)], [], [PoolCapacity(pool(), CATALOG)])
    assert [(c.instance_types[0], c.capacity_type, len(c.pods)) for c in plan.claims] == [("large", SPOT, 8)]
    assert plan.cost_per_hour == 0.12


def test_the_tail_goes_to_the_cheapest_type_that_holds_it() -> None:
    plan = simulate([pod(f"p{i}") for i in range(9)], [], [PoolCapacity(pool(), CATALOG)])
    assert sorted((c.instance_types[0], len(c.pods)) for c in plan.claims) == [("large", 8), ("small", 1)]


def test_spot_dearer_than_the_cheapest_on_demand_is_left_out() -> None:
    catalog = [itype("odd", 8, 32, od=0.30, spot=0.35), itype("cheap-od", 8, 32, od=0.32)]
    plan = simulate([pod("p")], [], [PoolCapacity(pool(), catalog)])
    assert (plan.claims[0].capacity_type, plan.claims[0].instance_types[0]) == (ON_DEMAND, "odd")


def test_on_demand_when_the_pool_allows_no_spot() -> None:
    reqs = [{"key": CAPACITY_TYPE, "operator": "In", "values": [ON_DEMAND]}]
    plan = simulate([pod("p")], [], [PoolCapacity(pool(requirements=reqs), CATALOG)])
    assert plan.claims[0].capacity_type == ON_DEMAND and plan.claims[0].price_per_hour == 0.10


def test_pools_are_tried_by_weight_then_name_descending() -> None:
    pools = [
        PoolCapacity(pool("a"), CATALOG),
        PoolCapacity(pool("b"), CATALOG),
        PoolCapacity(pool("c", weight=10), CATALOG),
    ]
    assert simulate([pod("p")], [], pools).claims[0].pool == "c"
    assert simulate([pod("p")], [], pools[:2]).claims[0].pool == "b"


def test_taints_need_tolerations_and_unschedulable_pods_say_why_per_pool() -> None:
    tainted = pool("gpu", weight=50, taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}])
    plan = simulate([pod("p", cpu="64")], [], [PoolCapacity(tainted, CATALOG), PoolCapacity(pool(), CATALOG)])
    assert plan.claims == []
    assert plan.unschedulable["default/p"] == [
        'nodepool "gpu": did not tolerate taint gpu=true:NoSchedule',
        'nodepool "default": no instance type fits (3 too small)',
    ]


def test_required_zone_narrows_the_claim() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z2"]}]}
                ]
            }
        }
    }
    plan = simulate([pod("p", affinity=affinity)], [], [PoolCapacity(pool(), CATALOG)])
    assert plan.claims[0].zones == ["z2"]


def test_a_preference_that_cannot_be_met_is_relaxed() -> None:
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z9"]}]},
                }
            ]
        }
    }
    plan = simulate([pod("p", affinity=affinity)], [], [PoolCapacity(pool(), CATALOG)])
    assert not plan.unschedulable and plan.claims[0].zones == list(ZONES)


def test_limits_stop_new_capacity() -> None:
    limited = pool(limits={"cpu": "8"})
    plan = simulate([pod(f"p{i}") for i in range(12)], [], [PoolCapacity(limited, CATALOG)])
    assert sum(len(c.pods) for c in plan.claims) == 8
    assert len(plan.unschedulable) == 4
    assert "would exceed the NodePool's limits" in plan.unschedulable["default/p9"][0]


def test_host_ports_put_one_pod_per_node() -> None:
    ports = [
        {
            "name": "c",
            "resources": {"requests": {"cpu": "100m"}},
            "ports": [{"containerPort": 80, "hostPort": 80}],
        }
    ]
    pods = [PodView.of({"metadata": {"name": f"p{i}"}, "spec": {"containers": ports}}) for i in range(3)]
    plan = simulate(pods, [], [PoolCapacity(pool(), CATALOG)])
    assert [len(c.pods) for c in plan.claims] == [1, 1, 1]


def test_claims_offer_every_type_within_the_flexibility_band() -> None:
    catalog = [
        *CATALOG,
        itype("large-b", 8, 32, od=0.41, spot=0.13),
        itype("large-c", 8, 32, od=0.5, spot=0.30),
    ]
    plan = simulate([pod(f"p{i}") for i in range(8)], [], [PoolCapacity(pool(), catalog)])
    assert plan.claims[0].instance_types == ["large", "large-b"]


def test_smaller_pods_share_the_claim_a_larger_one_opened() -> None:
    pods = [pod("big", cpu="6"), pod("s1", cpu="1"), pod("s2", cpu="1")]
    plan = simulate(pods, [], [PoolCapacity(pool(), CATALOG)])
    assert [sorted(c.pods) for c in plan.claims] == [["default/big", "default/s1", "default/s2"]]


def test_daemonset_overhead_is_reserved_on_every_new_node() -> None:
    plan = simulate([pod(f"p{i}") for i in range(8)], [], [PoolCapacity(pool(), CATALOG, {"cpu": 500})])
    assert sorted(len(c.pods) for c in plan.claims) == [1, 7]


def test_many_identical_pods_are_planned_quickly() -> None:
    import time

    pods = [pod(f"p{i:05d}", cpu="500m", memory="512Mi") for i in range(20_000)]
    started = time.process_time()
    plan = simulate(pods, [], [PoolCapacity(pool(), CATALOG)])
    assert sum(len(c.pods) for c in plan.claims) == 20_000
    assert time.process_time() - started < 30  # a loose bound against a quadratic regression
