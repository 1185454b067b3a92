"""The batcher: pending pods gathered into one scheduling decision.

As Karpenter's (kubernetes-sigs/karpenter ``pkg/controllers/provisioning/batcher.go``): a
``trigger`` opens a window, or keeps it open; a key already triggered in the current window is
ignored (so one pod's repeated watch events do not hold the window open). ``wait`` returns once no
trigger arrived for ``idle`` seconds or ``max_duration`` after the window opened, whichever comes
first, and clears the window. A Deployment scaled by 100 is then one plan, not 100.

kubespot adds ``trigger_now`` for the fallback path (docs/designs/launching.md §2): when a NodeClaim
is deleted for insufficient capacity its pods are pending again and nothing should wait an idle
second for more; the window closes at once, and what arrives meanwhile goes into the next one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["Batcher"]


class Batcher:
    """An idle/max batching window over trigger keys (pod UIDs)."""

    def __init__(
        self,
        *,
        idle: float,
        max_duration: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle = idle
        self.max_duration = max_duration
        self._monotonic = monotonic
        self._keys: set[str] = set()
        self._armed = asyncio.Event()
        self._now = False
        #: Why the last window closed: ``idle``, ``max`` or ``now`` (for tests and logs).
        self.last_close = ""
        #: Seconds from the last window's first trigger to its close (a trigger that came while a
        #: pass ran waited for it: that wait is in here too).
        self.window = 0.0
        self._first: float | None = None

    def trigger(self, key: str) -> None:
        """Open or extend the window, unless ``key`` is already in it."""
        if key in self._keys:
            return
        self._keys.add(key)
        self._opening()
        self._armed.set()

    def trigger_now(self, key: str = "") -> None:
        """Close the window at once (or open and close one): a re-plan that must not wait."""
        if key:
            self._keys.add(key)
        self._opening()
        self._now = True
        self._armed.set()

    def _opening(self) -> None:
        if self._first is None:
            self._first = self._monotonic()

    @property
    def pending(self) -> bool:
        """A window is open (a trigger arrived since the last ``wait`` returned)."""
        return self._armed.is_set() or bool(self._keys)

    async def wait(self) -> frozenset[str]:
        """Block until a window opens and closes; the keys it gathered."""
        await self._armed.wait()
        opened = self._monotonic()
        while not self._now:
            left = opened + self.max_duration - self._monotonic()
            if left <= 0:
                self.last_close = "max"
                break
            self._armed.clear()
            try:
                await asyncio.wait_for(self._armed.wait(), min(self.idle, left))
            except TimeoutError:
                self.last_close = "idle" if left > self.idle else "max"
                break
        else:
            self.last_close = "now"
        keys = frozenset(self._keys)
        self.window = self._monotonic() - (opened if self._first is None else self._first)
        self._first = None
        self._keys.clear()
        self._armed.clear()
        self._now = False
        return keys
