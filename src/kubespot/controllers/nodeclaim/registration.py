"""Registration: the Node whose ``spec.providerID`` is the NodeClaim's joins it (pure), as
Karpenter's registration step (kubernetes-sigs/karpenter
``pkg/controllers/nodeclaim/lifecycle/registration.go`` ``Registration.Reconcile``, ``syncNode``;
``pkg/utils/nodeclaim`` ``NodeForNodeClaim``, ``UpdateNodeOwnerReferences``; ``pkg/scheduling``
``Taints.Merge``).

- No Node: ``Registered=Unknown`` ``NodeNotFound`` "Node not registered with cluster"; several:
  ``Registered=False`` ``MultipleNodesFound`` "Invariant violated, matched multiple nodes".
- A Node with neither the ``karpenter.sh/registered`` label nor the ``karpenter.sh/unregistered``
  taint: Warning ``UnregisteredTaintMissing`` on the NodeClaim, and registration goes on.
- The Node gets the ``karpenter.sh/termination`` finalizer, an owner reference to the NodeClaim
  (``blockOwnerDeletion``), the NodeClaim's taints and startup taints merged in (same key and
  effect: the Node's kept) unless it is labelled ``karpenter.sh/do-not-sync-taints=true``, the
  NodeClaim's annotations and labels over its own; then the unregistered taint goes, label
  ``karpenter.sh/registered=true``; the claim: ``Registered=True``, ``status.nodeName``.
The Node patch carries the version it was computed from (Karpenter's optimistic lock).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubespot.scheduling.api.conditions import Condition
from kubespot.scheduling.taints import Taint

from .objects import (
    DO_NOT_SYNC_TAINTS_LABEL,
    LAUNCHED,
    NODEPOOL_LABEL,
    REGISTERED,
    REGISTERED_LABEL,
    TERMINATION_FINALIZER,
    UNREGISTERED_TAINT,
    Obj,
    annotations_of,
    conditions,
    finalizers,
    labels,
    matches,
    meta,
    name,
    resource_version,
    taint_dicts,
    uid,
)

__all__ = ["UNREGISTERED_TAINT_MISSING", "Registration", "RegistrationOutcome", "outcome", "register"]

UNREGISTERED_TAINT_MISSING = "UnregisteredTaintMissing"
TAINT_MISSING_MESSAGE = (
    f"Missing {UNREGISTERED_TAINT.key} taint which prevents registration related race conditions "
    "on Karpenter-managed nodes"
)
NODECLAIM_API_VERSION = "karpenter.sh/v1"


@dataclass(frozen=True, slots=True)
class Registration:
    condition: Condition
    #: A merge patch for the Node (None: nothing to write).
    node_patch: Obj | None = None
    node_name: str = ""
    #: Emit ``UnregisteredTaintMissing``.
    taint_missing: bool = False


@dataclass(frozen=True, slots=True)
class RegistrationOutcome:
    """What the NodePool's registration health learns of one claim (core registration.go and
    liveness.go ``updateNodePoolRegistrationHealth``): the claim registered, or it was deleted for
    a launch or registration timeout. The NodePool is the one the claim is labelled with; it counts
    the outcome only if it is the claim's owner (``pool_uid``)."""

    pool: str
    pool_uid: str
    registered: bool
    #: The claim's ``Launched`` condition (the reason a NodePool goes unhealthy with, unless it
    #: launched and did not register: ``RegistrationFailed``).
    launched: Condition | None = None


def outcome(claim: Obj, registered: bool) -> RegistrationOutcome | None:
    """The outcome to report for ``claim``; None when it names no NodePool owning it."""
    pool = labels(claim).get(NODEPOOL_LABEL, "")
    owners = meta(claim).get("ownerReferences")
    pool_uid = next(
        (
            str(o.get("uid") or "")
            for o in (owners if isinstance(owners, list) else ())
            if isinstance(o, Mapping) and o.get("kind") == "NodePool"
        ),
        "",
    )
    if not pool or not pool_uid:
        return None
    found = conditions(claim).get(LAUNCHED)
    launched = None
    if found is not None:
        launched = Condition(
            LAUNCHED,
            str(found.get("status") or ""),
            str(found.get("reason") or ""),
            str(found.get("message") or ""),
        )
    return RegistrationOutcome(pool, pool_uid, registered, launched)


def _taint_dict(taint: Mapping[str, Any]) -> Obj:
    return {
        k: v for k, v in taint.items() if k in ("key", "value", "effect", "timeAdded") and v not in (None, "")
    }


def register(claim: Obj, nodes: Sequence[Obj]) -> Registration:
    """The registration of ``claim`` given the Nodes carrying its provider id."""
    if not nodes:
        return Registration(
            Condition(REGISTERED, "Unknown", "NodeNotFound", "Node not registered with cluster")
        )
    if len(nodes) > 1:
        return Registration(
            Condition(REGISTERED, "False", "MultipleNodesFound", "Invariant violated, matched multiple nodes")
        )
    node = nodes[0]
    node_taints = taint_dicts(node, "taints")
    has_unregistered = any(matches(Taint.parse(t), UNREGISTERED_TAINT) for t in node_taints)
    missing = REGISTERED_LABEL not in labels(node) and not has_unregistered

    patch_meta: Obj = {}
    fins = finalizers(node)
    if TERMINATION_FINALIZER not in fins:
        patch_meta["finalizers"] = [*fins, TERMINATION_FINALIZER]
    owners = meta(node).get("ownerReferences")
    owners = [o for o in owners if isinstance(o, Mapping)] if isinstance(owners, list) else []
    if not any(
        o.get("apiVersion") == NODECLAIM_API_VERSION
        and o.get("kind") == "NodeClaim"
        and o.get("uid") == uid(claim)
        for o in owners
    ):
        ref = {
            "apiVersion": NODECLAIM_API_VERSION,
            "kind": "NodeClaim",
            "name": name(claim),
            "uid": uid(claim),
            "blockOwnerDeletion": True,
        }
        patch_meta["ownerReferences"] = [*owners, ref]

    new_taints = [_taint_dict(t) for t in node_taints]
    if labels(node).get(DO_NOT_SYNC_TAINTS_LABEL) != "true":
        for key in ("taints", "startupTaints"):
            for t in taint_dicts(claim, key):
                if not any(matches(Taint.parse(t), Taint.parse(n)) for n in new_taints):
                    new_taints.append(_taint_dict(t))
    new_taints = [t for t in new_taints if not matches(Taint.parse(t), UNREGISTERED_TAINT)]

    node_annotations = annotations_of(node)
    changed_annotations = {k: v for k, v in annotations_of(claim).items() if node_annotations.get(k) != v}
    if changed_annotations:
        patch_meta["annotations"] = changed_annotations
    wanted_labels = {**labels(claim), REGISTERED_LABEL: "true"}
    node_labels = labels(node)
    changed_labels = {k: v for k, v in wanted_labels.items() if node_labels.get(k) != v}
    if changed_labels:
        patch_meta["labels"] = changed_labels

    patch: Obj = {}
    if new_taints != [_taint_dict(t) for t in node_taints]:
        patch["spec"] = {"taints": new_taints}
    if patch_meta or patch:
        patch["metadata"] = {**patch_meta, "resourceVersion": resource_version(node)}
    return Registration(
        Condition(REGISTERED, "True", REGISTERED),
        node_patch=patch or None,
        node_name=name(node),
        taint_missing=missing,
    )
