"""The webhook notifier: one POST per interruption to Slack, Teams or any HTTP endpoint.

This module owns delivery: a bounded in-memory queue filled by ``notify()`` (which never blocks and
never raises, so a dead endpoint can never delay a drain), one background sender (``run()``) that
renders each message at send time and POSTs it with retries, and the shutdown flush (``aclose()``).
What a message says is ``kubespot.actions.templates``'s business.

The URL is a credential (a Slack webhook URL *is* the token) and header values may be too: neither
appears in any log line, exception or repr here. The URL is read from the settings at each send, so a
rotated Secret file takes effect without a restart; failures are logged by exception class or status
code only, because httpx's exception strings and response reprs carry the URL; and the HTTP library's
own request log line gets the URL replaced while a webhook request is being sent.

Delivery: ``settings.attempts`` tries, each within ``settings.timeout``; 5xx, 429 and transport
errors are retried after an exponential backoff with full jitter (or the server's ``Retry-After``, up
to a cap); any other non-2xx answer gives up at once. Each message ends in exactly one
``on_result`` call: ``"success"``, ``"failure"`` or ``"dropped"`` (queue overflow, shutdown).
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import logging
import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx2

from kubespot.config.loader import SettingsError
from kubespot.config.webhook import WebhookSettings
from kubespot.model import Clock, InterruptionEvent

from . import templates

log = logging.getLogger("kubespot.actions.notify")

Result = Literal["success", "failure", "dropped"]

#: Backoff between attempts: full jitter over min(cap, base * 2^(n-1)) seconds. Not settings: with
#: three attempts a webhook is given up within seconds, which is what a notification is worth.
BACKOFF_BASE = 0.5
BACKOFF_CAP = 8.0
#: A server's Retry-After is honoured up to this; longer and the message would be stale anyway.
RETRY_AFTER_CAP = 30.0

_REDACTED_URL = "<webhook url>"
#: Set while this module's client sends, so the HTTP library's log filter knows whose URL it sees.
_sending: contextvars.ContextVar[bool] = contextvars.ContextVar("kubespot_webhook_sending", default=False)


class _RedactWebhookUrl(logging.Filter):
    """Replaces the URL in httpx2's ``HTTP Request: POST <url> ...`` line for webhook requests.

    Installed on the ``httpx2`` logger (that line is logged at INFO by the client itself, so it
    cannot be avoided by how we call it); other users of httpx2 (the IMDS client) are untouched.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if _sending.get() and isinstance(record.args, tuple):
            record.args = tuple(_REDACTED_URL if isinstance(a, httpx2.URL) else a for a in record.args)
        return True


def _install_log_filter() -> None:
    target = logging.getLogger("httpx2")
    if not any(isinstance(f, _RedactWebhookUrl) for f in target.filters):
        target.addFilter(_RedactWebhookUrl())


@dataclass(frozen=True, slots=True)
class _Message:
    """One queued notification: the variables are captured when ``notify()`` is called."""

    event_id: str
    variables: dict[str, Any]


