"""Notifications: messages about each interruption to Slack, Teams, Chime or any HTTP endpoint.

This module owns delivery. ``notify()`` never blocks and never raises, so a dead endpoint can never
delay a drain: it captures what the message will say and puts it on the queue of each target that
wants it (by stage, started/finished/failed, and by event kind). Each target has its own bounded
queue, HTTP client and background sender, so a hung endpoint holds up only its own messages, never
another target's. A sender renders each message at send time (the target's template for the kind and
stage, else its built-in format: ``kubespot.actions.templates``) and POSTs it with retries;
``aclose()`` flushes what is queued at shutdown.

URLs are credentials (a Slack webhook URL *is* the token) and header values may be too: none appears
in any log line, exception or repr here. URLs and file-backed headers are read at each send, so a
rotated Secret takes effect without a restart; failures are logged by exception class or status code
only, because httpx's exception strings and response reprs carry the URL; and the HTTP library's own
request log line gets the URL replaced while one of our requests is being sent. The same plumbing
serves the outgoing HTTP calls of ``kubespot.actions.http_call``.

Delivery: ``attempts`` tries, each within ``timeout``; 5xx, 429 and transport errors are retried
after an exponential backoff with full jitter (or the server's ``Retry-After``, up to a cap); any
other non-2xx answer gives up at once. Each message ends, per target, in exactly one result:
``"success"``, ``"failure"`` or ``"dropped"`` (queue overflow, shutdown), reported to ``on_result``
(the result) and ``on_delivery`` (target, stage, result), and logged: the metrics and the logs are
the record when a message cannot be delivered.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import logging
import random
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import httpx2

from kubespot.config.loader import SettingsError, check_each
from kubespot.config.named import proxy_url
from kubespot.config.notify import WEBHOOK_TARGET, NotifyTarget, webhook_target
from kubespot.config.webhook import DEFAULT_TEMPLATE, WebhookSettings
from kubespot.model import Clock, InterruptionEvent, Kind
from kubespot.model.backoff import full_jitter
from kubespot.model.summary import InterruptionSummary, Stage

from . import templates

log = logging.getLogger("kubespot.actions.notify")

Result = Literal["success", "failure", "dropped"]

#: Backoff between attempts: full jitter over min(cap, base * 2^(n-1)) seconds. Not settings: with
#: three attempts a webhook is given up within seconds, which is what a notification is worth.
BACKOFF_BASE = 0.5
BACKOFF_CAP = 8.0
#: A server's Retry-After is honoured up to this; longer and the message would be stale anyway.
RETRY_AFTER_CAP = 30.0

#: While one of our requests is sent: what the HTTP library's log line shows instead of its URL.
_sending: contextvars.ContextVar[str | None] = contextvars.ContextVar("kubespot_sending", default=None)


class _RedactUrl(logging.Filter):
    """Replaces the URL in httpx2's ``HTTP Request: POST <url> ...`` line for our requests.

    Installed on the ``httpx2`` logger (that line is logged at INFO by the client itself, so it
    cannot be avoided by how we call it); other users of httpx2 (the IMDS client) are untouched.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        shown = _sending.get()
        if shown is not None and isinstance(record.args, tuple):
            record.args = tuple(shown if isinstance(a, httpx2.URL) else a for a in record.args)
        return True


def install_log_filter() -> None:
    """Make sure the URL redaction of httpx2's request log line is in place (idempotent)."""
    target = logging.getLogger("httpx2")
    if not any(isinstance(f, _RedactUrl) for f in target.filters):
        target.addFilter(_RedactUrl())


# --- one HTTP attempt (shared with kubespot.actions.http_call) -----------------------------------------


