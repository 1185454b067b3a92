"""The node patches the handler writes: what a fence adds, what an undo removes, and what they keep."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from kubespot.config.imds import MonitorSettings
from kubespot.config.node import NodeActionSettings
from kubespot.handling.node_patches import fence_patch as _fence_patch
from kubespot.handling.node_patches import undo_patch as _undo_patch
from kubespot.handling.policy import plan_for
from kubespot.kube import NodeView, Taint
from kubespot.model import InterruptionEvent, Kind, Source
from kubespot.records.interruption import STATE_ANNOTATION, UNDONE_ANNOTATION, Phase, decode

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
FOREIGN = Taint("team.example/maintenance", "NoSchedule", "x")


def event(kind: Kind = Kind.SPOT_INTERRUPTION, ident: str = "spot-itn-1") -> InterruptionEvent:
    return InterruptionEvent(
        id=ident,
        kind=kind,
        instance_id="i-1",
        source=Source.IMDS,
        notice_time=NOW,
        act_at=NOW,
        deadline=NOW + timedelta(minutes=2) if kind is Kind.SPOT_INTERRUPTION else None,
    )


def apply(node: NodeView, patch: Mapping[str, Any] | None) -> NodeView:
    """What a merge patch of the handler's shape does to a node view."""
    if patch is None:
        return node
    spec = dict(patch.get("spec") or {})
    meta = dict(patch.get("metadata") or {})
    taints = node.taints
    if "taints" in spec:
        taints = tuple(
            Taint(t["key"], t["effect"], t.get("value"), t.get("timeAdded")) for t in spec["taints"]
        )
    unschedulable = node.unschedulable
    if "unschedulable" in spec:
        unschedulable = bool(spec["unschedulable"])
    labels = {**node.labels, **meta.get("labels", {})}
    annotations = {**node.annotations, **meta.get("annotations", {})}
    return NodeView(
        name=node.name,
        taints=taints,
        unschedulable=unschedulable,
        labels={k: v for k, v in labels.items() if v is not None},
        annotations={k: v for k, v in annotations.items() if v is not None},
    )


def fence(node: NodeView, ev: InterruptionEvent, **actions: Any) -> NodeView:
    settings = NodeActionSettings(**actions)
    plan = plan_for(ev, actions=settings, monitors=MonitorSettings(rebalance_monitoring=True))
    undo_after = plan.undo_after
    return apply(node, _fence_patch(node, ev, plan, now=NOW, undo_after=undo_after))


def test_fence_taints_cordons_and_records_state_keeping_foreign_taints() -> None:
    node = fence(NodeView("n", taints=(FOREIGN,)), event(), taint_node=True, exclude_from_load_balancers=True)
    assert node.unschedulable
    assert FOREIGN in node.taints
    keys = {t.key for t in node.taints}
    assert {"kubespot.io/spot-itn", "aws-node-termination-handler/spot-itn"} <= keys
    assert node.labels["node.kubernetes.io/exclude-from-external-load-balancers"] == "true"
    state = decode(node.annotations[STATE_ANNOTATION])
    assert state is not None
    # The plan drains: the same write records DRAINING (no second write when the drain starts).
    assert state.phase is Phase.DRAINING and state.cordoned_by_us and state.event_id == "spot-itn-1"
    assert set(state.taints) == {"kubespot.io/spot-itn", "aws-node-termination-handler/spot-itn"}
    assert state.labels == ("node.kubernetes.io/exclude-from-external-load-balancers",)
    assert state.deadline == NOW + timedelta(minutes=2)


def test_rewrites_of_the_taint_list_keep_other_taints_time_added() -> None:
    """The node lifecycle controller stamps its taints with ``timeAdded`` and the taint manager counts
    ``tolerationSeconds`` from it (pkg/controller/tainteviction ``processPodOnNode``): a fence or an
    undo that rewrites the list must not reset that clock."""
    unreachable = Taint("node.kubernetes.io/unreachable", "NoExecute", None, "2026-11-22T02:59:00Z")
    ev = event()
    fenced = fence(NodeView("n", taints=(unreachable,)), ev, taint_node=True)
    kept = [t for t in fenced.taints if t.key == unreachable.key]
    assert [t.time_added for t in kept] == ["2026-11-22T02:59:00Z"]
    undone = apply(fenced, _undo_patch(fenced, ev.id))
    assert [t.time_added for t in undone.taints] == ["2026-11-22T02:59:00Z"]


def test_a_fence_without_a_drain_records_fenced_and_a_resumed_fenced_state_moves_on_to_draining() -> None:
    ev = event()
    only = fence(NodeView("n"), ev, cordon_only=True)
    state = decode(only.annotations[STATE_ANNOTATION])
    assert state is not None and state.phase is Phase.FENCED
    # A FENCED state of a plan that drains (an earlier version's two-step write) is resumed to DRAINING.
    again = decode(fence(only, ev).annotations[STATE_ANNOTATION])
    assert again is not None and again.phase is Phase.DRAINING and again.since == state.since


