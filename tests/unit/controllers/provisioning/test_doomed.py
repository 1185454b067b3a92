"""Pre-spin's pure half (``controllers/provisioning/doomed``): which nodes are going away and how
the provisioner's snapshot sees them.

Sources: kubernetes-sigs/karpenter ``pkg/controllers/provisioning/provisioner.go`` ``Schedule``
(the reschedulable pods of nodes marked for deletion join the pending ones; the scheduler gets the
active nodes only), ``pkg/utils/pod/scheduling.go`` ``IsReschedulable``; docs/designs/launching.md
§7 (kubespot's interruption fence dooms a node too).
"""

from __future__ import annotations

import asyncio
from typing import Any, cast
from unittest.mock import MagicMock

import pytest

from kubespot.controllers.provisioning import doomed
from kubespot.controllers.provisioning.doomed import (
    FENCE_TAINTS,
    DoomWatch,
    doomed_nodes,
    is_fenced,
    is_reschedulable,
    without_doomed,
)
from kubespot.kube.informer import Informer
from kubespot.records.interruption import STATE_ANNOTATION

Obj = dict[str, Any]


def state(kind: str = "spot-itn", phase: str = "draining") -> str:
    """The state annotation as ``handling.node_patches.fence_patch`` writes it."""
    return (
        f'{{"event_id":"e1","kind":"{kind}","phase":"{phase}","since":"2026-01-01T00:00:00Z",'
        f'"taints":["kubespot.io/{kind}"]}}'
    )


STATE = state()
REBALANCE = {"key": "kubespot.io/rebalance-recommendation", "value": "x", "effect": "NoSchedule"}


def node(
    name: str, *, taints: list[Obj] | None = None, annotations: dict[str, str] | None = None, **meta: Any
) -> Obj:
    return {
        "metadata": {"name": name, "annotations": annotations or {}, **meta},
        "spec": {"taints": taints or []},
    }


def pod(name: str, host: str, *, owner: str | None = None, **extra: Any) -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "x", "uid": "u"}]
    meta.update(extra.pop("meta", {}))
    return {"metadata": meta, "spec": {"nodeName": host, "containers": []}, "status": extra}


def test_the_fence_taints_are_the_handlers() -> None:
    """handling/policy.plan_for taints ``kubespot.io/<kind>`` for every interruption kind."""
    assert "kubespot.io/spot-itn" in FENCE_TAINTS
    assert "kubespot.io/rebalance-recommendation" in FENCE_TAINTS
    assert "kubespot.io/asg-lifecycle-termination" in FENCE_TAINTS


@pytest.mark.parametrize(
    ("obj", "fenced"),
    [
        (node("a"), False),
        (node("a", taints=[{"key": "kubespot.io/spot-itn", "value": "x", "effect": "NoSchedule"}]), True),
        (node("a", taints=[{"key": "kubespot.io/scheduled-maintenance", "effect": "NoExecute"}]), True),
        # NTH's taint alone is not kubespot's fence (another handler's, which shares nothing).
        (node("a", taints=[{"key": "aws-node-termination-handler/spot-itn", "effect": "NoSchedule"}]), False),
        (node("a", taints=[{"key": "kubespot.io/something-else", "effect": "NoSchedule"}]), False),
        (node("a", annotations={STATE_ANNOTATION: STATE}), True),
        # A value kubespot cannot read is not its state.
        (node("a", annotations={STATE_ANNOTATION: "{garbage"}), False),
    ],
)
def test_is_fenced(obj: Obj, fenced: bool) -> None:
    assert is_fenced(obj) is fenced


@pytest.mark.parametrize(
    ("kind", "phase", "doomed"),
    [
        # Cordon only (rebalance_draining off): nothing moves, the node is not going.
        ("rebalance-recommendation", "fenced", False),
        ("rebalance-recommendation", "draining", True),
        ("rebalance-recommendation", "drain-failed", True),
        ("asg-lifecycle-termination", "fenced", False),  # cordon_only: the hook waits, nothing moves
        ("scheduled-maintenance", "drained", True),
        # The instance is reclaimed whatever the handler does: doomed even when only cordoned.
        ("spot-itn", "fenced", True),
        ("state-change", "fenced", True),
    ],
)
def test_only_a_fence_that_moves_the_pods_dooms_the_node(kind: str, phase: str, doomed: bool) -> None:
    """handling/policy.py plan_for: a rebalance recommendation without rebalance_draining (or any
    event under cordon_only) cordons and taints but does not drain, and node_patches.fence_patch
    records that as phase ``fenced`` (``draining`` when the plan drains). Upstream Karpenter
    (aws pkg/controllers/interruption controller.go actionForMessage) does nothing on a rebalance
    recommendation, and core provisioner.go Schedule only moves the pods of nodes being deleted;
    kubespot dooms a fenced node only when its pods really leave."""
    taint = {"key": f"kubespot.io/{kind}", "value": "x", "effect": "NoSchedule"}
    obj = node("a", taints=[taint], annotations={STATE_ANNOTATION: state(kind, phase)})
    assert is_fenced(obj) is doomed
    assert doomed_nodes([obj], [], fence=True) == ({"a"} if doomed else set())
    # The taint alone (no state): a rebalance recommendation's does not doom, the others do.
    assert is_fenced(node("a", taints=[taint])) is (kind != "rebalance-recommendation")


