"""Node lifecycle over real HTTP: vanished kubelets, node deletion, NoExecute taints, out-of-service.

Upstream behaviour relied on (kube-controller-manager, https://kubernetes.io/docs/concepts/architecture/nodes/
and .../scheduling-eviction/taint-and-toleration/):
- after --node-monitor-grace-period without lease renewal or status, the node's Ready condition
  becomes Unknown (reason NodeStatusUnknown) and it gets the node.kubernetes.io/unreachable taints;
  its pods are marked Ready False; pods being deleted there stay Terminating (no kubelet confirms);
- PodGC force-deletes the pods of a deleted node, and terminating pods on a NotReady node tainted
  node.kubernetes.io/out-of-service;
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


async def test_deleting_a_node_force_removes_its_pods(cluster: Any) -> None:
    await cluster.create_node("doomed")
    await cluster.create_node("other")
    await cluster.create_pod("a", node_name="doomed", annotations={conventions.SHUTDOWN_SECONDS: "60"})
    await cluster.create_pod("b", node_name="doomed")
    await cluster.create_pod("c", node_name="other")
    await cluster.until(lambda: cluster.phase("a") == "Running" and cluster.phase("c") == "Running")
    cluster.kubelet.stop_node("doomed")  # the instance is gone: only PodGC can remove its pods
    await cluster.call("DELETE", "/api/v1/nodes/doomed")
    await cluster.until(lambda: cluster.pod("a") is None and cluster.pod("b") is None, within=3.0)
    assert cluster.phase("c") == "Running"
    deletes = [
        ev.obj for _t, ev in cluster.events if ev.type == "DELETED" and ev.obj["metadata"]["name"] == "a"
    ]
    assert deletes[0]["metadata"]["deletionGracePeriodSeconds"] == 0


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


async def test_out_of_service_taint_force_deletes_terminating_pods(cluster: Any) -> None:
    await cluster.create_node("n1")
    await cluster.create_pod("stuck", node_name="n1")
    await cluster.until(lambda: cluster.phase("stuck") == "Running")
    cluster.kubelet.stop_node("n1")
    await cluster.until(lambda: cluster.node_ready("n1") == "Unknown", within=6.0)
    await cluster.delete_pod("stuck")
    await asyncio.sleep(0.3)
    assert cluster.pod("stuck") is not None  # Terminating for ever without a kubelet...
    taints = cluster.node("n1")["spec"]["taints"] + [
        {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}
    ]
    await cluster.patch("/api/v1/nodes/n1", {"spec": {"taints": taints}})
    await cluster.until(lambda: cluster.pod("stuck") is None, within=3.0)  # ...until out-of-service
