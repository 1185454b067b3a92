"""What each write of ``NodeHandler`` changes on the Node: the merge patches, computed from the node as
read (pure; ``handling.fence`` makes the compare-and-set writes).

A fence adds taints, labels, the cordon and the ``kubespot.io/interruption`` record in one patch; an
undo removes exactly what the record says kubespot added (docs/designs/state-on-the-node.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from kubespot.kube import NodeView, Taint
from kubespot.model import InterruptionEvent, Kind
from kubespot.records.interruption import (
    STATE_ANNOTATION,
    UNDONE_ANNOTATION,
    NodeState,
    Phase,
    StateError,
    decode,
    with_undone,
)

from .policy import OUT_OF_SERVICE, Plan, scheduled_code

#: A holder's mark older than this means it died and another process may take over (the holder
#: renews it every ``fence.HOLD_RENEW`` while draining).
HOLD_STALE = 30.0


def state_of(node: NodeView | None) -> NodeState | None:
    """The node's record; None without one, or when it cannot be read (hand-edited)."""
    if node is None:
        return None
    try:
        return decode(node.annotations.get(STATE_ANNOTATION))
    except StateError:
        return None


def fence_patch(
    node: NodeView,
    event: InterruptionEvent,
    plan: Plan,
    *,
    now: datetime,
    undo_after: float | None,
    holder: str = "",
) -> Mapping[str, Any] | None:
    """The merge patch that fences ``node`` for ``event``, or None when it already is."""
    old = state_of(node)  # a hand-edited record is overwritten with what is true from now on
    same = old is not None and old.event_id == event.id
    if old is not None and old.held_by_other(holder, now, HOLD_STALE):
        # Another live process fenced the node since we last looked: two replicas waking at the same
        # act_at, or the agent (IMDS) and the controller (EventBridge) seeing one interruption under
        # two event ids. It goes on, we follow instead of taking the hold over.
        return None
    wanted = [Taint(t.key, t.effect, t.value) for t in plan.taints]
    keys = {(t.key, t.effect) for t in wanted}
    taints = [t for t in node.taints if (t.key, t.effect) not in keys] + wanted
    new_labels = {k: v for k, v in plan.labels if node.labels.get(k) != v}
    # A plan that drains records DRAINING in this same write (the drain starts right after it): one
    # write per node instead of two. A FENCED state of such a plan (written by an earlier version,
    # or a resumed fence) moves on to DRAINING here; a later phase is kept.
    fenced = Phase.DRAINING if plan.drain else Phase.FENCED
    state = NodeState(
        event_id=event.id,
        kind=event.kind.value,
        # DRAIN_FAILED is retried: back to DRAINING in this compare-and-set write, so the retry has
        # one owner (two replicas resuming the node at a rollout do not both drain it).
        phase=old.phase
        if same and old is not None and old.phase not in (Phase.FENCED, Phase.DRAIN_FAILED)
        else fenced,
        since=old.since if same and old is not None else now,
        deadline=event.deadline,
        cordoned_by_us=(old.cordoned_by_us if old is not None else False)
        or (plan.cordon and not node.unschedulable),
        # Carried over from an earlier event (a rebalance before this spot notice), so one undo
        # removes everything kubespot added.
        taints=tuple(sorted({*(old.taints if old else ()), *(t.key for t in wanted)})),
        labels=tuple(sorted({*(old.labels if old else ()), *new_labels})),
        undo_at=(old.undo_at if same and old is not None else None)
        or (now + timedelta(seconds=undo_after) if undo_after else None),
        holder=holder,
        renewed=now,
        extra=_extra(event, old if same else None),
    )
    encoded = state.encode()
    # Already fenced by this holder: only the renewal time would change, which is not worth a write.
    unchanged = old is not None and replace(state, renewed=old.renewed).encode() == node.annotations.get(
        STATE_ANNOTATION
    )
    if (
        tuple(taints) == node.taints
        and (node.unschedulable or not plan.cordon)
        and not new_labels
        and unchanged
    ):
        return None
    spec: dict[str, Any] = {"taints": [t.to_dict() for t in taints]}
    if plan.cordon:
        spec["unschedulable"] = True
    meta: dict[str, Any] = {"annotations": {STATE_ANNOTATION: encoded}}
    if new_labels:
        meta["labels"] = new_labels
    return {"spec": spec, "metadata": meta}


def _extra(event: InterruptionEvent, old: NodeState | None) -> dict[str, Any]:
    if old is not None:
        return dict(old.extra)
    extra: dict[str, Any] = {"source": event.source.value}
    if event.instance_id:
        extra["instance_id"] = event.instance_id
    code = scheduled_code(event) if event.kind is Kind.SCHEDULED_MAINTENANCE else None
    if code is not None:
        extra["code"] = code  # read back by node_handler._event_from_state: whether the instance stops
    return extra


def out_of_service_patch(node: NodeView, event_id: str) -> Mapping[str, Any] | None:
    """Taint the node ``node.kubernetes.io/out-of-service`` and record the key in its state."""
    state = state_of(node)
    if state is None or state.event_id != event_id:
        return None  # undone or taken over meanwhile: the taint is no longer ours to add
    key, value, effect = OUT_OF_SERVICE
    taint = Taint(key, effect, value)
    if taint in node.taints and key in state.taints:
        return None
    others = [t for t in node.taints if (t.key, t.effect) != (key, effect)]
    recorded = replace(state, taints=tuple(sorted({*state.taints, key})))
    return {
        "spec": {"taints": [t.to_dict() for t in (*others, taint)]},
        "metadata": {"annotations": {STATE_ANNOTATION: recorded.encode()}},
    }


def undo_patch(node: NodeView, event_id: str) -> Mapping[str, Any] | None:
    """The merge patch that removes what kubespot added for ``event_id``; None when nothing is left."""
    state = state_of(node)
    if state is None or state.event_id != event_id:
        return None  # nothing of ours, or the node is now handled for another event
    undone = with_undone(node.annotations.get(UNDONE_ANNOTATION), event_id)
    patch: dict[str, Any] = {"metadata": {"annotations": {STATE_ANNOTATION: None, UNDONE_ANNOTATION: undone}}}
    spec: dict[str, Any] = {}
    keep = [t for t in node.taints if t.key not in state.taints]
    if len(keep) != len(node.taints):
        spec["taints"] = [t.to_dict() for t in keep]
    if state.cordoned_by_us and node.unschedulable:
        spec["unschedulable"] = None
    if spec:
        patch["spec"] = spec
    if state.labels:
        patch["metadata"]["labels"] = {k: None for k in state.labels}
    return patch
