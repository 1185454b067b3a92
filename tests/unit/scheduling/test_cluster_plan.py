"""The one planning flow (``scheduling.cluster_plan``) the provisioner's pass and ``kubespot plan``
share: its inputs beyond the objects change the plan as the provisioner needs.

Sources: kubernetes-sigs/karpenter ``pkg/controllers/provisioning/provisioner.go`` (``Schedule``:
NodePools with their instance types, the pending pods, the cluster state's nodes and in-flight
NodeClaims; ``NewScheduler`` skips a pool with no compatible type), ``scheduling/scheduler.go``
(``updateRemainingResources``: a pool's limits against its usage), aws/karpenter-provider-aws
``pkg/cache/unavailableofferings.go`` (the offerings left out of the next simulation).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubespot.cloud import UnavailableOfferings, fake_type
from kubespot.model import SystemClock
from kubespot.scheduling import cluster
from kubespot.scheduling.cluster_plan import plan_cluster, pools_to_plan
from kubespot.sim.kubesim.testing import pod
from support.provisioning_env import nodeclass, nodepool

TYPES = [
    fake_type("small", 2, 8, od=0.10, spot=0.03, zones=("z1",)),
    fake_type("medium", 4, 16, od=0.20, spot=0.06, zones=("z1",)),
]


def objects(*pods: dict[str, Any], limits: dict[str, str] | None = None) -> dict[str, list[dict[str, Any]]]:
    return {
        "NodePool": [nodepool(limits=limits)],
        "EC2NodeClass": [nodeclass()],
        "Pod": list(pods),
    }


def test_the_objects_alone_make_the_plan_kubespot_plan_prints() -> None:
    objs = objects(pod("a", requests={"cpu": "1", "memory": "1Gi"}))
    todo = pools_to_plan(objs["NodePool"], objs["EC2NodeClass"])
    assert [p.name for p, _ in todo.pools] == ["general"]
    plan, inputs = plan_cluster(objs, [p for p, _ in todo.pools], {"general": TYPES})
    (claim,) = plan.claims
    assert claim.instance_types[0] == "small" and claim.capacity_type == "spot"
    assert [v.key for v in inputs.pending] == ["default/a"] and set(inputs.catalog["general"]) == {
        "small",
        "medium",
    }


def test_a_pool_without_its_class_is_left_out_with_a_condition() -> None:
    todo = pools_to_plan([nodepool()], [])
    assert todo.pools == [] and todo.conditions["general"].reason == "NodeClassNotReady"


def test_the_provisioner_s_inputs_usage_pending_pods_and_unavailable_offerings() -> None:
    """``in_use`` (what the provisioner charges for claims its cache does not show launched) holds a
    limited pool back; ``pending`` plans only the pods given; the unavailable offerings are left
    out, and a pool left with none compatible is reported (NewScheduler's Warning)."""
    objs = objects(
        pod("a", requests={"cpu": "1", "memory": "1Gi"}),
        pod("b", requests={"cpu": "1", "memory": "1Gi"}),
        limits={"cpu": "4"},
    )
    pools = [p for p, _ in pools_to_plan(objs["NodePool"], objs["EC2NodeClass"]).pools]
    plan, _ = plan_cluster(objs, pools, {"general": TYPES}, in_use={"general": {"cpu": 3000, "nodes": 1}})
    assert not plan.claims and set(plan.unschedulable) == {"default/a", "default/b"}
    plan, inputs = plan_cluster(objs, pools, {"general": TYPES}, pending=[objs["Pod"][0]])
    assert [v.key for v in inputs.pending] == ["default/a"] and plan.claims[0].pods == ["default/a"]
    unavailable = UnavailableOfferings(SystemClock())
    for name in ("small", "medium"):
        for kind in ("spot", "on-demand"):
            unavailable.mark(kind, name, "z1", "test")
    plan, inputs = plan_cluster(objs, pools, {"general": TYPES}, unavailable=unavailable)
    assert not plan.claims and inputs.incompatible == ["general"]


def test_kubespot_plan_reads_every_pool_s_usage_from_one_pass_over_the_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """provisioner.go ``Schedule`` → ``scheduler.go`` ``NewScheduler`` fills every NodePool's
    remaining resources from one read of the cluster state (``updateRemainingResources`` over
    ``nodes.Active()``): ``plan_cluster`` without ``in_use`` (``kubespot plan``) reads the nodes
    once for all its pools, not once per pool (review 16c #4)."""
    reads: list[int] = []
    real = cluster.state_nodes

    def counted(nodes: Any, nodeclaims: Any) -> list[cluster.StateNode]:
        reads.append(1)
        return real(nodes, nodeclaims)

    monkeypatch.setattr(cluster, "state_nodes", counted)
    names = ("general", "second", "third")
    objs = {
        "NodePool": [nodepool(n, limits={"cpu": "100"}) for n in names],
        "EC2NodeClass": [nodeclass()],
        "Pod": [pod("a", requests={"cpu": "1", "memory": "1Gi"})],
    }
    pools = [p for p, _ in pools_to_plan(objs["NodePool"], objs["EC2NodeClass"]).pools]
    assert sorted(p.name for p in pools) == sorted(names)
    plan, _ = plan_cluster(objs, pools, dict.fromkeys(names, TYPES))
    assert len(plan.claims) == 1 and len(reads) == 1
