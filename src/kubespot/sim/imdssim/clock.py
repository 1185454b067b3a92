"""Time sources for imdssim: the real wall clock and a settable fake for tests.

Every time-dependent rule (token expiry, when a notice appears, scheduled-event state changes) reads
the time through a ``Clock`` so tests move time forward instead of sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], float]
"""A callable returning the current time as seconds since the Unix epoch (UTC)."""


def system_clock() -> float:
    """The real wall clock."""
    return time.time()


# A fixed, readable instant (2026-11-20T16:00:00Z) so test expectations can be written literally.
DEFAULT_FAKE_START = datetime(2026, 11, 20, 16, 0, 0, tzinfo=UTC).timestamp()


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, start: float = DEFAULT_FAKE_START) -> None:
        self._now = float(start)

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (negative values are refused: time never goes back)."""
        if seconds < 0:
            raise ValueError("a fake clock only moves forward")
        self._now += seconds

    def set(self, now: float) -> None:
        """Jump to an absolute time (seconds since the epoch)."""
        self._now = float(now)
