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
