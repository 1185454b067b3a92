"""A planned NodeClaim as the object the provisioner creates (pure).

As Karpenter's ``NewNodeClaimTemplate`` and ``ToNodeClaim`` (kubernetes-sigs/karpenter
``pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go``):

- ``metadata.generateName: <nodepool>-`` (the API server names it), an owner reference to the
  NodePool (``blockOwnerDeletion``, not ``controller``), no finalizer: the lifecycle controller adds
  ``karpenter.sh/termination`` before it launches;
- labels: the template's, ``karpenter.sh/nodepool``, the class's ``<group>/<lower(kind)>`` and
  a value of each custom (not well-known, not restricted) requirement that admits one, as
  ``resolveCustomLabelsFromRequirements`` (``Requirement.Any``: the first ``In`` value, a number
  within the bounds, else a generated value ``NotIn``/``Exists`` allow), so the node carries the
  label its pods select on;
- annotations: the template's, ``karpenter.sh/nodepool-hash`` and its version;
- ``spec``: the template's (taints, startup taints, class, ``expireAfter``,
  ``terminationGracePeriod``) with the requirements narrowed by the simulation, the
  instance types cut to the ``MAX_INSTANCE_TYPES`` cheapest, ``karpenter.sh/capacity-type In`` the
  capacity types those types offer where the claim may go, and ``resources.requests`` the pods'
  summed requests. The whole spec is immutable once created (the CRD's rule).

``nodepool_hash`` is the drift hash of the template (Karpenter's ``NodePool.Hash``: the template
with its requirements left out, lists as sets, empty values ignored). Deliberate difference: its
value is kubespot's (FNV-1a over a canonical JSON form), not hashstructure's over Go structs, so
it compares with hashes kubespot wrote, not with Karpenter's, and is stamped with kubespot's own
version (``HASH_VERSION``) so that Karpenter re-stamps rather than drifts kubespot's NodeClaims.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

import orjson

from kubespot.cloud.candidates import MAX_INSTANCE_TYPES
from kubespot.model.quantity import quantity_text
from kubespot.scheduling.api.nodepool import NodePoolSpec
from kubespot.scheduling.api.restricted import restricted_reason
from kubespot.scheduling.api.template import taint_dict
from kubespot.scheduling.instance_types import InstanceType
from kubespot.scheduling.labels import (
    CAPACITY_TYPE,
    INSTANCE_TYPE,
    NODEPOOL,
    SPOT,
    WELL_KNOWN,
    ZONE,
)
from kubespot.scheduling.requirements import Requirement, Requirements
from kubespot.scheduling.simulate import PlannedClaim

__all__ = [
    "HASH_ANNOTATION",
    "HASH_VERSION",
    "HASH_VERSION_ANNOTATION",
    "any_value",
    "nodepool_hash",
    "to_nodeclaim",
]

HASH_ANNOTATION = "karpenter.sh/nodepool-hash"
HASH_VERSION_ANNOTATION = "karpenter.sh/nodepool-hash-version"
#: Not Karpenter's ``v3``: the value is kubespot's own (see the module docstring), so a Karpenter
#: that takes the cluster back sees another version and re-stamps its hash instead of drifting
#: every node (launching.md §2b).
HASH_VERSION = "kubespot-1"

Obj = dict[str, Any]

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3


def _fnv1a(data: bytes) -> int:
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def _pruned(value: Any) -> Any:
    """Empty values dropped and lists as sets (sorted by their canonical form)."""
    if isinstance(value, Mapping):
        out = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, "", [], {}, 0, False)}
    if isinstance(value, list | tuple):
        items = [_pruned(v) for v in value]
        return sorted(items, key=lambda v: orjson.dumps(v, option=orjson.OPT_SORT_KEYS))
    return value


def nodepool_hash(spec: NodePoolSpec) -> str:
    """The template's drift hash (see the module docstring) as a decimal string."""
    template = spec.template
    shape = {
        "metadata": {"labels": dict(spec.labels), "annotations": dict(spec.annotations)},
        "spec": {
            "taints": [taint_dict(t) for t in template.taints],
            "startupTaints": [taint_dict(t) for t in template.startup_taints],
            "nodeClassRef": template.node_class_ref.to_dict(),
            "expireAfter": template.expire_after,
            "terminationGracePeriod": template.termination_grace_period,
        },
    }
    return str(_fnv1a(orjson.dumps(_pruned(shape), option=orjson.OPT_SORT_KEYS)))


