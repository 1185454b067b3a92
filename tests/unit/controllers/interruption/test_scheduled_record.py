"""The ``kubespot.io/scheduled`` record: what an entry holds, how the list is merged, capped and
pruned, and the patches that write it (pure functions, no API)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from kubespot.controllers.interruption.scheduled import (
    PRUNE_AFTER,
    SCHEDULED_ANNOTATION,
    SCHEDULED_KEPT,
    SUMMARY_CHARS,
    Entry,
    RecordError,
    decode_entries,
    encode_entries,
    pruned,
    record_patch,
    with_entry,
    without_entry,
)
from kubespot.kube import NodeView
from kubespot.model import InterruptionEvent
from support.events import scheduled_change

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def change(n: int, *, start: datetime | None = None, lead: float = 600) -> InterruptionEvent:
    start = start or NOW + timedelta(days=n)
    return scheduled_change(
        n,
        start=start,
        noticed=NOW - timedelta(minutes=1),
        lead=timedelta(seconds=lead),
        description=f"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED (upcoming) starting {start.isoformat()}",
    )


def entry(n: int, *, start: datetime | None = None, lead: float = 600) -> Entry:
    return Entry.of(change(n, start=start, lead=lead))


def test_an_entry_round_trips_and_rebuilds_its_event() -> None:
    event = change(2, start=NOW + timedelta(days=2, microseconds=250_000))
    [back] = decode_entries(encode_entries([Entry.of(event)]))
    rebuilt = back.event(node_name="n1")
    assert (rebuilt.id, rebuilt.kind, rebuilt.instance_id, rebuilt.source) == (
        event.id,
        event.kind,
        event.instance_id,
        event.source,
    )
    assert (rebuilt.notice_time, rebuilt.act_at, rebuilt.deadline) == (
        event.notice_time,
        event.act_at,
        event.deadline,
    )
    assert rebuilt.node_name == "n1" and rebuilt.description == event.description
    assert not rebuilt.cancelled


def test_a_replica_applies_its_own_lead_time_to_the_start_time() -> None:
    recorded = entry(1, lead=600)
    rebuilt = recorded.event(node_name="n1", lead_time=timedelta(seconds=30))
    assert rebuilt.deadline == NOW + timedelta(days=1)
    assert rebuilt.act_at == NOW + timedelta(days=1) - timedelta(seconds=30)


def test_the_record_is_compact_and_bounded() -> None:
    long = dataclasses.replace(change(1), description="x " * 400)
    recorded = Entry.of(long)
    assert len(recorded.summary) == SUMMARY_CHARS and recorded.summary.endswith("…")
    entries: tuple[Entry, ...] = ()
    for n in range(1, 20):
        entries = with_entry(entries, entry(n), NOW)
    text = encode_entries(entries)
    assert text is not None and len(text) < 4000
    assert len(orjson.loads(text)) == SCHEDULED_KEPT


def test_the_cap_drops_the_entries_furthest_in_the_past() -> None:
    entries: tuple[Entry, ...] = ()
    for n in range(SCHEDULED_KEPT, 0, -1):  # added latest first
        entries = with_entry(entries, entry(n), NOW)
    entries = with_entry(entries, entry(0, start=NOW - timedelta(minutes=5)), NOW)
    kept = {e.id for e in entries}
    assert len(kept) == SCHEDULED_KEPT
    assert entry(0).id not in kept, "the one that already started went first"
    entries = with_entry(entries, entry(SCHEDULED_KEPT + 1), NOW)
    assert entry(1).id not in {e.id for e in entries}, "then the soonest"
    assert entry(SCHEDULED_KEPT + 1).id in {e.id for e in entries}


def test_an_update_of_the_same_event_replaces_its_entry() -> None:
    first = entry(3)
    moved = entry(3, start=NOW + timedelta(days=5))
    entries = with_entry(with_entry((entry(1),), first, NOW), moved, NOW)
    assert [e.id for e in entries].count(first.id) == 1
    assert {e.id: e.deadline for e in entries}[first.id] == NOW + timedelta(days=5)
    assert len(entries) == 2


def test_long_past_entries_are_pruned_recent_ones_kept() -> None:
    recent = entry(0, start=NOW - PRUNE_AFTER + timedelta(minutes=1))
    old = entry(9, start=NOW - PRUNE_AFTER - timedelta(minutes=1))
    assert pruned((recent, old, entry(1)), NOW) == (recent, entry(1))
    assert recent.expired(NOW) and not recent.stale(NOW)
    assert old.stale(NOW)
    assert without_entry((old, entry(1), entry(2)), entry(1).id, NOW) == (entry(2),)


def test_encode_orders_soonest_first_and_empty_means_no_annotation() -> None:
    text = encode_entries([entry(3), entry(1), entry(2)])
    assert text is not None
    assert [item["id"] for item in orjson.loads(text)] == [entry(n).id for n in (1, 2, 3)]
    assert encode_entries([]) is None
    assert decode_entries(None) == () and decode_entries("") == ()


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"id": "x"}',
        '[{"kind": "scheduled-maintenance"}]',
        '[{"id": "x", "kind": "nope", "notice": "2026-11-22T03:00:00+00:00", '
        '"act_at": "2026-11-22T03:00:00+00:00"}]',
        '[{"id": "x", "kind": "scheduled-maintenance", "notice": "2026-11-22T03:00:00", '
        '"act_at": "2026-11-22T03:00:00+00:00"}]',
        '[{"id": "", "kind": "scheduled-maintenance", "notice": "2026-11-22T03:00:00+00:00", '
        '"act_at": "2026-11-22T03:00:00+00:00"}]',
        "[3]",
    ],
)
def test_a_record_kubespot_did_not_write_is_an_error(text: str) -> None:
    with pytest.raises(RecordError):
        decode_entries(text)


def test_patches_write_only_what_changes() -> None:
    node = NodeView("n1", annotations={})
    patch = record_patch(node, lambda old: with_entry(old, entry(1), NOW))
    assert patch is not None
    text = patch["metadata"]["annotations"][SCHEDULED_ANNOTATION]
    written = NodeView("n1", annotations={SCHEDULED_ANNOTATION: text})
    assert record_patch(written, lambda old: with_entry(old, entry(1), NOW)) is None, "idempotent by id"
    assert record_patch(written, lambda old: without_entry(old, "other", NOW)) is None
    emptied = record_patch(written, lambda old: without_entry(old, entry(1).id, NOW))
    assert emptied == {"metadata": {"annotations": {SCHEDULED_ANNOTATION: None}}}


def test_a_garbled_record_is_overwritten_by_the_next_write() -> None:
    node = NodeView("n1", annotations={SCHEDULED_ANNOTATION: "{hand edited"})
    patch = record_patch(node, lambda old: with_entry(old, entry(1), NOW))
    assert patch is not None
    [back] = decode_entries(patch["metadata"]["annotations"][SCHEDULED_ANNOTATION])
    assert back == entry(1)
