"""Node lifecycle over real HTTP: vanished kubelets, NoExecute taints (PodGC: test_pod_gc.py).

Upstream behaviour relied on (kube-controller-manager, https://kubernetes.io/docs/concepts/architecture/nodes/
and .../scheduling-eviction/taint-and-toleration/):
- after --node-monitor-grace-period without lease renewal or status, the node's Ready condition
  becomes Unknown (reason NodeStatusUnknown) and it gets the node.kubernetes.io/unreachable taints;
  its pods are marked Ready False; pods being deleted there stay Terminating (no kubelet confirms);
- the taint manager deletes pods not tolerating a NoExecute taint, after tolerationSeconds when set.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kubespot.sim.kubesim import conventions, testing

UNREACHABLE = "node.kubernetes.io/unreachable"


def _taint_keys(cluster: Any, node: str) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in (cluster.node(node)["spec"].get("taints") or [])}


async def test_stopped_kubelet_makes_the_node_unknown_and_resuming_recovers(cluster: Any) -> None:
    await cluster.create_node("n1")
    await cluster.create_node("n2")
    await cluster.create_pod("victim", node_name="n1", annotations={conventions.SHUTDOWN_SECONDS: "0.1"})
    await cluster.until(lambda: cluster.phase("victim") == "Running")
    hb = cluster.condition(cluster.node("n1"), "Ready", "lastHeartbeatTime")

    cluster.kubelet.stop_node("n1")
    await cluster.until(lambda: cluster.node_ready("n1") == "Unknown", within=6.0)
    node = await cluster.call("GET", "/api/v1/nodes/n1")
    assert cluster.condition(node, "Ready", "reason") == "NodeStatusUnknown"
    assert cluster.condition(node, "Ready", "message") == "Kubelet stopped posting node status."
    assert cluster.condition(node, "Ready", "lastHeartbeatTime") >= hb
    await cluster.until(
        lambda: {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")} <= _taint_keys(cluster, "n1")
    )
    await cluster.until(lambda: cluster.condition(cluster.pod("victim"), "Ready") == "False")
    assert cluster.node_ready("n2") == "True"  # the other kubelet keeps beating

    # Nothing starts or terminates on a vanished instance.
    await cluster.create_pod("late", node_name="n1")
    await cluster.delete_pod("victim")
    await asyncio.sleep(0.5)
    assert cluster.phase("late") == "Pending"
    assert cluster.pod("victim")["metadata"].get("deletionTimestamp")

    cluster.kubelet.start_node("n1")
    await cluster.until(lambda: cluster.node_ready("n1") == "True")
    await cluster.until(lambda: not any(k == UNREACHABLE for k, _e in _taint_keys(cluster, "n1")))
    await cluster.until(lambda: cluster.pod("victim") is None)
    await cluster.until(lambda: cluster.phase("late") == "Running")


async def test_conditions_a_kubelet_never_posted_are_added_unknown_never_updated(cluster: Any) -> None:
    """pkg/controller/nodelifecycle/node_lifecycle_controller.go tryUpdateNodeHealth: past the grace
    period each of Ready, MemoryPressure, DiskPressure and PIDPressure the node lacks is appended
    Unknown, reason NodeStatusNeverUpdated, heartbeat its creationTimestamp; present ones turn
    Unknown with NodeStatusUnknown."""
    cluster.kubelet.stop_node("silent")  # its kubelet never runs: the Node never gets a status
    body = testing.node("silent")
    body["status"]["conditions"] = [
        {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"}
    ]
    created = await cluster.call("POST", "/api/v1/nodes", body)
    await cluster.until(lambda: cluster.node_ready("silent") == "Unknown", within=6.0)
    conditions = {c["type"]: c for c in cluster.node("silent")["status"]["conditions"]}
    assert set(conditions) == {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure"}
    for type_ in ("Ready", "DiskPressure", "PIDPressure"):
        assert conditions[type_]["status"] == "Unknown"
        assert conditions[type_]["reason"] == "NodeStatusNeverUpdated"
        assert conditions[type_]["message"] == "Kubelet never posted node status."
        assert conditions[type_]["lastHeartbeatTime"] == created["metadata"]["creationTimestamp"]
    memory = conditions["MemoryPressure"]
    assert (memory["status"], memory["reason"]) == ("Unknown", "NodeStatusUnknown")


async def test_noexecute_taint_evicts_untolerating_pods_after_toleration_seconds(cluster: Any) -> None:
    await cluster.create_node("n1")
    fast = {conventions.SHUTDOWN_SECONDS: "0.05"}
    await cluster.create_pod("plain", node_name="n1", annotations=fast)
    await cluster.create_pod(
        "brief",
        node_name="n1",
        annotations=fast,
        tolerations=[{"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1}],
    )
    await cluster.create_pod(
        "forever",
        node_name="n1",
        annotations=fast,
        tolerations=[{"key": "maint", "operator": "Exists", "effect": "NoExecute"}],
    )
    await cluster.until(lambda: all(cluster.phase(p) == "Running" for p in ("plain", "brief", "forever")))
    t0 = time.monotonic()
    await cluster.patch("/api/v1/nodes/n1", {"spec": {"taints": [{"key": "maint", "effect": "NoExecute"}]}})
    await cluster.until(lambda: cluster.pod("plain") is None, within=3.0)
    disrupted = [
        ev.obj
        for _t, ev in cluster.events
        if ev.obj["metadata"]["name"] == "plain" and cluster.condition(ev.obj, "DisruptionTarget")
    ]
    assert cluster.condition(disrupted[0], "DisruptionTarget", "reason") == "DeletionByTaintManager"
    assert cluster.pod("brief") is not None
    await cluster.until(lambda: cluster.pod("brief") is None, within=5.0)
    assert cluster.deleted_at("brief") - t0 >= 0.95
    await asyncio.sleep(0.3)
    assert cluster.phase("forever") == "Running"


async def test_removing_the_taint_cancels_a_pending_eviction(cluster: Any) -> None:
    await cluster.create_node("n1")
    await cluster.create_pod(
        "stay",
        node_name="n1",
        tolerations=[{"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1}],
    )
    await cluster.until(lambda: cluster.phase("stay") == "Running")
    await cluster.patch("/api/v1/nodes/n1", {"spec": {"taints": [{"key": "maint", "effect": "NoExecute"}]}})
    await asyncio.sleep(0.3)
    await cluster.patch("/api/v1/nodes/n1", {"spec": {"taints": None}})
    await asyncio.sleep(1.2)
    assert cluster.phase("stay") == "Running"
    assert not cluster.pod("stay")["metadata"].get("deletionTimestamp")


UNSCHEDULABLE = ("node.kubernetes.io/unschedulable", "NoSchedule")


async def test_cordon_adds_the_unschedulable_taint_and_uncordon_removes_it(cluster: Any) -> None:
    """pkg/controller/nodelifecycle/node_lifecycle_controller.go doNoScheduleTaintingPass: while
    spec.unschedulable is set the controller keeps node.kubernetes.io/unschedulable:NoSchedule (with
    timeAdded, util/node SwapNodeControllerTaint), removes it on uncordon and leaves other taints be.
    Its write right after the cordon makes a write based on the cordon's answer a 409."""
    await cluster.create_node("n1", taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}])
    cordoned = await cluster.patch("/api/v1/nodes/n1", {"spec": {"unschedulable": True}})
    await cluster.until(lambda: UNSCHEDULABLE in _taint_keys(cluster, "n1"))
    taint = next(t for t in cluster.node("n1")["spec"]["taints"] if t["key"] == UNSCHEDULABLE[0])
    assert taint["timeAdded"]
    assert ("team", "NoSchedule") in _taint_keys(cluster, "n1")
    stale = {**cordoned, "metadata": {**cordoned["metadata"], "labels": {"stale": "write"}}}
    await cluster.call("PUT", "/api/v1/nodes/n1", stale, expect=409)

    await cluster.patch("/api/v1/nodes/n1", {"spec": {"unschedulable": None}})
    await cluster.until(lambda: UNSCHEDULABLE not in _taint_keys(cluster, "n1"))
    assert _taint_keys(cluster, "n1") == {("team", "NoSchedule")}
    # Someone removing the controller's taint while the node is cordoned gets it back.
    await cluster.patch("/api/v1/nodes/n1", {"spec": {"unschedulable": True}})
    await cluster.until(lambda: UNSCHEDULABLE in _taint_keys(cluster, "n1"))
    await cluster.patch("/api/v1/nodes/n1", {"spec": {"taints": None}})
    await cluster.until(lambda: _taint_keys(cluster, "n1") == {UNSCHEDULABLE})


