"""The scheduler's VolumeBinding and VolumeZone over HTTP, with zonal PersistentVolumes.

Follows pkg/scheduler/framework/plugins/volumebinding (volume_binding.go PreFilter/Filter, binder.go
FindPodVolumes and its ErrReason* strings), pkg/scheduler/framework/plugins/volumezone
(ErrReasonConflict) and pkg/scheduler/framework/types.go FitError.Error (a PreFilter rejection's
message replaces the per-node histogram).
"""

from __future__ import annotations

from typing import Any

ZONE = "topology.kubernetes.io/zone"


def _node_of(cluster: Any, name: str) -> str | None:
    p = cluster.pod(name)
    return None if p is None else p["spec"].get("nodeName")


def _message(cluster: Any, name: str) -> str | None:
    return cluster.condition(cluster.pod(name), "PodScheduled", "message")  # type: ignore[no-any-return]


async def _zones(cluster: Any) -> None:
    await cluster.create_node("a1", labels={ZONE: "a"})
    await cluster.create_node("b1", labels={ZONE: "b"})


async def _claim(cluster: Any, name: str, *, volume: str | None = None, sc: str | None = None) -> Any:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if volume:
        spec["volumeName"] = volume
    if sc:
        spec["storageClassName"] = sc
    body = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec}
    return await cluster.call("POST", "/api/v1/namespaces/default/persistentvolumeclaims", body)


async def _volume(
    cluster: Any, name: str, *, zone_label: str | None = None, affinity_zone: str | None = None
) -> None:
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
    if affinity_zone:
        expr = {"key": ZONE, "operator": "In", "values": [affinity_zone]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}
    meta: dict[str, Any] = {"name": name, "labels": {ZONE: zone_label} if zone_label else {}}
    await cluster.call(
        "POST",
        "/api/v1/persistentvolumes",
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec},
    )