class AttemptFailed(Exception):
    """One attempt failed; ``reason`` is safe to log (never a URL or a header value).

    ``retry``: another attempt may succeed (5xx, 429, transport error, timeout). ``status``: the
    HTTP status, when there was an answer. ``timed_out``: no answer within the time allowed.
    """

    def __init__(
        self,
        reason: str,
        *,
        retry: bool,
        status: int | None = None,
        retry_after: str | None = None,
        timed_out: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry
        self.status = status
        self.retry_after = retry_after
        self.timed_out = timed_out


def new_client(*, proxy: str | None, transport: httpx2.AsyncBaseTransport | None) -> httpx2.AsyncClient:
    """An HTTP client for outgoing notifications or calls (timeouts are given per request)."""
    install_log_filter()
    return httpx2.AsyncClient(
        transport=transport,
        # tcp:// (NTH's example) is an HTTP proxy; socks5:// uses socksio, a dependency for this.
        proxy=proxy_url(proxy),
        # Only the configured proxy applies: an HTTP(S)_PROXY or .netrc in the pod's environment must
        # not reroute or add credentials to a request (the reference handler ignores them too).
        trust_env=False,
        # A redirect could send the body (and the Authorization header) somewhere unconfigured.
        follow_redirects=False,
    )


async def send_once(
    client: httpx2.AsyncClient,
    method: str,
    url: str,
    *,
    body: bytes | None,
    headers: Sequence[tuple[str, str]],
    timeout: float,  # noqa: ASYNC109 - per attempt, and the HTTP library's phases get it too
    shown_as: str,
) -> int:
    """One request within ``timeout`` seconds: the status on 2xx, else ``AttemptFailed``.

    ``shown_as`` replaces the URL in the HTTP library's log line.
    """
    token = _sending.set(shown_as)
    try:
        # httpx's timeout is per phase (connect, each read...): a server that trickles bytes could
        # exceed it many times over, so the whole attempt is bounded as well.
        async with asyncio.timeout(timeout):
            # Streamed and never read: an endpoint's answer body is of no use and could be large.
            async with client.stream(
                method, url, content=body, headers=list(headers), timeout=httpx2.Timeout(timeout)
            ) as response:
                status = response.status_code
                retry_after = response.headers.get("retry-after")
    except TimeoutError:
        raise AttemptFailed(f"no answer within {timeout:g}s", retry=True, timed_out=True) from None
    except httpx2.TimeoutException as exc:
        raise AttemptFailed(f"timed out ({type(exc).__name__})", retry=True, timed_out=True) from None
    except (httpx2.InvalidURL, httpx2.UnsupportedProtocol) as exc:
        raise AttemptFailed(f"unusable URL ({type(exc).__name__})", retry=False) from None
    except httpx2.TransportError as exc:
        # The class name only: the message of a connect error can include the URL.
        raise AttemptFailed(f"transport error ({type(exc).__name__})", retry=True) from None
    finally:
        _sending.reset(token)
    if 200 <= status < 300:
        return status
    retry = status == 429 or status >= 500
    raise AttemptFailed(f"HTTP {status}", retry=retry, status=status, retry_after=retry_after)


def backoff_delay(attempt: int, retry_after: str | None, *, now: datetime, rng: Callable[[], float]) -> float:
    """Seconds to wait before attempt ``attempt + 1``: the server's Retry-After (capped), else jitter."""
    asked = _retry_after(retry_after, now)
    if asked is not None:
        return min(asked, RETRY_AFTER_CAP)
    return full_jitter(attempt - 1, base=BACKOFF_BASE, cap=BACKOFF_CAP, rng=rng)


def _retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date); None if absent/bad."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - now).total_seconds())


def is_json(headers: Sequence[tuple[str, str]]) -> bool:
    """Whether the Content-Type is JSON (``application/json``, ``application/*+json``)."""
    for name, value in headers:
        if name.strip().lower() == "content-type":
            media = value.split(";", 1)[0].strip().lower()
            return media == "application/json" or (
                media.startswith("application/") and media.endswith("+json")
            )
    return False


def settings_reason(exc: SettingsError) -> str:
    """A ``SettingsError`` as one log-safe line (problems name files and settings, never content)."""
    return "; ".join(f"{p.setting}: {p.reason}" for p in exc.problems)


# --- one target ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Message:
    """One queued notification: what it says is captured when ``notify()`` is called."""

    event_id: str
    kind: Kind
    stage: Stage
    summary: InterruptionSummary
    variables: dict[str, Any]
    #: The node and instance facts for templates (NodeLabels, Pods...), being read since notify().
    context: asyncio.Future[Mapping[str, Any]] | None = None


def _field(target: NotifyTarget, field: str) -> str:
    # The webhook's fields are reported within their group, as they always were; a named target's
    # by their full path, since the target's name is what tells them apart.
    return field if target.name == WEBHOOK_TARGET else f"{target.path}.{field}"


TemplateKey = tuple[Kind | None, Stage | None]


