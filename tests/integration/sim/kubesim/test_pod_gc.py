"""PodGC over real HTTP: orphaned pods after the quarantine, out-of-service, terminated, unscheduled.

Each test follows pkg/controller/podgc/gc_controller.go (Kubernetes 1.32), named per test. The
conftest's config sweeps every 0.1 s with a 0.4 s quarantine (upstream: 20 s and 40 s).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kubespot.sim.kubesim import conventions

OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}


def _last_before_delete(cluster: Any, name: str) -> dict[str, Any]:
    """The pod as its last write before deletion left it (the DELETED event carries it)."""
    deletes = [
        ev.obj
        for _t, ev in cluster.events
        if ev.type == "DELETED" and ev.rkey == ("", "pods") and ev.obj["metadata"]["name"] == name
    ]
    assert deletes, name
    return deletes[-1]  # type: ignore[no-any-return]


async def test_orphaned_pods_go_after_the_quarantine_failed_and_force_deleted(cluster: Any) -> None:
    """gcOrphaned + discoverDeletedNodes + markFailedAndDeletePodWithCondition: the pods of a deleted
    node stay for quarantineTime, then are marked Failed with DisruptionTarget (DeletionByPodGC,
    "PodGC: node no longer exists") and deleted with grace 0."""
    await cluster.create_node("doomed")
    await cluster.create_node("other")
    await cluster.create_pod("a", node_name="doomed", annotations={conventions.SHUTDOWN_SECONDS: "60"})
    await cluster.create_pod("b", node_name="doomed")
    await cluster.create_pod("c", node_name="other")
    await cluster.until(lambda: all(cluster.phase(p) == "Running" for p in "abc"))
    cluster.kubelet.stop_node("doomed")  # the instance is gone: only PodGC can remove its pods
    t0 = time.monotonic()
    await cluster.call("DELETE", "/api/v1/nodes/doomed")
    await asyncio.sleep(0.25)
    assert cluster.phase("a") == "Running" and cluster.phase("b") == "Running"  # in quarantine
    await cluster.until(lambda: cluster.pod("a") is None and cluster.pod("b") is None, within=3.0)
    assert cluster.deleted_at("a") - t0 >= 0.4  # not before the quarantine
    assert cluster.phase("c") == "Running"
    gone = _last_before_delete(cluster, "a")
    assert gone["status"]["phase"] == "Failed"
    assert cluster.condition(gone, "DisruptionTarget") == "True"
    assert cluster.condition(gone, "DisruptionTarget", "reason") == "DeletionByPodGC"
    assert cluster.condition(gone, "DisruptionTarget", "message") == "PodGC: node no longer exists"
    assert gone["metadata"]["deletionGracePeriodSeconds"] == 0


async def test_a_node_back_within_the_quarantine_keeps_its_pods(cluster: Any) -> None:
    """gcOrphaned's quarantine: a node missing for less than quarantineTime (e.g. re-registered)
    is found again by discoverDeletedNodes' GET and its pods are left alone."""
    await cluster.create_node("flaky")
    await cluster.create_pod("p", node_name="flaky")
    await cluster.until(lambda: cluster.phase("p") == "Running")
    await cluster.call("DELETE", "/api/v1/nodes/flaky")
    await asyncio.sleep(0.15)
    await cluster.create_node("flaky")
    await asyncio.sleep(0.8)  # two quarantines
    assert cluster.phase("p") == "Running"
    assert not cluster.pod("p")["metadata"].get("deletionTimestamp")