def test_fence_is_idempotent() -> None:
    ev = event()
    once = fence(NodeView("n"), ev)
    plan = plan_for(ev, actions=NodeActionSettings(), monitors=MonitorSettings())
    assert _fence_patch(once, ev, plan, now=NOW + timedelta(seconds=5), undo_after=None) is None


def test_refencing_for_the_same_event_keeps_the_phase_it_reached() -> None:
    ev = event()
    node = fence(NodeView("n"), ev)
    state = decode(node.annotations[STATE_ANNOTATION])
    assert state is not None
    draining = state.advance(Phase.DRAINING, NOW)
    node = apply(node, {"metadata": {"annotations": {STATE_ANNOTATION: draining.encode()}}})
    again = fence(node, ev)
    resumed = decode(again.annotations[STATE_ANNOTATION])
    assert resumed is not None and resumed.phase is Phase.DRAINING


def test_a_node_cordoned_by_someone_else_is_not_ours_to_uncordon() -> None:
    ev = event(Kind.REBALANCE_RECOMMENDATION, "rebalance-1")
    node = fence(NodeView("n", unschedulable=True, taints=(FOREIGN,)), ev)
    state = decode(node.annotations[STATE_ANNOTATION])
    assert state is not None and not state.cordoned_by_us
    undone = apply(node, _undo_patch(node, "rebalance-1"))
    assert undone.unschedulable, "kubespot must not uncordon a node it did not cordon"
    assert undone.taints == (FOREIGN,)
    assert STATE_ANNOTATION not in undone.annotations


def test_undo_removes_exactly_what_was_added_across_superseding_events() -> None:
    rebalance = fence(NodeView("n", taints=(FOREIGN,)), event(Kind.REBALANCE_RECOMMENDATION, "rebalance-1"))
    rstate = decode(rebalance.annotations[STATE_ANNOTATION])
    assert rstate is not None and rstate.undo_at == NOW + timedelta(seconds=1800)
    spot = fence(rebalance, event(Kind.SPOT_INTERRUPTION, "spot-itn-2"), exclude_from_load_balancers=True)
    state = decode(spot.annotations[STATE_ANNOTATION])
    assert state is not None
    assert state.event_id == "spot-itn-2" and state.undo_at is None, "a spot notice cancels the auto-undo"
    assert set(state.taints) == {"kubespot.io/rebalance-recommendation", "kubespot.io/spot-itn"}
    assert state.cordoned_by_us, "carried over from the rebalance fence"
    assert _undo_patch(spot, "rebalance-1") is None, "the node now belongs to the spot notice"
    undone = apply(spot, _undo_patch(spot, "spot-itn-2"))
    assert undone.taints == (FOREIGN,) and not undone.unschedulable
    assert "node.kubernetes.io/exclude-from-external-load-balancers" not in undone.labels
    assert STATE_ANNOTATION not in undone.annotations
    assert undone.annotations[UNDONE_ANNOTATION] == "spot-itn-2", "so a restart does not fence again"
    again = fence(undone, event(Kind.REBALANCE_RECOMMENDATION, "rebalance-3"))
    assert apply(again, _undo_patch(again, "rebalance-3")).annotations[UNDONE_ANNOTATION] == (
        "spot-itn-2,rebalance-3"
    ), "earlier undone ids are kept (bounded)"


def test_undo_without_state_or_with_garbage_state_does_nothing() -> None:
    assert _undo_patch(NodeView("n"), "x") is None
    garbage = NodeView("n", annotations={STATE_ANNOTATION: "{not json"})
    assert _undo_patch(garbage, "x") is None


def test_fence_overwrites_a_hand_edited_state() -> None:
    node = NodeView("n", annotations={STATE_ANNOTATION: "garbage"})
    fenced = fence(node, event())
    state = orjson.loads(fenced.annotations[STATE_ANNOTATION])
    assert state["event_id"] == "spot-itn-1"


def test_a_fence_by_another_live_holder_for_the_same_event_is_left_to_it() -> None:
    # Two controller replicas waking at the same act_at: the one whose write lost the race (409,
    # re-read) must not take the hold over, or both would drain.
    ev = event()
    plan = plan_for(ev, actions=NodeActionSettings(), monitors=MonitorSettings())
    theirs = apply(
        NodeView("n"), _fence_patch(NodeView("n"), ev, plan, now=NOW, undo_after=None, holder="a/1")
    )
    soon = NOW + timedelta(seconds=1)
    assert _fence_patch(theirs, ev, plan, now=soon, undo_after=None, holder="b/2") is None
    # A holder that stopped renewing is taken over.
    late = NOW + timedelta(minutes=5)
    taken = _fence_patch(theirs, ev, plan, now=late, undo_after=None, holder="b/2")
    assert taken is not None
    state = decode(taken["metadata"]["annotations"][STATE_ANNOTATION])
    assert state is not None and state.holder == "b/2"
    # A live hold blocks another event too: the agent (IMDS) and the controller (EventBridge) see one
    # interruption under two event ids, and must not drain the node twice (issue 10).
    other = event(ident="spot-itn-2")
    assert (
        _fence_patch(
            theirs,
            other,
            plan_for(other, actions=NodeActionSettings(), monitors=MonitorSettings()),
            now=soon,
            undo_after=None,
            holder="b/2",
        )
        is None
    )
