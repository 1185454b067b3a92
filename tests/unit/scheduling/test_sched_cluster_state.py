"""Reading the cluster as Karpenter's cluster state does (``scheduling/cluster.py``): the taints of
starting nodes, cordoned nodes, DaemonSet pods still to come, and NodeClaims without a node."""

from __future__ import annotations

from typing import Any

from kubespot.scheduling.cluster import existing_nodes, pending_pods, pool_in_use
from kubespot.scheduling.nodepool import NodePool
from kubespot.scheduling.simulate import PoolCapacity, simulate
from support.catalog import itype

CATALOG = [itype("m", 4, 16, od=0.20, spot=0.07)]
LABELS = {
    "karpenter.sh/nodepool": "default",
    "node.kubernetes.io/instance-type": "m",
    "topology.kubernetes.io/zone": "z1",
    "karpenter.sh/capacity-type": "spot",
    "kubernetes.io/arch": "amd64",
    "kubernetes.io/os": "linux",
}
ROOM = {"cpu": "4", "memory": "16Gi", "pods": "110"}


def _pool() -> NodePool:
    return NodePool.of({"metadata": {"name": "default"}, "spec": {"template": {"spec": {}}}})


def _node(
    name: str, labels: dict[str, str], spec: dict[str, Any] | None = None, **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": spec or {},
        "status": {"allocatable": ROOM, "capacity": ROOM, **status},
    }


def _pod(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [container], **spec}}


def _plan(pods: list[dict[str, Any]], nodes: list[dict[str, Any]], **kw: Any) -> Any:
    existing = existing_nodes(nodes, pods, **kw)
    return simulate(pending_pods(pods), existing, [PoolCapacity(_pool(), CATALOG)])


def test_a_starting_managed_node_is_judged_without_its_ephemeral_and_startup_taints() -> None:
    """Karpenter's pkg/controllers/state/statenode.go Taints: a managed node not yet initialized is
    judged without the KnownEphemeralTaints (not-ready, unregistered...) and its NodeClaim's startup
    taints, so pending pods wait for it instead of launching a duplicate during a scale-up."""
    startup = {"key": "cni.example/agent-not-ready", "effect": "NoSchedule"}
    node = _node(
        "new-node",
        LABELS,
        {
            "taints": [
                {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
                startup,
            ]
        },
        conditions=[{"type": "Ready", "status": "False"}],
    )
    claim = {
        "metadata": {"name": "default-abc", "labels": LABELS},
        "spec": {"startupTaints": [startup]},
        "status": {"nodeName": "new-node"},
    }
    plan = _plan([_pod("p", "1")], [node], nodeclaims=[claim])
    assert plan.existing == {"default/p": "new-node"} and plan.claims == []
    # Once initialized, the node's taints are what they are.
    ready = {**LABELS, "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true"}
    done = _node("new-node", ready, node["spec"])
    plan = _plan([_pod("p", "1")], [done], nodeclaims=[claim])
    assert plan.existing == {} and len(plan.claims) == 1


def test_an_unmanaged_node_keeps_its_not_ready_taint() -> None:
    """statenode.go Taints: only managed nodes (Karpenter v1 ``Managed``: a NodeClaim owns it) drop
    the ephemeral taints; a node without a claim is always initialized and judged as it is, even
    one carrying the nodepool label (an orphan whose claim is gone: a dead node's ``unreachable``
    taint must keep pods off it, or they are planned onto it and no NodeClaim is made)."""
    unlabelled = {k: v for k, v in LABELS.items() if k != "karpenter.sh/nodepool"}
    for labels in (unlabelled, LABELS):
        node = _node(
            "other", labels, {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]}
        )
        plan = _plan([_pod("p", "1")], [node])
        assert plan.existing == {} and len(plan.claims) == 1, labels


