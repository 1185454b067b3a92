"""The webhook notifier over real HTTP: a local aiohttp receiver, and a forward proxy written here.

Each test drives ``WebhookNotifier`` as the agent will (``notify()`` from the loop, ``run()`` as a
task, ``aclose()`` at the end) and checks what the receiver saw, the ``on_result`` outcomes, the
backoff the clock was asked for, and that no log record carries the URL or a header value.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web

from kubespot.actions import notify as notify_module
from kubespot.actions.notify import WebhookNotifier
from kubespot.config.webhook import WebhookSettings
from kubespot.model import InterruptionEvent
from support.clocks import RecordingClock
from support.events import spot_itn
from support.http_receiver import ScriptedReceiver, assert_no_secret_logged, closed_port, serve, until
from support.notifiers import RunningNotifier, running

TOKEN = "T000/B000/XXXXsecretpathtoken"
HEADER_SECRET = "Bearer hdr-s3cret-value"
NOW = datetime(2026, 11, 20, 17, 2, 13, tzinfo=UTC)


# --- helpers ------------------------------------------------------------------------------------------


def event(n: int, description: str = "Spot ITN received") -> InterruptionEvent:
    return spot_itn(n, at=NOW, description=description)


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver(ScriptedReceiver):
    """A webhook endpoint: records requests, answers from a script (then 200), can hold answers."""

    requests: list[Seen] = field(default_factory=list)

    def url(self, path: str = TOKEN) -> str:
        return f"{self.base}/services/{path}"

    def record(self, request: web.Request, body: bytes) -> None:
        self.requests.append(Seen(request.path, {k.lower(): v for k, v in request.headers.items()}, body))


def receiver() -> AbstractAsyncContextManager[Receiver]:
    return serve(Receiver())


@dataclass
class ForwardProxy:
    """A minimal HTTP forward proxy: takes absolute-URI requests and relays them upstream."""

    port: int = 0
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            request_line, *header_lines = [line for line in head.split("\r\n") if line]
            method, target, _version = request_line.split(" ", 2)
            headers = dict(line.split(": ", 1) for line in header_lines)
            self.seen.append((method, target, headers))
            body = await reader.readexactly(
                int(headers.get("Content-Length", headers.get("content-length", 0)))
            )
            parts = urlsplit(target)  # absolute-form: what a client sends to a forward proxy
            up_reader, up_writer = await asyncio.open_connection(parts.hostname, parts.port)
            forwarded = [
                f"{k}: {v}" for k, v in headers.items() if not k.lower().startswith(("proxy-", "connection"))
            ]
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            lines = "".join(f"{line}\r\n" for line in forwarded)
            up_writer.write(
                f"{method} {path} HTTP/1.1\r\n{lines}Connection: close\r\n\r\n".encode("latin-1") + body
            )
            await up_writer.drain()
            answer = await up_reader.read()  # upstream closes after one answer
            up_writer.close()
            writer.write(answer)
            await writer.drain()
        finally:
            writer.close()


@asynccontextmanager
async def forward_proxy() -> AsyncIterator[ForwardProxy]:
    proxy = ForwardProxy()
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
    proxy.port = server.sockets[0].getsockname()[1]
    try:
        yield proxy
    finally:
        server.close()
        await server.wait_closed()


@asynccontextmanager
async def harness(
    settings: WebhookSettings, *, start: bool = True, **kw: Any
) -> AsyncIterator[RunningNotifier[WebhookNotifier]]:
    results: list[str] = []
    clock = RecordingClock()
    notifier = WebhookNotifier(settings, clock=clock, on_result=results.append, rng=lambda: 1.0, **kw)
    async with running(RunningNotifier(notifier, clock, results), start=start) as h:
        yield h


def settings(url: str | None = None, **kw: Any) -> WebhookSettings:
    base: dict[str, Any] = {
        "url": url,
        "headers": (("Content-type", "application/json"), ("Authorization", HEADER_SECRET)),
        "timeout": 2.0,
        "attempts": 3,
    }
    base.update(kw)
    return WebhookSettings(**base)


def assert_no_secrets(caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    assert_no_secret_logged(caplog, (TOKEN, HEADER_SECRET, "hdr-s3cret", *secrets))
    for rec in caplog.records:
        if rec.name == notify_module.log.name:
            assert getattr(rec, "event_id", None), f"log line without event id: {rec.getMessage()}"
            assert rec.event_id in rec.getMessage()  # type: ignore[attr-defined]


# --- delivery -----------------------------------------------------------------------------------------


async def test_body_and_headers_arrive(debug_logs: pytest.LogCaptureFixture) -> None:
    async with receiver() as rec, harness(settings(rec.url())) as h:
        h.notifier.notify(event(1, 'quote " and\nnewline'), node_name="node-a", extra={"InstanceType": "m5"})
        await until(lambda: h.results == ["success"])
    assert len(rec.requests) == 1
    seen = rec.requests[0]
    assert seen.path == f"/services/{TOKEN}"
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["authorization"] == HEADER_SECRET
    text = json.loads(seen.body)["text"]  # the default template, still valid JSON
    assert "EventID: spot-itn-0001 - Kind: SPOT_ITN - Instance: i-0001 - Node: node-a" in text
    assert 'Description: quote " and\nnewline - Start Time: 2026-11-20 17:04:13 +0000 UTC' in text
    # The HTTP library's own request line was logged, with the URL replaced.
    assert any(
        "HTTP Request" in r.getMessage() and "<webhook url>" in r.getMessage() for r in debug_logs.records
    )
    assert_no_secrets(debug_logs)


async def test_server_error_then_success_is_retried_once(debug_logs: pytest.LogCaptureFixture) -> None:
    async with receiver() as rec, harness(settings(rec.url())) as h:
        rec.script = [(500, {})]
        h.notifier.notify(event(1), node_name="n")
        await until(lambda: h.results == ["success"])
    assert len(rec.requests) == 2
    assert rec.requests[0].body == rec.requests[1].body
    # Full jitter with rng=1.0: the first backoff is the base.
    assert h.clock.sleeps == [notify_module.BACKOFF_BASE]
    assert "attempt 1/3 failed: HTTP 500" in debug_logs.text
    assert_no_secrets(debug_logs)


async def test_client_error_is_not_retried(debug_logs: pytest.LogCaptureFixture) -> None:
    async with receiver() as rec, harness(settings(rec.url())) as h:
        rec.script = [(400, {})]
        h.notifier.notify(event(1), node_name="n")
        await until(lambda: h.results == ["failure"])
        await asyncio.sleep(0.05)  # room for a wrong retry to show up
    assert len(rec.requests) == 1
    assert h.clock.sleeps == []
    assert "HTTP 400; not retrying" in debug_logs.text
    assert_no_secrets(debug_logs)


async def test_every_attempt_failing_reports_one_failure(debug_logs: pytest.LogCaptureFixture) -> None:
    async with receiver() as rec, harness(settings(rec.url(), attempts=3)) as h:
        rec.script = [(503, {}), (502, {}), (500, {}), (200, {})]
        h.notifier.notify(event(1), node_name="n")
        await until(lambda: h.results == ["failure"])
    assert len(rec.requests) == 3
    base = notify_module.BACKOFF_BASE
    assert h.clock.sleeps == [base, base * 2]  # exponential
    assert_no_secrets(debug_logs)


async def test_429_waits_for_retry_after_up_to_the_cap(debug_logs: pytest.LogCaptureFixture) -> None:
    async with receiver() as rec, harness(settings(rec.url())) as h:
        rec.script = [(429, {"Retry-After": "7"}), (429, {"Retry-After": "100000"})]
        h.notifier.notify(event(1), node_name="n")
        await until(lambda: h.results == ["success"])
    assert len(rec.requests) == 3
    assert h.clock.sleeps == [7.0, notify_module.RETRY_AFTER_CAP]
    assert_no_secrets(debug_logs)


async def test_transport_errors_are_retried_and_never_leak_the_url(
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/services/{TOKEN}"
    async with harness(settings(url, attempts=2)) as h:
        h.notifier.notify(event(1), node_name="n")
        await until(lambda: h.results == ["failure"])
    assert len(h.clock.sleeps) == 1
    assert "transport error (ConnectError)" in debug_logs.text
    assert_no_secrets(debug_logs, url)
    assert TOKEN not in repr(h.notifier)


# --- non-blocking, timeouts, queue --------------------------------------------------------------------


async def test_hung_receiver_does_not_block_notify_and_the_attempt_times_out(
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    async with receiver() as rec, harness(settings(rec.url(), timeout=0.3, attempts=1)) as h:
        rec.hold = asyncio.Event()
        h.notifier.notify(event(1), node_name="n")
        await until(lambda: len(rec.requests) == 1)  # the receiver has it and is not answering
        h.notifier.notify(event(2), node_name="n")
        # notify() came back while the receiver was still holding the first request unanswered.
        assert not rec.hold.is_set()
        assert rec.answered == 0
        assert h.notifier.queued == 1
        await until(lambda: h.results == ["failure"])  # the first attempt timed out...
        assert rec.answered == 0  # ...while the receiver was still holding it
        await until(lambda: len(rec.requests) == 2)
        rec.hold.set()
        await until(lambda: h.results == ["failure", "success"])
    assert "webhook for event spot-itn-0001 failed after 1 attempts: no answer within 0.3s" in debug_logs.text
    assert_no_secrets(debug_logs)


async def test_queue_overflow_drops_the_oldest(debug_logs: pytest.LogCaptureFixture) -> None:
    async with receiver() as rec, harness(settings(rec.url()), start=False, max_queue=2) as h:
        for n in (1, 2, 3):
            h.notifier.notify(event(n), node_name="n")
        assert h.results == ["dropped"]
        assert h.notifier.queued == 2
        h.start()
        await until(lambda: h.results == ["dropped", "success", "success"])
    sent = [json.loads(r.body)["text"] for r in rec.requests]
    assert ["spot-itn-0002" in sent[0], "spot-itn-0003" in sent[1]] == [True, True]
    assert "queue full (2): dropped the message for event spot-itn-0001" in debug_logs.text
    assert_no_secrets(debug_logs)


async def test_aclose_flushes_what_is_queued() -> None:
    async with receiver() as rec:
        results: list[str] = []
        notifier = WebhookNotifier(settings(rec.url()), clock=RecordingClock(), on_result=results.append)
        notifier.notify(event(1), node_name="n")
        notifier.notify(event(2), node_name="n")
        await notifier.aclose(timeout=2.0)  # no run() task: aclose sends them itself
        assert results == ["success", "success"]
        notifier.notify(event(3), node_name="n")  # after close: refused, not raised
        assert results == ["success", "success", "dropped"]
    assert len(rec.requests) == 2


async def test_aclose_gives_up_after_its_timeout() -> None:
    async with receiver() as rec:
        rec.hold = asyncio.Event()
        results: list[str] = []
        notifier = WebhookNotifier(
            settings(rec.url(), timeout=5.0), clock=RecordingClock(), on_result=results.append
        )
        task = asyncio.create_task(notifier.run())
        notifier.notify(event(1), node_name="n")
        notifier.notify(event(2), node_name="n")
        await until(lambda: len(rec.requests) == 1)
        await notifier.aclose(timeout=0.2)
        assert task.done()
        assert results == ["dropped", "dropped"]  # the one in flight and the one queued


# --- proxy, URL rotation, rendering errors ------------------------------------------------------------


async def test_requests_go_through_the_configured_proxy(debug_logs: pytest.LogCaptureFixture) -> None:
    async with receiver() as rec, forward_proxy() as proxy:
        proxy_url = f"http://proxyuser:proxy-pa55@127.0.0.1:{proxy.port}"
        async with harness(settings(rec.url(), proxy=proxy_url)) as h:
            h.notifier.notify(event(1), node_name="n")
            await until(lambda: h.results == ["success"])
    assert len(proxy.seen) == 1
    method, target, headers = proxy.seen[0]
    assert (method, target) == ("POST", rec.url())  # absolute-form: it really was a proxy request
    assert headers["Proxy-Authorization"].startswith("Basic ")
    assert [r.path for r in rec.requests] == [f"/services/{TOKEN}"]  # and it reached the receiver
    assert "proxy-authorization" not in rec.requests[0].headers
    assert_no_secrets(debug_logs, "proxy-pa55")


async def test_tcp_proxy_is_an_http_proxy_as_in_go() -> None:
    """NTH's flag help gives ``--webhook-proxy tcp://<host>:<port>``; Go's HTTP transport treats a
    proxy whose scheme is not https or socks5 as a plain HTTP proxy (net/http transport.go,
    dialConn/connectMethod), so tcp:// is http://. It once stopped the agent at start-up."""
    async with (
        receiver() as rec,
        forward_proxy() as proxy,
        harness(settings(rec.url(), proxy=f"tcp://127.0.0.1:{proxy.port}")) as h,
    ):
        h.notifier.notify(event(1), node_name="n")
        await until(lambda: h.results == ["success"])
    assert [(m, t) for m, t, _ in proxy.seen] == [("POST", rec.url())]
    assert len(rec.requests) == 1


