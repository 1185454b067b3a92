"""A client-side token bucket, so kubespot stays within its API budget however many tasks call at once.

Callers reserve a token and sleep until it is theirs (tokens may go negative), which makes waiting
first-come first-served without a queue, as client-go's and golang.org/x/time/rate's limiters do.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up. ``qps <= 0`` means unlimited."""

    def __init__(
        self,
        *,
        qps: float,
        burst: int,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._monotonic = monotonic
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._last = monotonic()

    def reserve(self) -> float:
        """Take one token now; return the seconds the caller must wait before using it."""
        if self.qps <= 0:
            return 0.0
        now = self._monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            await self._sleep(wait)