async def test_out_of_service_taint_force_deletes_terminating_pods(cluster: Any) -> None:
    """gcTerminating: a terminating pod on a node that is not Ready and tainted
    node.kubernetes.io/out-of-service is marked Failed and deleted with grace 0 (a pod the
    NoExecute taint evicts is terminating too, so it follows)."""
    await cluster.create_node("n1")
    await cluster.create_pod("stuck", node_name="n1")
    await cluster.create_pod("bystander", node_name="n1")
    await cluster.until(lambda: cluster.phase("stuck") == cluster.phase("bystander") == "Running")
    cluster.kubelet.stop_node("n1")
    await cluster.until(lambda: cluster.node_ready("n1") == "Unknown", within=6.0)
    await cluster.delete_pod("stuck")
    await asyncio.sleep(0.3)
    assert cluster.pod("stuck") is not None  # Terminating for ever without a kubelet...
    taints = cluster.node("n1")["spec"]["taints"] + [OUT_OF_SERVICE]
    await cluster.patch("/api/v1/nodes/n1", {"spec": {"taints": taints}})
    await cluster.until(lambda: cluster.pod("stuck") is None, within=3.0)  # ...until out-of-service
    gone = _last_before_delete(cluster, "stuck")
    assert gone["status"]["phase"] == "Failed"
    assert gone["metadata"]["deletionGracePeriodSeconds"] == 0
    # The taint is NoExecute: the taint manager evicts the other pod, and PodGC then removes it too.
    await cluster.until(lambda: cluster.pod("bystander") is None, within=3.0)
    other = _last_before_delete(cluster, "bystander")
    assert cluster.condition(other, "DisruptionTarget", "reason") == "DeletionByTaintManager"
    assert other["status"]["phase"] == "Failed"


async def test_out_of_service_on_a_ready_node_does_nothing(cluster: Any) -> None:
    """gcTerminating requires !IsNodeReady: on a Ready node the kubelet still confirms deletions."""
    await cluster.create_node("n1")
    slow = {conventions.SHUTDOWN_SECONDS: "30"}
    await cluster.create_pod("slow", node_name="n1", annotations=slow, grace=30)
    await cluster.until(lambda: cluster.phase("slow") == "Running")
    await cluster.patch("/api/v1/nodes/n1", {"spec": {"taints": [OUT_OF_SERVICE]}})
    await cluster.delete_pod("slow")
    await asyncio.sleep(0.5)
    assert cluster.pod("slow") is not None


async def test_terminated_pods_beyond_the_threshold_go_evicted_then_oldest(cluster_with: Any) -> None:
    """gcTerminated with byEvictionAndCreationTimestamp: with more terminated pods than
    --terminated-pod-gc-threshold, the excess goes, evicted pods first, then oldest, then by name."""
    async with cluster_with(terminated_pod_gc_threshold=2) as cluster:
        await cluster.create_node("n1")
        for name in ("t1", "t2", "t3", "t4", "live"):
            await cluster.create_pod(name, node_name="n1")
        await cluster.until(lambda: all(cluster.phase(p) == "Running" for p in ("t1", "t2", "t3", "t4")))
        for name in ("t1", "t2", "t3", "t4"):
            status: dict[str, Any] = {"phase": "Succeeded"}
            if name == "t4":
                status = {"phase": "Failed", "reason": "Evicted", "message": "The node was low on memory."}
            await cluster.patch(f"/api/v1/namespaces/default/pods/{name}/status", {"status": status})
        await cluster.until(lambda: cluster.pod("t4") is None and cluster.pod("t1") is None)
        await asyncio.sleep(0.3)
        assert cluster.phase("t2") == "Succeeded" and cluster.phase("t3") == "Succeeded"
        assert cluster.phase("live") == "Running"


async def test_unscheduled_terminating_pods_are_failed_and_force_deleted(cluster: Any) -> None:
    """gcUnscheduledTerminating: a pod being deleted that was never bound (only a finalizer keeps it)
    is marked Failed and deleted with grace 0."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "limbo", "finalizers": ["example.com/hold"]},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
    }
    await cluster.call("POST", "/api/v1/namespaces/default/pods", body)  # no node fits: stays Pending
    await cluster.delete_pod("limbo", grace=30)
    await cluster.until(lambda: cluster.phase("limbo") == "Failed", within=3.0)
    assert cluster.pod("limbo")["metadata"]["deletionGracePeriodSeconds"] == 0
    await cluster.patch("/api/v1/namespaces/default/pods/limbo", {"metadata": {"finalizers": None}})
    await cluster.until(lambda: cluster.pod("limbo") is None)
