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

from kubespot.sim.kubesim import conventions

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