class _Retry(Exception):
    """An attempt failed in a way worth another try; ``reason`` is safe to log."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class _GiveUp(Exception):
    """An attempt failed in a way another try will not fix; ``reason`` is safe to log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WebhookNotifier:
    """Queues interruption notifications and POSTs them in the background.

    Construction reads and checks the template (raising ``InvalidSetting``/``SettingsError``, so a bad
    template stops the agent at start-up) and imports jinja2. Call ``notify()`` from the event loop's
    thread; run ``run()`` as a task; call ``aclose()`` at shutdown.
    """

    def __init__(
        self,
        settings: WebhookSettings,
        *,
        clock: Clock,
        on_result: Callable[[str], None] | None = None,
        max_queue: int = 256,
        transport: httpx2.AsyncBaseTransport | None = None,
        rng: Callable[[], float] | None = None,
    ) -> None:
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        self._settings = settings
        self._clock = clock
        self._on_result = on_result
        self._max_queue = max_queue
        self._rng = rng or random.random
        self._template = settings.read_template()
        templates.check_template(
            self._template, field="template" if settings.template_file is None else "template_file"
        )
        self._headers = list(settings.headers)
        self._json = _is_json(settings.headers)
        _install_log_filter()
        self._http = httpx2.AsyncClient(
            transport=transport,
            proxy=settings.proxy,
            timeout=httpx2.Timeout(settings.timeout),
            # Only settings.proxy applies: an HTTP(S)_PROXY or .netrc in the pod's environment must
            # not reroute or add credentials to the webhook (the reference handler ignores them too).
            trust_env=False,
            # A redirect could send the body (and the Authorization header) somewhere unconfigured.
            follow_redirects=False,
        )
        self._queue: deque[_Message] = deque()
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._runner: asyncio.Task[None] | None = None
        self._closing = False
        self._closed = False

    def __repr__(self) -> str:
        # Never the URL, the proxy or header values: the settings' own repr redacts them.
        return f"WebhookNotifier(queued={len(self._queue)}, settings={self._settings!r})"

    @property
    def queued(self) -> int:
        """Messages waiting to be sent (not counting one being sent)."""
        return len(self._queue)

    # --- producer ------------------------------------------------------------------------------------

    def notify(
        self, event: InterruptionEvent, *, node_name: str, extra: Mapping[str, Any] | None = None
    ) -> None:
        """Queue a message about ``event``; returns at once. When the queue is full the oldest goes."""
        ev_id = getattr(event, "id", "?")
        try:
            if self._closing:
                log.warning(
                    "webhook for event %s not sent: notifier is closed", ev_id, extra={"event_id": ev_id}
                )
                self._report("dropped", ev_id)
                return
            message = _Message(ev_id, templates.template_variables(event, node_name=node_name, extra=extra))
            while len(self._queue) >= self._max_queue:
                # The newest notice matters most (it may be the spot interruption that follows a
                # rebalance recommendation), so overflow sacrifices the oldest.
                old = self._queue.popleft()
                log.warning(
                    "webhook queue full (%d): dropped the message for event %s",
                    self._max_queue,
                    old.event_id,
                    extra={"event_id": old.event_id},
                )
                self._report("dropped", old.event_id)
            self._queue.append(message)
            self._idle.clear()
            self._wakeup.set()
        except Exception as exc:  # the caller is draining a node: nothing here may interrupt it
            log.error(
                "webhook for event %s not queued: %s", ev_id, type(exc).__name__, extra={"event_id": ev_id}
            )
            self._report("failure", ev_id)

    # --- sender --------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Send queued messages one at a time until cancelled."""
        self._runner = asyncio.current_task()
        try:
            while True:
                if not self._queue:
                    self._idle.set()
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                await self._deliver(self._queue.popleft())
        finally:
            self._runner = None

    # The agent's shutdown path owns this budget (the agreed API), hence a parameter, not a scope.
    async def aclose(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Refuse new messages, send what is queued within ``timeout``, then stop and free the client.

        Messages still queued when the time is up are reported as ``"dropped"``.
        """
        if self._closed:
            return
        self._closing = True
        runner = self._runner
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
                log.warning(
                    "webhook for event %s dropped at shutdown",
                    left.event_id,
                    extra={"event_id": left.event_id},
                )
                self._report("dropped", left.event_id)
            await self._http.aclose()
            self._closed = True

    async def _deliver(self, message: _Message) -> None:
        """Render and send one message; report its outcome exactly once."""
        ev = message.event_id
        try:
            result = await self._send(message)
        except asyncio.CancelledError:
            log.warning("webhook for event %s abandoned: sender stopped", ev, extra={"event_id": ev})
            self._report("dropped", ev)
            raise
        except Exception as exc:  # a bug here must cost one message, not the sender
            log.error("webhook for event %s failed: %s", ev, type(exc).__name__, extra={"event_id": ev})
            result = "failure"
        self._report(result, ev)

    async def _send(self, message: _Message) -> Result:
        ev = message.event_id
        try:
            body = templates.render_template(self._template, message.variables, json_escape=self._json)
        except Exception as exc:
            # Template errors name the template construct, never a secret.
            log.error(
                "webhook for event %s not sent: template failed to render: %s: %s",
                ev,
                type(exc).__name__,
                exc,
                extra={"event_id": ev},
            )
            return "failure"
        attempts = self._settings.attempts
        for attempt in range(1, attempts + 1):
            try:
                url = self._settings.read_url()
            except SettingsError as exc:
                # The problem names the file and what is wrong with it, never its content.
                reason = "; ".join(f"{p.setting}: {p.reason}" for p in exc.problems)
                log.error("webhook for event %s not sent: %s", ev, reason, extra={"event_id": ev})
                return "failure"
            if url is None:
                log.error("webhook for event %s not sent: no URL configured", ev, extra={"event_id": ev})
                return "failure"
            try:
                status = await self._post(url, body)
            except _GiveUp as exc:
                log.warning(
                    "webhook for event %s failed on attempt %d/%d: %s; not retrying",
                    ev,
                    attempt,
                    attempts,
                    exc.reason,
                    extra={"event_id": ev},
                )
                return "failure"
            except _Retry as exc:
                if attempt == attempts:
                    log.warning(
                        "webhook for event %s failed after %d attempts: %s",
                        ev,
                        attempts,
                        exc.reason,
                        extra={"event_id": ev},
                    )
                    return "failure"
                delay = self._backoff(attempt, exc.retry_after)
                log.warning(
                    "webhook for event %s: attempt %d/%d failed: %s; retrying in %.2fs",
                    ev,
                    attempt,
                    attempts,
                    exc.reason,
                    delay,
                    extra={"event_id": ev},
                )
                await self._clock.sleep(delay)
                continue
            log.info(
                "webhook for event %s sent: HTTP %d (attempt %d/%d)",
                ev,
                status,
                attempt,
                attempts,
                extra={"event_id": ev},
            )
            return "success"
        return "failure"  # unreachable: every path through the last attempt returns

    async def _post(self, url: str, body: str) -> int:
        """One POST within the per-attempt timeout; the status on 2xx, else ``_Retry``/``_GiveUp``."""
        token = _sending.set(True)
        try:
            # httpx's timeout is per phase (connect, each read...): a server that trickles bytes
            # could exceed it many times over, so the whole attempt is bounded as well.
            async with asyncio.timeout(self._settings.timeout):
                # Streamed and never read: an endpoint's answer body is of no use and could be large.
                async with self._http.stream(
                    "POST", url, content=body.encode(), headers=self._headers
                ) as response:
                    status = response.status_code
                    retry_after = response.headers.get("retry-after")
        except TimeoutError:
            raise _Retry(f"no answer within {self._settings.timeout:g}s") from None
        except httpx2.TimeoutException as exc:
            raise _Retry(f"timed out ({type(exc).__name__})") from None
        except (httpx2.InvalidURL, httpx2.UnsupportedProtocol) as exc:
            raise _GiveUp(f"unusable URL ({type(exc).__name__})") from None
        except httpx2.TransportError as exc:
            # The class name only: the message of a connect error can include the URL.
            raise _Retry(f"transport error ({type(exc).__name__})") from None
        finally:
            _sending.reset(token)
        if 200 <= status < 300:
            return status
        if status == 429 or status >= 500:
            raise _Retry(f"HTTP {status}", self._retry_after(retry_after))
        raise _GiveUp(f"HTTP {status}")

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, RETRY_AFTER_CAP)
        return self._rng() * min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** (attempt - 1))

    def _retry_after(self, value: str | None) -> float | None:
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
        return max(0.0, (when - self._clock.now()).total_seconds())

    def _report(self, result: Result, event_id: str) -> None:
        if self._on_result is None:
            return
        try:
            self._on_result(result)
        except Exception as exc:  # a broken callback must not stop notifications
            log.error(
                "webhook result callback failed for event %s: %s",
                event_id,
                type(exc).__name__,
                extra={"event_id": event_id},
            )


def _is_json(headers: tuple[tuple[str, str], ...]) -> bool:
    """Whether the configured Content-Type is JSON (``application/json``, ``application/*+json``)."""
    for name, value in headers:
        if name.strip().lower() == "content-type":
            media = value.split(";", 1)[0].strip().lower()
            return media == "application/json" or (
                media.startswith("application/") and media.endswith("+json")
            )
    return False
