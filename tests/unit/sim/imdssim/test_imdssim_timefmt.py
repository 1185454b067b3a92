"""Wire date formats (FACTS.md: spot/rebalance ISO ``2026-11-20T17:04:13Z``; scheduled events
``21 Nov 2026 09:00:00 GMT``) and the times users write in scenarios."""

from __future__ import annotations

import pytest

from kubespot.sim.imdssim.clock import DEFAULT_FAKE_START, FakeClock
from kubespot.sim.imdssim.timefmt import event_date, iso_utc, parse_time


def test_iso_utc_whole_seconds_with_z() -> None:
    assert iso_utc(DEFAULT_FAKE_START + 253.9) == "2026-11-20T16:04:13Z"


def test_event_date_format() -> None:
    t = parse_time("2026-11-21T09:00:00Z")
    assert event_date(t) == "21 Nov 2026 09:00:00 GMT"
    assert event_date(parse_time("2026-01-05T00:00:00Z")) == "5 Jan 2026 00:00:00 GMT"


@pytest.mark.parametrize(
    "value",
    ["2026-11-20T16:00:00Z", "2026-11-20T16:00:00+00:00", "2026-11-20T17:00:00+01:00", "2026-11-20T16:00:00"],
)
def test_parse_time_accepts_iso_forms(value: str) -> None:
    assert parse_time(value) == DEFAULT_FAKE_START


def test_parse_time_accepts_epoch_numbers() -> None:
    assert parse_time(1795190400) == DEFAULT_FAKE_START


@pytest.mark.parametrize("value", ["yesterday", "", True, None, [1], float("nan")])
def test_parse_time_refuses_garbage(value: object) -> None:
    with pytest.raises(ValueError):
        parse_time(value)


def test_fake_clock_moves_only_forward() -> None:
    clock = FakeClock()
    clock.advance(5)
    assert clock() == DEFAULT_FAKE_START + 5
    with pytest.raises(ValueError):
        clock.advance(-1)
    clock.set(0)
    assert clock() == 0