@dataclass
class Socks5:
    port: int = 0
    #: (host, port) of every CONNECT relayed.
    targets: list[tuple[str, int]] = field(default_factory=list)


@asynccontextmanager
async def socks5_proxy() -> AsyncIterator[Socks5]:
    """A minimal SOCKS5 server (RFC 1928: no authentication, CONNECT)."""
    socks = Socks5()
    seen = socks.targets

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        version, methods = await reader.readexactly(2)
        await reader.readexactly(methods)
        writer.write(bytes([5, 0]))  # no authentication
        _, command, _, atyp = await reader.readexactly(4)
        if atyp == 1:
            host = socket.inet_ntoa(await reader.readexactly(4))
        else:
            host = (await reader.readexactly((await reader.readexactly(1))[0])).decode()
        port = int.from_bytes(await reader.readexactly(2), "big")
        assert (version, command) == (5, 1)
        seen.append((host, port))
        up_reader, up_writer = await asyncio.open_connection(host, port)
        writer.write(bytes([5, 0, 0, 1, 127, 0, 0, 1, 0, 0]))
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    socks.port = server.sockets[0].getsockname()[1]
    try:
        yield socks
    finally:
        server.close()


@pytest.mark.parametrize("scheme", ["socks5", "socks5h"])
async def test_socks5_proxy(scheme: str) -> None:
    """``socks5://`` (a proxy Go's transport supports, so NTH users may have one) once stopped the
    agent at start-up; it is now used, through httpx2's SOCKS support (socksio)."""
    async with (
        receiver() as rec,
        socks5_proxy() as socks,
        harness(settings(rec.url(), proxy=f"{scheme}://127.0.0.1:{socks.port}")) as h,
    ):
        h.notifier.notify(event(1), node_name="n")
        await until(lambda: h.results == ["success"])
    assert socks.targets == [("127.0.0.1", urlsplit(rec.url()).port)]
    assert len(rec.requests) == 1


