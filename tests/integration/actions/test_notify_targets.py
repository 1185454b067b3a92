"""Several notification targets over real HTTP: formats, stages, isolation, retries, overflow, secrets.

Each receiver is a local aiohttp server; the notifier runs as the agent runs it (``notify()`` from
the loop, ``run()`` as a task, ``aclose()`` at the end). The point of most tests is isolation: a
hung or failing endpoint costs its own queue its own timeout, never ``notify()`` or another target.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kubespot.actions import notify as notify_module
from kubespot.actions.notify import Notifier
from kubespot.config.notify import NotifyTarget
from kubespot.model import InterruptionEvent
from kubespot.model.summary import ActionResult, ActionSummary, InterruptionSummary, PodCounts, Stage
from support.clocks import RecordingClock
from support.events import spot_itn
from support.http_receiver import ScriptedReceiver, assert_no_secret_logged, serve, until
from support.notifiers import RunningNotifier, running

TOKEN = "T000/B000/XXXXtargetsecrettoken"
HEADER_SECRET = "Bearer file-s3cret-value"
NOW = datetime(2026, 11, 20, 17, 2, 13, tzinfo=UTC)


def event(n: int) -> InterruptionEvent:
    return spot_itn(n, at=NOW)


@dataclass
class Receiver(ScriptedReceiver):
    """An endpoint: records requests, answers from a script (then 200), can hold every answer."""

    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)

    def url(self, name: str) -> str:
        return f"{self.base}/hooks/{name}/{TOKEN}"

    def bodies(self) -> list[Any]:
        return [json.loads(body) for _, _, body in self.requests]

    def record(self, request: web.Request, body: bytes) -> None:
        self.requests.append((request.path, {k.lower(): v for k, v in request.headers.items()}, body))


def receiver() -> AbstractAsyncContextManager[Receiver]:
    return serve(Receiver())


@dataclass
class Harness(RunningNotifier[Notifier]):
    #: (target, event id, result) of every delivery.
    deliveries: list[tuple[str, str, str]] = field(default_factory=list)

    def of(self, target: str) -> list[str]:
        return [r for t, _, r in self.deliveries if t == target]


@asynccontextmanager
async def harness(targets: list[NotifyTarget], *, start: bool = True, **kw: Any) -> AsyncIterator[Harness]:
    clock = RecordingClock()
    deliveries: list[tuple[str, str, str]] = []
    results: list[str] = []
    notifier = Notifier(
        targets,
        clock=clock,
        on_result=results.append,
        on_delivery=lambda *a: deliveries.append(a),
        rng=lambda: 1.0,
        **kw,
    )
    async with running(Harness(notifier, clock, results, deliveries=deliveries), start=start) as h:
        yield h


def target(name: str, url: str | None, **kw: Any) -> NotifyTarget:
    return NotifyTarget(name=name, url=url, **{"timeout": 2.0, "attempts": 3, **kw})


def assert_no_secrets(caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    assert_no_secret_logged(caplog, (TOKEN, HEADER_SECRET, "s3cret", *secrets))
    for rec in caplog.records:
        if rec.name == notify_module.log.name:
            assert rec.event_id in rec.getMessage()  # type: ignore[attr-defined]


def finished_summary(ev: InterruptionEvent) -> InterruptionSummary:
    return InterruptionSummary.for_event(
        ev,
        node="node-a",
        stage=Stage.FINISHED,
        started=NOW + timedelta(seconds=1),
        finished=NOW + timedelta(seconds=60),
        actions=(ActionSummary(name="drain", result=ActionResult.SUCCESS, duration=58.0),),
        pods=PodCounts(evicted=4, skipped=2),
    )


# --- formats and stages over HTTP ---------------------------------------------------------------------


async def test_humans_and_automation_each_get_their_format(
    tmp_path: Path, debug_logs: pytest.LogCaptureFixture
) -> None:
    url_file = tmp_path / "url"
    auth = tmp_path / "auth"
    auth.write_text(HEADER_SECRET + "\n")
    async with receiver() as chat, receiver() as robot:
        url_file.write_text(robot.url("robot") + "\n")
        targets = [
            target(
                "chat", chat.url("chat"), format="slack", stages=frozenset({Stage.STARTED, Stage.FINISHED})
            ),
            target("robot", None, url_file=str(url_file), header_files=(("Authorization", str(auth)),)),
        ]
        async with harness(targets) as h:
            ev = event(1)
            h.notifier.notify(ev, node_name="node-a")
            h.notifier.notify(ev, node_name="node-a", stage=Stage.FINISHED, summary=finished_summary(ev))
            h.notifier.notify(ev, node_name="node-a", stage=Stage.FAILED)  # robot only
            await until(lambda: len(h.deliveries) == 5)
    assert sorted(h.deliveries) == [
        ("chat", "finished", "success"),
        ("chat", "started", "success"),
        ("robot", "failed", "success"),
        ("robot", "finished", "success"),
        ("robot", "started", "success"),
    ]
    started, finished = chat.bodies()
    assert started["blocks"][0]["text"]["text"] == "Spot interruption on node-a: handling started"
    assert "4 evicted, 2 skipped" in json.dumps(finished["blocks"])
    robot_bodies = robot.bodies()
    assert [b["stage"] for b in robot_bodies] == ["started", "finished", "failed"]
    assert robot_bodies[1]["summary"]["pods"]["evicted"] == 4
    assert all(h["authorization"] == HEADER_SECRET for _, h, _ in robot.requests)
    assert all(h["content-type"] == "application/json" for _, h, _ in robot.requests + chat.requests)
    assert any("<notification robot url>" in r.getMessage() for r in debug_logs.records)
    assert_no_secrets(debug_logs, str(robot.url("robot")))


# --- isolation ------------------------------------------------------------------------------------------


async def test_a_hung_target_never_delays_notify_or_another_target(
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    async with receiver() as hung, receiver() as fine:
        hung.hold = asyncio.Event()
        targets = [
            target("hung", hung.url("hung"), timeout=0.5, attempts=1),
            target("fine", fine.url("fine")),
        ]
        async with harness(targets) as h:
            h.notifier.notify(event(1), node_name="n")
            await until(lambda: len(hung.requests) == 1)  # accepted, never answered
            began = time.monotonic()
            for n in range(2, 12):
                h.notifier.notify(event(n), node_name="n")
            assert time.monotonic() - began < 0.05  # notify() returned at once, ten times
            # The other target got all eleven while the first is still stuck on its first message.
            await until(lambda: h.of("fine") == ["success"] * 11, within=2.0)
            assert h.of("hung") == []
            await until(lambda: h.of("hung")[:1] == ["failure"], within=2.0)  # its own timeout only
    assert "notification hung for event spot-itn-0001 failed after 1 attempts: no answer within 0.5s" in (
        debug_logs.text
    )
    assert_no_secrets(debug_logs)


async def test_retries_with_backoff_on_500_and_429_per_target(debug_logs: pytest.LogCaptureFixture) -> None:
    async with receiver() as flaky, receiver() as limited:
        flaky.script = [(500, {}), (503, {})]
        limited.script = [(429, {"Retry-After": "3"})]
        targets = [target("flaky", flaky.url("flaky")), target("limited", limited.url("limited"))]
        async with harness(targets) as h:
            h.notifier.notify(event(1), node_name="n")
            await until(lambda: len(h.deliveries) == 2)
    assert sorted(h.deliveries) == [("flaky", "started", "success"), ("limited", "started", "success")]
    assert (len(flaky.requests), len(limited.requests)) == (3, 2)
    base = notify_module.BACKOFF_BASE
    assert sorted(h.clock.sleeps) == [base, base * 2, 3.0]  # exponential, and the server's Retry-After
    assert "notification flaky for event spot-itn-0001: attempt 1/3 failed: HTTP 500" in debug_logs.text
    assert_no_secrets(debug_logs)


async def test_a_client_error_gives_up_at_once(debug_logs: pytest.LogCaptureFixture) -> None:
    async with receiver() as rec:
        rec.script = [(404, {})]
        async with harness([target("gone", rec.url("gone"))]) as h:
            h.notifier.notify(event(1), node_name="n", stage=Stage.FAILED)
            await until(lambda: h.deliveries == [("gone", "failed", "failure")])
    assert len(rec.requests) == 1 and h.clock.sleeps == []
    assert (
        "notification gone (failed) for event spot-itn-0001 failed on attempt 1/3: HTTP 404"
        in debug_logs.text
    )


async def test_queue_overflow_is_counted_as_dropped_per_target(debug_logs: pytest.LogCaptureFixture) -> None:
    async with receiver() as rec:
        targets = [
            target("busy", rec.url("busy")),
            target("quiet", rec.url("quiet"), stages=frozenset({Stage.FAILED})),
        ]
        async with harness(targets, start=False, max_queue=2) as h:
            for n in (1, 2, 3, 4):
                h.notifier.notify(event(n), node_name="n")
            assert h.of("busy") == ["dropped", "dropped"]  # the two oldest, at once
            h.notifier.notify(event(5), node_name="n", stage=Stage.FAILED)
            assert h.of("busy") == ["dropped"] * 3
            assert h.of("quiet") == []  # its own queue: the busy one's overflow is not its loss
            assert h.notifier.queued == 3
            h.start()
            await until(lambda: len(h.deliveries) == 6)
    assert h.of("busy") == ["dropped"] * 3 + ["success"] * 2
    assert h.of("quiet") == ["success"]
    assert h.results.count("dropped") == 3
    sent = sorted(
        (p.split("/")[2], b["event"]["id"], b["stage"])
        for (p, _, _), b in zip(rec.requests, rec.bodies(), strict=True)
    )
    assert sent == [
        ("busy", "spot-itn-0004", "started"),
        ("busy", "spot-itn-0005", "failed"),
        ("quiet", "spot-itn-0005", "failed"),
    ]
    assert "notification busy queue full (2): dropped the message for event spot-itn-0001" in debug_logs.text


async def test_shutdown_flushes_every_target_within_one_budget() -> None:
    async with receiver() as a, receiver() as b:
        a.hold = asyncio.Event()
        b.hold = asyncio.Event()
        targets = [target("a", a.url("a"), timeout=5.0), target("b", b.url("b"), timeout=5.0)]
        async with harness(targets) as h:
            h.notifier.notify(event(1), node_name="n")
            await until(lambda: len(a.requests) == len(b.requests) == 1)
            began = time.monotonic()
            await h.notifier.aclose(timeout=0.3)
            took = time.monotonic() - began
            assert h.task is not None and h.task.done()
    assert took < 0.6  # the targets flushed side by side, not one after the other
    assert sorted(h.deliveries) == [("a", "started", "dropped"), ("b", "started", "dropped")]


async def test_file_backed_header_is_reread_at_each_send(
    tmp_path: Path, debug_logs: pytest.LogCaptureFixture
) -> None:
    auth = tmp_path / "auth"
    auth.write_text("Bearer s3cret-one")
    async with (
        receiver() as rec,
        harness([target("x", rec.url("x"), header_files=(("Authorization", str(auth)),))]) as h,
    ):
        h.notifier.notify(event(1), node_name="n")
        await until(lambda: h.of("x") == ["success"])
        auth.write_text("Bearer s3cret-two")  # the Secret was rotated
        h.notifier.notify(event(2), node_name="n")
        await until(lambda: h.of("x") == ["success", "success"])
        auth.unlink()
        h.notifier.notify(event(3), node_name="n")
        await until(lambda: h.of("x") == ["success", "success", "failure"])
    assert [hdr["authorization"] for _, hdr, _ in rec.requests] == ["Bearer s3cret-one", "Bearer s3cret-two"]
    assert "notify.x.header_files: cannot read" in debug_logs.text
    assert_no_secrets(debug_logs)