async def _class(cluster: Any, name: str, mode: str, zones: list[str] | None = None) -> None:
    body: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": mode,
    }
    if zones:
        body["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]
    await cluster.call("POST", "/apis/storage.k8s.io/v1/storageclasses", body)


async def _pod_with(cluster: Any, name: str, claim: str) -> None:
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    await cluster.create_pod(name, cpu="10m", volumes=volumes)


async def test_bound_claim_pins_the_pod_to_its_volume_zone(cluster: Any) -> None:
    """volume_binding.go Filter: a bound PV's required nodeAffinity must match -- "node(s) had volume node
    affinity conflict"; volumezone: the PV's zone label must match -- "node(s) had no available volume
    zone". Both UnschedulableAndUnresolvable: preemption is not helpful."""
    await _zones(cluster)
    await _volume(cluster, "pv-b", affinity_zone="b")
    await _claim(cluster, "data-b", volume="pv-b")
    await _pod_with(cluster, "db", "data-b")
    await cluster.until(lambda: _node_of(cluster, "db") == "b1")
    await _volume(cluster, "pv-a", zone_label="a")
    await _claim(cluster, "data-a", volume="pv-a")
    await cluster.patch("/api/v1/nodes/a1", {"spec": {"unschedulable": True}})
    await _pod_with(cluster, "cache", "data-a")
    await cluster.until(lambda: _message(cluster, "cache"))
    assert _message(cluster, "cache") == (
        "0/2 nodes are available: 1 node(s) had no available volume zone, 1 node(s) were unschedulable. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    await cluster.patch("/api/v1/nodes/a1", {"spec": {"unschedulable": False}})
    await cluster.until(lambda: _node_of(cluster, "cache") == "a1")
    await cluster.patch("/api/v1/nodes/b1", {"spec": {"unschedulable": True}})
    await _pod_with(cluster, "db2", "data-b")
    await cluster.until(lambda: _message(cluster, "db2"))
    assert _message(cluster, "db2") == (
        "0/2 nodes are available: 1 node(s) had volume node affinity conflict, 1 node(s) were unschedulable. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    await cluster.patch("/api/v1/nodes/b1", {"spec": {"unschedulable": False}})
    await cluster.until(lambda: _node_of(cluster, "db2") == "b1")


async def test_missing_or_immediate_unbound_claims_fail_pre_filter(cluster: Any) -> None:
    """volume_binding.go PreFilter: a missing claim fails every node with the lister's NotFound error,
    an unbound claim of an Immediate class with "pod has unbound immediate PersistentVolumeClaims";
    FitError prints the PreFilter message instead of a histogram."""
    await _zones(cluster)
    await _pod_with(cluster, "orphan", "nope")
    await cluster.until(lambda: _message(cluster, "orphan"))
    assert _message(cluster, "orphan") == (
        '0/2 nodes are available: persistentvolumeclaim "nope" not found. '
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    await _class(cluster, "gp3-now", "Immediate")
    await _claim(cluster, "now", sc="gp3-now")
    await _pod_with(cluster, "eager", "now")
    await cluster.until(lambda: _message(cluster, "eager"))
    assert _message(cluster, "eager") == (
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    await _class(cluster, "gp3", "WaitForFirstConsumer")
    await _claim(cluster, "nope", sc="gp3")
    await cluster.until(lambda: _node_of(cluster, "orphan"))  # the claim's creation retried it


async def test_wait_for_first_consumer_binds_where_the_pod_goes(cluster: Any) -> None:
    """binder.go checkVolumeProvisions: a WaitForFirstConsumer claim is provisioned on a node its class's
    allowedTopologies allow ("node(s) didn't find available persistent volumes to bind" elsewhere);
    once bound (PreBind's volume.kubernetes.io/selected-node) its volume pins later pods to that zone."""
    await _zones(cluster)
    await cluster.create_pod("filler", cpu="3", nodeName="a1")
    await _class(cluster, "gp3-a", "WaitForFirstConsumer", zones=["a"])
    await _claim(cluster, "data", sc="gp3-a")
    await _pod_with(cluster, "first", "data")
    await cluster.until(lambda: _node_of(cluster, "first") == "a1")  # b1 is emptier but not allowed
    pvc = await cluster.call("GET", "/api/v1/namespaces/default/persistentvolumeclaims/data")
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "a1"
    assert pvc["status"]["phase"] == "Bound"
    pv = await cluster.call("GET", f"/api/v1/persistentvolumes/{pvc['spec']['volumeName']}")
    (term,) = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": ZONE, "operator": "In", "values": ["a"]}]
    await _class(cluster, "gp3-b", "WaitForFirstConsumer", zones=["b"])
    await _claim(cluster, "other", sc="gp3-b")
    await cluster.patch("/api/v1/nodes/b1", {"spec": {"unschedulable": True}})
    await _pod_with(cluster, "second", "other")
    await cluster.until(lambda: _message(cluster, "second"))
    assert _message(cluster, "second").startswith(  # type: ignore[union-attr]
        "0/2 nodes are available: 1 node(s) didn't find available persistent volumes to bind, "
        "1 node(s) were unschedulable."
    )


async def test_a_claim_without_a_class_is_provisioned_from_the_default_class(cluster: Any) -> None:
    """plugin/pkg/admission/storage/storageclass/setdefault/admission.go: the claim gets the class
    annotated storageclass.kubernetes.io/is-default-class, so binder.go checkVolumeProvisions
    provisions it where the pod goes (WaitForFirstConsumer) and the pod schedules."""
    await _zones(cluster)
    await _class(cluster, "gp3", "WaitForFirstConsumer", zones=["b"])
    await cluster.patch(
        "/apis/storage.k8s.io/v1/storageclasses/gp3",
        {"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}},
    )
    created = await _claim(cluster, "data")
    assert created["spec"]["storageClassName"] == "gp3"
    await _pod_with(cluster, "db", "data")
    await cluster.until(lambda: _node_of(cluster, "db") == "b1")