async def test_pressure_conditions_taint_noschedule(cluster: Any) -> None:
    """doNoScheduleTaintingPass's nodeConditionToTaintKeyStatusMap: MemoryPressure True ->
    node.kubernetes.io/memory-pressure:NoSchedule, removed when the condition clears."""
    await cluster.create_node("n1")
    cluster.kubelet.stop_node("n1")  # so the kubelet's next heartbeat does not clear the condition
    conds = [{"type": "MemoryPressure", "status": "True", "reason": "KubeletHasInsufficientMemory"}]
    await cluster.patch("/api/v1/nodes/n1/status", {"status": {"conditions": conds}})
    pressure = ("node.kubernetes.io/memory-pressure", "NoSchedule")
    await cluster.until(lambda: pressure in _taint_keys(cluster, "n1"))
    cluster.kubelet.start_node("n1")  # posts MemoryPressure False
    await cluster.until(lambda: pressure not in _taint_keys(cluster, "n1"))


def _no_execute(cluster: Any, node: str) -> set[str]:
    return {k for k, e in _taint_keys(cluster, node) if e == "NoExecute"}


def _tainted_at(cluster: Any, node: str, key: str) -> float:
    """Monotonic time of the first write that gave ``node`` the NoExecute taint ``key``."""

    def has(obj: dict[str, Any] | None) -> bool:
        taints = ((obj or {}).get("spec") or {}).get("taints") or []
        return any(t["key"] == key and t["effect"] == "NoExecute" for t in taints)

    return next(
        t
        for t, ev in cluster.events
        if ev.rkey == ("", "nodes") and ev.obj["metadata"]["name"] == node and has(ev.obj) and not has(ev.old)
    )


