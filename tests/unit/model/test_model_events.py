"""The normalized interruption event: stable ids, deadlines, taint values."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from kubespot.model import InterruptionEvent, Kind, Source, event_id

NOW = datetime(2026, 11, 20, 17, 2, 13, tzinfo=UTC)


def test_event_id_is_stable_for_the_same_notice_and_differs_for_a_new_one() -> None:
    a = event_id(Kind.SPOT_INTERRUPTION, "i-0abc", {"action": "terminate", "time": "2026-11-20T17:04:13Z"})
    again = event_id(
        Kind.SPOT_INTERRUPTION, "i-0abc", {"time": "2026-11-20T17:04:13Z", "action": "terminate"}
    )
    later = event_id(
        Kind.SPOT_INTERRUPTION, "i-0abc", {"action": "terminate", "time": "2026-11-20T18:00:00Z"}
    )
    other_node = event_id(
        Kind.SPOT_INTERRUPTION, "i-0def", {"action": "terminate", "time": "2026-11-20T17:04:13Z"}
    )
    other_kind = event_id(Kind.REBALANCE_RECOMMENDATION, "i-0abc", "2026-11-20T17:04:13Z")
    assert a == again  # key order does not matter
    assert len({a, later, other_node, other_kind}) == 4
    assert a.startswith("spot-itn-")


def test_seconds_left_and_equality_ignore_the_raw_payload() -> None:
    ev = InterruptionEvent(
        id="spot-itn-1",
        kind=Kind.SPOT_INTERRUPTION,
        instance_id="i-0abc",
        source=Source.IMDS,
        notice_time=NOW,
        act_at=NOW,
        deadline=NOW + timedelta(seconds=120),
        raw={"action": "terminate"},
    )
    assert ev.seconds_left(NOW + timedelta(seconds=30)) == 90
    assert ev.seconds_left(NOW + timedelta(seconds=150)) == -30
    same = dataclasses.replace(ev, raw={"something": "else"})
    assert ev == same and hash(ev) == hash(same)
    no_deadline = InterruptionEvent("r", Kind.REBALANCE_RECOMMENDATION, "i-0abc", Source.IMDS, NOW, NOW)
    assert no_deadline.seconds_left(NOW) is None


def test_taint_value_fits_a_label_value() -> None:
    ev = InterruptionEvent("x" * 80, Kind.SPOT_INTERRUPTION, "i-0abc", Source.SQS, NOW, NOW)
    assert ev.taint_value() == "x" * 63
