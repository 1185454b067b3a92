"""A client-side token bucket, so kubespot stays within its API budget however many tasks call at once.

Two ways in. ``acquire`` reserves a token and sleeps until it is its (tokens may go negative), which
is first-come first-served without a queue, as client-go's and golang.org/x/time/rate's limiters do;
urgent calls (fencing a node) use it. ``acquire_ordinary`` takes a token only when one is actually
free and the caller's ``ready`` check passes, one ordinary caller at a time in arrival order, so
ordinary calls never book tokens ahead of urgent ones: an urgent call waits for at most one token.
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
        self._ordinary = asyncio.Lock()

    def _refill(self) -> None:
        now = self._monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def reserve(self) -> float:
        """Take one token now; return the seconds the caller must wait before using it."""
        if self.qps <= 0:
            return 0.0
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def try_acquire(self) -> bool:
        """Take a token if one is free now; False (nothing taken) otherwise. For what is dropped
        rather than delayed when over budget (client-go's ``TryAccept``: rate-limited events)."""
        if self.qps <= 0:
            return True
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            await self._sleep(wait)

    async def acquire_ordinary(self, ready: Callable[[], Awaitable[None]]) -> None:
        """Wait for ``ready()``, then for a free token (not a reserved future one), and take it."""
        async with self._ordinary:  # asyncio.Lock wakes waiters in arrival order
            while True:
                await ready()
                if self.qps <= 0:
                    return
                self._refill()
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                await self._sleep((1.0 - self._tokens) / self.qps)
