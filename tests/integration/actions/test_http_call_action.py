"""The generic HTTP action over real HTTP: rendering, outcomes, retries, bounds, secrets.

A call is a step of the timeline, so besides what it sends, what matters is how long it can take
(its timeout per attempt, its attempts, the time left before the deadline, the caller's budget) and
that it always comes back with an outcome instead of an exception.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
from aiohttp import web

from kubespot.actions.http_call import HttpCallAction, HttpCalls
from kubespot.config.http_calls import HttpCall
from kubespot.model import InterruptionEvent, Kind
from kubespot.model.summary import ActionResult, ActionSummary, InterruptionSummary, Stage
from support.clocks import RecordingClock
from support.events import imds_event
from support.http_receiver import ScriptedReceiver, assert_no_secret_logged, closed_port, serve, until

API_KEY = "dd-api-s3cret-key"
QUERY_KEY = "qk-s3cret-in-url"


def event(*, seconds_left: float | None = 120.0, kind: Kind = Kind.SPOT_INTERRUPTION) -> InterruptionEvent:
    return imds_event(
        kind,
        "spot-itn-0001",
        datetime.now(tz=UTC),
        deadline_in=seconds_left,
        description='Spot "ITN"',
        instance_id="i-0abc",
    )


@dataclass
class Seen:
    method: str
    path_qs: str
    headers: dict[str, str]
    body: bytes
    raw_path: str = ""


@dataclass
class Receiver(ScriptedReceiver):
    text: ClassVar[str] = "{}"

    requests: list[Seen] = field(default_factory=list)

    def record(self, request: web.Request, body: bytes) -> None:
        self.requests.append(
            Seen(
                request.method,
                request.path_qs,
                {k.lower(): v for k, v in request.headers.items()},
                body,
                request.raw_path,
            )
        )


def receiver() -> AbstractAsyncContextManager[Receiver]:
    return serve(Receiver())


@asynccontextmanager
async def action(call: HttpCall, clock: RecordingClock | None = None) -> AsyncIterator[HttpCallAction]:
    a = HttpCallAction(call, clock=clock or RecordingClock(), rng=lambda: 1.0)
    try:
        yield a
    finally:
        await a.aclose()


def call(url: str, **kw: Any) -> HttpCall:
    return HttpCall(name=kw.pop("name", "mute"), url=url, **kw)


def assert_no_secrets(caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    assert_no_secret_logged(caplog, (API_KEY, QUERY_KEY, "s3cret", *secrets))


# --- what is sent, and the outcome ----------------------------------------------------------------------


async def test_a_datadog_style_mute_is_rendered_and_succeeds(
    tmp_path: Path, debug_logs: pytest.LogCaptureFixture
) -> None:
    key_file = tmp_path / "api-key"
    key_file.write_text(API_KEY + "\n")
    body = (
        '{"data": {"type": "downtime", "attributes": {"scope": "host:{{ .InstanceID }}", '
        '"message": "{{ .Description }} on {{ .NodeName }}", '
        '"schedule": {"end": "{{ add (or .DeadlineUnix .NowUnix) 900 | rfc3339 }}"}}}}'
    )
    async with receiver() as rec:
        mute = call(
            f"{rec.base}/api/v2/downtime?key={QUERY_KEY}&host={{{{ .InstanceID }}}}",
            method="POST",
            headers=(("X-Node", "{{ .NodeName }}"),),
            header_files=(("DD-API-KEY", str(key_file)),),
            body=body,
        )
        ev = event()
        async with action(mute) as a:
            outcome = await a.run(ev, node_name="node-a")
    assert outcome.result is ActionResult.SUCCESS
    assert (outcome.name, outcome.status, outcome.detail) == ("http:mute", 200, "HTTP 200 (attempt 1/2)")
    assert outcome.duration is not None and outcome.duration < 2.0
    (seen,) = rec.requests
    assert seen.method == "POST"
    assert seen.path_qs == f"/api/v2/downtime?key={QUERY_KEY}&host=i-0abc"
    assert seen.headers["dd-api-key"] == API_KEY
    assert seen.headers["x-node"] == "node-a"
    assert seen.headers["content-type"] == "application/json"
    sent = json.loads(seen.body)  # the quotes in the description were JSON-escaped
    attributes = sent["data"]["attributes"]
    assert attributes["scope"] == "host:i-0abc"
    assert attributes["message"] == 'Spot "ITN" on node-a'
    assert ev.deadline is not None
    end = datetime.fromisoformat(attributes["schedule"]["end"].replace("Z", "+00:00"))
    assert abs((end - ev.deadline).total_seconds() - 900) < 1
    assert_no_secrets(debug_logs)


async def test_server_errors_and_429_are_retried(debug_logs: pytest.LogCaptureFixture) -> None:
    async with receiver() as rec:
        rec.script = [(503, {}), (429, {"Retry-After": "2"})]
        clock = RecordingClock()
        async with action(call(rec.base + "/x", attempts=3), clock) as a:
            outcome = await a.run(event(), node_name="n")
    assert (outcome.result, outcome.status, outcome.detail) == (
        ActionResult.SUCCESS,
        200,
        "HTTP 200 (attempt 3/3)",
    )
    assert clock.sleeps == [0.5, 2.0]  # full jitter at rng=1.0, then the server's Retry-After
    assert_no_secrets(debug_logs)


async def test_a_client_error_is_a_failure_with_its_status() -> None:
    async with receiver() as rec:
        rec.script = [(403, {})]
        async with action(call(rec.base + "/x", attempts=3)) as a:
            outcome = await a.run(event(), node_name="n")
    assert (outcome.result, outcome.status, outcome.detail) == (
        ActionResult.FAILURE,
        403,
        "HTTP 403 after 1 attempt",
    )
    assert len(rec.requests) == 1


async def test_every_attempt_failing_is_a_failure() -> None:
    async with receiver() as rec:
        rec.script = [(500, {}), (502, {})]
        async with action(call(rec.base + "/x")) as a:
            outcome = await a.run(event(), node_name="n")
    assert (outcome.result, outcome.status, outcome.detail) == (
        ActionResult.FAILURE,
        502,
        "HTTP 502 after 2 attempts",
    )


# --- bounds ---------------------------------------------------------------------------------------------


async def test_a_hung_endpoint_costs_the_timeout_per_attempt() -> None:
    async with receiver() as rec:
        rec.hold = asyncio.Event()
        async with action(call(rec.base + "/x", timeout=0.3, attempts=2)) as a:
            began = time.monotonic()
            outcome = await a.run(event(), node_name="n")
            took = time.monotonic() - began
    assert outcome.result is ActionResult.TIMEOUT
    assert outcome.detail == "no answer within 0.3s after 2 attempts"
    assert 0.55 < took < 1.5
    assert len(rec.requests) == 2


@pytest.mark.parametrize(("seconds_left", "budget"), [(120.0, 0.4), (0.4, None)])
async def test_the_deadline_or_the_budget_bound_the_whole_call(
    seconds_left: float, budget: float | None
) -> None:
    async with receiver() as rec:
        rec.hold = asyncio.Event()
        async with action(call(rec.base + "/x", timeout=5.0, attempts=3)) as a:
            began = time.monotonic()
            outcome = await a.run(event(seconds_left=seconds_left), node_name="n", budget=budget)
            took = time.monotonic() - began
    assert outcome.result is ActionResult.TIMEOUT
    assert took < 1.0  # not 3 x 5 s
    assert "out of time before the deadline" in outcome.detail
    assert len(rec.requests) == 1


async def test_no_time_left_means_skipped_without_a_request() -> None:
    async with receiver() as rec, action(call(rec.base + "/x")) as a:
        outcome = await a.run(event(seconds_left=-1.0), node_name="n")
        zero_budget = await a.run(event(), node_name="n", budget=0.0)
    assert outcome.result is ActionResult.SKIPPED is zero_budget.result
    assert outcome.detail == "no time left before the deadline"
    assert rec.requests == []


# --- never raises ---------------------------------------------------------------------------------------


async def test_failures_are_outcomes_never_exceptions(
    tmp_path: Path, debug_logs: pytest.LogCaptureFixture
) -> None:
    dead = f"http://127.0.0.1:{closed_port()}/x?key={QUERY_KEY}"
    # Passes the start-up check (no Pods there) but fails on a real event whose Pods are names.
    render = call(dead, body='{"n": "{% for p in Pods %}{{ p + 1 }}{% endfor %}"}')
    url_file = HttpCall(name="f", url_file=str(tmp_path / "missing"))
    outcomes: list[ActionSummary] = []
    for c, extra in ((call(dead), None), (render, {"Pods": ["web-0"]}), (url_file, None)):
        async with action(c) as a:
            outcomes.append(await a.run(event(), node_name="n", extra=extra))
    assert [o.result for o in outcomes] == [ActionResult.FAILURE] * 3
    assert outcomes[0].detail == "transport error (ConnectError) after 2 attempts"
    assert outcomes[1].detail.startswith("template failed to render: TypeError")
    assert outcomes[2].detail == "http_calls.f.url_file: cannot read: No such file or directory"
    assert_no_secrets(debug_logs, dead)


async def test_cancellation_still_reaches_the_caller() -> None:
    async with receiver() as rec:
        rec.hold = asyncio.Event()
        async with action(call(rec.base + "/x", timeout=5.0)) as a:
            task = asyncio.create_task(a.run(event(), node_name="n"))
            await until(lambda: bool(rec.requests))
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task


# --- several calls --------------------------------------------------------------------------------------


async def test_a_stage_runs_its_calls_side_by_side_and_reports_them() -> None:
    async with receiver() as slow, receiver() as fast:
        slow.hold = asyncio.Event()
        calls = [
            call(slow.base + "/slow", name="slow", timeout=0.4, attempts=1),
            call(fast.base + "/fast", name="fast", method="DELETE"),
            call(fast.base + "/after", name="after", stage="post-drain"),
            call(
                fast.base + "/rebalance", name="rebalance", kinds=frozenset({Kind.REBALANCE_RECOMMENDATION})
            ),
        ]
        reported: list[tuple[str, str]] = []
        actions = HttpCalls(calls, clock=RecordingClock(), on_result=lambda *a: reported.append(a))
        summary = InterruptionSummary.for_event(event(), node="n", stage=Stage.STARTED)
        try:
            began = time.monotonic()
            outcomes = await actions.run_stage("pre-drain", event(), node_name="n", summary=summary)
            took = time.monotonic() - began
            post = await actions.run_stage("post-drain", event(), node_name="n")
        finally:
            await actions.aclose()
    assert [(o.name, o.result) for o in outcomes] == [
        ("http:slow", ActionResult.TIMEOUT),
        ("http:fast", ActionResult.SUCCESS),
    ]
    assert took < 0.9  # the fast call did not wait for the slow one, nor the slow one for it
    assert [r.method for r in fast.requests] == ["DELETE", "POST"]
    assert [(o.name, o.result) for o in post] == [("http:after", ActionResult.SUCCESS)]
    assert reported == [("http:slow", "timeout"), ("http:fast", "success"), ("http:after", "success")]


async def test_dry_run_sends_nothing() -> None:
    async with receiver() as rec:
        actions = HttpCalls([call(rec.base + "/x")], clock=RecordingClock(), dry_run=True)
        try:
            (outcome,) = await actions.run_stage("pre-drain", event(), node_name="n")
        finally:
            await actions.aclose()
    assert outcome.result is ActionResult.DRY_RUN and rec.requests == []


# --- the URL's values (issue 10: a value is data, never URL structure) ----------------------------------


async def test_url_values_are_percent_encoded_for_the_path_or_the_query() -> None:
    """A node name (or any variable) with URL delimiters stays one path segment or one query value:
    it cannot add a path, a parameter or a fragment (RFC 3986 sections 3.3 and 3.4)."""
    name = "a/../admin?x=1&y=2#frag %"
    async with receiver() as rec:
        mute = call(f"{rec.base}/hosts/{{{{ .NodeName }}}}/mute?node={{{{ .NodeName }}}}&k=v", method="GET")
        async with action(mute) as a:
            outcome = await a.run(event(), node_name=name)
        # A value that makes a whole segment ".." is refused, not sent encoded: a server or proxy may
        # decode %2E before removing dot segments (RFC 3986 sections 6.2.2.2 and 5.2.4).
        dots = call(f"{rec.base}/hosts/{{{{ .NodeName }}}}/mute", method="GET", name="dots")
        async with action(dots) as a:
            assert (await a.run(event(), node_name="..")).result is not ActionResult.SUCCESS
    assert outcome.result is ActionResult.SUCCESS
    (first,) = rec.requests
    assert first.raw_path == (
        "/hosts/a%2F..%2Fadmin%3Fx%3D1%26y%3D2%23frag%20%25/mute?node=a/../admin?x%3D1%26y%3D2%23frag%20%25&k=v"
    )
