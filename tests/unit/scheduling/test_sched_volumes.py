"""Zonal volumes as node requirements, and the pods the provisioner leaves alone: kubernetes-sigs/karpenter
``pkg/controllers/provisioning/scheduling/volumetopology.go`` (``getRequirements``,
``getPersistentVolumeRequirements``, ``getStorageClassRequirements``, ``ValidatePersistentVolumeClaims``),
``pkg/utils/volume/volume.go`` ``GetPersistentVolumeClaim`` and ``scheduling/events.go``
``PodFailedToScheduleEvent``."""

from __future__ import annotations

from typing import Any

import pytest

from kubespot.scheduling.cluster import provisionable_pods, workload_claims, workload_pods
from kubespot.scheduling.labels import HOSTNAME, ZONE
from kubespot.scheduling.nodepool import NodePool
from kubespot.scheduling.simulate import PoolCapacity, simulate
from kubespot.scheduling.volumes import UnprovisionablePod, Volumes, volume_requirements
from support.catalog import itype

BOUND = {"pv.kubernetes.io/bind-completed": "yes"}


def pv(name: str, *terms: list[dict[str, Any]], local: bool = False, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}}
    }
    if local:
        spec["local"] = {"path": "/mnt/disk"}
    return {"kind": "PersistentVolume", "metadata": {"name": name, **meta}, "spec": spec}


def pvc(name: str, volume: str = "", cls: str | None = "gp3", **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"volumeName": volume} if volume else {}
    if cls is not None:
        spec["storageClassName"] = cls
    annotations = BOUND if volume else {}
    return {"metadata": {"name": name, "namespace": "db", "annotations": annotations, **meta}, "spec": spec}


def sc(
    name: str, mode: str | None = "WaitForFirstConsumer", zones: list[list[str]] | None = None, **meta: Any
) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name, **meta}}
    if mode:
        obj["volumeBindingMode"] = mode
    if zones:
        obj["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": z}]} for z in zones]
    return obj


def zone_in(*zones: str) -> list[dict[str, Any]]:
    return [{"key": ZONE, "operator": "In", "values": list(zones)}]


def pod(*volumes: dict[str, Any], name: str = "web-0") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "db"},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "volumes": list(volumes),
        },
    }


def claim(name: str, volume: str = "data") -> dict[str, Any]:
    return {"name": volume, "persistentVolumeClaim": {"claimName": name}}