def _zone(zone: str) -> dict[str, dict[str, str]]:
    return {"labels": {"topology.kubernetes.io/region": "r1", "topology.kubernetes.io/zone": zone}}


async def test_recovered_kubelet_makes_its_pods_ready_again(cluster: Any) -> None:
    """pkg/controller/util/node MarkPodsNotReady turns the pods of an unreachable node Ready False;
    pkg/kubelet/status/status_manager.go syncBatch/needsReconcile writes the kubelet's own status
    (containers running and ready: Ready True) back once the kubelet reaches the API again."""
    await cluster.create_node("n1")
    await cluster.create_node("n2")
    await cluster.create_pod("web", node_name="n1")
    await cluster.until(lambda: cluster.condition(cluster.pod("web"), "Ready") == "True")
    cluster.kubelet.stop_node("n1")
    await cluster.until(lambda: cluster.condition(cluster.pod("web"), "Ready") == "False", within=6.0)
    cluster.kubelet.start_node("n1")
    await cluster.until(lambda: cluster.condition(cluster.pod("web"), "Ready") == "True")
    await cluster.until(lambda: cluster.node_ready("n1") == "True")
    assert cluster.phase("web") == "Running"


async def test_noexecute_tainting_follows_the_zone_rate(cluster_with: Any) -> None:
    """node_lifecycle_controller.go doNoExecuteTaintingPass with the zone's RateLimitedTimedQueue
    (token bucket, burst 1) at --node-eviction-rate while the zone is Normal (ComputeZoneState: 2 of
    6 not Ready): the second unreachable node is tainted NoExecute 1/rate after the first."""
    async with cluster_with(node_eviction_rate=2.0) as cluster:
        for i in range(6):
            await cluster.create_node(f"n{i}", **_zone("a"))
        cluster.kubelet.stop_node("n0")
        cluster.kubelet.stop_node("n1")
        await cluster.until(lambda: _no_execute(cluster, "n0") and _no_execute(cluster, "n1"), within=6.0)
        added = sorted(_tainted_at(cluster, n, UNREACHABLE) for n in ("n0", "n1"))
        assert added[1] - added[0] >= 0.4


