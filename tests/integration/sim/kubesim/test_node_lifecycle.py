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
