"""Helpers for running the real IMDS source against imdssim over HTTP on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import httpx2

from kubespot.config.imds import ImdsSettings, MonitorSettings
from kubespot.model import InterruptionEvent
from kubespot.sim.imdssim import FakeClock
from kubespot.sources.imds import ImdsClient, ImdsMonitor

IID = "i-0123456789abcdef0"
WAIT = 5.0
"""Longest a test waits for something that should take milliseconds."""

#: Fast loops for tests: a 20 ms poll, millisecond backoff, a timeout a hung request reaches quickly.
FAST: dict[str, Any] = {
    "poll_interval": 0.02,
    "retry_backoff_base": 0.001,
    "retry_backoff_cap": 0.01,
    "request_timeout": 0.5,
}


class SimTime:
    """``model.Clock`` on imdssim's fake clock, so both sides agree on time (token expiry, notices).

    Sleeps are real but short: loops keep turning while simulated time moves only when a test says.
    """

    def __init__(self, sim_clock: FakeClock) -> None:
        self.sim_clock = sim_clock

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.sim_clock(), tz=UTC)

    def monotonic(self) -> float:
        return self.sim_clock()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(min(max(0.0, seconds), 0.05))


class CountingTransport(httpx2.AsyncHTTPTransport):
    """The real HTTP transport, noting each request so tests can count token fetches and polls."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, str, str | None]] = []
        self._changed = asyncio.Condition()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(
            (request.method, request.url.path, request.headers.get("X-aws-ec2-metadata-token"))
        )
        async with self._changed:
            self._changed.notify_all()
        return await super().handle_async_request(request)

    async def reads(self, suffix: str, n: int) -> None:
        """Wait until ``suffix`` has been read ``n`` more times (at most ``WAIT`` seconds)."""
        target = self.count("GET", suffix) + n
        async with asyncio.timeout(WAIT), self._changed:
            await self._changed.wait_for(lambda: self.count("GET", suffix) >= target)

    def count(self, method: str, suffix: str = "") -> int:
        return sum(1 for m, p, _ in self.requests if m == method and p.endswith(suffix))


def client_for(
    url: str, clock: Any, transport: CountingTransport | None = None, **settings: Any
) -> ImdsClient:
    return ImdsClient(ImdsSettings(url=url, **{**FAST, **settings}), clock=clock, transport=transport)


@asynccontextmanager
async def running_monitor(
    url: str,
    clock: Any,
    *,
    transport: CountingTransport | None = None,
    monitors: MonitorSettings | None = None,
    **settings: Any,
) -> AsyncIterator[tuple[ImdsMonitor, asyncio.Queue[InterruptionEvent]]]:
    """``ImdsMonitor.run()`` in a task for the duration of the block, events into a queue."""
    imds_settings = ImdsSettings(url=url, **{**FAST, **settings})
    queue: asyncio.Queue[InterruptionEvent] = asyncio.Queue()
    async with ImdsClient(imds_settings, clock=clock, transport=transport) as client:
        monitor = ImdsMonitor(
            client,
            settings=imds_settings,
            monitors=monitors or MonitorSettings(),
            clock=clock,
            sink=queue,
            node_name="spot-node-1",
        )
        task = asyncio.create_task(monitor.run())
        try:
            yield monitor, queue
            assert not task.done(), "the monitor loop must keep running"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def next_event(queue: asyncio.Queue[InterruptionEvent]) -> InterruptionEvent:
    async with asyncio.timeout(WAIT):
        return await queue.get()
