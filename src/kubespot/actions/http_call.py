"""Outgoing HTTP calls made as steps of the timeline (mute the host in monitoring, open a ticket...).

Unlike notifications, a call is awaited: the timeline runs the calls of a stage (``pre-drain`` after
the fence, ``post-drain`` after the drain) and gets an ``ActionSummary`` for each, for the summary
and the metrics. A call is bounded by its own ``timeout`` per attempt, by its attempts, and by the
time left before the event's deadline (or a tighter ``budget`` the caller gives), and it never raises
into the caller: every failure is an outcome (``failure``, ``timeout``, ``skipped``). Only the
caller's own cancellation goes through.

Method, URL, header values and body are templates with the notification variables
(``kubespot.actions.templates.message_variables``: ``{{ .InstanceID }}``, ``{{ DeadlineUnix }}``...),
rendered in the sandbox; with a JSON Content-Type the body's printed values are JSON-escaped, and
the URL's values are percent-encoded for the path or the query (``kubespot.actions.url``), whose
scheme, host and port are literal (refused at start-up otherwise).
Header values read from files (``header_files``) are used as read. The URL and header values are
secrets: logs name the call, the status and the failure class, never them.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

import httpx2

from kubespot.config.http_calls import HttpCall
from kubespot.config.loader import InvalidSetting, Problem, SettingsError, check_each
from kubespot.config.named import check_url
from kubespot.config.notify import read_headers
from kubespot.model import Clock, InterruptionEvent
from kubespot.model.summary import ActionResult, ActionSummary, InterruptionSummary, Stage

from . import templates
from .notify import AttemptFailed, backoff_delay, is_json, new_client, send_once, settings_reason
from .url import ServerChanged, render_url

log = logging.getLogger("kubespot.actions.http_call")

CallStage = Literal["pre-drain", "post-drain"]


def _templates_of(call: HttpCall) -> list[tuple[str, str]]:
    """(text, field) of every template of ``call``: URL (when inline), header values, body."""
    out: list[tuple[str, str]] = []
    if call.url is not None:
        out.append((call.url, "url"))
    out += [(value, f"headers[{name}]") for name, value in call.headers]
    body = call.read_body()
    if body is not None:
        out.append(body)
    return out


def _check(call: HttpCall) -> None:
    for text, field in _templates_of(call):
        try:
            templates.check_template(text, field=field)
        except InvalidSetting as exc:
            raise InvalidSetting(f"{call.path}.{field}", exc.reason) from None


def check_calls(calls: Sequence[HttpCall]) -> None:
    """Read and compile every call's templates; ``SettingsError`` naming each one that fails."""
    check_each(calls, _check)


