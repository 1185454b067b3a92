"""A local HTTP endpoint for tests of outgoing calls (webhooks, notify targets, HTTP actions).

- ``ScriptedReceiver``: answers from a script (then 200), can hold every answer until released;
  a subclass says what it records of each request (``record``).
- ``serving(handler)``: an aiohttp handler served on every path of 127.0.0.1 on a free port (its
  base URL) for the ``async with``; ``serve(receiver)``: a ``ScriptedReceiver`` served so
  (``receiver.base``), a held answer released on the way out.
- ``until``: wait for an outcome instead of sleeping for a guessed time.
- ``closed_port``: a port nothing listens on.
- ``assert_no_secret_logged``: no log record carries any of the secrets.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import pytest
from aiohttp import web


@dataclass
class ScriptedReceiver:
    """An endpoint: records requests (``record``), answers from ``script`` (then 200), can ``hold``."""

    #: The body of every answer.
    text: ClassVar[str] = "ok"

    base: str = ""
    script: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    hold: asyncio.Event | None = None
    answered: int = 0

    def record(self, request: web.Request, body: bytes) -> None:
        raise NotImplementedError

    async def handle(self, request: web.Request) -> web.Response:
        self.record(request, await request.read())
        if self.hold is not None:
            await self.hold.wait()
        status, headers = self.script.pop(0) if self.script else (200, {})
        self.answered += 1
        return web.Response(status=status, headers=headers, text=self.text)


R = TypeVar("R", bound=ScriptedReceiver)


@asynccontextmanager
async def serving(
    handle: Callable[[web.Request], Awaitable[web.StreamResponse]], **runner_options: Any
) -> AsyncIterator[str]:
    """``handle`` answers every method and path on 127.0.0.1 (a free port) until the block ends;
    yields the base URL. ``runner_options`` go to ``web.AppRunner`` (``access_log=None`` and so on)."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, **runner_options)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def serve(rec: R) -> AsyncIterator[R]:
    """``rec`` served on every path; on the way out a held answer is released and the server stopped."""
    # No access log: it would print the (secret) path, and it is the receiver's, not ours.
    async with serving(rec.handle, shutdown_timeout=0.5, access_log=None) as base:
        rec.base = base
        try:
            yield rec
        finally:
            if rec.hold is not None:
                rec.hold.set()


async def until(check: Callable[[], bool], *, within: float = 5.0) -> None:
    """Wait for an outcome instead of sleeping for a guessed time."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s")
        await asyncio.sleep(0.01)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def assert_no_secret_logged(caplog: pytest.LogCaptureFixture, secrets: Iterable[str]) -> None:
    """There are log records, and none carries any of ``secrets`` (message, args or exception)."""
    assert caplog.records, "the test should have produced log lines to inspect"
    secrets = tuple(secrets)
    for rec in caplog.records:
        blob = f"{rec.getMessage()} {rec.args!r} {rec.exc_info!r} {rec.exc_text!r}"
        for secret in secrets:
            assert secret not in blob, f"secret in log line from {rec.name}: {rec.getMessage()}"
