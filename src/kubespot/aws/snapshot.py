"""A view of AWS rebuilt now and then: fresh for a TTL, rebuilt by one task that every caller shares.

AWS has no "which load balancers hold this target" lookup, so the load-balancer adapters list
everything and index it. ``Snapshot`` holds that index: ``get()`` answers from it while it is younger
than the TTL, and otherwise starts a rebuild that concurrent callers join (an interruption burst
costs one rebuild, not one per node). A failed rebuild keeps the previous index (stale beats
nothing while AWS throttles) and is not retried before ``retry_after``, so errors cannot turn into
a storm of rebuilds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from kubespot.aws.session import AwsError
from kubespot.model import Clock, SystemClock

__all__ = ["Snapshot"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")


class Snapshot(Generic[_T]):
    """A value built by ``build(previous)``; ``previous`` lets a partial failure keep old parts.

    ``builds`` counts rebuilds started (failed ones included), for tests and metrics.
    """

    def __init__(
        self,
        build: Callable[[_T | None], Awaitable[_T]],
        *,
        ttl: float,
        retry_after: float,
        name: str,
        clock: Clock | None = None,
    ) -> None:
        self._build = build
        self._ttl = ttl
        self._retry_after = retry_after
        self._name = name
        self._clock = clock or SystemClock()
        # (value, when its rebuild started): the start, so a value never looks fresher than it is.
        self._current: tuple[_T, float] | None = None
        self._failed_at: float | None = None
        self._error: AwsError | None = None
        self._task: asyncio.Task[_T] | None = None
        self.builds = 0

    @property
    def age(self) -> float | None:
        """Seconds since the current value's rebuild started; None before the first one."""
        return None if self._current is None else self._clock.monotonic() - self._current[1]

    def invalidate(self) -> None:
        """Make the next ``get()`` rebuild (the old value is still used if that rebuild fails)."""
        if self._current is not None:
            self._current = (self._current[0], float("-inf"))
        self._failed_at = None

    async def get(self, max_age: float | None = None) -> _T:
        """A value whose rebuild started at most ``max_age`` seconds ago (default: the TTL).

        Joins a rebuild under way rather than starting another. Within ``retry_after`` of a failed
        rebuild it returns the old value (or raises that failure when there is none) without
        asking AWS again. Raises ``AwsError`` only when no value was ever built.
        """
        limit = self._ttl if max_age is None else max_age
        now = self._clock.monotonic()
        current = self._current
        if current is not None and now - current[1] <= limit:
            return current[0]
        if self._task is None:
            if self._failed_at is not None and now - self._failed_at < self._retry_after:
                if current is not None:
                    return current[0]
                assert self._error is not None
                raise self._error
            self._task = asyncio.create_task(self._rebuild(), name=f"kubespot-{self._name}-refresh")
            self._task.add_done_callback(_consume_exception)
        # shield: a caller cancelled mid-wait must not cancel the rebuild the others are waiting on.
        return await asyncio.shield(self._task)

    async def _rebuild(self) -> _T:
        started = self._clock.monotonic()
        self.builds += 1
        previous = self._current
        try:
            value = await self._build(None if previous is None else previous[0])
        except AwsError as exc:
            self._failed_at = self._clock.monotonic()
            self._error = exc
            if previous is None:
                raise
            _log.warning(
                "%s: refresh failed, keeping the index from %.0f s ago: %s",
                self._name,
                started - previous[1],
                exc,
            )
            return previous[0]
        finally:
            self._task = None
        self._current = (value, started)
        self._failed_at = self._error = None
        return value


def _consume_exception(task: asyncio.Task[_T]) -> None:
    # Every waiter may have been cancelled; the failure is still reported to the next caller.
    if not task.cancelled():
        task.exception()
