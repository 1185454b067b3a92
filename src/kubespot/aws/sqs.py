"""The interruption queue over SQS: receive, delete and extend messages, in batches.

``Queue.receive`` long-polls ReceiveMessage and returns plain ``QueueMessage``s with their receive
count and send time. ``delete`` and ``extend`` go out as DeleteMessageBatch and
ChangeMessageVisibilityBatch (10 entries per call, the SQS limit), and calls made by concurrent
tasks within a few milliseconds of each other are coalesced into the same batches: a thousand
handlers finishing together cost a hundred calls, not a thousand.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from kubespot.aws.session import AwsClients, AwsError

__all__ = ["MAX_BATCH", "Queue", "QueueMessage", "region_of"]

_log = logging.getLogger(__name__)

#: SQS's limit of entries per batch call and of messages per ReceiveMessage.
MAX_BATCH: Final = 10
#: How long a delete/extend waits for other callers to share its batch. Short against an API
#: round trip (~10-30 ms), long enough to collect the handlers that finish in the same burst.
BATCH_WINDOW: Final = 0.005
#: SQS refuses visibility timeouts beyond 12 hours.
MAX_VISIBILITY: Final = 43_200


_QUEUE_URL_REGION = re.compile(r"^https?://sqs[.-]([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/")


def region_of(queue_url: str) -> str | None:
    """The region in an SQS queue URL (``https://sqs.<region>.amazonaws.com/<account>/<name>``)."""
    match = _QUEUE_URL_REGION.match(queue_url)
    return match.group(1) if match else None


@dataclass(frozen=True)
class QueueMessage:
    """One received message. ``receipt_handle`` is this receipt's; a redelivery has a new one."""

    message_id: str
    receipt_handle: str
    body: str
    receive_count: int
    """ApproximateReceiveCount: 1 on first delivery, +1 per redelivery."""
    sent_at: datetime | None
    """When the message was sent to the queue (SentTimestamp), UTC."""


def _parse_message(raw: dict[str, Any]) -> QueueMessage:
    attributes: dict[str, str] = raw.get("Attributes") or {}
    try:
        receive_count = int(attributes.get("ApproximateReceiveCount", "1"))
    except ValueError:
        receive_count = 1
    sent_at: datetime | None = None
    sent = attributes.get("SentTimestamp")
    if sent:
        with contextlib.suppress(ValueError, OverflowError, OSError):
            sent_at = datetime.fromtimestamp(int(sent) / 1000, tz=UTC)
    return QueueMessage(
        message_id=str(raw.get("MessageId", "")),
        receipt_handle=str(raw.get("ReceiptHandle", "")),
        body=str(raw.get("Body", "")),
        receive_count=receive_count,
        sent_at=sent_at,
    )


_Send = Callable[[Hashable, list[QueueMessage]], Awaitable[set[str]]]


class _Coalescer:
    """Collects messages from concurrent callers for ``BATCH_WINDOW`` and sends them in tens.

    Callers with the same ``key`` (the visibility timeout, for extends) share batches. Each caller
    gets back the ids of its own messages that failed; a batch call that fails as a whole raises
    its ``AwsError`` in every caller whose messages were in it.
    """

    def __init__(self, send: _Send, window: float) -> None:
        self._send = send
        self._window = window
        self._pending: dict[Hashable, list[tuple[QueueMessage, asyncio.Future[bool]]]] = {}
        self._flusher: asyncio.Task[None] | None = None

    async def submit(self, key: Hashable, messages: Iterable[QueueMessage]) -> list[str]:
        loop = asyncio.get_running_loop()
        waits: list[tuple[QueueMessage, asyncio.Future[bool]]] = []
        for message in messages:
            fut: asyncio.Future[bool] = loop.create_future()
            waits.append((message, fut))
        if not waits:
            return []
        bucket = self._pending.setdefault(key, [])
        bucket.extend(waits)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_later(), name="kubespot-sqs-batch")
        # asyncio.wait, not gather: a caller cancelled while waiting must not cancel the shared
        # futures other callers' entries resolve.
        await asyncio.wait([f for _, f in waits])
        failed: list[str] = []
        for message, fut in waits:
            if fut.result() is False:  # raises the batch's AwsError, if it failed whole
                failed.append(message.message_id)
        return failed

    async def _flush_later(self) -> None:
        await asyncio.sleep(self._window)
        while self._pending:
            pending, self._pending = self._pending, {}
            sends = []
            for key, entries in pending.items():
                for start in range(0, len(entries), MAX_BATCH):
                    sends.append(self._send_one(key, entries[start : start + MAX_BATCH]))
            await asyncio.gather(*sends)

    async def _send_one(
        self, key: Hashable, entries: list[tuple[QueueMessage, asyncio.Future[bool]]]
    ) -> None:
        try:
            failed_handles = await self._send(key, [m for m, _ in entries])
        except Exception as exc:  # AwsError, or a bug: either way every waiter must hear of it
            for _, fut in entries:
                if not fut.done():
                    fut.set_exception(exc)
                    # Marks the exception retrieved even if its caller was cancelled meanwhile.
                    fut.add_done_callback(_consume_exception)
            return
        for message, fut in entries:
            if not fut.done():
                fut.set_result(message.receipt_handle not in failed_handles)


def _consume_exception(fut: asyncio.Future[bool]) -> None:
    if not fut.cancelled():
        fut.exception()


