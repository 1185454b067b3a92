"""The NodeClaim controller's pure decisions: registration, initialization, liveness, the launch's
mapping of the cloud's answers, garbage collection and the termination drain's deadline.

Each test names the kubernetes-sigs/karpenter (core) or aws/karpenter-provider-aws (aws) function
it follows.
"""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubespot.cloud.errors import CreateError, InsufficientCapacityError, NodeClassNotReadyError
from kubespot.cloud.fake import FakeCloud, fake_type
from kubespot.cloud.provider import CloudNodeClaim
from kubespot.config.drain import DrainSettings
from kubespot.controllers.nodeclaim.garbage_collection import GarbageCollector, lost_claims, orphan_instances
from kubespot.controllers.nodeclaim.initialization import initialize
from kubespot.controllers.nodeclaim.launch import launch, populate
from kubespot.controllers.nodeclaim.lifecycle import advance
from kubespot.controllers.nodeclaim.liveness import liveness
from kubespot.controllers.nodeclaim.objects import conditions, set_conditions
from kubespot.controllers.nodeclaim.registration import register
from kubespot.controllers.nodeclaim.termination import drain_deadline, termination_time
from kubespot.kube.custom import ObjectList
from kubespot.model import SystemClock
from kubespot.scheduling.api.conditions import Condition
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec

Obj = dict[str, Any]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
PID = "aws:///z1/i-0123"


def claim(**status: Any) -> Obj:
    obj: Obj = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "general-abc",
            "uid": "uid-1",
            "generation": 1,
            "labels": {"karpenter.sh/nodepool": "general", "team": "a"},
            "annotations": {"karpenter.sh/nodepool-hash": "123"},
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}
            ],
            "taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "cni.io/not-ready", "effect": "NoSchedule"}],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        },
        "status": {"providerID": PID, **status},
    }
    return obj


def with_conditions(obj: Obj, *conds: Condition, at: datetime = T0) -> Obj:
    set_conditions(obj, list(conds), at)
    return obj


