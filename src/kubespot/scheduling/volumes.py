"""Zonal volumes: the node requirements a pod's PersistentVolumeClaims put on where it may run, or
why the provisioner must leave the pod alone.

Karpenter's ``pkg/controllers/provisioning/scheduling/volumetopology.go`` (kubernetes-sigs/karpenter,
as released v1.0 to v1.12): per volume that names a claim (``persistentVolumeClaim``, or
``ephemeral``, whose claim is named ``<pod>-<volume>``),

- a claim bound to a PersistentVolume (``spec.volumeName``) takes the volume's
  ``nodeAffinity.required`` first term (terms are ORed; Karpenter keeps the first), without the
  hostname for ``local`` and ``hostPath`` volumes (a new node cannot be the old one);
- an unbound claim takes its StorageClass's ``allowedTopologies`` first term as ``In``
  requirements; a class without them (``WaitForFirstConsumer`` with any zone) adds nothing.

A pod that cannot be judged is not provisionable (``ValidatePersistentVolumeClaims``: Karpenter
ignores it and publishes a ``FailedScheduling`` event, "Failed to schedule pod, ..."): a missing
claim, volume or class; a claim being deleted or Lost; a bound claim without the
``pv.kubernetes.io/bind-completed`` annotation; an unbound claim without a class, or whose class
binds ``Immediate`` (the default mode: the volume controller binds it first).

Beyond what a live cluster has, for plans of workloads not created yet: an ``ephemeral`` volume
whose claim does not exist yet is judged by its ``volumeClaimTemplate`` (the ephemeral controller
creates it from that), and a claim without a class gets the default StorageClass, as the
``DefaultStorageClass`` admission plugin would give it.

Pure: dicts in, requirements or a reason out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .labels import HOSTNAME
from .requirements import Requirement, Requirements

Obj = Mapping[str, Any]
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
_DEFAULT_CLASS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


class UnprovisionablePod(ValueError):
    """Why the provisioner leaves a pod alone (Karpenter's error words)."""


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


class MalformedVolume(ValueError):
    """A PersistentVolume's node affinity or a StorageClass's allowed topologies that cannot be
    read (the API server's validation would have refused it; only a file brings one)."""


def _read(kind: str, name: str, terms: list[Obj], read: Callable[[list[Obj]], Requirements]) -> Requirements:
    try:
        out = read(terms)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MalformedVolume(f"{kind} {name!r}: {exc!r}") from exc
    return out


@dataclass(frozen=True)
class Volumes:
    """The cluster's claims (by namespace and name), volumes and classes (by name)."""

    claims: Mapping[tuple[str, str], Obj] = field(default_factory=dict)
    volumes: Mapping[str, Obj] = field(default_factory=dict)
    classes: Mapping[str, Obj] = field(default_factory=dict)

    @classmethod
    def of(cls, claims: Iterable[Obj], volumes: Iterable[Obj], classes: Iterable[Obj]) -> Volumes:
        return cls(
            {(str(_meta(c).get("namespace") or "default"), str(_meta(c).get("name"))): c for c in claims},
            {str(_meta(v).get("name")): v for v in volumes},
            {str(_meta(s).get("name")): s for s in classes},
        )

    def default_class(self) -> str | None:
        """The class a claim without one gets (the newest of those marked default, then by name)."""
        marked = [
            sc
            for sc in self.classes.values()
            if any((_meta(sc).get("annotations") or {}).get(a) == "true" for a in _DEFAULT_CLASS)
        ]
        if not marked:
            return None
        newest = max(
            marked, key=lambda sc: (str(_meta(sc).get("creationTimestamp") or ""), _meta(sc).get("name"))
        )
        return str(_meta(newest).get("name"))


def _claim_name(pod: Obj, volume: Obj) -> str | None:
    if volume.get("persistentVolumeClaim"):
        return str(volume["persistentVolumeClaim"].get("claimName") or "")
    if volume.get("ephemeral"):
        return f"{_meta(pod).get('name')}-{volume.get('name')}"
    return None


def _class_of(claim: Obj, volumes: Volumes) -> str:
    spec = claim.get("spec") or {}
    if "storageClassName" in spec and spec["storageClassName"] is not None:
        return str(spec["storageClassName"])
    return volumes.default_class() or ""


def _first_term(terms: Iterable[Obj], key: str) -> list[Obj]:
    for term in terms:
        return list(term.get(key) or [])
    return []


def _bound(claim_name: str, volume_name: str, claim: Obj, volumes: Volumes) -> Requirements:
    pv = volumes.volumes.get(volume_name)
    if pv is None:
        raise UnprovisionablePod(f'failed to validate pvc, persistentvolumes "{volume_name}" not found')
    if _meta(pv).get("deletionTimestamp"):
        raise UnprovisionablePod("failed to validate pvc, persistentvolume is being deleted")
    if BIND_COMPLETED not in (_meta(claim).get("annotations") or {}):
        raise UnprovisionablePod(
            f"pvc is considered unbound because it does not contain annotation "
            f"(annotation={BIND_COMPLETED}, PersistentVolumeClaim={claim_name})"
        )
    spec = pv.get("spec") or {}
    required = (spec.get("nodeAffinity") or {}).get("required") or {}
    terms = _first_term(required.get("nodeSelectorTerms") or [], "matchExpressions")
    if spec.get("local") or spec.get("hostPath"):
        terms = [t for t in terms if t.get("key") != HOSTNAME]
    return _read("PersistentVolume", volume_name, terms, Requirements.from_selector)


def _unbound(claim: Obj, volumes: Volumes) -> Requirements:
    name = _class_of(claim, volumes)
    if not name:
        raise UnprovisionablePod("unbound pvc must define a storage class")
    sc = volumes.classes.get(name)
    if sc is None:
        missing = f'storageclasses.storage.k8s.io "{name}" not found'
        raise UnprovisionablePod(f"failed to validate pvc, failed to get storage class, {missing}")
    if (sc.get("volumeBindingMode") or "Immediate") == "Immediate":
        raise UnprovisionablePod(
            "failed to validate pvc, pvc with immediate volume binding mode must be bound"
        )
    terms = _first_term(sc.get("allowedTopologies") or [], "matchLabelExpressions")
    return _read(
        "StorageClass",
        name,
        terms,
        lambda ts: Requirements(
            Requirement.of(str(t["key"]), "In", [str(v) for v in t.get("values") or []]) for t in ts
        ),
    )


def volume_requirements(pod: Obj, volumes: Volumes) -> Requirements:
    """The node requirements ``pod``'s claims add; ``UnprovisionablePod`` when it cannot be judged."""
    namespace = str(_meta(pod).get("namespace") or "default")
    out = Requirements()
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        name = _claim_name(pod, volume)
        if name is None:
            continue  # emptyDir, configMap, hostPath...: no claim, no topology
        claim = volumes.claims.get((namespace, name))
        if claim is None and volume.get("ephemeral"):
            template = (volume["ephemeral"].get("volumeClaimTemplate")) or {}
            claim = {"metadata": {"name": name, "namespace": namespace}, "spec": template.get("spec") or {}}
        if claim is None:
            raise UnprovisionablePod(
                f'getting persistent volume claim, persistentvolumeclaims "{name}" not found'
            )
        if _meta(claim).get("deletionTimestamp"):
            raise UnprovisionablePod("persistentvolumeclaim is being deleted")
        if (claim.get("status") or {}).get("phase") == "Lost":
            raise UnprovisionablePod("persistentvolumeclaim bound to non-existent persistentvolume")
        volume_name = str((claim.get("spec") or {}).get("volumeName") or "")
        reqs = _bound(name, volume_name, claim, volumes) if volume_name else _unbound(claim, volumes)
        out.add(*reqs.values())
    return out


def failed_to_schedule(error: UnprovisionablePod) -> str:
    """The message of Karpenter's event for a pod it leaves alone (``PodFailedToScheduleEvent``)."""
    return f"Failed to schedule pod, {error}"