def test_is_reschedulable_as_karpenter() -> None:
    """IsReschedulable (kubernetes-sigs/karpenter pkg/utils/pod/scheduling.go): active, or a
    StatefulSet's pod terminating; not a DaemonSet's or a static (Node-owned, mirror) pod."""
    assert is_reschedulable(pod("web", "n"))
    assert not is_reschedulable(pod("done", "n", phase="Succeeded"))
    assert not is_reschedulable(pod("failed", "n", phase="Failed"))
    assert not is_reschedulable(pod("ds", "n", owner="DaemonSet"))
    assert is_reschedulable(pod("rs", "n", owner="ReplicaSet"))
    assert not is_reschedulable(pod("going", "n", meta={"deletionTimestamp": "2026-01-01T00:00:00Z"}))
    # A StatefulSet's terminating pod is: its controller re-creates it only once it is gone.
    sts = pod("db-0", "n", owner="StatefulSet", meta={"deletionTimestamp": "2026-01-01T00:00:00Z"})
    assert is_reschedulable(sts)
    assert not is_reschedulable(
        pod("node-owned", "n", meta={"ownerReferences": [{"kind": "Node", "name": "n"}]})
    )
    assert not is_reschedulable(
        pod("static", "n", meta={"annotations": {"kubernetes.io/config.mirror": "x"}})
    )


def test_doomed_nodes_fenced_deleted_or_their_claim_deleted() -> None:
    """provisioner.go Schedule: nodes marked for deletion (the node, or its NodeClaim, being
    deleted); launching.md §7: a fenced node too, unless the fence half is off."""
    fenced = node("fenced", taints=[{"key": "kubespot.io/spot-itn", "effect": "NoSchedule"}])
    deleting = node("deleting", deletionTimestamp="2026-01-01T00:00:00Z")
    claimed = node("claimed")
    fine = node("fine")
    claims: list[Obj] = [
        {
            "metadata": {"name": "c1", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"nodeName": "claimed"},
        },
        {"metadata": {"name": "c2"}, "status": {"nodeName": "fine"}},
    ]
    nodes = [fenced, deleting, claimed, fine]
    assert doomed_nodes(nodes, claims) == {"fenced", "deleting", "claimed"}
    assert doomed_nodes(nodes, claims, fence=False) == {"deleting", "claimed"}


def test_without_doomed_unbinds_the_reschedulable_pods_and_drops_the_rest() -> None:
    """The snapshot the simulation sees: the doomed node and its NodeClaim gone (so the claim is
    not taken for capacity still to come), its reschedulable pods unbound, its DaemonSet and
    finished pods gone with it; other nodes' pods untouched."""
    nodes = [node("doomed"), node("fine")]
    claims: list[Obj] = [
        {"metadata": {"name": "c-doomed"}, "status": {"nodeName": "doomed"}},
        {"metadata": {"name": "c-fine"}, "status": {"nodeName": "fine"}},
        {"metadata": {"name": "c-new"}, "status": {}},
    ]
    pods = [
        pod("web", "doomed", owner="ReplicaSet"),
        pod("db-0", "doomed", owner="StatefulSet", meta={"deletionTimestamp": "2026-01-01T00:00:00Z"}),
        pod("old", "doomed", owner="ReplicaSet", meta={"deletionTimestamp": "2026-01-01T00:00:00Z"}),
        pod("ds", "doomed", owner="DaemonSet"),
        pod("job", "doomed", phase="Succeeded"),
        pod("other", "fine"),
    ]
    out = without_doomed(nodes, claims, pods, {"doomed"})
    assert [n["metadata"]["name"] for n in out.nodes] == ["fine"]
    assert [c["metadata"]["name"] for c in out.claims] == ["c-fine", "c-new"]
    assert [p["metadata"]["name"] for p in out.pods] == ["other"]
    assert [p["metadata"]["name"] for p in out.moving] == ["web", "db-0"]
    assert all("nodeName" not in p["spec"] for p in out.moving)
    # The StatefulSet's pod is planned as the one its controller re-creates: not being deleted.
    assert "deletionTimestamp" not in out.moving[1]["metadata"]
    assert pods[0]["spec"]["nodeName"] == "doomed"  # the snapshot's own objects are not changed
    same = without_doomed(nodes, claims, pods, set())
    assert same.nodes == nodes and same.pods == pods and not same.moving


