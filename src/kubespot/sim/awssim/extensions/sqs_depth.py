"""SQS at depth: receive, delete and visibility changes without walking the whole queue.

What stock moto 5.2.x does per request on a queue of N messages:

- ReceiveMessage builds the list of all visible messages, then for *each* message returned asks
  ``get_queue_attributes(["MessageRetentionPeriod"])``, which evaluates every queue attribute
  three times, each evaluation scanning all N messages with a clock read per message. Ten
  messages returned means about 90 x N clock reads; a 2 000-deep queue gives a few calls a second.
- DeleteMessage scans all N messages (each building a list of its receipt handles) twice and
  rebuilds the message list; ChangeMessageVisibility scans too.
- SendMessage evaluates all queue attributes once (three scans) to read one flag.

This module replaces those paths with equivalents that keep moto's data structures (the
``Queue._messages`` list, ``pending_messages`` set, ``deleted_messages`` set) and semantics, adding
one index per queue: receipt handle -> message, filled when a message is received. Any lookup the
index cannot answer falls back to moto's original code, so behaviour stays moto's in odd cases
(a handle from before installation, a purged queue, a message moved to a DLQ).

Semantics kept: visibility timeout and its expiry, ChangeMessageVisibility (including the 12-hour
limit), long polling, redrive to the DLQ once ``maxReceiveCount`` receives happened, FIFO group
blocking and ordering, message attributes filtering. Deliberate differences from stock moto:
messages past their retention period are dropped when met (as SQS does) instead of stopping the
receive, and a receive scan holds the queue's lock so two concurrent receivers cannot both take
the same message.
"""

from __future__ import annotations

import copy
from typing import Any

from moto.core.utils import unix_time, unix_time_millis
from moto.sqs import models as sqs_models
from moto.sqs.exceptions import InvalidParameterValue

__all__ = ["install"]

_MARK = "_kubespot_sqs_depth"
_INDEX = "_kubespot_handles"
_MAX_TOTAL_VISIBILITY_MS = 43200 * 1000

Message = Any  # moto.sqs.models.Message (moto ships no type information)
Queue = Any  # moto.sqs.models.Queue


def _index(queue: Queue) -> dict[str, Message]:
    index: dict[str, Message] | None = queue.__dict__.get(_INDEX)
    if index is None:
        # First use on this queue: index what was received before (normally nothing).
        index = {}
        for message in queue._messages:
            for handle in message.all_receipt_handles:
                if handle:
                    index[handle] = message
        queue.__dict__[_INDEX] = index
    return index


def _forget(index: dict[str, Message], message: Message) -> None:
    for handle in message.all_receipt_handles:
        if handle:
            index.pop(handle, None)


# -- Queue ---------------------------------------------------------------------------------------


def _approximate_number_of_messages(self: Queue) -> int:
    now = unix_time_millis()
    return sum(1 for m in self._messages if now > m.visible_at and not now < m.delayed_until)


def _approximate_number_of_messages_not_visible(self: Queue) -> int:
    now = unix_time_millis()
    return sum(1 for m in self._messages if not now > m.visible_at)


def _approximate_number_of_messages_delayed(self: Queue) -> int:
    now = unix_time_millis()
    return sum(1 for m in self._messages if now < m.delayed_until)


def _make_queue_delete(original: Any) -> Any:
    def delete_message(self: Queue, receipt_handle: str) -> None:
        if receipt_handle in self.deleted_messages:
            return
        index = _index(self)
        message = index.get(receipt_handle)
        if message is not None:
            with self._messages_lock:
                try:
                    # Identity comparison in C: cheap even when the message sits deep in the list.
                    self._messages.remove(message)
                except ValueError:
                    pass
                else:
                    self.pending_messages.discard(message)
                    self.deleted_messages.update(message.all_receipt_handles)
                    _forget(index, message)
                    return
        original(self, receipt_handle)

    return delete_message


# -- SQSBackend ----------------------------------------------------------------------------------


