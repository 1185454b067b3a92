"""A notifier (``Notifier``, ``WebhookNotifier``) run as the agent runs it: ``notify()`` from the
loop, ``run()`` as a task (from ``start()``), ``aclose()`` at the end, for tests of outgoing
notifications. ``RunningNotifier`` also keeps what the notifier reported (``on_result``) and the
backoff it asked its clock for."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from support.clocks import RecordingClock


class Runnable(Protocol):
    async def run(self) -> None: ...

    async def aclose(self, timeout: float) -> None: ...  # noqa: ASYNC109 - the notifiers' own signature


N = TypeVar("N", bound=Runnable)


@dataclass
class RunningNotifier(Generic[N]):
    notifier: N
    clock: RecordingClock
    #: Every outcome ``on_result`` reported, in order.
    results: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.notifier.run())


@asynccontextmanager
async def running(h: RunningNotifier[N], *, start: bool = True) -> AsyncIterator[RunningNotifier[N]]:
    """``h``'s notifier, its task started unless ``start`` is False; closed (1 s to send what is
    queued) and its task awaited at the end."""
    if start:
        h.start()
    try:
        yield h
    finally:
        await h.notifier.aclose(timeout=1.0)
        if h.task is not None:
            await asyncio.gather(h.task, return_exceptions=True)