class Queue:
    """One SQS queue, by URL."""

    def __init__(self, clients: AwsClients, url: str, *, batch_window: float = BATCH_WINDOW) -> None:
        self.clients = clients
        self.url = url
        self._deletes = _Coalescer(self._delete_batch, batch_window)
        self._extends = _Coalescer(self._extend_batch, batch_window)
        self._background: set[asyncio.Future[None]] = set()

    async def receive(
        self, max_messages: int = MAX_BATCH, wait_time: int = 20, visibility_timeout: int = 30
    ) -> list[QueueMessage]:
        """Long-poll up to ``max_messages`` (1..10), hiding them for ``visibility_timeout`` seconds.

        If the calling task is cancelled while the poll is in flight, whatever the poll still
        returns is made visible again at once (visibility 0) instead of staying hidden for
        ``visibility_timeout`` with nobody handling it.
        """
        max_messages = max(1, min(MAX_BATCH, max_messages))
        abandoned = threading.Event()
        kwargs: dict[str, Any] = {
            "QueueUrl": self.url,
            "MaxNumberOfMessages": max_messages,
            "WaitTimeSeconds": wait_time,
            "VisibilityTimeout": visibility_timeout,
            "MessageSystemAttributeNames": ["ApproximateReceiveCount", "SentTimestamp"],
        }
        client = self.clients

        def poll() -> list[dict[str, Any]]:
            answer: Any = client.client("sqs").receive_message(**kwargs)
            raw: list[dict[str, Any]] = answer.get("Messages") or []
            if raw and abandoned.is_set():
                _release_blocking(client, self.url, raw)
                return []
            return raw

        client.counts[("sqs", "ReceiveMessage")] += 1
        future = asyncio.ensure_future(client.run(poll, service="sqs", operation="ReceiveMessage"))
        try:
            raw = await asyncio.shield(future)
        except asyncio.CancelledError:
            abandoned.set()
            # The poll may have returned just before the flag was set: its messages are then on
            # the loop's side; release them from there, in the background.
            future.add_done_callback(lambda f: self._release_done(f, abandoned))
            raise
        return [_parse_message(m) for m in raw]

    def _release_done(self, future: asyncio.Future[list[dict[str, Any]]], abandoned: threading.Event) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        raw = future.result()
        if raw:
            messages = [_parse_message(m) for m in raw]
            with contextlib.suppress(RuntimeError):  # loop closing: they reappear on their own
                task = asyncio.ensure_future(self._release_quietly(messages))
                self._background.add(task)
                task.add_done_callback(self._background.discard)

    async def _release_quietly(self, messages: list[QueueMessage]) -> None:
        with contextlib.suppress(AwsError):
            await self.extend(messages, 0)

    async def delete(self, messages: Iterable[QueueMessage]) -> list[str]:
        """Delete ``messages``; returns the ids of those SQS refused (e.g. an expired receipt).

        Raises ``AwsError`` if a batch call carrying some of them failed as a whole.
        """
        return await self._deletes.submit(None, messages)

    async def extend(self, messages: Iterable[QueueMessage], seconds: int) -> list[str]:
        """Set the visibility of ``messages`` to ``seconds`` from now (0: visible at once).

        Returns the ids of those SQS refused (receipt no longer valid: the message was deleted or
        its visibility lapsed and someone else received it). Raises ``AwsError`` like ``delete``.
        """
        seconds = max(0, min(MAX_VISIBILITY, int(seconds)))
        return await self._extends.submit(seconds, messages)

    # -- batch calls -----------------------------------------------------------------------------

    async def _delete_batch(self, _key: Hashable, messages: list[QueueMessage]) -> set[str]:
        entries = [{"Id": str(i), "ReceiptHandle": m.receipt_handle} for i, m in enumerate(messages)]
        answer = await self.clients.call("sqs", "DeleteMessageBatch", QueueUrl=self.url, Entries=entries)
        return _failed_handles(answer, messages, "delete")

    async def _extend_batch(self, key: Hashable, messages: list[QueueMessage]) -> set[str]:
        assert isinstance(key, int)
        entries = [
            {"Id": str(i), "ReceiptHandle": m.receipt_handle, "VisibilityTimeout": key}
            for i, m in enumerate(messages)
        ]
        answer = await self.clients.call(
            "sqs", "ChangeMessageVisibilityBatch", QueueUrl=self.url, Entries=entries
        )
        return _failed_handles(answer, messages, "extend")


def _failed_handles(answer: dict[str, Any], messages: Sequence[QueueMessage], what: str) -> set[str]:
    failed: set[str] = set()
    for entry in answer.get("Failed") or []:
        try:
            message = messages[int(entry.get("Id", -1))]
        except (ValueError, IndexError):
            continue
        failed.add(message.receipt_handle)
        _log.debug(
            "SQS refused to %s message %s: %s %s",
            what,
            message.message_id,
            entry.get("Code"),
            entry.get("Message"),
        )
    return failed


def _release_blocking(clients: AwsClients, url: str, raw: list[dict[str, Any]]) -> None:
    """On a pool thread, right after an abandoned poll: make its messages visible again."""
    entries = [
        {"Id": str(i), "ReceiptHandle": str(m.get("ReceiptHandle", "")), "VisibilityTimeout": 0}
        for i, m in enumerate(raw)
    ]
    # Not counted in ``clients.counts``: that Counter belongs to the event loop's thread.
    with contextlib.suppress(Exception):  # best effort: otherwise they reappear after the timeout
        clients.client("sqs").change_message_visibility_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