class HttpCallAction:
    """One configured call: renders the request, sends it within its bounds, says how it went."""

    def __init__(
        self,
        call: HttpCall,
        *,
        clock: Clock,
        transport: httpx2.AsyncBaseTransport | None = None,
        rng: Callable[[], float] | None = None,
        http: httpx2.AsyncClient | None = None,
    ) -> None:
        """``http``: a client to share (its owner closes it; it must use ``call.proxy``); else one
        of its own, closed by ``aclose()``."""
        _check(call)  # InvalidSetting/SettingsError: a bad template stops start-up
        self.call = call
        body = call.read_body()
        self._body = None if body is None else body[0]
        self._clock = clock
        self._rng = rng or random.random
        self._shown_url = f"<http call {call.name} url>"
        self._owns_http = http is None
        self._http = new_client(proxy=call.proxy, transport=transport) if http is None else http

    def __repr__(self) -> str:
        return f"HttpCallAction({self.call!r})"

    @property
    def name(self) -> str:
        """The action's name in metrics, logs and summaries: ``http:<name>``."""
        return self.call.action

    def wants(self, event: InterruptionEvent, stage: CallStage) -> bool:
        """Whether this call is made for ``event`` at ``stage``."""
        return self.call.wants(event.kind, stage)

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def run(
        self,
        event: InterruptionEvent,
        *,
        node_name: str,
        summary: InterruptionSummary | None = None,
        extra: Mapping[str, Any] | None = None,
        budget: float | None = None,
        dry_run: bool = False,
    ) -> ActionSummary:
        """Make the call; never raises (but for the caller's own cancellation).

        Bounded by ``min(time left before event.deadline, budget)`` seconds over all attempts, each
        attempt by the call's ``timeout``. ``summary`` feeds the template variables (the stage so far).
        """
        started = self._clock.now()
        t0 = self._clock.monotonic()
        extra_log = {"event_id": event.id, "action": self.name}
        limits = [x for x in (event.seconds_left(started), budget) if x is not None]
        limit = min(limits) if limits else None

        def done(result: ActionResult, detail: str, status: int | None = None) -> ActionSummary:
            duration = self._clock.monotonic() - t0
            level = (
                logging.INFO if result in (ActionResult.SUCCESS, ActionResult.DRY_RUN) else logging.WARNING
            )
            log.log(
                level,
                "%s for event %s: %s (%s, %.2fs)",
                self.name,
                event.id,
                result.value,
                detail,
                duration,
                extra=extra_log,
            )
            return ActionSummary(
                name=self.name,
                result=result,
                started=started,
                duration=duration,
                detail=detail,
                status=status,
            )

        if limit is not None and limit <= 0:
            return done(ActionResult.SKIPPED, "no time left before the deadline")
        try:
            request = self._render(event, node_name=node_name, summary=summary, extra=extra, now=started)
        except SettingsError as exc:
            return done(ActionResult.FAILURE, settings_reason(exc))
        except Exception as exc:
            # Template errors name the template construct, never a secret.
            return done(ActionResult.FAILURE, f"template failed to render: {type(exc).__name__}: {exc}")
        if dry_run:
            return done(ActionResult.DRY_RUN, f"would {self.call.method}")
        try:
            return await self._send(request, t0=t0, limit=limit, done=done)
        except Exception as exc:  # a bug here must cost this call, never the timeline
            return done(ActionResult.FAILURE, f"unexpected {type(exc).__name__}")

    def _render(
        self,
        event: InterruptionEvent,
        *,
        node_name: str,
        summary: InterruptionSummary | None,
        extra: Mapping[str, Any] | None,
        now: datetime,
    ) -> tuple[str, list[tuple[str, str]], bytes | None]:
        if summary is None:
            summary = InterruptionSummary.for_event(event, node=node_name, stage=Stage.STARTED)
        variables = templates.message_variables(
            event, node_name=node_name, summary=summary, now=now, extra=extra
        )
        template = self.call.read_url()  # SettingsError: a url_file unreadable or naming no host
        try:
            # Values percent-encoded by where they land; scheme and host literal (start-up check,
            # and at each read of a url_file), compared once more after rendering.
            url = render_url(template, variables)
        except ServerChanged as exc:
            raise SettingsError([Problem(f"{self.call.path}.url", "rendered", None, str(exc))]) from None
        if check_url(url):
            raise SettingsError([Problem(f"{self.call.path}.url", "rendered", None, "is not an http(s) URL")])
        rendered = tuple(
            (name, templates.render_template(value, variables)) for name, value in self.call.headers
        )
        headers = read_headers(self.call.path, rendered, self.call.header_files)
        body = None
        if self._body is not None:
            body = templates.render_template(self._body, variables, json_escape=is_json(headers)).encode()
        return url, headers, body

    async def _send(
        self,
        request: tuple[str, list[tuple[str, str]], bytes | None],
        *,
        t0: float,
        limit: float | None,
        done: Callable[[ActionResult, str, int | None], ActionSummary],
    ) -> ActionSummary:
        url, headers, body = request
        attempts = self.call.attempts
        last: AttemptFailed | None = None
        tried = 0
        for attempt in range(1, attempts + 1):
            left = None if limit is None else limit - (self._clock.monotonic() - t0)
            if left is not None and left <= 0:
                break
            per_attempt = self.call.timeout if left is None else min(self.call.timeout, left)
            tried = attempt
            try:
                status = await send_once(
                    self._http,
                    self.call.method,
                    url,
                    body=body,
                    headers=headers,
                    timeout=per_attempt,
                    shown_as=self._shown_url,
                )
            except AttemptFailed as exc:
                last = exc
                if not exc.retry or attempt == attempts:
                    break
                delay = backoff_delay(attempt, exc.retry_after, now=self._clock.now(), rng=self._rng)
                if limit is not None and delay >= limit - (self._clock.monotonic() - t0):
                    break  # waiting would leave no time for another attempt
                log.info(
                    "%s: attempt %d/%d failed: %s; retrying in %.2fs",
                    self.name,
                    attempt,
                    attempts,
                    exc.reason,
                    delay,
                    extra={"action": self.name},
                )
                await self._clock.sleep(delay)
                continue
            return done(ActionResult.SUCCESS, f"HTTP {status} (attempt {attempt}/{attempts})", status)
        if last is None:
            return done(ActionResult.TIMEOUT, "no time left before the deadline", None)
        result = ActionResult.TIMEOUT if last.timed_out else ActionResult.FAILURE
        cut = " (out of time before the deadline)" if tried < attempts and last.retry else ""
        return done(
            result, f"{last.reason} after {tried} attempt{'s' if tried > 1 else ''}{cut}", last.status
        )


