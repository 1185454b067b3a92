"""VolumeBinding and VolumeZone for a pod's PersistentVolumeClaims (minimal, zonal storage).

After upstream's pkg/scheduler/framework/plugins/volumebinding (PreFilter, Filter,
binder.go FindPodVolumes) and volumezone:

- PreFilter: a claim that does not exist -- ``persistentvolumeclaim "<name>" not found``; one being
  deleted -- ``persistentvolumeclaim "<name>" is being deleted``; an unbound claim whose
  StorageClass binds Immediately (or has no class) -- "pod has unbound immediate
  PersistentVolumeClaims". Each fails every node (UnschedulableAndUnresolvable).
- Filter, a bound claim: its PersistentVolume must exist ("node(s) unavailable due to one or more
  pvc(s) bound to non-existent pv(s)") and its ``nodeAffinity`` required terms must match the node
  -- "node(s) had volume node affinity conflict"; then VolumeZone: the PV's zone labels
  (``topology.kubernetes.io/zone``, ``topology.kubernetes.io/region`` and their failure-domain
  betas, matched against the node's GA label too; a value may list several zones joined by ``__``)
  must match the node's -- "node(s) had no available volume zone"; a node without any such label
  passes.
- Filter, an unbound ``WaitForFirstConsumer`` claim: dynamically provisioned where the pod goes, so
  the node must satisfy the class's ``allowedTopologies`` -- "node(s) didn't find available
  persistent volumes to bind". Existing unbound PVs are not matched (no static binding).

When the pod is bound, ``provision`` stands in for the external provisioner and the PV controller:
each such claim gets a PV pinned (by ``nodeAffinity``) to the node's zone, or to the node when it has
no zone label, and is bound to it; the claim carries ``volume.kubernetes.io/selected-node`` as the
scheduler's PreBind writes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...store import Obj
from .nodes import NodeInfo, term_matches

REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_PV_MISSING = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
REASON_ZONE_CONFLICT = "node(s) had no available volume zone"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
ZONE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)
#: A PV's beta label is matched against the node's GA label too (volumezone translateToGALabel).
_GA = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}
UNRESOLVABLE = frozenset(
    [REASON_NODE_CONFLICT, REASON_BIND_CONFLICT, REASON_PV_MISSING, REASON_ZONE_CONFLICT]
)

Find = Callable[[str, str | None, str], Obj | None]  # (plural, namespace, name) -> object


def claim_names(spec: Obj) -> tuple[str, ...]:
    return tuple(
        str(v["persistentVolumeClaim"].get("claimName", ""))
        for v in spec.get("volumes") or []
        if v.get("persistentVolumeClaim")
    )


@dataclass(slots=True)
class VolumeState:
    """One pod's claims, resolved: PreFilter's verdict and what Filter checks per node."""

    pre_filter: str  # non-empty: every node fails with this message
    pv_missing: bool
    pv_terms: list[list[Obj]]  # per bound PV: its required nodeSelectorTerms
    pv_zones: list[dict[str, set[str]]]  # per bound PV: zone label -> allowed values
    topologies: list[list[Obj]]  # per WaitForFirstConsumer claim: its class's allowedTopologies

    def reason(self, n: NodeInfo) -> str | None:
        if self.pv_missing:
            return REASON_PV_MISSING
        for terms in self.pv_terms:
            if not any(term_matches(t, n.name, n.labels) for t in terms):
                return REASON_NODE_CONFLICT
        for topology in self.topologies:
            if topology and not any(_topology_matches(t, n.labels) for t in topology):
                return REASON_BIND_CONFLICT
        if self.pv_zones and any(k in n.labels for k in ZONE_LABELS):  # a node without any may host it
            for zones in self.pv_zones:
                for key, values in zones.items():
                    value = n.labels.get(key, n.labels.get(_GA.get(key, key)))
                    if value not in values:
                        return REASON_ZONE_CONFLICT
        return None


def _topology_matches(term: Obj, labels: dict[str, str]) -> bool:
    """A TopologySelectorTerm: every matchLabelExpressions key has one of its values."""
    return all(
        labels.get(e.get("key", "")) in (e.get("values") or [])
        for e in term.get("matchLabelExpressions") or []
    )


def pre_filter(find: Find, ns: str, claims: tuple[str, ...]) -> VolumeState | None:
    if not claims:
        return None
    state = VolumeState("", False, [], [], [])
    for name in claims:
        pvc = find("persistentvolumeclaims", ns, name)
        if pvc is None:
            state.pre_filter = f'persistentvolumeclaim "{name}" not found'
            return state
        if pvc["metadata"].get("deletionTimestamp"):
            state.pre_filter = f'persistentvolumeclaim "{name}" is being deleted'
            return state
        volume = (pvc.get("spec") or {}).get("volumeName")
        if volume:
            pv = find("persistentvolumes", None, volume)
            if pv is None:
                state.pv_missing = True
                continue
            required = (((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}).get(
                "nodeSelectorTerms"
            )
            if required is not None:
                state.pv_terms.append(list(required))
            labels = pv["metadata"].get("labels") or {}
            zones = {k: set(str(labels[k]).split("__")) for k in ZONE_LABELS if k in labels}
            if zones:
                state.pv_zones.append(zones)
            continue
        class_name = (pvc.get("spec") or {}).get("storageClassName")
        sc = find("storageclasses", None, class_name) if class_name else None
        if sc is None or sc.get("volumeBindingMode") != "WaitForFirstConsumer":
            state.pre_filter = UNBOUND_IMMEDIATE
            return state
        state.topologies.append(list(sc.get("allowedTopologies") or []))
    return state


def provisioned_pv(pvc: Obj, node: NodeInfo, now: str) -> Obj:
    """The PV a dynamic provisioner would create for ``pvc`` on ``node``'s zone (or on the node)."""
    meta, spec = pvc["metadata"], pvc.get("spec") or {}
    zone = node.labels.get("topology.kubernetes.io/zone")
    key, value = ("topology.kubernetes.io/zone", zone) if zone else ("kubernetes.io/hostname", node.name)
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta.get('uid', meta['name'])}",
            "labels": {"topology.kubernetes.io/zone": zone} if zone else {},
            "annotations": {"pv.kubernetes.io/provisioned-by": "kubesim"},
        },
        "spec": {
            "capacity": {"storage": storage},
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": spec.get("storageClassName"),
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta.get("namespace"),
                "name": meta["name"],
                "uid": meta.get("uid"),
            },
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
                    ]
                }
            },
        },
        "status": {"phase": "Bound", "lastPhaseTransitionTime": now},
    }