def node(*, taints: list[Obj] | None = None, labels: dict[str, str] | None = None, ready: bool = True) -> Obj:
    return {
        "metadata": {
            "name": "ip-10-0-0-1.ec2.internal",
            "uid": "node-uid",
            "resourceVersion": "42",
            "labels": {"kubernetes.io/hostname": "ip-10-0-0-1", "team": "node-side", **(labels or {})},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {
            "providerID": PID,
            "taints": taints
            if taints is not None
            else [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
        },
    }


LAUNCHED = Condition("Launched", "True", "Launched")
REGISTERED = Condition("Registered", "True", "Registered")


# -- registration ------------------------------------------------------------------------------------


def test_registration_without_a_node_is_unknown_node_not_found() -> None:
    """core registration.go Reconcile: NodeNotFound "Node not registered with cluster"."""
    reg = register(claim(), [])
    assert reg.condition == Condition(
        "Registered", "Unknown", "NodeNotFound", "Node not registered with cluster"
    )
    assert reg.node_patch is None


def test_registration_with_two_nodes_is_false_multiple_nodes_found() -> None:
    """core registration.go Reconcile (IsDuplicateNodeError): Registered=False MultipleNodesFound."""
    reg = register(claim(), [node(), node()])
    assert (reg.condition.status, reg.condition.reason) == ("False", "MultipleNodesFound")
    assert reg.condition.message == "Invariant violated, matched multiple nodes"


def test_registration_syncs_the_node_and_removes_the_unregistered_taint() -> None:
    """core registration.go syncNode (finalizer, owner reference, taints merged, labels and
    annotations with the NodeClaim winning), then the unregistered taint removed and the
    registered label set; utils/nodeclaim UpdateNodeOwnerReferences."""
    reg = register(claim(), [node()])
    assert reg.condition == Condition("Registered", "True", "Registered")
    assert reg.node_name == "ip-10-0-0-1.ec2.internal" and not reg.taint_missing
    patch = reg.node_patch
    assert patch is not None
    meta = patch["metadata"]
    assert meta["resourceVersion"] == "42"  # the optimistic lock
    assert meta["finalizers"] == ["karpenter.sh/termination"]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "name": "general-abc",
            "uid": "uid-1",
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["labels"] == {
        "karpenter.sh/nodepool": "general",
        "team": "a",
        "karpenter.sh/registered": "true",
    }
    assert meta["annotations"] == {"karpenter.sh/nodepool-hash": "123"}
    assert patch["spec"]["taints"] == [
        {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
        {"key": "cni.io/not-ready", "effect": "NoSchedule"},
    ]


def test_registration_keeps_the_nodes_taint_of_the_same_key_and_effect() -> None:
    """core scheduling/taints.go Taints.Merge: a claim taint matching one on the node (MatchTaint:
    key and effect) is not added again; the node's value stays."""
    taints = [
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
        {"key": "dedicated", "value": "other", "effect": "NoSchedule"},
    ]
    patch = register(claim(), [node(taints=taints)]).node_patch
    assert patch is not None
    assert patch["spec"]["taints"] == [
        {"key": "dedicated", "value": "other", "effect": "NoSchedule"},
        {"key": "cni.io/not-ready", "effect": "NoSchedule"},
    ]


def test_do_not_sync_taints_leaves_the_taints_but_still_removes_unregistered() -> None:
    """core registration.go syncNode: karpenter.sh/do-not-sync-taints=true skips the merge; the
    unregistered taint is removed either way."""
    n = node(labels={"karpenter.sh/do-not-sync-taints": "true"})
    patch = register(claim(), [n]).node_patch
    assert patch is not None and patch["spec"]["taints"] == []


def test_a_node_without_the_unregistered_taint_warns_and_registers() -> None:
    """core registration.go Reconcile: neither the registered label nor the unregistered taint →
    UnregisteredTaintMissing event, registration proceeds."""
    reg = register(claim(), [node(taints=[])])
    assert reg.taint_missing and reg.condition.is_true
    # Already registered (the label): no warning.
    assert not register(claim(), [node(taints=[], labels={"karpenter.sh/registered": "true"})]).taint_missing


def test_registration_of_an_already_synced_node_writes_nothing() -> None:
    """core registration.go Reconcile: the Node is patched only when syncNode changed it."""
    reg = register(claim(), [node()])
    assert reg.node_patch is not None
    synced = node(taints=reg.node_patch["spec"]["taints"])
    synced["metadata"]["labels"].update(reg.node_patch["metadata"]["labels"])
    synced["metadata"]["annotations"].update(reg.node_patch["metadata"]["annotations"])
    synced["metadata"]["finalizers"] = reg.node_patch["metadata"]["finalizers"]
    synced["metadata"]["ownerReferences"] = reg.node_patch["metadata"]["ownerReferences"]
    again = register(claim(), [synced])
    assert again.condition.is_true and again.node_patch is None


# -- initialization ----------------------------------------------------------------------------------


def _init_reason(n: Obj, c: Obj | None = None) -> tuple[str, str]:
    cond = initialize(c or claim(), [n]).condition
    return cond.reason, cond.message


def test_initialization_waits_for_ready_then_startup_then_ephemeral_taints_then_resources() -> None:
    """core initialization.go Reconcile: NodeNotReady, StartupTaintsExist, KnownEphemeralTaintsExist,
    ResourceNotRegistered in that order, with formatTaint's "key=value:Effect"."""
    assert initialize(claim(), []).condition.reason == "NodeNotFound"
    assert _init_reason(node(ready=False)) == ("NodeNotReady", "Node status is NotReady")
    startup = [{"key": "cni.io/not-ready", "value": "x", "effect": "NoSchedule"}]
    assert _init_reason(node(taints=startup)) == (
        "StartupTaintsExist",
        'StartupTaint "cni.io/not-ready=x:NoSchedule" still exists',
    )
    ephemeral = [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]
    assert _init_reason(node(taints=ephemeral)) == (
        "KnownEphemeralTaintsExist",
        'KnownEphemeralTaint "node.kubernetes.io/not-ready:NoExecute" still exists',
    )
    prefixed = [{"key": "readiness.k8s.io/gpu", "effect": "NoSchedule"}]
    assert _init_reason(node(taints=prefixed))[0] == "KnownEphemeralTaintsExist"
    gpu = claim()
    gpu["spec"]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    assert _init_reason(node(taints=[]), gpu) == (
        "ResourceNotRegistered",
        'Resource "nvidia.com/gpu" was requested but not registered',
    )


def test_initialized_labels_the_node() -> None:
    """core initialization.go Reconcile: label karpenter.sh/initialized=true, Initialized=True."""
    init = initialize(claim(), [node(taints=[])])
    assert init.condition == Condition("Initialized", "True", "Initialized")
    assert init.node_labels == {"karpenter.sh/initialized": "true"}


def test_ready_follows_the_three_dependents() -> None:
    """operatorpkg status/condition_set.go For (dependents start Unknown AwaitingReconciliation)
    and recomputeRootCondition; core NodeClaim conditions Launched, Registered, Initialized."""
    c = with_conditions(claim())
    conds = conditions(c)
    assert conds["Launched"]["reason"] == "AwaitingReconciliation"
    assert conds["Ready"]["status"] == "Unknown"
    with_conditions(c, LAUNCHED, REGISTERED, Condition("Initialized", "True", "Initialized"))
    assert conditions(c)["Ready"]["status"] == "True"
    assert all(x["observedGeneration"] == 1 for x in conditions(c).values())


def test_advance_registers_then_initializes_on_the_next_pass() -> None:
    """core lifecycle/controller.go Reconcile (registration, initialization, liveness on one copy):
    the Node patched by registration is judged for initialization once written."""
    work = with_conditions(claim(), LAUNCHED)
    step = advance(copy.deepcopy(work), [node()], T0, launch_timeout=300, registration_timeout=900)
    assert step.node_patch is not None and step.node_labels is None
    work2 = with_conditions(claim(nodeName="ip-10-0-0-1.ec2.internal"), LAUNCHED, REGISTERED)
    step = advance(work2, [node(taints=[])], T0, launch_timeout=300, registration_timeout=900)
    assert step.node_labels == ("ip-10-0-0-1.ec2.internal", {"karpenter.sh/initialized": "true"})
    assert conditions(work2)["Ready"]["status"] == "True"


# -- liveness ----------------------------------------------------------------------------------------


def test_launch_timeout_then_registration_timeout() -> None:
    """core liveness.go Reconcile: not Launched 5 min after Launched's lastTransitionTime →
    launch_timeout; not Registered 15 min after Registered's → registration_timeout; else requeue
    for the nearest."""
    pending = with_conditions(claim())
    assert (
        liveness(
            pending, T0 + timedelta(seconds=299), launch_timeout=300, registration_timeout=900
        ).requeue_after
        == 1
    )
    assert (
        liveness(
            pending, T0 + timedelta(seconds=301), launch_timeout=300, registration_timeout=900
        ).delete_reason
        == "launch_timeout"
    )
    launched = with_conditions(claim(), LAUNCHED)
    live = liveness(launched, T0 + timedelta(seconds=600), launch_timeout=300, registration_timeout=900)
    assert (live.delete_reason, live.requeue_after) == ("", 300)
    late = liveness(launched, T0 + timedelta(seconds=901), launch_timeout=300, registration_timeout=900)
    assert late.delete_reason == "registration_timeout"
    registered = with_conditions(claim(), LAUNCHED, REGISTERED)
    assert (
        liveness(
            registered, T0 + timedelta(days=1), launch_timeout=300, registration_timeout=900
        ).delete_reason
        == ""
    )


# -- launch ------------------------------------------------------------------------------------------


def _fake() -> FakeCloud:
    return FakeCloud([fake_type("m5.large", 2, 8, od=0.096, spot=0.04)])


async def test_launch_maps_the_clouds_errors_as_karpenter() -> None:
    """core launch.go launchNodeClaim: InsufficientCapacityError → event + delete; NodeClassNotReady →
    delete; CreateError → Launched Unknown with its reason; any other error LaunchFailed."""

    class Failing(FakeCloud):
        error: Exception

        async def create(self, claim: Any) -> CloudNodeClaim:
            raise self.error

    cloud = Failing()
    cloud.error = InsufficientCapacityError("no capacity for m5.large")
    out = await launch(cloud, claim())
    assert out.delete_reason == "insufficient_capacity"
    assert out.event == ("InsufficientCapacityError", "NodeClaim general-abc event: no capacity for m5.large")
    cloud.error = NodeClassNotReadyError("no subnets")
    assert (await launch(cloud, claim())).delete_reason == "nodeclass_not_ready"
    cloud.error = CreateError("SpotQuotaExceeded", "quota")
    assert (await launch(cloud, claim())).condition == Condition(
        "Launched", "Unknown", "SpotQuotaExceeded", "quota"
    )
    cloud.error = RuntimeError("x" * 400)
    cond = (await launch(cloud, claim())).condition
    assert cond is not None and cond.reason == "LaunchFailed" and cond.message == "x" * 300 + "..."


async def test_populate_writes_the_clouds_details_with_the_claims_labels_winning() -> None:
    """core launch.go PopulateNodeClaimDetails: labels the cloud's overlaid by the claim's, providerID,
    imageID, capacity, allocatable."""
    cloud = _fake()
    c = claim()
    c["metadata"]["labels"]["karpenter.sh/capacity-type"] = "mine"
    out = await launch(cloud, c)
    assert out.launched is not None
    populate(c, out.launched)
    assert c["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m5.large"
    assert c["metadata"]["labels"]["karpenter.sh/capacity-type"] == "mine"
    assert c["status"]["providerID"] == out.launched.provider_id
    assert c["status"]["capacity"] == {"cpu": "2", "memory": "8192Mi", "pods": "110"}
    assert c["status"]["allocatable"]["cpu"] == "2"


# -- garbage collection ------------------------------------------------------------------------------


def _instance(pid: str, *, name: str = "", age: float = 60.0, state: str = "running") -> CloudNodeClaim:
    return CloudNodeClaim(name, pid, "m5.large", "z1", "spot", launched_at=1000.0 - age, state=state)


def test_orphan_instances_are_old_unclaimed_and_live() -> None:
    """aws garbagecollection/controller.go Reconcile: no NodeClaim has the provider id, launched
    more than 30 s ago, not shutting down. kubespot spares one tagged for a NodeClaim not yet
    launched (docs/designs/launching.md §3)."""
    claimed = with_conditions(claim(), LAUNCHED)
    waiting = with_conditions(claim())
    waiting["metadata"]["name"] = "general-lost-write"
    del waiting["status"]["providerID"]
    instances = [
        _instance(PID),  # claimed
        _instance("aws:///z1/i-young", age=10),
        _instance("aws:///z1/i-gone", state="shutting-down"),
        _instance("aws:///z1/i-lostwrite", name="general-lost-write"),
        _instance("aws:///z1/i-orphan", name="deleted-claim"),
    ]
    found = orphan_instances(instances, [claimed, waiting], now=1000.0)
    assert [i.provider_id for i in found] == ["aws:///z1/i-orphan"]


def test_stopped_and_stopping_orphans_are_collected_but_not_shutting_down_ones() -> None:
    """aws providers/instance/instance.go instanceStateFilter (stopping and stopped are listed),
    cloudprovider/cloudprovider.go instanceToNodeClaim (a deletionTimestamp for shutting-down and
    terminated only) and garbagecollection/controller.go Reconcile (those two skipped)."""
    states = ["running", "stopping", "stopped", "shutting-down", "terminated"]
    instances = [_instance(f"aws:///z1/i-{s}", name="deleted-claim", state=s) for s in states]
    found = orphan_instances(instances, [], now=1000.0)
    assert [i.state for i in found] == ["running", "stopping", "stopped"]


class _Unserved:
    """A custom-object API answering 404 to its list (``CustomObjects.list``: served=False)."""

    path = "apis/karpenter.sh/v1/nodeclaims"

    async def list(self) -> ObjectList:
        return ObjectList((), "", served=False)


async def test_a_gc_pass_whose_claim_list_is_not_served_collects_nothing() -> None:
    """aws garbagecollection/controller.go Reconcile and core garbagecollection/controller.go
    Reconcile: an error listing the NodeClaims (or Nodes) returns before anything is collected."""
    cloud = _fake()
    cloud.now = lambda: 0.0  # launched at the epoch: far older than the 30 s grace
    for n in ("a", "b"):
        await cloud.create(NodeClaimSpec(name=n))
    gc = GarbageCollector(cloud=cloud, claims=_Unserved(), nodes=_Unserved(), clock=SystemClock())  # type: ignore[arg-type]
    await gc.run_pass()
    assert len(cloud.launched) == 2 and gc.skipped == 1 and gc.last_pass is not None


class _Deletes:
    """A custom-object API's path and delete (the informer path reads nothing else)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.deleted: list[str] = []

    async def delete(self, name: str) -> bool:
        self.deleted.append(name)
        return True


class _SlowCloud:
    """A cloud list answered from before ``during`` ran (the claim's launch and registration)."""

    def __init__(self, instances: list[CloudNodeClaim], during: Any) -> None:
        self.instances, self.during = instances, during

    async def list(self) -> list[CloudNodeClaim]:
        snapshot = list(self.instances)
        self.during()
        return snapshot


async def test_a_claim_registered_while_the_cloud_list_runs_is_not_taken_for_lost() -> None:
    """core pkg/controllers/nodeclaim/garbagecollection/controller.go ``Reconcile`` lists the
    NodeClaims before ``cloudProvider.List``: a claim whose instance launched and registered while
    the list ran was not Registered in that read, so its instance missing from the list does not
    make it lost. A claim lost in both reads is still deleted."""
    from kubespot.kube.informer import Informers

    old = with_conditions(claim(), LAUNCHED, REGISTERED)
    old["metadata"].update(name="general-old", uid="uid-old", resourceVersion="1")
    new = with_conditions(claim(), LAUNCHED, REGISTERED)
    new["metadata"].update(name="general-new", uid="uid-new", resourceVersion="9")
    new["status"]["providerID"] = "aws:///z1/i-new"
    claims_api, nodes_api = _Deletes("apis/karpenter.sh/v1/nodeclaims"), _Deletes("api/v1/nodes")
    informers = Informers(None)  # type: ignore[arg-type]
    claims, nodes = informers.get(claims_api.path), informers.get(nodes_api.path)
    claims._replace([old])
    nodes._replace([])
    gc = GarbageCollector(
        cloud=_SlowCloud([], lambda: claims._apply("ADDED", new)),  # type: ignore[arg-type]
        claims=claims_api,  # type: ignore[arg-type]
        nodes=nodes_api,  # type: ignore[arg-type]
        clock=SystemClock(),
        informers=informers,
    )
    # Synced and "running" (no server behind them): the pass reads the caches as they are.
    claims._task = nodes._task = asyncio.get_running_loop().create_future()  # type: ignore[assignment]
    try:
        await gc.run_pass()
    finally:
        claims._task = nodes._task = None
    assert claims_api.deleted == ["general-old"]


def test_lost_claims_are_registered_without_instance_and_without_a_ready_node() -> None:
    """core garbagecollection/controller.go Reconcile: Registered, not deleting, provider id not
    listed by the cloud, and the Node not Ready."""
    registered = with_conditions(claim(), LAUNCHED, REGISTERED)
    unregistered = with_conditions(claim(), LAUNCHED)
    assert lost_claims([registered, unregistered], [], {}) == [registered]
    assert lost_claims([registered], [], {PID: [node(ready=True)]}) == []
    assert lost_claims([registered], [], {PID: [node(ready=False)]}) == [registered]
    assert lost_claims([registered], [_instance(PID)], {}) == []


@pytest.mark.parametrize(
    ("state", "lost"), [("stopping", False), ("stopped", False), ("shutting-down", True)]
)
def test_a_stopped_instance_keeps_its_claim(state: str, lost: bool) -> None:
    """aws instance.go List lists pending, running, stopping and stopped instances (and
    shutting-down ones, which cloudprovider.go instanceToNodeClaim marks deleted): a claim whose
    instance was stopped is still listed and not garbage collected (core garbagecollection
    Reconcile), while one shutting down is gone. Its Node is NotReady, so only the listing decides."""
    registered = with_conditions(claim(), LAUNCHED, REGISTERED)
    found = lost_claims([registered], [_instance(PID, state=state)], {PID: [node(ready=False)]})
    assert found == ([registered] if lost else [])


# -- termination -------------------------------------------------------------------------------------


def test_drain_deadline_follows_the_termination_grace_period() -> None:
    """core lifecycle/controller.go ensureTerminationGracePeriodTerminationTimeAnnotation
    (deletionTimestamp + terminationGracePeriod); without one Karpenter waits on budgets for ever:
    here drain.voluntary_timeout with budgets kept."""
    c = claim()
    c["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    c["spec"]["terminationGracePeriod"] = "1h30m"
    settings = DrainSettings()
    got, deadline = drain_deadline(c, settings, T0 + timedelta(seconds=5))
    assert deadline == T0 + timedelta(minutes=90) and got.pdb_deadline_action == settings.pdb_deadline_action
    # The annotation, once written, is what counts (node/termination/controller.go nodeTerminationTime).
    c["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"] = "2026-01-01T00:10:00Z"
    assert termination_time(c) == T0 + timedelta(minutes=10)
    del c["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"]
    del c["spec"]["terminationGracePeriod"]
    assert termination_time(c) is None
    got, deadline = drain_deadline(c, settings, T0)
    assert (
        deadline == T0 + timedelta(seconds=settings.voluntary_timeout) and got.pdb_deadline_action == "keep"
    )


def test_the_termination_drain_never_refuses_whatever_the_drain_settings() -> None:
    """core node/termination/terminator/terminator.go Drain (every evictable pod is evicted, emptyDir
    or not; nothing makes the drain refuse). DaemonSet pods are left to the instance
    (docs/controller.md, NodeClaim termination)."""
    strict = DrainSettings(delete_local_data=False, ignore_daemon_sets=False)
    got, _ = drain_deadline(claim(), strict, T0)
    assert got.delete_local_data and got.ignore_daemon_sets
    c = claim()
    c["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    c["spec"]["terminationGracePeriod"] = "10m"
    got, _ = drain_deadline(c, strict, T0)
    assert got.delete_local_data and got.ignore_daemon_sets