class HttpCalls:
    """Every configured call; ``run_stage()`` makes those of a stage, concurrently, and reports them."""

    def __init__(
        self,
        calls: Sequence[HttpCall],
        *,
        clock: Clock,
        on_result: Callable[[str, str], None] | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        rng: Callable[[], float] | None = None,
        dry_run: bool = False,
    ) -> None:
        for c in calls:
            _check(c)  # every template first: a bad one raises before any client exists
        # One client per proxy, shared by the calls (each client costs ~0.2 MiB on every node).
        self._clients: dict[str | None, httpx2.AsyncClient] = {}
        for c in calls:
            if c.proxy not in self._clients:
                self._clients[c.proxy] = new_client(proxy=c.proxy, transport=transport)
        self._actions = [HttpCallAction(c, clock=clock, rng=rng, http=self._clients[c.proxy]) for c in calls]
        self._on_result = on_result
        self._dry_run = dry_run

    def __len__(self) -> int:
        return len(self._actions)

    def __repr__(self) -> str:
        return f"HttpCalls({[a.name for a in self._actions]!r})"

    def wanted(self, event: InterruptionEvent, stage: CallStage) -> list[HttpCallAction]:
        """The calls made for ``event`` at ``stage``."""
        return [a for a in self._actions if a.wants(event, stage)]

    async def run_stage(
        self,
        stage: CallStage,
        event: InterruptionEvent,
        *,
        node_name: str,
        summary: InterruptionSummary | None = None,
        extra: Mapping[str, Any] | None = None,
        budget: float | None = None,
    ) -> tuple[ActionSummary, ...]:
        """Make the calls of ``stage`` for ``event`` at once; their outcomes, in configuration order.

        Takes at most ``min(time left before the deadline, budget)`` seconds, and at most the
        slowest call's ``attempts x timeout`` plus backoff. Never raises but for cancellation.
        """
        wanted = self.wanted(event, stage)
        if not wanted:
            return ()
        outcomes = await asyncio.gather(
            *(
                a.run(
                    event,
                    node_name=node_name,
                    summary=summary,
                    extra=extra,
                    budget=budget,
                    dry_run=self._dry_run,
                )
                for a in wanted
            )
        )
        for outcome in outcomes:
            if self._on_result is not None:
                try:
                    self._on_result(outcome.name, outcome.result.value)
                except Exception as exc:  # a broken callback must not stop the timeline
                    log.error("%s result callback failed: %s", outcome.name, type(exc).__name__)
        return tuple(outcomes)

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self._clients.values()), return_exceptions=True)
