"""The clock every deadline is computed from, injectable so timing logic is tested without sleeping."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Wall time for deadlines (they come from AWS as UTC timestamps) and a way to wait."""

    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin that never goes backwards (for intervals)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a fake clock advances instead)."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(tz=UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


async def wait_event(event: asyncio.Event, seconds: float, clock: Clock) -> bool:
    """Wait for ``event`` at most ``seconds`` on ``clock``; True if it is set. Loops that sleep until
    their next due time unless something wakes them, and waits for a pod to be gone, share it."""
    if event.is_set():
        return True
    if seconds <= 0:
        return False
    if type(clock) is SystemClock:
        # The real clock: a timeout on the wait itself, without the two tasks below (a burst of
        # drains has thousands of pods waiting to be gone at once).
        try:
            async with asyncio.timeout(seconds):
                await event.wait()
        except TimeoutError:
            pass
        return event.is_set()
    waiter = asyncio.ensure_future(event.wait())
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        sleeper.cancel()
    return event.is_set()