async def test_no_proxy_means_direct_even_with_proxy_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with receiver() as rec, forward_proxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("ALL_PROXY", f"http://127.0.0.1:{proxy.port}")
        async with harness(settings(rec.url())) as h:
            h.notifier.notify(event(1), node_name="n")
            await until(lambda: h.results == ["success"])
    assert proxy.seen == []
    assert len(rec.requests) == 1


async def test_url_file_is_read_at_each_send(tmp_path: Path, debug_logs: pytest.LogCaptureFixture) -> None:
    url_file = tmp_path / "webhook-url"
    async with receiver() as rec:
        url_file.write_text(rec.url("first-" + TOKEN) + "\n")
        async with harness(settings(url_file=str(url_file))) as h:
            h.notifier.notify(event(1), node_name="n")
            await until(lambda: h.results == ["success"])
            url_file.write_text(rec.url("second-" + TOKEN))  # the Secret was rotated
            h.notifier.notify(event(2), node_name="n")
            await until(lambda: h.results == ["success", "success"])
            url_file.write_text("not a url")
            h.notifier.notify(event(3), node_name="n")
            await until(lambda: h.results == ["success", "success", "failure"])
    assert [r.path for r in rec.requests] == [f"/services/first-{TOKEN}", f"/services/second-{TOKEN}"]
    assert "does not hold an http(s) URL" in debug_logs.text
    assert_no_secrets(debug_logs, "not a url")


