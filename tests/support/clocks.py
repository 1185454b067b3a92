"""Clocks for unit tests (``kubespot.model.Clock``): time that moves only when a test says so.

- ``ManualClock``: sleepers wake once ``advance`` has moved time past their end; ``advance`` moves in
  one go, or ``step`` seconds at a time (the clock's own ``step`` unless the call gives one), and
  lets every woken task run after each move.
- ``StillClock``: time stands still unless a test sets ``t``/``mono``; sleeps never end (a loop's
  sweep stays idle while the test drives it by hand).
- ``RecordingClock``: real time, but sleeps are recorded and skipped (retries over real HTTP run at
  once, and a test reads the backoff it was asked for).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from kubespot.model import SystemClock

#: Passes of the event loop ``settle`` gives pending tasks (a chain of awaits takes one each).
SETTLE_PASSES = 60


async def settle() -> None:
    """Let every task that can run, run (without real time passing)."""
    for _ in range(SETTLE_PASSES):
        await asyncio.sleep(0)


class ManualClock:
    """Time moves only in ``advance``; sleepers wake when their time has come."""

    def __init__(self, start: datetime, *, step: float | None = None) -> None:
        self.start = self.t = start
        self.step = step
        self._moved = asyncio.Condition()

    def now(self) -> datetime:
        return self.t

    def monotonic(self) -> float:
        return self.t.timestamp()

    @property
    def elapsed(self) -> float:
        return (self.t - self.start).total_seconds()

    async def sleep(self, seconds: float) -> None:
        until = self.t + timedelta(seconds=max(0.0, seconds))
        async with self._moved:
            await self._moved.wait_for(lambda: self.t >= until)

    async def advance(self, seconds: float, *, step: float | None = None) -> None:
        """Move time on by ``seconds`` (in ``step``-second moves if given), letting every waiter
        run after each move."""
        step = self.step if step is None else step
        left = seconds
        while True:
            move = left if step is None else min(step, left)
            left -= move
            async with self._moved:
                self.t += timedelta(seconds=move)
                self._moved.notify_all()
            await settle()
            if left <= 1e-9:
                return


class StillClock:
    """Wall time stands still unless a test moves it; sleeps never end."""

    def __init__(self, start: datetime, *, mono: float = 100.0) -> None:
        self.t = start
        self.mono = mono

    def now(self) -> datetime:
        return self.t

    def monotonic(self) -> float:
        return self.mono

    async def sleep(self, seconds: float) -> None:
        await asyncio.Event().wait()


class RecordingClock(SystemClock):
    """Real time, but backoff sleeps are recorded and skipped so retries run at once."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await asyncio.sleep(0)
