"""The endpoint server over a real socket: routes, methods, malformed and hostile clients."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx2
import orjson
import pytest

from kubespot.observability import (
    EndpointServer,
    HealthReport,
    Metrics,
    freshness,
    health_handler,
    metrics_handler,
    report,
)

TIMEOUT = 0.2


class Health:
    """A health check the test can flip."""

    def __init__(self) -> None:
        self.last_success: datetime | None = datetime.now(UTC)

    def __call__(self) -> HealthReport:
        now = datetime.now(UTC)
        return report(freshness("imds", self.last_success, now=now, max_age=timedelta(seconds=60)))


async def boom() -> tuple[int, str, bytes]:
    raise RuntimeError("handler bug")


@pytest.fixture
def metrics() -> Metrics:
    m = Metrics()
    m.interruption("spot-itn", "imds")
    return m


@pytest.fixture
def health() -> Health:
    return Health()


@pytest.fixture
async def server(metrics: Metrics, health: Health) -> AsyncIterator[EndpointServer]:
    srv = EndpointServer(read_timeout=TIMEOUT)
    srv.route("/metrics", metrics_handler(metrics))
    srv.route("/healthz", health_handler(health))
    srv.route("/boom", boom)
    await srv.start("127.0.0.1", 0)
    try:
        yield srv
    finally:
        await srv.close()


class Reply:
    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        version, status, _reason = status_line.split(" ", 2)
        assert version == "HTTP/1.1"
        self.status = int(status)
        self.headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}


async def exchange(port: int, data: bytes) -> bytes:
    """Send ``data``, read until the server closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


async def get(port: int, path: str, method: str = "GET") -> Reply:
    return Reply(await exchange(port, f"{method} {path} HTTP/1.1\r\nHost: node\r\n\r\n".encode()))


async def test_metrics_over_a_real_client(server: EndpointServer, metrics: Metrics) -> None:
    metrics.action("cordon", "success")
    async with httpx2.AsyncClient() as client:
        resp = await client.get(f"http://127.0.0.1:{server.port}/metrics")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert resp.headers["connection"] == "close"
    assert int(resp.headers["content-length"]) == len(resp.content)
    assert 'kubespot_interruptions_total{kind="spot-itn",source="imds"} 1.0' in resp.text
    assert 'kubespot_actions_total{action="cordon",result="success"} 1.0' in resp.text


async def test_head_has_headers_and_no_body(server: EndpointServer) -> None:
    full = await get(server.port, "/metrics")
    head = await get(server.port, "/metrics", "HEAD")
    assert head.status == 200
    assert head.body == b""
    assert head.headers["content-length"] == str(len(full.body))


async def test_query_string_is_ignored_for_routing(server: EndpointServer) -> None:
    reply = await get(server.port, "/metrics?name[]=kubespot_info")
    assert reply.status == 200
    assert b"kubespot_info" in reply.body


async def test_health_is_200_when_ok_and_503_when_not(server: EndpointServer, health: Health) -> None:
    ok = await get(server.port, "/healthz")
    assert ok.status == 200
    assert ok.headers["content-type"] == "application/json"
    assert orjson.loads(ok.body)["ok"] is True

    health.last_success = datetime.now(UTC) - timedelta(minutes=5)
    stale = await get(server.port, "/healthz")
    assert stale.status == 503
    body = orjson.loads(stale.body)
    assert body["ok"] is False
    assert body["checks"][0]["name"] == "imds" and body["checks"][0]["ok"] is False


async def test_unknown_path_is_404(server: EndpointServer) -> None:
    reply = await get(server.port, "/nope")
    assert reply.status == 404
    assert reply.headers["content-length"] == str(len(reply.body))
    assert reply.headers["connection"] == "close"


async def test_other_methods_are_405_with_allow(server: EndpointServer) -> None:
    data = b"POST /metrics HTTP/1.1\r\nHost: node\r\nContent-Length: 5\r\n\r\nhello"
    reply = Reply(await exchange(server.port, data))
    assert reply.status == 405
    assert reply.headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize(
    "data",
    [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello: rejected without waiting
        b"HELLO\r\n\r\n",
        b"GET /metrics\r\n\r\n",
        b"GET metrics HTTP/1.1\r\n\r\n",
        b"GET /metrics HTTP/2.0\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n",
    ],
)
async def test_malformed_requests_are_400(server: EndpointServer, data: bytes) -> None:
    started = time.monotonic()
    reply = Reply(await exchange(server.port, data))
    assert reply.status == 400
    assert time.monotonic() - started < TIMEOUT  # answered, not timed out


async def test_headers_over_16_kib_are_431(server: EndpointServer) -> None:
    big = b"X-Filler: " + b"a" * (17 * 1024) + b"\r\n"
    reply = Reply(await exchange(server.port, b"GET /metrics HTTP/1.1\r\n" + big + b"\r\n"))
    assert reply.status == 431
    many = b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 100) for i in range(200))
    reply = Reply(await exchange(server.port, b"GET /metrics HTTP/1.1\r\n" + many + b"\r\n"))
    assert reply.status == 431


async def test_silent_and_slow_clients_are_dropped_after_the_timeout(server: EndpointServer) -> None:
    for data in (b"", b"GET /metrics HTTP/1.1\r\nHost: no"):  # nothing, and a head that never ends
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        started = time.monotonic()
        writer.write(data)
        got = await asyncio.wait_for(reader.read(), 5)
        elapsed = time.monotonic() - started
        writer.close()
        assert got == b""  # closed without an answer
        assert TIMEOUT * 0.9 <= elapsed < TIMEOUT + 1.0


async def test_a_raising_handler_gives_500_and_the_server_keeps_serving(
    server: EndpointServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="kubespot.observability")
    reply = await get(server.port, "/boom")
    assert reply.status == 500
    assert any("/boom" in r.getMessage() and r.exc_info for r in caplog.records)
    again = await get(server.port, "/boom")
    assert again.status == 500
    assert (await get(server.port, "/metrics")).status == 200


async def test_a_hung_handler_is_cut_off_with_503() -> None:
    async def hang() -> tuple[int, str, bytes]:
        await asyncio.sleep(60)
        return 200, "text/plain", b""

    srv = EndpointServer(read_timeout=TIMEOUT, handler_timeout=0.1)
    srv.route("/hang", hang)
    await srv.start("127.0.0.1", 0)
    try:
        started = time.monotonic()
        reply = await get(srv.port, "/hang")
        assert reply.status == 503
        assert time.monotonic() - started < 2
    finally:
        await srv.close()


async def test_concurrent_requests(server: EndpointServer) -> None:
    replies = await asyncio.gather(*(get(server.port, p) for p in ["/metrics", "/healthz", "/nope"] * 10))
    assert sorted({r.status for r in replies}) == [200, 404]


async def test_close_ends_connections_in_progress_and_stops_listening() -> None:
    srv = EndpointServer(read_timeout=30)
    srv.route("/metrics", metrics_handler(Metrics()))
    await srv.start("127.0.0.1", 0)
    port = srv.port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)  # idle, would hold for 30 s
    await asyncio.sleep(0.05)
    await asyncio.wait_for(srv.close(), 2)
    assert await asyncio.wait_for(reader.read(), 2) == b""
    writer.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    with pytest.raises(RuntimeError):
        _ = srv.port


def test_route_paths_must_be_absolute() -> None:
    with pytest.raises(ValueError):
        EndpointServer().route("metrics", metrics_handler(Metrics()))