def _receive_message(
    self: Any,
    queue_name: str,
    count: int,
    wait_seconds_timeout: int,
    visibility_timeout: int,
    message_attribute_names: list[str] | None = None,
) -> list[Message]:
    names = message_attribute_names or []
    queue = self.get_queue(queue_name)
    index = _index(queue)
    fifo = bool(queue.fifo_queue)
    polling_end = unix_time() + wait_seconds_timeout
    retention_ms = int(queue.message_retention_period) * 1000
    max_receives: int | None = None
    if queue.dead_letter_queue is not None and queue.redrive_policy:
        max_receives = int(queue.redrive_policy["maxReceiveCount"])

    result: list[Message] = []
    while True:
        to_dlq: list[Message] = []
        expired: list[Message] = []
        with queue._messages_lock:
            now = unix_time_millis()
            pending = queue.pending_messages
            blocked_groups = queue.pending_message_groups if fifo else set()
            for message in queue._messages:
                if not now > message.visible_at or now < message.delayed_until:
                    continue
                if message in pending:
                    # Visible again while still pending: the previous consumer timed out.
                    pending.discard(message)
                    if fifo:
                        blocked_groups = queue.pending_message_groups
                if fifo and message.group_id and message.group_id in blocked_groups:
                    continue
                if max_receives is not None and message.approximate_receive_count >= max_receives:
                    to_dlq.append(message)
                    continue
                if message.sent_timestamp + retention_ms <= now:
                    expired.append(message)
                    continue
                pending.add(message)
                message.mark_received(visibility_timeout=visibility_timeout)
                index[message.receipt_handle] = message
                # A shallow copy is enough: the attribute filter replaces the dict it narrows.
                snapshot = copy.copy(message)
                sqs_models._filter_message_attributes(snapshot, names)
                result.append(snapshot)
                if len(result) >= count:
                    break
            for message in (*to_dlq, *expired):
                queue._messages.remove(message)
                _forget(index, message)
        for message in to_dlq:
            # Outside the source lock: the DLQ's add_message takes the DLQ's own lock.
            queue.dead_letter_queue.add_message(message)

        if result or wait_seconds_timeout == 0 or unix_time() > polling_end:
            return result
        queue.wait_for_messages(1)


def _make_change_visibility(original: Any) -> Any:
    def change_message_visibility(
        self: Any, queue_name: str, receipt_handle: str, visibility_timeout: int
    ) -> None:
        queue = self.get_queue(queue_name)
        message = _index(queue).get(receipt_handle)
        if message is None or not any(m is message for m in queue._messages):
            original(self, queue_name, receipt_handle, visibility_timeout)
            return
        requested_until = unix_time_millis() + int(visibility_timeout) * 1000
        if requested_until - message.sent_timestamp > _MAX_TOTAL_VISIBILITY_MS:
            raise InvalidParameterValue(
                f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. Reason: Total "
                "VisibilityTimeout for the message is beyond the limit [43200 seconds]"
            )
        with queue._messages_lock:
            message.change_visibility(visibility_timeout)
            if message.visible and message in queue.pending_messages:
                queue.pending_messages.discard(message)
                queue._messages_lock.notify_all()

    return change_message_visibility


def _make_purge(original: Any) -> Any:
    def purge_queue(self: Any, queue_name: str) -> None:
        original(self, queue_name)
        self.get_queue(queue_name).__dict__.pop(_INDEX, None)

    return purge_queue


def _is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Message) -> bool:
    queue = self.get_queue(queue_name)
    retain_until_ms = int(queue.message_retention_period) * 1000 + message.sent_timestamp
    return bool(retain_until_ms > unix_time_millis())


def install() -> None:
    """Patch moto's SQS ``Queue`` and ``SQSBackend`` classes (once)."""
    # Typed as Any: moto's classes are typed, and replacing their methods is the point here.
    queue_cls: Any = sqs_models.Queue
    backend_cls: Any = sqs_models.SQSBackend
    if getattr(backend_cls, _MARK, False):
        return
    queue_cls.approximate_number_of_messages = property(_approximate_number_of_messages)
    queue_cls.approximate_number_of_messages_not_visible = property(
        _approximate_number_of_messages_not_visible
    )
    queue_cls.approximate_number_of_messages_delayed = property(_approximate_number_of_messages_delayed)
    queue_cls.delete_message = _make_queue_delete(queue_cls.delete_message)
    backend_cls.receive_message = _receive_message
    backend_cls.change_message_visibility = _make_change_visibility(backend_cls.change_message_visibility)
    backend_cls.purge_queue = _make_purge(backend_cls.purge_queue)
    backend_cls.is_message_valid_based_on_retention_period = _is_message_valid_based_on_retention_period
    setattr(backend_cls, _MARK, True)