def _compile_templates(target: NotifyTarget) -> tuple[dict[TemplateKey, str], list[str]]:
    """The target's usable templates (files read: ``SettingsError`` if one cannot be), and a line
    per template that cannot be used, naming its setting and the construct at fault.

    An unusable template is replaced by the default message rather than stopping the process: a
    template written for NTH that uses something this engine lacks must not crash-loop the agent on
    every node. The default is NTH's message for the target's main template in format ``template``;
    otherwise the next template that applies, or the target's built-in format.
    """
    out: dict[TemplateKey, str] = {}
    problems: list[str] = []
    for key, (text, field) in target.read_templates().items():
        problem = templates.template_problem(text)
        if problem is None:
            out[key] = text
            continue
        fallback = key == (None, None) and target.format == "template"
        instead = (
            "NTH's default message" if fallback else "the next template that applies, or the built-in message"
        )
        problems.append(f"{_field(target, field)}: {problem}; sending {instead} instead")
        if fallback:
            out[key] = DEFAULT_TEMPLATE
    return out, problems


class _Sender:
    """One target's queue, HTTP client and background sender."""

    def __init__(
        self,
        target: NotifyTarget,
        *,
        templates: dict[TemplateKey, str],
        http: httpx2.AsyncClient,
        clock: Clock,
        report: Callable[[_Sender, Result, str, Stage], None],
        max_queue: int,
        rng: Callable[[], float],
    ) -> None:
        self.target = target
        self.label = "webhook" if target.name == WEBHOOK_TARGET else f"notification {target.name}"
        self._shown_url = f"<{self.label} url>"
        self._clock = clock
        self._report_to = report
        self._max_queue = max_queue
        self._rng = rng
        self._templates = templates
        # Shared with the other targets that use the same proxy (the Notifier owns and closes it).
        self._http = http
        self._queue: deque[_Message] = deque()
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self.runner: asyncio.Task[None] | None = None
        self.closing = False
        self._closed = False

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def has_templates(self) -> bool:
        """Whether some template of this target uses the node's facts (``NodeLabels``, ``Pods``...):
        only then are they read, so NTH's default message costs no API call."""
        return any(templates.uses_context(text) for text in self._templates.values())

    def _what(self, m: _Message) -> str:
        # Started messages read as they always have; later stages say which they are.
        stage = "" if m.stage is Stage.STARTED else f" ({m.stage.value})"
        return f"{self.label}{stage} for event {m.event_id}"

    def _extra(self, m: _Message) -> dict[str, str]:
        return {"event_id": m.event_id, "target": self.target.name, "stage": m.stage.value}

    def put(self, message: _Message) -> None:
        if self.closing:
            log.warning("%s not sent: notifier is closed", self._what(message), extra=self._extra(message))
            self._report(message, "dropped")
            return
        while len(self._queue) >= self._max_queue:
            # The newest notice matters most (it may be the spot interruption that follows a
            # rebalance recommendation), so overflow sacrifices the oldest.
            old = self._queue.popleft()
            log.warning(
                "%s queue full (%d): dropped the message for event %s",
                self.label,
                self._max_queue,
                old.event_id,
                extra=self._extra(old),
            )
            self._report(old, "dropped")
        self._queue.append(message)
        self._idle.clear()
        self._wakeup.set()

    def start(self) -> asyncio.Task[None]:
        # The task is known before it first runs, so an aclose() right after start() waits for it
        # instead of sending the queue itself alongside it.
        self.runner = asyncio.create_task(self._run(), name=f"notify-{self.target.name}")
        return self.runner

    async def _run(self) -> None:
        while True:
            if not self._queue:
                self._idle.set()
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            await self._deliver(self._queue.popleft())

    async def aclose(self, timeout: float) -> None:  # noqa: ASYNC109 - the caller's shutdown budget
        if self._closed:
            return
        self.closing = True
        runner = self.runner
        try:
            async with asyncio.timeout(timeout):
                if runner is not None and not runner.done():
                    await self._idle.wait()
                else:
                    while self._queue:
                        await self._deliver(self._queue.popleft())
        except TimeoutError:
            pass
        finally:
            if runner is not None and runner is not asyncio.current_task() and not runner.done():
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
            while self._queue:
                left = self._queue.popleft()
                log.warning("%s dropped at shutdown", self._what(left), extra=self._extra(left))
                self._report(left, "dropped")
            self._closed = True

    async def _deliver(self, message: _Message) -> None:
        """Render and send one message; report its outcome exactly once."""
        try:
            result = await self._send(message)
        except asyncio.CancelledError:
            log.warning("%s abandoned: sender stopped", self._what(message), extra=self._extra(message))
            self._report(message, "dropped")
            raise
        except Exception as exc:  # a bug here must cost one message, not the sender
            log.error("%s failed: %s", self._what(message), type(exc).__name__, extra=self._extra(message))
            result = "failure"
        self._report(message, result)

    def _template_for(self, kind: Kind, stage: Stage) -> str | None:
        # Most specific first: kind and stage, the stage, the kind, the target's default.
        for key in ((kind, stage), (None, stage), (kind, None), (None, None)):
            if key in self._templates:
                return self._templates[key]
        return None

    async def _render(self, m: _Message, template: str | None, json_body: bool) -> str:
        """The body: the template with the node's facts, else the built-in message. A template that
        fails on this event's data gives way to the default message, so the message still goes out."""
        if template is None:
            return templates.render_builtin(self.target.format, m.summary)
        variables = m.variables
        if m.context is not None:
            variables = templates.with_context(variables, await _context_of(m))
        try:
            return templates.render_template(template, variables, json_escape=json_body)
        except Exception as exc:
            log.error(
                "%s: the template failed to render (%s: %s); sending the default message instead",
                self._what(m),
                type(exc).__name__,
                exc,
                extra=self._extra(m),
            )
        if self.target.format == "template":
            return templates.render_template(DEFAULT_TEMPLATE, variables, json_escape=json_body)
        return templates.render_builtin(self.target.format, m.summary)

    async def _send(self, m: _Message) -> Result:
        what, extra = self._what(m), self._extra(m)
        try:
            headers = self.target.read_headers()
        except SettingsError as exc:
            log.error("%s not sent: %s", what, settings_reason(exc), extra=extra)
            return "failure"
        template = self._template_for(m.kind, m.stage)
        try:
            body = await self._render(m, template, is_json(headers))
        except Exception as exc:
            # Template errors name the template construct, never a secret.
            log.error(
                "%s not sent: template failed to render: %s: %s", what, type(exc).__name__, exc, extra=extra
            )
            return "failure"
        content = body.encode()
        attempts = self.target.attempts
        for attempt in range(1, attempts + 1):
            try:
                url = self.target.read_url()
            except SettingsError as exc:
                log.error("%s not sent: %s", what, settings_reason(exc), extra=extra)
                return "failure"
            try:
                status = await send_once(
                    self._http,
                    "POST",
                    url,
                    body=content,
                    headers=headers,
                    timeout=self.target.timeout,
                    shown_as=self._shown_url,
                )
            except AttemptFailed as exc:
                if not exc.retry:
                    log.warning(
                        "%s failed on attempt %d/%d: %s; not retrying",
                        what,
                        attempt,
                        attempts,
                        exc.reason,
                        extra=extra,
                    )
                    return "failure"
                if attempt == attempts:
                    log.warning("%s failed after %d attempts: %s", what, attempts, exc.reason, extra=extra)
                    return "failure"
                delay = backoff_delay(attempt, exc.retry_after, now=self._clock.now(), rng=self._rng)
                log.warning(
                    "%s: attempt %d/%d failed: %s; retrying in %.2fs",
                    what,
                    attempt,
                    attempts,
                    exc.reason,
                    delay,
                    extra=extra,
                )
                await self._clock.sleep(delay)
                continue
            log.info("%s sent: HTTP %d (attempt %d/%d)", what, status, attempt, attempts, extra=extra)
            return "success"
        return "failure"  # unreachable: every path through the last attempt returns

    def _report(self, message: _Message, result: Result) -> None:
        self._report_to(self, result, message.event_id, message.stage)