async def test_partial_disruption_of_a_small_zone_stops_noexecute_tainting(cluster_with: Any) -> None:
    """handleDisruption + ComputeZoneState: 3 of 4 nodes (more than 2, at least 55 %) not Ready puts
    the zone in PartialDisruption; setLimiterInZone's ReducedQPSFunc gives a zone of at most
    --large-cluster-size-threshold nodes rate 0, so beyond the first (the bucket's burst) no node is
    tainted NoExecute; its NoSchedule unreachable taint is not rate limited."""
    async with cluster_with(node_eviction_rate=2.0) as cluster:
        for i in range(4):
            await cluster.create_node(f"n{i}", **_zone("a"))
        for i in range(3):
            cluster.kubelet.stop_node(f"n{i}")
        stopped = [f"n{i}" for i in range(3)]
        await cluster.until(lambda: {cluster.node_ready(n) for n in stopped} == {"Unknown"}, within=6.0)
        unreachable = (UNREACHABLE, "NoSchedule")
        await cluster.until(lambda: all(unreachable in _taint_keys(cluster, f"n{i}") for i in range(3)))
        await asyncio.sleep(0.8)  # the normal rate (2/s) would have tainted a second one by now
        assert sum(1 for i in range(3) if _no_execute(cluster, f"n{i}")) <= 1
        lifecycle = next(c for c in cluster.sim.controllers.controllers if c.name == "nodelifecycle")
        assert lifecycle.zones.states == {"r1:\x00:a": "PartialDisruption"}


async def test_partial_disruption_of_a_large_zone_taints_at_the_secondary_rate(cluster_with: Any) -> None:
    """setLimiterInZone: a partially disrupted zone of more than --large-cluster-size-threshold nodes
    is tainted at --secondary-node-eviction-rate (here 3 nodes, threshold 3, secondary rate 4/s)."""
    async with cluster_with(
        node_eviction_rate=0.5, secondary_node_eviction_rate=4.0, large_cluster_size_threshold=3
    ) as cluster:
        for i in range(4):
            await cluster.create_node(f"n{i}", **_zone("a"))
        for i in range(3):
            cluster.kubelet.stop_node(f"n{i}")
        await cluster.until(lambda: all(_no_execute(cluster, f"n{i}") for i in range(3)), within=4.0)
        assert not _no_execute(cluster, "n3")


async def test_all_zones_fully_disrupted_stops_and_undoes_noexecute_tainting(cluster: Any) -> None:
    """handleDisruption: a fully disrupted zone among healthy ones is tainted at the normal rate
    (HealthyQPSFunc); once every zone is fully disrupted the controller removes the NoExecute taints
    (markNodeAsReachable) and stops tainting; a node Ready again ends that mode."""
    await cluster.create_node("a1", **_zone("a"))
    await cluster.create_node("a2", **_zone("a"))
    await cluster.create_node("b1", **_zone("b"))
    cluster.kubelet.stop_node("a1")
    cluster.kubelet.stop_node("a2")
    await cluster.until(lambda: _no_execute(cluster, "a1") and _no_execute(cluster, "a2"), within=6.0)
    cluster.kubelet.stop_node("b1")
    await cluster.until(lambda: cluster.node_ready("b1") == "Unknown", within=6.0)
    await cluster.until(lambda: not any(_no_execute(cluster, n) for n in ("a1", "a2", "b1")))
    await asyncio.sleep(0.25)
    assert not any(_no_execute(cluster, n) for n in ("a1", "a2", "b1"))
    assert (UNREACHABLE, "NoSchedule") in _taint_keys(cluster, "a1")
    cluster.kubelet.start_node("b1")
    await cluster.until(lambda: _no_execute(cluster, "a1") and _no_execute(cluster, "a2"), within=3.0)
    assert not _no_execute(cluster, "b1")


