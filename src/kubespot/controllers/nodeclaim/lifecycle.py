"""One reconcile of a launched NodeClaim, decided without I/O (pure): registration, initialization
and liveness in Karpenter's order (kubernetes-sigs/karpenter
``pkg/controllers/nodeclaim/lifecycle/controller.go`` ``Reconcile``: launch → registration →
initialization → liveness on one copy of the NodeClaim, then its metadata and status written).

``advance`` changes the working copy's conditions and ``status.nodeName`` and says what to write
elsewhere: the Node patch of registration, the Node label of initialization, the events, and
whether liveness deletes the claim. A Node patched by registration is judged for initialization on
the next reconcile (its watch event brings it), so a decision never rests on a write not yet made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from kubespot.scheduling.api.conditions import Condition

from .initialization import initialize
from .liveness import liveness
from .objects import INITIALIZED, REGISTERED, Obj, is_true, is_unknown, set_conditions
from .registration import TAINT_MISSING_MESSAGE, UNREGISTERED_TAINT_MISSING, register

__all__ = ["Step", "advance"]


@dataclass
class Step:
    """What one reconcile of a launched claim decided (the claim's own changes are in the copy)."""

    #: (node name, merge patch) to send before the claim's status.
    node_patch: tuple[str, Obj] | None = None
    #: (node name, labels) to set.
    node_labels: tuple[str, dict[str, str]] | None = None
    #: Warning events on the claim: (reason, message).
    events: list[tuple[str, str]] = field(default_factory=list)
    #: Liveness: delete the claim for this reason.
    delete_reason: str = ""
    #: Registration made the claim Registered in this reconcile (its NodePool's health counts it).
    registered: bool = False
    #: Seconds until this claim needs looking at again even if nothing changes (None: never).
    requeue_after: float | None = None


def advance(
    claim: Obj,
    nodes: Sequence[Obj],
    now: datetime,
    *,
    launch_timeout: float,
    registration_timeout: float,
) -> Step:
    """Registration, initialization and liveness on ``claim`` (a working copy, already launched or
    still waiting to), given the Nodes with its provider id."""
    step = Step()
    changes: list[Condition] = []
    if is_true(claim, "Launched") and is_unknown(claim, REGISTERED):
        reg = register(claim, nodes)
        changes.append(reg.condition)
        if reg.taint_missing:
            step.events.append((UNREGISTERED_TAINT_MISSING, TAINT_MISSING_MESSAGE))
        if reg.node_patch is not None:
            step.node_patch = (reg.node_name, reg.node_patch)
        if reg.condition.is_true:
            claim.setdefault("status", {})["nodeName"] = reg.node_name
            step.registered = True
    set_conditions(claim, changes, now)
    if step.node_patch is None and is_true(claim, REGISTERED) and is_unknown(claim, INITIALIZED):
        init = initialize(claim, nodes)
        set_conditions(claim, [init.condition], now)
        if init.node_labels and nodes:
            step.node_labels = (str(nodes[0]["metadata"]["name"]), init.node_labels)
    live = liveness(claim, now, launch_timeout=launch_timeout, registration_timeout=registration_timeout)
    step.delete_reason = live.delete_reason
    step.requeue_after = live.requeue_after
    return step
