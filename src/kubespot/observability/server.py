"""A minimal HTTP/1.1 server for the agent's /metrics and health endpoints.

Built on ``asyncio.start_server`` because the agent must stay small (no web framework on every
node; aiohttp is a simulator dependency) and must not start threads (prometheus_client's own
server runs in one). It serves one GET or HEAD per connection and then closes it, which is all a
Prometheus scrape or a kubelet probe needs, and it defends itself against clients it cannot trust
on a node's network: bounded header size, a deadline for the whole request head, and handlers
whose failures become a 500 instead of a dead server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from http import HTTPStatus

from .health import HealthReport
from .metrics import Metrics

__all__ = ["EndpointServer", "Handler", "health_handler", "metrics_handler"]

_log = logging.getLogger(__name__)

#: What a route returns: status, content type, body.
Response = tuple[int, str, bytes]
Handler = Callable[[], Awaitable[Response]]

#: The request line and all headers together may not exceed this (431 beyond).
MAX_HEAD_BYTES = 16 * 1024

_ALLOWED = ("GET", "HEAD")
_TEXT = "text/plain; charset=utf-8"
# method SP request-target SP HTTP-version (RFC 9112 section 3); the method is a token.
_REQUEST_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([\x21-\x7e]+) HTTP/1\.[01]")
#: A byte that cannot appear in a request line (only visible ASCII and spaces can), or a leading space.
_NOT_REQUEST_LINE = re.compile(rb"[^\x20-\x7e]|\A ")
#: The blank line that ends the head (bare LF line ends are tolerated, as RFC 9112 allows).
_END_OF_HEAD = re.compile(rb"\r?\n\r?\n")


class _BadRequest(Exception):
    def __init__(self, status: HTTPStatus, why: str) -> None:
        super().__init__(why)
        self.status = status


class EndpointServer:
    """Routes exact paths to handlers. ``read_timeout`` bounds the time a client has to send its
    whole request head, so a slow or silent client cannot hold a connection; the same bound
    applies to writing the response to it. ``handler_timeout`` bounds a handler: a wedged health
    check answers 503 instead of piling up connections."""

    def __init__(self, *, read_timeout: float = 5.0, handler_timeout: float = 10.0) -> None:
        self._routes: dict[str, Handler] = {}
        self._read_timeout = read_timeout
        self._handler_timeout = handler_timeout
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    def route(self, path: str, handler: Handler) -> None:
        """Serve ``handler`` at ``path`` (exact match; the query string is ignored)."""
        if not path.startswith("/"):
            raise ValueError(f"route path must start with '/': {path!r}")
        self._routes[path] = handler

    @property
    def port(self) -> int:
        """The bound TCP port (useful after ``start(host, 0)``)."""
        if self._server is None or not self._server.sockets:
            raise RuntimeError("server is not started")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self, host: str, port: int) -> None:
        """Listen on ``host``:``port`` (0: any free port)."""
        if self._server is not None:
            raise RuntimeError("server already started")
        self._server = await asyncio.start_server(self._connection, host, port)

    async def close(self) -> None:
        """Stop listening and end the connections in progress."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    # -- one connection --------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the client went away or was too slow; nothing to answer
        except Exception:
            _log.exception("endpoint server: unexpected error on a connection")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            if task is not None:
                self._connections.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self._read_timeout):
                method, path = await _read_head(reader)
        except _BadRequest as bad:
            await self._send(writer, bad.status, _TEXT, f"{bad.status.phrase}: {bad}\n".encode(), head=False)
            await _discard_input(reader, writer, min(self._read_timeout, 1.0))
            return
        if method not in _ALLOWED:
            body = f"{HTTPStatus.METHOD_NOT_ALLOWED.phrase}\n".encode()
            allow = (("Allow", ", ".join(_ALLOWED)),)
            await self._send(writer, 405, _TEXT, body, head=False, extra=allow)
            await _discard_input(reader, writer, min(self._read_timeout, 1.0))  # a request body may follow
            return
        handler = self._routes.get(path)
        if handler is None:
            await self._send(writer, 404, _TEXT, b"Not Found\n", head=method == "HEAD")
            return
        try:
            async with asyncio.timeout(self._handler_timeout):
                status, content_type, body = await handler()
        except TimeoutError:
            _log.error("endpoint server: handler for %s timed out", path, extra={"path": path})
            status, content_type, body = 503, _TEXT, b"Service Unavailable: handler timed out\n"
        except Exception:
            _log.exception("endpoint server: handler for %s failed", path, extra={"path": path})
            status, content_type, body = 500, _TEXT, b"Internal Server Error\n"
        await self._send(writer, status, content_type, body, head=method == "HEAD")

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        content_type: str,
        body: bytes,
        *,
        head: bool,
        extra: tuple[tuple[str, str], ...] = (),
    ) -> None:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Status"
        lines = [
            f"HTTP/1.1 {status} {reason}",
            f"Content-Type: {content_type}",
            # HEAD answers carry the length the GET body would have (RFC 9110 section 9.3.2).
            f"Content-Length: {len(body)}",
            "Connection: close",
            *(f"{name}: {value}" for name, value in extra),
        ]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if not head:
            writer.write(body)
        async with asyncio.timeout(self._read_timeout):
            await writer.drain()


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, str]:
    """Read the request line and headers; return (method, path). Raises _BadRequest.

    Reads in chunks until the blank line that ends the head, so the size bound covers the head as
    a whole, and rejects bytes that cannot be in a request line as soon as they arrive (garbage
    without a newline would otherwise be answered only by the timeout).
    """
    buffer = bytearray()
    while True:
        chunk = await reader.read(4096)
        if not chunk:
            raise asyncio.IncompleteReadError(bytes(buffer), None)
        buffer += chunk
        first_end = buffer.find(b"\n")
        first = buffer if first_end < 0 else buffer[:first_end]
        if _NOT_REQUEST_LINE.search(first.rstrip(b"\r")):
            raise _BadRequest(HTTPStatus.BAD_REQUEST, "malformed request line")
        end = _END_OF_HEAD.search(buffer)
        if end is not None and end.start() <= MAX_HEAD_BYTES:
            break
        if len(buffer) > MAX_HEAD_BYTES:
            if first_end < 0:
                raise _BadRequest(HTTPStatus.REQUEST_URI_TOO_LONG, "request line too long")
            raise _BadRequest(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "headers too large")
    lines = bytes(buffer[: end.start()]).split(b"\n")
    match = _REQUEST_LINE.fullmatch(lines[0].rstrip(b"\r"))
    if match is None:
        raise _BadRequest(HTTPStatus.BAD_REQUEST, "malformed request line")
    method, target = match.group(1).decode("ascii"), match.group(2)
    if not target.startswith(b"/"):
        raise _BadRequest(HTTPStatus.BAD_REQUEST, "request target must be an absolute path")
    # Headers are checked for shape but not otherwise needed: no bodies, no keep-alive.
    for line in lines[1:]:
        field = line.rstrip(b"\r")
        if b":" not in field or field[:1] in (b" ", b"\t"):  # obsolete line folding is rejected too
            raise _BadRequest(HTTPStatus.BAD_REQUEST, "malformed header line")
    return method, target.split(b"?", 1)[0].decode("ascii")


async def _discard_input(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seconds: float) -> None:
    """Signal the end of the response and read what the client still sends, for a bounded time.

    Closing a socket with unread input makes the kernel send a reset, and a reset can destroy the
    error response before the client reads it; reading the rest first lets the answer arrive.
    """
    with contextlib.suppress(Exception):
        if writer.can_write_eof():
            writer.write_eof()
        async with asyncio.timeout(seconds):
            budget = 1 << 20
            while budget > 0 and (data := await reader.read(65536)):
                budget -= len(data)


# -- handlers --------------------------------------------------------------------------------------


def metrics_handler(metrics: Metrics) -> Handler:
    """Serve ``metrics.render()``."""

    async def handle() -> Response:
        body, content_type = metrics.render()
        return 200, content_type, body

    return handle


def health_handler(check: Callable[[], HealthReport]) -> Handler:
    """Serve the report from ``check()`` as JSON: 200 when ok, 503 when not."""

    async def handle() -> Response:
        result = check()
        return (200 if result.ok else 503), "application/json", result.to_json()

    return handle
