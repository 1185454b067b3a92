"""A cap on the API calls in flight at once, urgent (fencing) calls served first.

The token bucket (``ratelimit``) bounds how many calls start per second, not how many wait for an
answer. When the API server answers slower than the budget allows (a burst of a thousand drains),
the calls that already took their token would otherwise all queue inside the HTTP connection pool,
whose bookkeeping is linear in the queued requests on every request and response (quadratic over a
burst: it was a fifth of the controller's CPU at 1 000 drains), and whose waiting counts against each
request's timeout. ``InFlight`` keeps that queue here instead, where waiting is O(1), costs no
timeout, and a fencing call takes the next free slot ahead of every waiting ordinary call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class InFlight:
    """At most ``limit`` holders at once; waiters are served urgent first, then in arrival order."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._busy = 0
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._ordinary: deque[asyncio.Future[None]] = deque()

    @property
    def busy(self) -> int:
        return self._busy

    @property
    def waiting(self) -> int:
        return len(self._urgent) + len(self._ordinary)

    @asynccontextmanager
    async def slot(self, *, urgent: bool = False) -> AsyncIterator[None]:
        await self.acquire(urgent=urgent)
        try:
            yield
        finally:
            self.release()

    async def acquire(self, *, urgent: bool = False) -> None:
        if self._busy < self.limit and not self._urgent and (urgent or not self._ordinary):
            self._busy += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._urgent if urgent else self._ordinary
        queue.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot was handed over just as we were cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):  # release() may have dropped it already
                    queue.remove(waiter)
            raise

    def release(self) -> None:
        """Hand the slot to the next waiter (urgent first), or free it."""
        for queue in (self._urgent, self._ordinary):
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    waiter.set_result(None)  # the slot changes hands: _busy stays
                    return
        self._busy -= 1
