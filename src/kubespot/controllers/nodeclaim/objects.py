"""What the NodeClaim controller reads of a ``karpenter.sh/v1`` NodeClaim and of a Node, both kept
as the API's JSON (pure): names, finalizers, conditions, taints, and Karpenter's well-known keys
(kubernetes-sigs/karpenter ``pkg/apis/v1/labels.go``, ``taints.go``, ``nodeclaim_status.go``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kubespot.scheduling.api.condition_set import merge_conditions
from kubespot.scheduling.api.conditions import Condition
from kubespot.scheduling.taints import Taint

Obj = dict[str, Any]

NODECLAIMS = "apis/karpenter.sh/v1/nodeclaims"
NODES = "api/v1/nodes"

#: On NodeClaims before launch and on their Nodes at registration; removed last.
TERMINATION_FINALIZER = "karpenter.sh/termination"
REGISTERED_LABEL = "karpenter.sh/registered"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
INITIALIZED_LABEL = "karpenter.sh/initialized"
DO_NOT_SYNC_TAINTS_LABEL = "karpenter.sh/do-not-sync-taints"
UNREGISTERED_TAINT = Taint("karpenter.sh/unregistered", "NoExecute")

LAUNCHED = "Launched"
REGISTERED = "Registered"
INITIALIZED = "Initialized"
INSTANCE_TERMINATING = "InstanceTerminating"
#: The root ``Ready`` is True when these are (``NodeClaim.StatusConditions``).
DEPENDENTS = (LAUNCHED, REGISTERED, INITIALIZED)


#: A NodeClaim's lifecycle phases, for the ``kubespot_nodeclaims`` gauge.
NODECLAIM_PHASES = ("pending", "launched", "registered", "initialized", "deleting")


def phase_of(claim: Mapping[str, Any]) -> str:
    """The furthest lifecycle condition that is True (``deleting`` once deleted)."""
    if deleting(claim):
        return "deleting"
    for type_, phase in ((INITIALIZED, "initialized"), (REGISTERED, "registered"), (LAUNCHED, "launched")):
        if is_true(claim, type_):
            return phase
    return "pending"


def _map(obj: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(obj, "metadata")


def name(obj: Mapping[str, Any]) -> str:
    value = meta(obj).get("name")
    return value if isinstance(value, str) else ""


def uid(obj: Mapping[str, Any]) -> str:
    value = meta(obj).get("uid")
    return value if isinstance(value, str) else ""


def generation(obj: Mapping[str, Any]) -> int:
    value = meta(obj).get("generation")
    return value if isinstance(value, int) else 0


def resource_version(obj: Mapping[str, Any]) -> str:
    value = meta(obj).get("resourceVersion")
    return value if isinstance(value, str) else ""


def finalizers(obj: Mapping[str, Any]) -> list[str]:
    value = meta(obj).get("finalizers")
    return [f for f in value if isinstance(f, str)] if isinstance(value, list) else []


def deleting(obj: Mapping[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return {k: v for k, v in _map(meta(obj), "labels").items() if isinstance(v, str)}


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return {k: v for k, v in _map(meta(obj), "annotations").items() if isinstance(v, str)}


def status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(obj, "status")


def provider_id(obj: Mapping[str, Any]) -> str:
    """A NodeClaim's ``status.providerID`` ("" before launch)."""
    value = status(obj).get("providerID")
    return value if isinstance(value, str) else ""


def node_provider_id(node: Mapping[str, Any]) -> str:
    value = _map(node, "spec").get("providerID")
    return value if isinstance(value, str) else ""


def conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found = status(obj).get("conditions")
    if not isinstance(found, list):
        return {}
    return {c["type"]: c for c in found if isinstance(c, Mapping) and isinstance(c.get("type"), str)}


def condition_status(obj: Mapping[str, Any], type_: str) -> str:
    """``True``, ``False``, ``Unknown``; "" when the condition is absent."""
    value = conditions(obj).get(type_, {}).get("status")
    return value if isinstance(value, str) else ""


def is_true(obj: Mapping[str, Any], type_: str) -> bool:
    return condition_status(obj, type_) == "True"


def is_unknown(obj: Mapping[str, Any], type_: str) -> bool:
    """Unknown, or not set yet (operatorpkg creates the dependents Unknown on first access)."""
    return condition_status(obj, type_) in ("Unknown", "")


def transition_time(obj: Mapping[str, Any], type_: str) -> datetime | None:
    value = conditions(obj).get(type_, {}).get("lastTransitionTime")
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def set_conditions(claim: Obj, changes: Sequence[Condition], now: datetime) -> None:
    """``changes`` written into ``claim``'s status as operatorpkg's condition set does: the
    dependents that are missing start Unknown (``AwaitingReconciliation``, stamped with the claim's
    creation), the root ``Ready`` follows them (``scheduling.api.condition_set``)."""
    created = meta(claim).get("creationTimestamp")
    merged = merge_conditions(
        list(conditions(claim).values()),
        changes,
        dependents=DEPENDENTS,
        generation=generation(claim),
        now=now,
        created=created if isinstance(created, str) else None,
        deleting=deleting(claim),
    )
    claim.setdefault("status", {})["conditions"] = merged


def taint_dicts(obj: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """``spec.<key>`` (``taints``, ``startupTaints``) of a NodeClaim or ``spec.taints`` of a Node."""
    value = _map(obj, "spec").get(key)
    return [t for t in value if isinstance(t, Mapping)] if isinstance(value, list) else []


def taints(obj: Mapping[str, Any], key: str = "taints") -> list[Taint]:
    return [Taint.parse(t) for t in taint_dicts(obj, key)]


def matches(a: Taint, b: Taint) -> bool:
    """corev1 ``Taint.MatchTaint``: the same key and effect (the value does not count)."""
    return a.key == b.key and a.effect == b.effect


def node_ready(node: Mapping[str, Any]) -> bool:
    """The Node's ``Ready`` condition is True."""
    found = status(node).get("conditions")
    for cond in found if isinstance(found, list) else ():
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def node_allocatable(node: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(status(node), "allocatable")


def requests(claim: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(_map(_map(claim, "spec"), "resources"), "requests")


def managed(claim: Mapping[str, Any]) -> bool:
    """Whether the claim is this cloud provider's: its ``nodeClassRef`` names an EC2NodeClass
    (core ``utils/nodeclaim`` ``IsManaged``: another provider's claims are left alone)."""
    ref = _map(_map(claim, "spec"), "nodeClassRef")
    return (ref.get("group"), ref.get("kind")) == ("karpenter.k8s.aws", "EC2NodeClass")
