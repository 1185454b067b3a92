"""Fakes for the IMDS source's unit tests: a fake clock and a scriptable IMDS on a mock transport."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx2

START = datetime(2026, 11, 20, 16, 0, 0, tzinfo=UTC)


class FakeClock:
    """``model.Clock`` whose time only moves when slept on or advanced; sleeps are recorded."""

    def __init__(self, start: datetime = START) -> None:
        self.start = start
        self.t = 0.0
        self.sleeps: list[float] = []

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.t)

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += max(0.0, seconds)
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        self.t += seconds


Reply = httpx2.Response | Exception | Callable[[httpx2.Request], httpx2.Response]


@dataclass
class FakeImds:
    """A scripted IMDS behind ``httpx2.MockTransport``.

    ``bodies`` maps a path to its 200 body (absent → 404). ``script`` maps a path (or ``"PUT"`` for
    the token endpoint) to a list of one-shot replies used before the normal behaviour.
    """

    bodies: dict[str, str] = field(default_factory=dict)
    script: dict[str, list[Reply]] = field(default_factory=dict)
    require_v2: bool = False
    token_status: int = 200
    ttl_granted: str | None = None
    requests: list[httpx2.Request] = field(default_factory=list)
    issued: list[str] = field(default_factory=list)
    valid: set[str] = field(default_factory=set)

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handle)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        key = "PUT" if request.method == "PUT" else request.url.path
        queue = self.script.get(key)
        if queue:
            reply = queue.pop(0)
            if isinstance(reply, Exception):
                raise reply
            return reply if isinstance(reply, httpx2.Response) else reply(request)
        if request.method == "PUT":
            if self.token_status != 200:
                return httpx2.Response(self.token_status)
            token = f"tok-{len(self.issued) + 1}"
            self.issued.append(token)
            self.valid.add(token)
            ttl = self.ttl_granted or request.headers["X-aws-ec2-metadata-token-ttl-seconds"]
            return httpx2.Response(200, text=token, headers={"X-aws-ec2-metadata-token-ttl-seconds": ttl})
        token = request.headers.get("X-aws-ec2-metadata-token")
        if token is not None and token not in self.valid:
            return httpx2.Response(401)
        if token is None and self.require_v2:
            return httpx2.Response(401)
        body = self.bodies.get(request.url.path)
        return httpx2.Response(404) if body is None else httpx2.Response(200, text=body)

    def gets(self, path: str | None = None) -> list[httpx2.Request]:
        return [r for r in self.requests if r.method == "GET" and (path is None or r.url.path == path)]

    def puts(self) -> list[httpx2.Request]:
        return [r for r in self.requests if r.method == "PUT"]