def any_value(req: Requirement) -> str | None:
    """A label value ``req`` admits (Karpenter's ``Requirement.Any``), None for ``DoesNotExist`` or
    an empty set: the first ``In`` value in order (deterministic, unlike Karpenter's pick), the first
    integer within the bounds not excluded, else a generated value ``NotIn``/``Exists`` allow."""
    if not req.complement:
        return min(req.values) if req.values else None
    if req.gte is not None or req.lte is not None:
        # One more candidate than values excluded: one of them is admitted if the bounds allow any.
        if req.gte is not None:
            stop = req.lte if req.lte is not None else req.gte + len(req.values)
            candidates = range(req.gte, stop + 1)
        else:
            assert req.lte is not None
            candidates = range(req.lte, req.lte - len(req.values) - 1, -1)
        return next((str(v) for v in candidates if req.has(str(v))), None)
    while True:
        value_text = secrets.token_hex(5)
        if value_text not in req.values:
            return value_text


def _capacity_types(types: list[InstanceType], reqs: Requirements) -> list[str]:
    """The capacity types of the types' available offerings in the zones and capacity types the
    claim allows."""
    zones = reqs.get_or_any(ZONE)
    allowed = reqs.get_or_any(CAPACITY_TYPE)
    return sorted(
        {
            o.capacity_type
            for t in types
            for o in t.offerings
            if o.available and zones.has(o.zone) and allowed.has(o.capacity_type)
        }
    )


def to_nodeclaim(
    planned: PlannedClaim,
    pool: NodePoolSpec,
    pool_uid: str,
    types: Mapping[str, InstanceType],
    *,
    allowed_capacity: Requirement | None = None,
) -> Obj:
    """The NodeClaim object for ``planned`` of NodePool ``pool`` (``types``: the catalog the
    simulation used, by name).

    ``allowed_capacity``: the capacity types the pool and the claim's pods allow. The simulation
    pins the one it priced (docs/designs/provisioning.md); a spot claim is opened again to what is
    allowed, as Karpenter's claims are, so that the launch falls back to on-demand in the same
    reconcile when no spot pool is left (``getCapacityType``). An on-demand claim stays pinned:
    the simulation chose it although spot was allowed, because spot was dearer there."""
    template = pool.template
    ref = template.node_class_ref
    chosen = [types[n] for n in planned.instance_types[:MAX_INSTANCE_TYPES] if n in types]
    reqs = Requirements(r for k, r in planned.requirements.items() if k != CAPACITY_TYPE)
    pinned = planned.requirements.get(CAPACITY_TYPE)
    if allowed_capacity is not None and planned.capacity_type == SPOT:
        reqs.add(allowed_capacity)
    elif pinned is not None:
        reqs.add(pinned)
    reqs.add(Requirement.of(INSTANCE_TYPE, "In", [t.name for t in chosen]))
    reqs.add(Requirement.of(CAPACITY_TYPE, "In", _capacity_types(chosen, reqs)))
    labels = dict(pool.labels)
    for key, req in reqs.items():
        if key in WELL_KNOWN or key in labels or restricted_reason(key) is not None:
            continue
        value = any_value(req)
        if value is not None:
            labels[key] = value
    labels[NODEPOOL] = pool.name
    if ref.group and ref.kind:
        labels[f"{ref.group}/{ref.kind.lower()}"] = ref.name
    annotations = {
        **pool.annotations,
        HASH_ANNOTATION: nodepool_hash(pool),
        HASH_VERSION_ANNOTATION: HASH_VERSION,
    }
    spec: Obj = {}
    if template.taints:
        spec["taints"] = [taint_dict(t) for t in template.taints]
    if template.startup_taints:
        spec["startupTaints"] = [taint_dict(t) for t in template.startup_taints]
    spec["requirements"] = [entry for key in sorted(reqs) for entry in reqs[key].as_selector()]
    spec["nodeClassRef"] = ref.to_dict()
    spec["expireAfter"] = template.expire_after
    if template.termination_grace_period is not None:
        spec["terminationGracePeriod"] = template.termination_grace_period
    spec["resources"] = {
        "requests": {k: quantity_text(k, v) for k, v in sorted(planned.requests.items()) if v}
    }
    owner = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "name": pool.name,
        "uid": pool_uid,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "generateName": f"{pool.name}-",
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner],
        },
        "spec": spec,
    }
