"""How ``KubeClient``'s raw-JSON calls reach the API server: one small interface, two HTTP stacks.

Pods and nodes, which are nearly all of a burst's traffic, are read, written and watched as raw JSON
(decoded with orjson into views), not through lightkube's models. They go through a ``RawHttp``:

- ``HttpxRaw`` (the default, and the agent's) sends them through lightkube's own httpx client, so the
  per-node agent has one HTTP stack and nothing more in memory;
- ``AiohttpRaw`` (``aiohttp_transport``; the controller, which installs ``kubespot[controller]``)
  sends them through aiohttp, whose C HTTP parser costs ~0.1 ms of CPU per request against httpx's
  ~0.6 ms. At a thousand evictions a second that difference is most of a core (docs/PERFORMANCE.md).

Both raise the same two errors, so the client's retry policy is the same whichever stack is in use:
``ApiStatus`` for an error answer (its code, reason, message and Retry-After) and ``LinkError`` when
no answer came (connection refused or reset, timeout).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

import httpx2
import orjson

_JSON_BODY = {"Content-Type": "application/json"}
#: Seconds after which the API server ends a watch (it is then resumed from its resourceVersion).
WATCH_SERVER_TIMEOUT = 60


class ApiStatus(Exception):
    """The API server answered with an error status (4xx/5xx)."""

    def __init__(
        self, code: int, message: str, *, reason: str = "", retry_after: float | None = None
    ) -> None:
        super().__init__(f"{code} {reason}: {message}" if reason else f"{code}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.retry_after = retry_after


class LinkError(Exception):
    """No answer: the connection failed, broke or timed out."""


class RawHttp(Protocol):
    """Raw-JSON requests to the API server; paths are relative to its base URL (``api/v1/...``)."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> bytes:
        """The body of a 2xx answer; raises ``ApiStatus`` or ``LinkError``. ``content_type``: of the
        body, JSON unless said (a merge patch says so)."""
        ...

    def stream(
        self, path: str, params: Mapping[str, str], *, idle_timeout: float
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """A GET whose answer is read as it comes (a watch), as its non-empty lines. Opening it
        raises ``ApiStatus`` or ``LinkError``; reading it raises ``LinkError`` when the connection
        fails or when no byte (headers included) came for ``idle_timeout`` seconds: a silent watch
        is a broken one (see ``watchhealth``)."""
        ...

    async def aclose(self) -> None: ...


def body_headers(body: bytes | None, content_type: str | None) -> dict[str, str] | None:
    """The Content-Type header of a request with ``body`` (JSON unless ``content_type`` says)."""
    if body is None:
        return None
    return {"Content-Type": content_type} if content_type else dict(_JSON_BODY)


def api_status(code: int, body: bytes, *, content_type: str, retry_after: str | None) -> ApiStatus:
    """The error of an answer: the fields of its Status body when it is JSON, else its text."""
    reason, message = "", ""
    if content_type.startswith("application/json"):
        try:
            status = orjson.loads(body)
        except orjson.JSONDecodeError:
            status = None
        if isinstance(status, dict):
            reason = str(status.get("reason") or "")
            message = str(status.get("message") or "")
    if not message:
        message = body[:200].decode(errors="replace").strip() or f"HTTP {code}"
    try:
        wait = float(retry_after) if retry_after is not None else None
    except ValueError:
        wait = None
    return ApiStatus(code, message, reason=reason, retry_after=wait)


async def watch_lines(
    chunks: AsyncIterator[bytes],
    *,
    idle_timeout: float,
    timeouts: tuple[type[BaseException], ...],
    failures: tuple[type[BaseException], ...],
) -> AsyncIterator[bytes]:
    """The non-empty lines of a streamed answer (a watch), its stack's errors as ``LinkError``:
    ``timeouts`` (a read that waited ``idle_timeout``) say the watch went silent, ``failures`` that
    the connection broke. One generator, not two stacked: a burst streams thousands of lines."""
    pending = b""
    while True:
        try:
            chunk = await anext(chunks)
        except StopAsyncIteration:
            break
        except timeouts as err:
            silent = f"watch silent for {idle_timeout:g}s, taken as broken"
            raise LinkError(f"{silent} ({type(err).__name__})") from err
        except failures as err:
            raise LinkError(f"{type(err).__name__}: {err}") from err
        if pending:
            chunk = pending + chunk
        lines = chunk.split(b"\n")
        pending = lines.pop()
        for line in lines:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


class HttpxRaw:
    """``RawHttp`` over lightkube's httpx client: its base URL, credentials, TLS and connections."""

    def __init__(self, http: httpx2.AsyncClient) -> None:
        self._http = http

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> bytes:
        request = self._http.build_request(
            method, path, params=params or None, content=body, headers=body_headers(body, content_type)
        )
        try:
            response = await self._http.send(request)
        except httpx2.TransportError as err:
            raise LinkError(f"{type(err).__name__}: {err}") from err
        if response.is_error:
            raise _status_of(response)
        return response.content

    @asynccontextmanager
    async def stream(
        self, path: str, params: Mapping[str, str], *, idle_timeout: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        # httpx's read timeout bounds each read of the socket: the idle bound of the watch.
        base = self._http.timeout
        timeout = httpx2.Timeout(connect=base.connect, read=idle_timeout, write=base.write, pool=base.pool)
        request = self._http.build_request("GET", path, params=params, timeout=timeout)
        try:
            response = await self._http.send(request, stream=True)
        except httpx2.TransportError as err:
            raise LinkError(f"{type(err).__name__}: {err}") from err
        try:
            if response.is_error:
                await response.aread()
                raise _status_of(response)
            yield watch_lines(
                response.aiter_bytes(),
                idle_timeout=idle_timeout,
                timeouts=(httpx2.TimeoutException,),
                failures=(httpx2.TransportError,),
            )
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        """Nothing of its own: the connections are lightkube's, closed with its client."""


def _status_of(response: httpx2.Response) -> ApiStatus:
    return api_status(
        response.status_code,
        response.content,
        content_type=response.headers.get("Content-Type", ""),
        retry_after=response.headers.get("Retry-After"),
    )
