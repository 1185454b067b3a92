"""Fencing before draining: API calls made while fencing a node go ahead of everything else.

When a thousand nodes are interrupted at once, the API budget (``KubeSettings.qps``) is the
bottleneck. First-come first-served would let the first nodes' drains (hundreds of evictions) delay
the taint and cordon of the last ones, so new pods keep landing on doomed nodes. Calls made inside
``fencing()`` register with a gate; every other call waits until no fencing call is pending before
it takes its token, so every affected node is fenced first and the drains share what is left.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

_fencing: contextvars.ContextVar[bool] = contextvars.ContextVar("kubespot_fencing", default=False)


@contextmanager
def fencing() -> Iterator[None]:
    """Mark the API calls made inside (and in tasks started inside) as fencing work."""
    token = _fencing.set(True)
    try:
        yield
    finally:
        _fencing.reset(token)


def is_fencing() -> bool:
    return _fencing.get()


class PriorityGate:
    """Counts fencing calls in progress; ``wait_clear()`` returns once there are none."""

    def __init__(self) -> None:
        self._pending = 0
        self._clear = asyncio.Event()
        self._clear.set()

    @property
    def pending(self) -> int:
        return self._pending

    @contextmanager
    def priority(self) -> Iterator[None]:
        self._pending += 1
        self._clear.clear()
        try:
            yield
        finally:
            self._pending -= 1
            if self._pending == 0:
                self._clear.set()

    async def wait_clear(self) -> None:
        await self._clear.wait()