async def test_a_node_labelled_exclude_disruption_does_not_count_in_its_zone(cluster: Any) -> None:
    """node_lifecycle_controller.go monitorNodeHealth and isNodeExcludedFromDisruptionChecks: a node
    labelled node.kubernetes.io/exclude-disruption is left out of zoneToNodeConditions, so its Ready
    neighbour alone makes the zone fully disrupted -- every zone is, and NoExecute tainting stops."""
    await cluster.create_node("a1", **_zone("a"))
    excluded = _zone("a")
    excluded["labels"]["node.kubernetes.io/exclude-disruption"] = ""
    await cluster.create_node("a2", **excluded)
    cluster.kubelet.stop_node("a1")
    await cluster.until(lambda: cluster.node_ready("a1") == "Unknown", within=6.0)
    await asyncio.sleep(0.3)  # the normal rate would have tainted a1 by now (tested above)
    assert not _no_execute(cluster, "a1")
    lifecycle = next(c for c in cluster.sim.controllers.controllers if c.name == "nodelifecycle")
    assert lifecycle.zones.states == {"r1:\x00:a": "FullDisruption"}


NOT_READY = "node.kubernetes.io/not-ready"


async def test_a_new_node_is_not_ready_and_tainted_until_its_kubelet_is_up(cluster_with: Any) -> None:
    """plugin/pkg/admission/nodetaint/admission.go (TaintNodesByCondition admission) taints a created
    Node not-ready:NoSchedule; the kubelet (pkg/kubelet/nodestatus ReadyCondition) reports Ready False
    until its runtime network is up, overwriting the Ready the Node was created with; then Ready True,
    and doNoScheduleTaintingPass removes the taint, so a pending pod is scheduled only then."""
    async with cluster_with(node_ready_seconds=0.5) as cluster:
        created = await cluster.call("POST", "/api/v1/nodes", testing.node("fresh", ready=True))
        assert (NOT_READY, "NoSchedule") in {(t["key"], t["effect"]) for t in created["spec"]["taints"]}
        await cluster.create_pod("p", cpu="100m")
        await cluster.until(
            lambda: cluster.condition(cluster.node("fresh"), "Ready", "reason") == "KubeletNotReady"
        )
        assert cluster.node_ready("fresh") == "False"
        await asyncio.sleep(0.2)
        assert not cluster.pod("p")["spec"].get("nodeName")  # not-ready: NoSchedule
        # Its only zone is fully disrupted (no node Ready), so handleDisruption taints nothing NoExecute.
        assert not _no_execute(cluster, "fresh")
        await cluster.until(lambda: cluster.node_ready("fresh") == "True", within=3.0)
        await cluster.until(lambda: not cluster.not_ready_tainted("fresh"))
        await cluster.until(lambda: cluster.phase("p") == "Running")
        assert cluster.pod("p")["spec"]["nodeName"] == "fresh"


UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"


async def test_an_external_cloud_node_is_uninitialized_until_the_cloud_node_controller_runs(
    cluster_with: Any,
) -> None:
    """pkg/kubelet/kubelet_node_status.go initialNode: with --cloud-provider=external the kubelet
    registers the Node tainted node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule;
    staging/src/k8s.io/cloud-provider/controllers/node/node_controller.go syncNode sets providerID and
    the instance-type/zone/region labels and removes the taint in one update."""
    async with cluster_with(cloud_node_init_seconds=0.4) as cluster:
        body = testing.node("ext", labels={conventions.INSTANCE_ID_LABEL: "i-0123456789abcdef0"})
        body["metadata"]["annotations"] = {conventions.CLOUD_PROVIDER_ANNOTATION: "external"}
        await cluster.call("POST", "/api/v1/nodes", body)
        await cluster.until(lambda: (UNINITIALIZED, "NoSchedule") in _taint_keys(cluster, "ext"))
        await cluster.create_pod("p", cpu="100m")
        await cluster.until(
            lambda: cluster.node_ready("ext") == "True" and not cluster.not_ready_tainted("ext")
        )
        assert not cluster.pod("p")["spec"].get("nodeName")  # Ready, but still uninitialized
        assert not cluster.node("ext")["spec"].get("providerID")
        await cluster.until(lambda: (UNINITIALIZED, "NoSchedule") not in _taint_keys(cluster, "ext"))
        node = cluster.node("ext")
        assert node["spec"]["providerID"] == "aws:///us-east-1a/i-0123456789abcdef0"
        labels = node["metadata"]["labels"]
        assert labels["topology.kubernetes.io/zone"] == "us-east-1a"
        assert labels["topology.kubernetes.io/region"] == "us-east-1"
        assert labels["node.kubernetes.io/instance-type"]
        await cluster.until(lambda: cluster.phase("p") == "Running")