def test_a_nodeclaim_without_a_node_is_existing_capacity() -> None:
    """Karpenter's cluster state holds launched NodeClaims not yet registered as state nodes of
    their labels and requirements (statenode.go Labels, Allocatable from NodeClaim status), tried
    before new capacity; they count against the pool's limits too (scheduler.go
    updateRemainingResources over every state node)."""
    claim = {
        "metadata": {"name": "default-xyz", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]},
            ],
            "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
        },
        "status": {"capacity": ROOM},
    }
    plan = _plan([_pod("p", "1")], [], nodeclaims=[claim], type_allocatable={"m": {"cpu": 3900, "pods": 110}})
    assert plan.existing == {"default/p": "default-xyz"} and plan.claims == []
    # Too big for the type's allocatable: a new NodeClaim; a pod in another zone cannot use it.
    plan = _plan([_pod("q", "3950m")], [], nodeclaims=[claim], type_allocatable={"m": {"cpu": 3900}})
    assert plan.existing == {}
    zoned = _pod("z", "1", nodeSelector={"topology.kubernetes.io/zone": "z2"})
    assert _plan([zoned], [], nodeclaims=[claim], type_allocatable={"m": {"cpu": 3900}}).existing == {}
    assert pool_in_use([], "default", [claim]) == {"nodes": 1, "cpu": 4000, "memory": 16 << 30, "pods": 110}


