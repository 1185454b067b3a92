"""How long to wait before trying again: exponential backoff with jitter, the one helper every retry
loop of kubespot uses (API calls, evictions, IMDS reads, SQS receives, notifications).

Pure: the random source is injected (a callable returning a float in [0, 1), e.g. ``random.random``
or a seeded ``random.Random().random``), so tests can pin the draw.
"""

from __future__ import annotations

import random
from collections.abc import Callable

#: Attempts past this double no further (``2.0 ** 1024`` would overflow; the cap applies long before).
_MAX_DOUBLINGS = 30


def ceiling(attempt: int, *, base: float, cap: float) -> float:
    """``min(cap, base * 2 ** attempt)``: the longest wait before the retry after ``attempt`` (from 0)."""
    return min(cap, base * 2.0 ** min(max(attempt, 0), _MAX_DOUBLINGS))


def full_jitter(attempt: int, *, base: float, cap: float, rng: Callable[[], float] = random.random) -> float:
    """A wait uniform in [0, ``ceiling``): spreads apart the retries of callers that failed together
    (a drain's evictions, every agent after an API outage), rather than +-10 % around one instant."""
    return rng() * ceiling(attempt, base=base, cap=cap)


def equal_jitter(attempt: int, *, base: float, cap: float, rng: Callable[[], float] = random.random) -> float:
    """Half of ``ceiling`` fixed, half random: spread out, yet never again at once."""
    upper = ceiling(attempt, base=base, cap=cap)
    return upper / 2 + rng() * upper / 2