#: Events whose facts are kept for their later messages (started, then finished or failed).
_CONTEXTS_KEPT = 64
#: How long a message waits for the node's facts (labels, pods) before it is sent without them.
CONTEXT_TIMEOUT = 3.0

#: Reads the node and instance facts templates may use (``NodeLabels``, ``Pods``, ``InstanceType``...)
#: for an event on a node; called once per event, when its first message is queued.
ContextReader = Callable[[InterruptionEvent, str], Awaitable[Mapping[str, Any]]]


async def _context_of(m: _Message) -> Mapping[str, Any]:
    """The message's facts, or none if they could not be read in time (the message must go out)."""
    assert m.context is not None
    try:
        async with asyncio.timeout(CONTEXT_TIMEOUT):
            return await asyncio.shield(m.context)
    except Exception as exc:
        log.warning(
            "node facts for event %s not read (%s): the message leaves them empty",
            m.event_id,
            type(exc).__name__,
            extra={"event_id": m.event_id},
        )
        return {}


# --- the notifier -------------------------------------------------------------------------------------


class Notifier:
    """Queues notifications for every target and sends them in the background, one sender each.

    Construction reads and checks every template: an unreadable file raises ``SettingsError``; a
    template that cannot be used is logged, naming the setting and the construct, and replaced by the
    default message. ``context`` reads the node's facts for templates (labels, pods, instance).
    Call ``notify()`` from the event loop's thread; run ``run()`` as a task; call ``aclose()`` at
    shutdown. ``on_result(result)`` and ``on_delivery(target, stage, result)`` hear about every
    message of every target; neither may block.
    """

    def __init__(
        self,
        targets: Sequence[NotifyTarget],
        *,
        clock: Clock,
        on_result: Callable[[str], None] | None = None,
        on_delivery: Callable[[str, str, str], None] | None = None,
        max_queue: int = 256,
        transport: httpx2.AsyncBaseTransport | None = None,
        rng: Callable[[], float] | None = None,
        context: ContextReader | None = None,
    ) -> None:
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        names = [t.name for t in targets]
        if len(set(names)) != len(names):
            raise ValueError(f"notification target names must be unique: {names}")
        self._clock = clock
        self._on_result = on_result
        self._on_delivery = on_delivery
        # Every template first: an unreadable file raises before any client exists; a template that
        # cannot be used is named here (the logs are set up by now) and replaced by the default.
        compiled: list[dict[TemplateKey, str]] = []
        for t in targets:
            usable, problems = _compile_templates(t)
            compiled.append(usable)
            for problem in problems:
                log.error("notification template not usable: %s", problem, extra={"target": t.name})
        self._context = context
        self._contexts: OrderedDict[str, asyncio.Future[Mapping[str, Any]]] = OrderedDict()
        # One client per proxy, shared: each costs ~0.2 MiB on every node, and its connection pool
        # serves concurrent senders without one waiting for another (timeouts are per request).
        self._clients: dict[str | None, httpx2.AsyncClient] = {}
        for t in targets:
            if t.proxy not in self._clients:
                self._clients[t.proxy] = new_client(proxy=t.proxy, transport=transport)
        self._senders = [
            _Sender(
                t,
                templates=templates_of_t,
                http=self._clients[t.proxy],
                clock=clock,
                report=self._report,
                max_queue=max_queue,
                rng=rng or random.random,
            )
            for t, templates_of_t in zip(targets, compiled, strict=True)
        ]
        self._runner: asyncio.Task[None] | None = None
        self._closed = False

    def __repr__(self) -> str:
        # Names only: never a URL, a proxy or a header value.
        return f"{type(self).__name__}(queued={self.queued}, targets={self.targets!r})"

    @property
    def targets(self) -> tuple[str, ...]:
        """The names of the targets, in the order given."""
        return tuple(s.target.name for s in self._senders)

    @property
    def queued(self) -> int:
        """Messages waiting to be sent, all targets together (not counting those being sent)."""
        return sum(s.queued for s in self._senders)

    # --- producer ------------------------------------------------------------------------------------

    def notify(
        self,
        event: InterruptionEvent,
        *,
        node_name: str,
        extra: Mapping[str, Any] | None = None,
        stage: Stage | None = None,
        summary: InterruptionSummary | None = None,
    ) -> None:
        """Queue a message about ``event`` for each target that wants it; returns at once.

        ``summary`` is what was done so far (for finished/failed: the drain's pod counts, the
        actions' outcomes, the error); without one, a summary of the event alone is used. ``stage``
        defaults to the summary's, else ``started`` (the one message the agent has always sent).
        When a target's queue is full its oldest message goes.
        """
        ev_id = str(getattr(event, "id", "?"))
        stage = stage or (summary.stage if summary is not None else Stage.STARTED)
        try:
            wanted = [s for s in self._senders if s.target.wants(event.kind, stage)]
            if not wanted:
                return
            now = self._clock.now()
            if summary is None:
                summary = InterruptionSummary.for_event(event, node=node_name, stage=stage, started=now)
            variables = templates.message_variables(
                event, node_name=node_name, summary=summary, now=now, extra=extra
            )
            context = self._context_for(event, node_name) if any(s.has_templates for s in wanted) else None
            message = _Message(ev_id, event.kind, stage, summary, variables, context)
            for sender in wanted:
                sender.put(message)
        except Exception as exc:  # the caller is draining a node: nothing here may interrupt it
            log.error(
                "notification for event %s not queued: %s",
                ev_id,
                type(exc).__name__,
                extra={"event_id": ev_id},
            )
            for sender in self._senders:
                self._report(sender, "failure", ev_id, stage)

    def _context_for(
        self, event: InterruptionEvent, node_name: str
    ) -> asyncio.Future[Mapping[str, Any]] | None:
        """The facts for ``event``, read once per event (its later messages reuse them, as NTH reads
        the labels and pods once, before the drain), starting now."""
        if self._context is None:
            return None
        found = self._contexts.get(event.id)
        if found is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # no loop to read them on (a caller outside asyncio): none
                return None
            found = asyncio.ensure_future(self._context(event, node_name))
            # Read or not, the outcome is looked at by whoever awaits it; never "never retrieved".
            found.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._contexts[event.id] = found
            while len(self._contexts) > _CONTEXTS_KEPT:
                self._contexts.popitem(last=False)
        return found

    # --- senders -------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run every target's sender until cancelled (or until ``aclose()`` stops them)."""
        self._runner = asyncio.current_task()
        tasks = [s.start() for s in self._senders if not s.closing]
        try:
            if tasks:
                # Not gather: one sender stopped by aclose() must not cut short another's flush.
                await asyncio.wait(tasks)
            else:
                await asyncio.Event().wait()  # nothing to send, ever: idle like a sender would
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._runner = None

    # The process's shutdown path owns this budget (the agreed API), hence a parameter, not a scope.
    async def aclose(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Refuse new messages, send what is queued within ``timeout``, then stop and free the clients.

        All targets flush at once, each within ``timeout``; messages still queued when the time is up
        are reported as ``"dropped"``.
        """
        if self._closed:
            return
        self._closed = True
        for sender in self._senders:
            sender.closing = True
        await asyncio.gather(*(s.aclose(timeout) for s in self._senders), return_exceptions=True)
        runner = self._runner
        if runner is not None and runner is not asyncio.current_task() and not runner.done():
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        await asyncio.gather(*(c.aclose() for c in self._clients.values()), return_exceptions=True)

    def _report(self, sender: _Sender, result: Result, event_id: str, stage: Stage) -> None:
        try:
            if self._on_result is not None:
                self._on_result(result)
            if self._on_delivery is not None:
                self._on_delivery(sender.target.name, stage.value, result)
        except Exception as exc:  # a broken callback must not stop notifications
            log.error(
                "%s result callback failed for event %s: %s",
                sender.label,
                event_id,
                type(exc).__name__,
                extra={"event_id": event_id, "target": sender.target.name},
            )


class WebhookNotifier(Notifier):
    """The notifier built from the ``WEBHOOK_*`` settings, plus any named targets.

    ``WebhookNotifier(settings.webhook, clock=...)`` is what the agent has always built: the webhook
    becomes the target ``webhook`` (when a URL is set), followed by ``targets``.
    """

    def __init__(
        self,
        settings: WebhookSettings,
        *,
        clock: Clock,
        targets: Sequence[NotifyTarget] = (),
        on_result: Callable[[str], None] | None = None,
        on_delivery: Callable[[str, str, str], None] | None = None,
        max_queue: int = 256,
        transport: httpx2.AsyncBaseTransport | None = None,
        rng: Callable[[], float] | None = None,
        context: ContextReader | None = None,
    ) -> None:
        webhook = [webhook_target(settings)] if settings.enabled else []
        super().__init__(
            [*webhook, *(t for t in targets if t.name != WEBHOOK_TARGET)],
            clock=clock,
            on_result=on_result,
            on_delivery=on_delivery,
            max_queue=max_queue,
            transport=transport,
            rng=rng,
            context=context,
        )


def check_targets(targets: Sequence[NotifyTarget]) -> None:
    """Read every target's template files; ``SettingsError`` naming each one that cannot be read.

    For start-up: a template file that cannot be read stops the process with a clear message. A
    template that cannot be used does not: the notifier names it in the logs and sends the default
    message instead (see ``_compile_templates``).
    """
    check_each(targets, _compile_templates)
