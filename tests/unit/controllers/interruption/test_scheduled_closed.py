"""Tombstones of closed Health events, and which scheduled-change messages are outdated."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from kubespot.controllers.interruption.scheduled import (
    CLOSED_ANNOTATION,
    CLOSED_KEPT,
    PRUNE_AFTER,
    Closed,
    Entry,
    closed_of,
    decode_closed,
    encode_closed,
    is_outdated,
    pruned_closed,
    with_closed,
)
from kubespot.kube import NodeView
from kubespot.model import InterruptionEvent, Kind, Source

T0 = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
START = T0 + timedelta(days=4)


def change(*, sent: datetime, cancelled: bool = False) -> InterruptionEvent:
    return InterruptionEvent(
        id="sched-1",
        kind=Kind.SCHEDULED_MAINTENANCE,
        instance_id="i-1",
        source=Source.SQS,
        notice_time=sent,
        act_at=sent if cancelled else START - timedelta(minutes=5),
        deadline=START,
        cancelled=cancelled,
    )


def test_a_tombstone_outlives_the_start_time_and_round_trips() -> None:
    closed = closed_of(change(sent=T0, cancelled=True))
    assert closed == Closed("sched-1", T0, START + PRUNE_AFTER)
    assert decode_closed(encode_closed({closed.id: closed})) == {closed.id: closed}
    assert decode_closed("not json") == {} and decode_closed(None) == {} and encode_closed({}) is None


def test_upcoming_sent_before_the_closing_is_outdated_and_one_sent_after_is_not() -> None:
    tombstones = {"sched-1": closed_of(change(sent=T0, cancelled=True))}
    assert is_outdated(change(sent=T0 - timedelta(minutes=1)), (), tombstones)
    assert is_outdated(change(sent=T0), (), tombstones)  # a tie goes to the closing
    assert not is_outdated(change(sent=T0 + timedelta(seconds=1)), (), tombstones)
    assert not is_outdated(change(sent=T0, cancelled=True), (), tombstones)  # a repeat of the closing
    assert not is_outdated(change(sent=T0 - timedelta(minutes=1)), (), {})


def test_an_update_older_than_the_recorded_one_is_outdated() -> None:
    recorded = Entry.of(change(sent=T0))
    assert is_outdated(change(sent=T0 - timedelta(hours=1)), (recorded,), {})
    assert not is_outdated(change(sent=T0), (recorded,), {})  # a redelivery of the recorded message
    other = dataclasses.replace(recorded, id="sched-2")
    assert not is_outdated(change(sent=T0 - timedelta(hours=1)), (other,), {})


def test_tombstones_keep_the_latest_closing_drop_expired_and_stay_few() -> None:
    early, late = Closed("a", T0, START), Closed("a", T0 + timedelta(hours=1), START)
    assert with_closed({"a": late}, early, T0)["a"] == late
    assert with_closed({"a": early}, late, T0)["a"] == late
    expired = Closed("old", T0 - timedelta(days=2), T0 - timedelta(days=1))
    assert "old" not in with_closed({"old": expired}, early, T0)
    many = {f"e{i}": Closed(f"e{i}", T0, START + timedelta(minutes=i)) for i in range(CLOSED_KEPT + 4)}
    kept = with_closed(many, early, T0)
    assert len(kept) == CLOSED_KEPT and "e0" not in kept and f"e{CLOSED_KEPT + 3}" in kept


def test_expired_tombstones_are_pruned_from_the_node() -> None:
    live, old = Closed("live", T0, START), Closed("old", T0 - timedelta(days=2), T0 - timedelta(days=1))
    node = NodeView("n1", annotations={CLOSED_ANNOTATION: encode_closed({"live": live, "old": old}) or ""})
    patch = pruned_closed(node, T0)
    assert patch == {"metadata": {"annotations": {CLOSED_ANNOTATION: encode_closed({"live": live})}}}
    only_old = NodeView("n1", annotations={CLOSED_ANNOTATION: encode_closed({"old": old}) or ""})
    assert pruned_closed(only_old, T0) == {"metadata": {"annotations": {CLOSED_ANNOTATION: None}}}
    assert pruned_closed(NodeView("n1"), T0) is None
