"""A planned NodeClaim as the object the provisioner creates, and which pods are provisionable.

Sources: kubernetes-sigs/karpenter ``pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go``
(``NewNodeClaimTemplate``, ``ToNodeClaim``), ``pkg/apis/v1/nodepool.go`` (``Hash``: requirements
carry ``hash:"ignore"``), ``pkg/utils/pod/scheduling.go`` (``IsProvisionable``).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubespot.cloud import fake_type
from kubespot.controllers.provisioning.nodeclaim_template import (
    HASH_ANNOTATION,
    HASH_VERSION,
    HASH_VERSION_ANNOTATION,
    any_value,
    nodepool_hash,
    to_nodeclaim,
)
from kubespot.controllers.provisioning.pending import is_provisionable
from kubespot.scheduling.api.nodepool import parse_nodepool
from kubespot.scheduling.cluster import pending_pods
from kubespot.scheduling.nodepool import NodePool
from kubespot.scheduling.requirements import Requirement, Requirements
from kubespot.scheduling.simulate import PoolCapacity, simulate

Obj = dict[str, Any]


def pool_obj(**template_spec: Any) -> Obj:
    spec = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
            {"key": "team", "operator": "In", "values": ["a", "b"]},
        ],
        "taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}],
        **template_spec,
    }
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "general", "uid": "pool-uid"},
        "spec": {
            "template": {"metadata": {"labels": {"env": "prod"}, "annotations": {"a": "1"}}, "spec": spec}
        },
    }


def pending_pod(name: str, cpu: str = "1", **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            **spec,
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


TYPES = [
    fake_type("small", 2, 8, od=0.10, spot=0.04),
    fake_type("large", 8, 32, od=0.40, spot=0.12),
    fake_type("odonly", 4, 16, od=0.15),
]


def plan_for(pods: list[Obj], obj: Obj) -> tuple[Any, Any]:
    spec = parse_nodepool(obj).spec
    plan = simulate(pending_pods(pods), [], [PoolCapacity(NodePool.from_spec(spec), TYPES)])
    return plan, spec


def req(claim: Obj, key: str) -> Obj:
    found = [r for r in claim["spec"]["requirements"] if r["key"] == key]
    assert len(found) == 1, claim["spec"]["requirements"]
    return found[0]


def test_the_nodeclaim_object_as_to_nodeclaim_builds_it() -> None:
    """nodeclaimtemplate.go ToNodeClaim: generateName, owner NodePool (blockOwnerDeletion, not
    controller), labels (template, nodepool, nodeclass, single-valued custom requirement), the
    hash annotations, the template's spec with narrowed requirements and the summed requests; no
    finalizer."""
    pods = [pending_pod(f"p{i}", cpu="500m", nodeSelector={"team": "a"}) for i in range(3)]
    plan, spec = plan_for(pods, pool_obj())
    assert len(plan.claims) == 1
    types = {t.name: t for t in TYPES}
    both = Requirement.of("karpenter.sh/capacity-type", "In", ["spot", "on-demand"])
    claim = to_nodeclaim(plan.claims[0], spec, "pool-uid", types, allowed_capacity=both)
    meta = claim["metadata"]
    assert meta["generateName"] == "general-" and "name" not in meta
    assert "finalizers" not in meta
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "name": "general",
            "uid": "pool-uid",
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["labels"] == {
        "env": "prod",
        "team": "a",
        "karpenter.sh/nodepool": "general",
        "karpenter.k8s.aws/ec2nodeclass": "default",
    }
    assert meta["annotations"]["a"] == "1"
    assert meta["annotations"][HASH_ANNOTATION] == nodepool_hash(spec)
    # kubespot's own version, not Karpenter's v3: the value is not Karpenter's hash.
    assert meta["annotations"][HASH_VERSION_ANNOTATION] == "kubespot-1"
    body = claim["spec"]
    assert body["taints"] == [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    assert body["nodeClassRef"]["name"] == "default" and body["expireAfter"] == "720h"
    assert body["resources"] == {"requests": {"cpu": "1500m", "memory": "3072Mi", "pods": "3"}}
    # Narrowed: team a only; instance types the cheapest that hold the pods; the spot claim opened
    # again to both capacity types (the types offer both where the claim may go), so the launch
    # can fall back to on-demand.
    assert plan.claims[0].capacity_type == "spot"
    assert req(claim, "team")["values"] == ["a"]
    itypes = req(claim, "node.kubernetes.io/instance-type")
    assert itypes["operator"] == "In" and itypes["values"][0] == "small"
    assert req(claim, "karpenter.sh/capacity-type")["values"] == ["on-demand", "spot"]
    # Without what is allowed, the simulation's pin stays.
    pinned = to_nodeclaim(plan.claims[0], spec, "pool-uid", types)
    assert req(pinned, "karpenter.sh/capacity-type")["values"] == ["spot"]
    assert req(claim, "karpenter.sh/nodepool")["values"] == ["general"]


def test_the_hash_version_is_not_karpenters_so_karpenter_restamps_instead_of_drifting() -> None:
    """core pkg/controllers/nodeclaim/disruption/drift.go areStaticFieldsDrifted compares the
    NodePool's and the NodeClaim's hashes only when their karpenter.sh/nodepool-hash-version
    values are equal, and pkg/controllers/nodepool/hash/controller.go updateNodeClaimHash re-stamps
    only NodeClaims whose version differs from NodePoolHashVersion (v3): kubespot's hash (not
    hashstructure's) must carry another version, or a return to Karpenter would drift every node
    kubespot launched."""
    plan, spec = plan_for([pending_pod("p")], pool_obj())
    claim = to_nodeclaim(plan.claims[0], spec, "pool-uid", {t.name: t for t in TYPES})
    version = claim["metadata"]["annotations"][HASH_VERSION_ANNOTATION]
    assert version == HASH_VERSION and version != "v3" and version.startswith("kubespot-")


@pytest.mark.parametrize(
    ("pool_req", "pod_req"),
    [
        ({"operator": "In", "values": ["a", "b"]}, {"operator": "In", "values": ["a", "b"]}),
        ({"operator": "In", "values": ["a", "b"]}, {"operator": "Exists"}),
        ({"operator": "Exists"}, {"operator": "Exists"}),
        ({"operator": "Exists"}, {"operator": "NotIn", "values": ["c"]}),
        ({"operator": "Gt", "values": ["5"]}, {"operator": "Lt", "values": ["9"]}),
    ],
)
def test_a_custom_requirement_with_several_values_still_labels_the_node(pool_req: Obj, pod_req: Obj) -> None:
    """core scheduling/nodeclaimtemplate.go resolveCustomLabelsFromRequirements: every custom (not
    well-known, not restricted) requirement becomes a label with requirement.Any()
    (pkg/scheduling/requirement.go Any: an In value, a value within the bounds, or a generated one
    for Exists/NotIn), so the node carries a value the pod's affinity accepts and kube-scheduler
    can bind it; without it a new NodeClaim would be planned every pass."""
    pool = pool_obj(
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
            {"key": "team", **pool_req},
        ]
    )
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "team", **pod_req}]}]
            }
        }
    }
    plan, spec = plan_for([pending_pod("p", affinity=affinity)], pool)
    assert len(plan.claims) == 1, plan.unschedulable
    claim = to_nodeclaim(plan.claims[0], spec, "pool-uid", {t.name: t for t in TYPES})
    value = claim["metadata"]["labels"].get("team")
    assert value is not None, claim["metadata"]["labels"]
    for r in (pool_req, pod_req):
        assert Requirement.of("team", r["operator"], r.get("values", ())).has(value)
    # The NodeClaim's own requirement admits it too (the node's labels must match the claim).
    assert Requirements.from_selector(claim["spec"]["requirements"])["team"].has(value)


def test_any_value_as_karpenters_requirement_any() -> None:
    """pkg/scheduling/requirement.go Any: DoesNotExist has none; In one of its values; bounds a
    number within them that is not excluded; NotIn/Exists a value they admit."""
    assert any_value(Requirement.of("k", "DoesNotExist")) is None
    assert any_value(Requirement.of("k", "In", ["b", "a"])) == "a"
    assert (
        any_value(Requirement.of("k", "Gt", ["5"]).intersection(Requirement.of("k", "NotIn", ["6"]))) == "7"
    )
    assert any_value(Requirement.of("k", "Lt", ["3"])) == "2"
    generated = any_value(Requirement.of("k", "NotIn", ["x"]))
    assert generated and generated != "x"


def test_capacity_type_follows_the_offerings_still_available() -> None:
    """ToNodeClaim: capacity-type In the capacity types of the types' available offerings (the
    catalog after UnavailableOfferings.apply): no spot offering left, on-demand only."""
    from dataclasses import replace

    plan, spec = plan_for([pending_pod("p", cpu="6")], pool_obj())
    claim_plan = plan.claims[0]
    no_spot = {
        t.name: replace(
            t,
            offerings=tuple(replace(o, available=o.capacity_type != "spot") for o in t.offerings),
        )
        for t in TYPES
    }
    both = Requirement.of("karpenter.sh/capacity-type", "In", ["spot", "on-demand"])
    claim = to_nodeclaim(claim_plan, spec, "pool-uid", no_spot, allowed_capacity=both)
    assert req(claim, "karpenter.sh/capacity-type")["values"] == ["on-demand"]


def test_the_hash_ignores_requirements_and_order_but_not_taints() -> None:
    """nodepool.go Hash: requirements are hash:"ignore" (drift on them is judged apart); slices as
    sets; a taint change is drift."""
    base = parse_nodepool(pool_obj()).spec
    reordered = parse_nodepool(
        pool_obj(
            requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
            taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}],
        )
    ).spec
    assert nodepool_hash(base) == nodepool_hash(reordered)
    tainted = parse_nodepool(pool_obj(taints=[{"key": "other", "effect": "NoSchedule"}])).spec
    assert nodepool_hash(tainted) != nodepool_hash(base)
    assert nodepool_hash(base).isdigit()


def test_is_provisionable_as_karpenter() -> None:
    """scheduling.go IsProvisionable: unbound, not preempting, Unschedulable, not a DaemonSet's
    or a static pod; GetProvisionablePods: not terminating."""
    ok = pending_pod("p")
    assert is_provisionable(ok)
    waiting = pending_pod("w")
    waiting["status"]["conditions"] = []  # kube-scheduler has not said Unschedulable yet
    assert not is_provisionable(waiting)
    bound = pending_pod("b", nodeName="n1")
    assert not is_provisionable(bound)
    preempting = pending_pod("n")
    preempting["status"]["nominatedNodeName"] = "n1"
    assert not is_provisionable(preempting)
    deleting = pending_pod("d")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not is_provisionable(deleting)
    daemon = pending_pod("ds")
    daemon["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x"}]
    assert not is_provisionable(daemon)
    replica = pending_pod("rs")
    replica["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x"}]
    assert is_provisionable(replica)