def ephemeral(cls: str | None) -> dict[str, Any]:
    spec = {"storageClassName": cls} if cls else {}
    return {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": spec}}}


CLASSES = [
    sc("gp3", zones=[["z1", "z2"], ["z3"]]),
    sc("anywhere"),
    sc("fast", mode="Immediate"),
    sc("unset-mode", mode=None),
    sc("default-wffc", zones=[["z2"]], annotations={"storageclass.kubernetes.io/is-default-class": "true"}),
]


@pytest.mark.parametrize(
    ("volumes", "claims", "pvs", "expected"),
    [
        # No claim: no topology (emptyDir).
        ([{"name": "tmp", "emptyDir": {}}], [], [], ""),
        # Bound: the PV's first nodeAffinity term (terms are ORed; Karpenter keeps the first).
        (
            [claim("data")],
            [pvc("data", "pv-a")],
            [pv("pv-a", zone_in("z1"), zone_in("z2"))],
            f"{ZONE} In [z1]",
        ),
        # The EBS CSI driver's own zone key reads as the zone (the AWS provider normalises it).
        (
            [claim("data")],
            [pvc("data", "pv-e")],
            [pv("pv-e", [{"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["z3"]}])],
            f"{ZONE} In [z3]",
        ),
        # A local volume's hostname is dropped: a new node cannot be the old one.
        (
            [claim("data")],
            [pvc("data", "pv-l")],
            [
                pv(
                    "pv-l",
                    [*zone_in("z2"), {"key": HOSTNAME, "operator": "In", "values": ["old"]}],
                    local=True,
                )
            ],
            f"{ZONE} In [z2]",
        ),
        # Unbound, WaitForFirstConsumer: the class's first allowedTopologies term as In.
        ([claim("data")], [pvc("data", cls="gp3")], [], f"{ZONE} In [z1 z2]"),
        # ... and nothing when the class allows any zone.
        ([claim("data")], [pvc("data", cls="anywhere")], [], ""),
        # An ephemeral volume's claim not created yet: its template (here, the default class).
        ([ephemeral(None)], [], [], f"{ZONE} In [z2]"),
        # Two claims: both apply.
        (
            [claim("data"), claim("logs", "logs")],
            [pvc("data", "pv-a"), pvc("logs", cls="gp3")],
            [pv("pv-a", zone_in("z1", "z3"))],
            f"{ZONE} In [z1]",
        ),
    ],
)
def test_claims_become_zone_requirements(
    volumes: list[dict[str, Any]], claims: list[dict[str, Any]], pvs: list[dict[str, Any]], expected: str
) -> None:
    """volumetopology.go getPersistentVolumeRequirements / getStorageClassRequirements (v1.0-v1.12: first
    term); volume.go GetPersistentVolumeClaim (ephemeral claims are ``<pod>-<volume>``)."""
    assert str(volume_requirements(pod(*volumes), Volumes.of(claims, pvs, CLASSES))) == expected


@pytest.mark.parametrize(
    ("volumes", "claims", "pvs", "message"),
    [
        ([claim("gone")], [], [], 'getting persistent volume claim, persistentvolumeclaims "gone" not found'),
        (
            [claim("data")],
            [pvc("data", "pv-x")],
            [],
            'failed to validate pvc, persistentvolumes "pv-x" not found',
        ),
        (
            [claim("data")],
            [pvc("data", "pv-a")],
            [pv("pv-a", zone_in("z1"), deletionTimestamp="2026-01-01T00:00:00Z")],
            "failed to validate pvc, persistentvolume is being deleted",
        ),
        (
            [claim("data")],
            [{**pvc("data", "pv-a"), "metadata": {"name": "data", "namespace": "db"}}],
            [pv("pv-a", zone_in("z1"))],
            "pvc is considered unbound because it does not contain annotation",
        ),
        (
            [claim("data")],
            [pvc("data", deletionTimestamp="2026-01-01T00:00:00Z")],
            [],
            "persistentvolumeclaim is being deleted",
        ),
        (
            [claim("data")],
            [{**pvc("data"), "status": {"phase": "Lost"}}],
            [],
            "persistentvolumeclaim bound to non-existent persistentvolume",
        ),
        ([claim("data")], [pvc("data", cls="")], [], "unbound pvc must define a storage class"),
        (
            [claim("data")],
            [pvc("data", cls="nope")],
            [],
            'failed to get storage class, storageclasses.storage.k8s.io "nope" not found',
        ),
        (
            [claim("data")],
            [pvc("data", cls="fast")],
            [],
            "pvc with immediate volume binding mode must be bound",
        ),
        # The API server defaults volumeBindingMode to Immediate.
        (
            [claim("data")],
            [pvc("data", cls="unset-mode")],
            [],
            "pvc with immediate volume binding mode must be bound",
        ),
    ],
)
def test_pods_whose_claims_cannot_be_judged_are_left_alone(
    volumes: list[dict[str, Any]], claims: list[dict[str, Any]], pvs: list[dict[str, Any]], message: str
) -> None:
    """volumetopology.go ValidatePersistentVolumeClaims / validateVolume: Karpenter ignores the pod."""
    with pytest.raises(UnprovisionablePod) as caught:
        volume_requirements(pod(*volumes), Volumes.of(claims, pvs, CLASSES))
    assert message in str(caught.value)


def test_a_bound_claim_puts_the_new_node_in_the_volumes_zone_and_a_lost_one_is_reported() -> None:
    """provisioner.go Validate + PodFailedToScheduleEvent ("Failed to schedule pod, ..."); the zone
    becomes the NodeClaim's (volumetopology.go: requirements added to every required term, so
    preference relaxation keeps them)."""
    volumes = Volumes.of([pvc("data-web-0", "pv-a")], [pv("pv-a", zone_in("z2"))], CLASSES)
    pods = [pod(claim("data-web-0")), pod(claim("missing"), name="web-1")]
    pending, left_out = provisionable_pods(pods, volumes)
    assert [p.key for p in pending] == ["db/web-0"]
    assert str(pending[0].strict_requirements) == f"{ZONE} In [z2]"
    missing = 'getting persistent volume claim, persistentvolumeclaims "missing" not found'
    assert left_out == {"db/web-1": [f"Failed to schedule pod, {missing}"]}
    catalog = [itype("m", 2, 8, od=0.1, spot=0.04, zones=("z1", "z2", "z3"))]
    nodepool = NodePool.of({"metadata": {"name": "p"}, "spec": {"template": {"spec": {}}}})
    plan = simulate(pending, [], [PoolCapacity(nodepool, catalog)])
    assert plan.claims[0].zones == ["z2"]


def test_a_statefulsets_claim_templates_become_its_pods_claims() -> None:
    """kubernetes pkg/controller/statefulset/stateful_set_utils.go getPersistentVolumeClaimName
    (``<template>-<set>-<ordinal>``) and updateStorage (the pod's volume per template)."""
    sts = {
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "db"},
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "c"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"storageClassName": "gp3"}}],
        },
    }
    pods = workload_pods([sts])
    assert [p["spec"]["volumes"] for p in pods] == [
        [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}],
        [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}}],
    ]
    claims = workload_claims([sts])
    assert [(c["metadata"]["namespace"], c["metadata"]["name"], c["spec"]) for c in claims] == [
        ("db", "data-db-0", {"storageClassName": "gp3"}),
        ("db", "data-db-1", {"storageClassName": "gp3"}),
    ]
    assert str(volume_requirements(pods[1], Volumes.of(claims, [], CLASSES))) == f"{ZONE} In [z1 z2]"