def test_a_cordoned_node_takes_pods_that_tolerate_unschedulable() -> None:
    """kube-scheduler's NodeUnschedulable filter (pkg/scheduler/framework/plugins/nodeunschedulable
    Filter) and the node.kubernetes.io/unschedulable:NoSchedule taint the node lifecycle controller
    adds: a cordoned node refuses pods, unless they tolerate that taint."""
    node = _node("cordoned", {**LABELS, "karpenter.sh/initialized": "true"}, {"unschedulable": True})
    tolerant = _pod("t", "1", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    plan = _plan([tolerant, _pod("p", "1")], [node])
    assert plan.existing == {"default/t": "cordoned"}
    assert [c.pods for c in plan.claims] == [["default/p"]]


def test_an_existing_node_keeps_room_for_daemonset_pods_not_yet_bound() -> None:
    """Karpenter's existingnode.go NewExistingNode: the requests of the compatible DaemonSets
    (scheduler.go getCompatibleDaemonPods) less those already bound there are kept free."""
    node = _node("fresh", {**LABELS, "karpenter.sh/initialized": "true"})
    ds = {
        "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {
            "template": {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}}
        },
    }
    plan = _plan([_pod("p", "3500m")], [node], daemonsets=[ds])
    assert plan.existing == {}
    # Once the DaemonSet's pod is bound there, it is counted once, not twice.
    bound = _pod("agent-x", "1", nodeName="fresh")
    bound["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "agent"}]
    plan = _plan([bound, _pod("p", "2500m")], [node], daemonsets=[ds])
    assert plan.existing == {"default/p": "fresh"}


def test_a_node_registered_before_its_claim_says_so_is_one_node_not_two() -> None:
    """Karpenter's pkg/controllers/state/cluster.go keys a Node and its NodeClaim by provider ID
    (``UpdateNode``, ``UpdateNodeClaim``): once the Node exists, before the NodeClaim's
    ``Registered`` write sets ``status.nodeName``, the two are one state node. Counted apart, the
    pool's usage doubles (found end to end: tests/e2e/provisioning/test_e2e_provision_limits.py)."""
    pid = "aws:///z1/i-0123"
    node = _node("ip-10-0-0-1.ec2.internal", LABELS, {"providerID": pid})
    claim = {
        "metadata": {"name": "default-xyz", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {},
        "status": {"providerID": pid, "capacity": ROOM},  # launched, not yet Registered
    }
    assert pool_in_use([node], "default", [claim]) == {
        "nodes": 1,
        "cpu": 4000,
        "memory": 16 << 30,
        "pods": 110,
    }
    # The simulation sees the one node, with room for one 3-CPU pod, not a second in-flight claim.
    plan = _plan([_pod("a", "3"), _pod("b", "3")], [node], nodeclaims=[claim])
    assert list(plan.existing.values()) == [node["metadata"]["name"]]
    assert len(plan.claims) == 1


PID = "aws:///z1/i-0abc"
CLAIM_LABELS = {"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "spot"}


def _launched(name: str = "default-abc", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": dict(CLAIM_LABELS)},
        "spec": {},
        "status": {"providerID": PID, "capacity": ROOM, "allocatable": ROOM, **status},
    }


def test_an_unlabelled_node_matched_to_its_claim_counts_in_its_claims_pool() -> None:
    """Review 15b #2a: Karpenter's pkg/controllers/state/statenode.go ``Labels`` takes the
    NodeClaim's labels while the node is not ``Registered``, and ``scheduler.go``
    ``updateRemainingResources`` charges each state node to the pool those labels name. A Node
    its kubelet created without the claim's labels (custom user data), matched by provider ID,
    is still the pool's: its limit counts it, and the two counters agree."""
    from kubespot.controllers.provisioning.nodepool_counter import pool_counts

    node = _node("ip-10-0-0-1", {}, {"providerID": PID})
    claim = _launched()
    assert pool_in_use([node], "default", [claim]) == {
        "nodes": 1,
        "cpu": 4000,
        "memory": 16 << 30,
        "pods": 110,
    }
    resources, n = pool_counts([node], [claim])["default"]
    assert n == 1 and resources["cpu"] == "4"


def test_an_unregistered_node_keeps_its_claims_labels_for_scheduling() -> None:
    """Review 15b #2b: statenode.go ``Labels`` (the NodeClaim's until ``Registered``) feeds
    ``existingnode.go`` ``NewExistingNode``'s requirements: a pod selecting the claim's
    capacity type still fits the in-flight node once its unlabelled Node appears, and no second
    claim is planned for it."""
    node = _node("ip-10-0-0-1", {}, {"providerID": PID})
    spot = _pod("a", "3", nodeSelector={"karpenter.sh/capacity-type": "spot"})
    plan = _plan([spot], [node], nodeclaims=[_launched()])
    assert plan.existing == {"default/a": "ip-10-0-0-1"}
    assert not plan.claims
    # Registered: the Node's own labels are the truth (here: none, so the selector no longer fits).
    registered = _node("ip-10-0-0-1", {"karpenter.sh/registered": "true"}, {"providerID": PID})
    plan = _plan([spot], [registered], nodeclaims=[_launched()])
    assert plan.existing == {}


def test_a_gpu_node_before_its_device_plugin_counts_its_claims_gpus() -> None:
    """Review 15b #2c: statenode.go ``Capacity`` (and ``Allocatable``) fill a not yet
    ``Initialized`` node's zero figures from its NodeClaim: a GPU node reporting
    ``nvidia.com/gpu: 0`` until its device plugin runs counts its GPU against the pool's limits,
    in the limit check as in the NodePool's counter."""
    from kubespot.controllers.provisioning.nodepool_counter import pool_counts

    gpu = {**ROOM, "nvidia.com/gpu": "1"}
    claim = _launched(nodeName="ip-10-0-0-1", capacity=gpu, allocatable=gpu)
    labels = {**LABELS, "karpenter.sh/registered": "true"}
    starting = {**ROOM, "nvidia.com/gpu": "0"}
    node = _node("ip-10-0-0-1", labels, {"providerID": PID}, capacity=starting, allocatable=starting)
    assert pool_in_use([node], "default", [claim])["nvidia.com/gpu"] == 1
    assert pool_counts([node], [claim])["default"][0]["nvidia.com/gpu"] == "1"
    # Initialized: the Node's figures stand (a GPU that never came up is not counted).
    ready = _node(
        "ip-10-0-0-1", {**labels, "karpenter.sh/initialized": "true"}, {"providerID": PID}, capacity=starting
    )
    assert pool_in_use([ready], "default", [claim])["nvidia.com/gpu"] == 0


def test_a_pool_at_its_limit_may_replace_a_node_being_deleted() -> None:
    """Review 16 #3: Karpenter's ``provisioner.go`` ``Schedule`` hands the scheduler
    ``nodes.Active()`` (``state/statenode.go``: not ``MarkedForDeletion``, which ``Deleted``
    makes true for a node whose NodeClaim is being deleted), and ``scheduler.go``
    ``calculateExistingNodeClaims`` → ``updateRemainingResources`` subtracts only those from the
    pool's limits; ``Create``'s ``ExceededBy`` reads ``NodePoolResourcesFor``, which leaves them
    out too (``updateNodePoolResources``). So a pool at ``limits.nodes: 2`` with one of its two
    nodes going may launch one node, the replacement, and no more."""
    from kubespot.scheduling.cluster_plan import plan_cluster

    limited = NodePool.of(
        {"metadata": {"name": "default"}, "spec": {"template": {"spec": {}}, "limits": {"nodes": "2"}}}
    )
    nodes, claims, pods = [], [], []
    for i in (1, 2):
        pid = f"aws:///z1/i-{i}"
        nodes.append(_node(f"n{i}", {**LABELS, "karpenter.sh/registered": "true"}, {"providerID": pid}))
        claims.append(
            {
                "metadata": {"name": f"default-{i}", "labels": dict(CLAIM_LABELS)},
                "spec": {},
                "status": {"providerID": pid, "nodeName": f"n{i}", "capacity": ROOM},
            }
        )
        pods.append(_pod(f"bound{i}", "3", nodeName=f"n{i}"))
    pending = [_pod("a", "3"), _pod("b", "3")]

    def plan(claims: list[dict[str, Any]]) -> Any:
        objects = {"Node": nodes, "NodeClaim": claims, "Pod": pods + pending}
        return plan_cluster(objects, [limited], {"default": CATALOG})[0]

    assert pool_in_use(nodes, "default", claims)["nodes"] == 2
    at_limit = plan(claims)
    assert at_limit.claims == [] and set(at_limit.unschedulable) == {"default/a", "default/b"}
    going = {**claims[1], "metadata": {**claims[1]["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert pool_in_use(nodes, "default", [claims[0], going])["nodes"] == 1
    replacing = plan([claims[0], going])
    assert len(replacing.claims) == 1 and len(replacing.unschedulable) == 1


def test_a_node_whose_claim_is_being_deleted_takes_no_pods_since_the_limits_do_not_count_it() -> None:
    """Review 16c #2: Karpenter's ``provisioner.go`` ``Schedule`` hands the scheduler
    ``nodes.Active()`` (``state/statenode.go``: not ``MarkedForDeletion``, which ``Deleted``
    makes true once the NodeClaim is being deleted): a node whose claim is going is neither a
    placement target nor counted against the limits (``scheduler.go``
    ``updateRemainingResources``). ``kubespot plan`` does not strip doomed nodes first as the
    provisioner does, so ``existing_nodes`` must close such a node itself: else it would fill
    the node the limits left out and launch past them. The Node alone being deleted (its claim
    still counting it) is closed too: the termination controller taints it while it drains."""
    from kubespot.scheduling.cluster_plan import plan_cluster

    limited = NodePool.of(
        {"metadata": {"name": "default"}, "spec": {"template": {"spec": {}}, "limits": {"nodes": "2"}}}
    )
    nodes, claims = [], []
    for i in (1, 2):
        pid = f"aws:///z1/i-{i}"
        nodes.append(_node(f"n{i}", {**LABELS, "karpenter.sh/registered": "true"}, {"providerID": pid}))
        claims.append(
            {
                "metadata": {"name": f"default-{i}", "labels": dict(CLAIM_LABELS)},
                "spec": {},
                "status": {"providerID": pid, "nodeName": f"n{i}", "capacity": ROOM},
            }
        )
    claims[1]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    pods = [_pod("bound", "3", nodeName="n1"), _pod("a", "3"), _pod("b", "3")]
    closed = {n.name: n.closed for n in existing_nodes(nodes, pods, nodeclaims=claims)}
    assert closed == {"n1": False, "n2": True}
    plan, _ = plan_cluster({"Node": nodes, "NodeClaim": claims, "Pod": pods}, [limited], {"default": CATALOG})
    assert [c.pods for c in plan.claims] == [["default/a"]] and list(plan.unschedulable) == ["default/b"]
    # InstanceTerminating True is Deleted too; a Node being deleted before its claim is closed
    # while it still counts.
    claims[1]["metadata"].pop("deletionTimestamp")
    claims[1]["status"]["conditions"] = [{"type": "InstanceTerminating", "status": "True"}]
    assert existing_nodes(nodes, pods, nodeclaims=claims)[1].closed
    claims[1]["status"].pop("conditions")
    nodes[1]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert existing_nodes(nodes, pods, nodeclaims=claims)[1].closed
    assert pool_in_use(nodes, "default", claims)["nodes"] == 2