def controlled(name: str, host: str, owner: str, *, kind: str = "ReplicaSet", **extra: Any) -> Obj:
    """A pod of controller ``owner`` (``controller: true``), as a ReplicaSet makes it."""
    out = pod(name, host, **extra)
    out["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": f"uid-{owner}", "controller": True}
    ]
    return out


EVICTED = {"deletionTimestamp": "2026-01-01T00:00:00Z"}
UNSCHEDULABLE = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}


def test_pods_the_drain_already_evicted_are_planned_through_their_replacements() -> None:
    """The drain starts right after the fence (handling/node_handler.py _execute: fence then
    drain), so a pass's snapshot may see a doomed node's ReplicaSet pods terminating already.
    Karpenter's IsReschedulable (pkg/utils/pod/scheduling.go) drops them and its IsProvisionable
    skips their replacements until kube-scheduler marks them Unschedulable, which would lose
    pre-spin for the drain's first tier (launching.md §7). Each evicted pod whose controller
    replaces it (ReplicaSet controller: a terminating pod is not active, pkg/controller/replicaset
    manageReplicas makes another at once) is planned once: through an unbound replacement of the
    same controller (held, judged or not), else as itself until the replacement exists."""
    nodes = [node("doomed"), node("fine")]
    pods = [
        controlled("web-a", "doomed", "web", meta=EVICTED),
        controlled("web-b", "doomed", "web", meta=EVICTED),
        controlled("web-c", "doomed", "web", meta=EVICTED),
        # web-a's and web-b's replacements: one not judged yet, one already Unschedulable.
        controlled("web-new-1", "", "web"),
        controlled("web-new-2", "", "web", **UNSCHEDULABLE),
        # Another controller's pending pod is not a replacement; nor is a bound or gated one.
        controlled("api-new", "", "api"),
        controlled("web-bound", "fine", "web"),
        # Evicted with no controller that replaces it: gone with the node.
        pod("bare", "doomed", meta=EVICTED),
        controlled("agent", "doomed", "agent", kind="DaemonSet", meta=EVICTED),
    ]
    out = without_doomed(nodes, [], pods, {"doomed"})
    assert out.held == {"uid-web-new-1", "uid-web-new-2"}
    (pending,) = out.moving  # web-c: no replacement yet, planned as the pod to come
    assert pending["metadata"]["name"] in ("web-a", "web-b", "web-c")
    assert "deletionTimestamp" not in pending["metadata"] and "nodeName" not in pending["spec"]
    assert {p["metadata"]["name"] for p in out.pods} == {"web-new-1", "web-new-2", "api-new", "web-bound"}
    # Once every replacement exists, only the replacements are planned: never both.
    more = [*pods, controlled("web-new-3", "", "web")]
    out = without_doomed(nodes, [], more, {"doomed"})
    assert out.held == {"uid-web-new-1", "uid-web-new-2", "uid-web-new-3"} and out.moving == []


def test_the_watch_calls_once_per_node_turning_doomed() -> None:
    """launching.md §7: a node turning doomed starts a pass at once, once; a rebalance fence undone
    and set again (handling/policy.py ``undo_after``) is a new doom."""
    called: list[str] = []
    watch = DoomWatch(MagicMock(), MagicMock(), called.append, clock=MagicMock())
    fenced = node("a", taints=[REBALANCE], annotations={STATE_ANNOTATION: state("rebalance-recommendation")})
    watch._node_objs.update({"a": node("a"), "b": node("b")})
    watch._judge()
    assert called == []
    watch._node_objs["a"] = fenced
    watch._judge()
    watch._judge()  # another event of the same node: no second call
    assert called == ["a"]
    watch._node_objs["a"] = node("a")  # undone
    watch._judge()
    watch._node_objs["a"] = fenced
    watch._claim_objs["c"] = {
        "metadata": {"name": "c", "deletionTimestamp": "x"},
        "status": {"nodeName": "b"},
    }
    watch._judge()
    assert called == ["a", "a", "b"] and watch.doomed == {"a", "b"}
    off = DoomWatch(MagicMock(), MagicMock(), called.append, clock=MagicMock(), fence=False)
    off._node_objs["a"] = fenced
    off._judge()
    assert called == ["a", "a", "b"]


