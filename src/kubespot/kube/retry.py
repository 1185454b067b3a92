"""Retry policy for API calls: which failures are transient, and how long to wait between attempts."""

from __future__ import annotations

import random

_RNG = random.Random()

#: Statuses worth another attempt on any call: throttling and server-side trouble.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


def full_jitter(attempt: int, *, base: float, cap: float, rng: random.Random | None = None) -> float:
    """A wait in [0, min(cap, base * 2**attempt)): spreads retries of many clients apart.

    ``attempt`` counts from 0. Full jitter (rather than +-10 %) because a drain's retries start together.
    """
    upper = min(cap, base * 2.0 ** min(attempt, 30))
    return (rng or _RNG).uniform(0.0, upper)


def backoff_with_floor(attempt: int, *, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with "equal jitter": half fixed, half random, so a retry never comes at once."""
    upper = min(cap, base * 2.0 ** min(attempt, 30))
    return upper / 2 + (rng or _RNG).uniform(0.0, upper / 2)