async def test_render_error_sends_the_default_message_and_is_logged(
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    # Passes the start-up check (no pods there, so the loop body never runs) but fails on a real
    # message whose Pods hold something that cannot be added to a number: NTH's message goes instead.
    template = '{"text": "{% for p in Pods %}{{ p + 1 }}{% endfor %}"}'
    async with receiver() as rec, harness(settings(rec.url(), template=template)) as h:
        h.notifier.notify(event(1), node_name="n", extra={"Pods": ["web-0"]})
        h.notifier.notify(event(2), node_name="n", extra={"Pods": []})
        await until(lambda: h.results == ["success", "success"])
    assert len(rec.requests) == 2
    assert json.loads(rec.requests[0].body)["text"].startswith(
        "[NTH][Instance Interruption] EventID: spot-itn-0001"
    )
    assert json.loads(rec.requests[1].body) == {"text": ""}
    record = next(r for r in debug_logs.records if "failed to render" in r.getMessage())
    assert record.event_id == "spot-itn-0001"  # type: ignore[attr-defined]
    assert_no_secrets(debug_logs)


async def test_unusable_template_is_logged_and_the_default_message_sent(
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    """Once an unusable template stopped the agent (exit 2, a crash loop on every node); now the
    construct is named in the log and NTH's default message is sent."""
    async with receiver() as rec, harness(settings(rec.url(), template='{{ template "x" . }}')) as h:
        h.notifier.notify(event(1), node_name="n")
        await until(lambda: h.results == ["success"])
    assert json.loads(rec.requests[0].body)["text"].startswith(
        "[NTH][Instance Interruption] EventID: spot-itn-0001"
    )
    (line,) = [r.getMessage() for r in debug_logs.records if "not usable" in r.getMessage()]
    assert "template: unsupported construct (line 1): {{template}}" in line
    assert "sending NTH's default message instead" in line


async def test_node_facts_are_read_once_per_event_and_fill_the_template(
    monkeypatch: pytest.MonkeyPatch, debug_logs: pytest.LogCaptureFixture
) -> None:
    """The labels and pods are read once per event, when its first message is queued (NTH reads them
    once, before the drain), and every message of the event uses them; a read that does not finish
    in time leaves them empty rather than holding the message."""
    from kubespot.model.summary import Stage

    calls: list[str] = []
    slow = asyncio.Event()

    async def facts(ev: InterruptionEvent, node: str) -> dict[str, Any]:
        calls.append(ev.id)
        if ev.id == "spot-itn-0002":
            await slow.wait()
        return {"NodeLabels": {"team": "search"}, "Pods": ["web-0", "web-1"], "InstanceType": "m5.large"}

    monkeypatch.setattr(notify_module, "CONTEXT_TIMEOUT", 0.2)
    template = '{"text": "{{ .Stage }} {{ .NodeLabels.team }} {{ join "," .Pods }} {{ .InstanceType }}"}'
    stages = frozenset({Stage.STARTED, Stage.FINISHED})
    async with (
        receiver() as rec,
        harness(settings(rec.url(), template=template, stages=stages), context=facts) as h,
    ):
        h.notifier.notify(event(1), node_name="n")
        h.notifier.notify(event(1), node_name="n", stage=Stage.FINISHED)
        await until(lambda: h.results == ["success", "success"])
        h.notifier.notify(event(2), node_name="n")
        await until(lambda: len(h.results) == 3)
        slow.set()
    texts = [json.loads(r.body)["text"] for r in rec.requests]
    assert texts == [
        "started search web-0,web-1 m5.large",
        "finished search web-0,web-1 m5.large",
        "started <no value>  ",  # not read in time: empty labels and pods, no instance type
    ]
    assert calls == ["spot-itn-0001", "spot-itn-0002"]
    assert any("node facts for event spot-itn-0002 not read" in r.getMessage() for r in debug_logs.records)


async def test_notify_never_raises_even_when_the_callback_does() -> None:
    def broken(_: str) -> None:
        raise RuntimeError("callback bug")

    async with receiver() as rec:
        notifier = WebhookNotifier(settings(rec.url()), clock=RecordingClock(), on_result=broken, max_queue=1)
        notifier.notify(event(1), node_name="n")
        notifier.notify(event(2), node_name="n")  # overflow -> broken callback, swallowed
        notifier.notify(object(), node_name="n")  # type: ignore[arg-type]  # not even an event
        await notifier.aclose(timeout=2.0)
    assert len(rec.requests) == 1


async def test_unusable_url_gives_up_at_once(debug_logs: pytest.LogCaptureFixture) -> None:
    async with harness(settings(f"http://[::1/{TOKEN}")) as h:
        h.notifier.notify(event(1), node_name="n")
        await until(lambda: h.results == ["failure"])
    assert h.clock.sleeps == []
    assert "unusable URL (InvalidURL); not retrying" in debug_logs.text
    assert_no_secrets(debug_logs)
