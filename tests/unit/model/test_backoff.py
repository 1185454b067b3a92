"""``model.backoff``: the one backoff every retry loop uses (kube calls, evictions, IMDS, SQS, notify)."""

from __future__ import annotations

import random

import pytest

from kubespot.model.backoff import ceiling, equal_jitter, full_jitter


def test_the_ceiling_doubles_from_base_and_stops_at_the_cap() -> None:
    assert [ceiling(a, base=0.5, cap=4.0) for a in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    # Far past the cap no float overflows (2.0 ** 5000 would).
    assert ceiling(5000, base=0.5, cap=30.0) == 30.0


@pytest.mark.parametrize("draw", [0.0, 0.25, 0.999])
def test_full_jitter_is_the_draw_times_the_ceiling(draw: float) -> None:
    assert full_jitter(2, base=0.5, cap=4.0, rng=lambda: draw) == pytest.approx(draw * 2.0)


def test_equal_jitter_never_waits_less_than_half_the_ceiling() -> None:
    assert equal_jitter(3, base=0.5, cap=30.0, rng=lambda: 0.0) == 2.0
    assert equal_jitter(3, base=0.5, cap=30.0, rng=lambda: 0.999) == pytest.approx(3.998)


def test_a_seeded_generator_gives_what_random_uniform_gave() -> None:
    """Callers that kept a ``random.Random`` pass its ``random``: the same waits as the
    ``uniform(0, ceiling)`` they drew before, draw for draw."""
    before, after = random.Random(3), random.Random(3)
    old = [before.uniform(0.0, min(4.0, 0.5 * 2.0**a)) for a in range(8)]
    new = [full_jitter(a, base=0.5, cap=4.0, rng=after.random) for a in range(8)]
    assert new == pytest.approx(old)


def test_many_draws_spread_over_the_whole_range() -> None:
    rng = random.Random(11)
    waits = [full_jitter(4, base=0.5, cap=4.0, rng=rng.random) for _ in range(2000)]
    assert 0.0 <= min(waits) < 0.1 and 3.9 < max(waits) < 4.0