class _Idle:
    """A client whose LIST never answers: the informers here are fed by hand."""

    async def list_versioned(self, path: str) -> None:
        await asyncio.Event().wait()


async def test_a_relist_costs_the_watch_constant_work_per_object(monkeypatch: pytest.MonkeyPatch) -> None:
    """review 15c #1: an informer hands every object of a re-list to its handlers (client-go
    ``delta_fifo.go`` ``Replace``), so the watch judges only the object changed, as Karpenter's
    ``pkg/controllers/state/cluster.go`` ``UpdateNode``/``UpdateNodeClaim`` do constant work per
    event: the nodes judged over one re-list of N nodes and N claims grow as N, not N²; a claim's
    deletion still dooms its node, and its node alone."""
    judged = [0]
    real = doomed.doomed_nodes

    def counting(nodes: Any, claims: Any, *, fence: bool = True) -> set[str]:
        nodes = list(nodes)
        judged[0] += len(nodes)
        return real(nodes, claims, fence=fence)

    monkeypatch.setattr(doomed, "doomed_nodes", counting)
    n = 300
    nodes = Informer(cast(Any, _Idle()), "api/v1/nodes")
    claims = Informer(cast(Any, _Idle()), "apis/karpenter.sh/v1/nodeclaims")

    def claim(i: int, **meta: Any) -> Obj:
        meta = {"name": f"c{i}", "resourceVersion": "1", **meta}
        return {"metadata": meta, "status": {"nodeName": f"n{i}"}}

    nodes._replace([{"metadata": {"name": f"n{i}", "resourceVersion": "1"}, "spec": {}} for i in range(n)])
    claims._replace([claim(i) for i in range(n)])
    called: list[str] = []
    watch = DoomWatch(nodes, claims, called.append, clock=MagicMock())
    task = asyncio.create_task(watch.run())
    try:
        await asyncio.sleep(0.01)
        judged[0] = 0
        nodes._replace(list(nodes.items()))
        claims._replace(list(claims.items()))
        assert judged[0] <= 3 * n  # one node per node event, two per claim event at most
        claims._apply("MODIFIED", claim(7, deletionTimestamp="x"))
        assert called == ["n7"] and watch.doomed == {"n7"}
        claims._apply("DELETED", claim(7))
        nodes._apply("MODIFIED", {"metadata": {"name": "n7", "resourceVersion": "2"}, "spec": {}})
        assert watch.doomed == set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        # review 15c #7: stopped (the lease lost), the watch keeps no copy of the cluster.
        assert watch._node_objs == {} and watch._claim_objs == {}
        await nodes.stop()
        await claims.stop()


class _Api:
    """``CustomObjects``' list and watch: the watch breaks once and its re-list is answered as
    ``relisted`` (a 404: not served), then brings nothing."""

    def __init__(self, items: list[Obj], relisted: Any = None) -> None:
        from kubespot.kube.custom import ObjectList

        self.listing = ObjectList(tuple(items), "1")
        self.relisted = relisted
        self.relisted_done = asyncio.Event()

    async def list(self) -> Any:
        return self.listing

    async def watch(self, rv: str) -> Any:
        if self.relisted is not None:
            yield "RESYNC", None, self.relisted
        self.relisted_done.set()
        await asyncio.Event().wait()


async def test_a_re_list_answered_404_keeps_the_claims_that_doom_their_nodes() -> None:
    """client-go ``reflector.go`` ``list``: a failed LIST (a 404 from an API server whose CRD
    handler is not ready yet) leaves the store as it was, so the node whose NodeClaim is being
    deleted stays doomed (provisioner.go ``Schedule``: nodes marked for deletion take no pods)."""
    from kubespot.kube.custom import ObjectList

    going = {
        "metadata": {"name": "c1", "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"nodeName": "claimed"},
    }
    claims = _Api([going], relisted=ObjectList((), "", served=False))
    watch = DoomWatch(
        cast(Any, _Api([node("claimed")])), cast(Any, claims), lambda name: None, clock=MagicMock()
    )
    task = asyncio.create_task(watch.run())
    try:
        await asyncio.wait_for(claims.relisted_done.wait(), 1.0)
        assert watch.doomed == {"claimed"} and set(watch._claim_objs) == {"c1"}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
