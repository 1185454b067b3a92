"""Publishing the interruption summary: an SNS topic and an EventBridge bus.

``SnsPublisher.publish`` sends the summary as a JSON message with a subject cleaned to SNS's rules
and message attributes (``kind``, ``source``, and the caller's) that subscriptions can filter on.
``EventBridgePublisher.put`` sends it as the ``detail`` of one custom event; a failed entry
(PutEvents answers 200 with ``FailedEntryCount``) comes out as ``AwsError`` like a failed call.
Both check AWS's size limits before sending, so an oversized summary fails here with a clear
``PublishError`` rather than at AWS.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from kubespot.aws.session import AwsClients, AwsError

__all__ = [
    "DEFAULT_DETAIL_TYPE",
    "DEFAULT_SOURCE",
    "EventBridgePublisher",
    "PublishError",
    "SnsPublisher",
    "entry_size",
    "sns_subject",
]

#: SNS: a subject is at most 100 ASCII characters; a message at most 256 KiB of UTF-8.
MAX_SUBJECT: Final = 100
MAX_SNS_MESSAGE_BYTES: Final = 262_144
#: SNS delivers at most 10 message attributes to SQS subscribers; more would be dropped there.
MAX_ATTRIBUTES: Final = 10
#: EventBridge: a PutEvents entry (source + detail-type + detail + resources, +14 with a time)
#: must be less than 256 KiB.
MAX_EVENT_ENTRY_BYTES: Final = 262_144
DEFAULT_SOURCE: Final = "kubespot"
DEFAULT_DETAIL_TYPE: Final = "kubespot Interruption Summary"


class PublishError(ValueError):
    """The message cannot be sent as it is (too large, bad source); nothing was sent."""


def _json(document: Mapping[str, Any]) -> str:
    # default=str: summaries carry datetimes and enums; a subscriber reads them as strings.
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, default=str)


def sns_subject(text: str) -> str:
    """``text`` as SNS accepts a subject: printable ASCII on one line, at most 100 characters.

    Other characters become ``?``, runs of whitespace one space; an empty result is ``kubespot``.
    """
    ascii_only = "".join(ch if " " <= ch <= "~" else (" " if ch.isspace() else "?") for ch in text)
    subject = " ".join(ascii_only.split())
    if len(subject) > MAX_SUBJECT:
        subject = subject[: MAX_SUBJECT - 3].rstrip() + "..."
    return subject or DEFAULT_SOURCE


class SnsPublisher:
    """Publishes JSON messages to one SNS topic (standard or FIFO)."""

    def __init__(self, clients: AwsClients, topic_arn: str, *, source: str = DEFAULT_SOURCE) -> None:
        if not topic_arn.startswith("arn:") or ":sns:" not in topic_arn:
            raise ValueError(f"not an SNS topic ARN: {topic_arn!r}")
        self._clients = clients
        self.topic_arn = topic_arn
        self._source = source
        self._fifo = topic_arn.endswith(".fifo")

    async def publish(
        self,
        message: Mapping[str, Any],
        *,
        subject: str,
        kind: str,
        attributes: Mapping[str, str] | None = None,
        deduplication_id: str | None = None,
        group_id: str | None = None,
    ) -> str:
        """Publish ``message`` as JSON; returns SNS's message id.

        ``kind`` (the event kind) and ``source`` go out as String message attributes, with
        ``attributes`` (at most 8 more), so subscriptions can filter (``{"kind": ["spot-itn"]}``).
        On a FIFO topic, ``group_id`` (default ``kind``) orders messages and ``deduplication_id``
        (default: a hash of the message) drops repeats within SNS's 5-minute window.
        Raises ``PublishError`` before sending if the message or attributes exceed SNS's limits,
        ``AwsError`` if SNS refuses.
        """
        body = _json(message)
        if len(body.encode()) > MAX_SNS_MESSAGE_BYTES:
            raise PublishError(
                f"SNS message is {len(body.encode())} bytes; SNS takes at most {MAX_SNS_MESSAGE_BYTES}"
            )
        values = {"kind": kind, "source": self._source, **(attributes or {})}
        if len(values) > MAX_ATTRIBUTES:
            raise PublishError(f"{len(values)} message attributes; SNS delivers at most {MAX_ATTRIBUTES}")
        kwargs: dict[str, Any] = {
            "TopicArn": self.topic_arn,
            "Message": body,
            "Subject": sns_subject(subject),
            "MessageAttributes": {
                name: {"DataType": "String", "StringValue": value} for name, value in values.items() if value
            },
        }
        if self._fifo:
            kwargs["MessageGroupId"] = group_id or kind or self._source
            kwargs["MessageDeduplicationId"] = deduplication_id or hashlib.sha256(body.encode()).hexdigest()
        answer = await self._clients.call("sns", "Publish", **kwargs)
        return str(answer.get("MessageId", ""))


class EventBridgePublisher:
    """Puts custom events on one EventBridge bus (name or ARN; ``default`` is the account's)."""

    def __init__(
        self,
        clients: AwsClients,
        event_bus: str = "default",
        *,
        source: str = DEFAULT_SOURCE,
        detail_type: str = DEFAULT_DETAIL_TYPE,
    ) -> None:
        if not source or source.startswith("aws."):
            raise ValueError(f"event source {source!r}: must be set and not start with 'aws.'")
        if not event_bus:
            raise ValueError("event_bus must be a bus name or ARN")
        if not detail_type:
            raise ValueError("detail_type must be set")
        self._clients = clients
        self.event_bus = event_bus
        self.source = source
        self.detail_type = detail_type

    async def put(
        self,
        detail: Mapping[str, Any],
        *,
        detail_type: str | None = None,
        resources: Iterable[str] = (),
        time: datetime | None = None,
    ) -> str:
        """Put one event whose ``detail`` is ``detail``; returns its event id.

        ``resources`` (ARNs, e.g. the instance's) let rules match on them. Raises ``PublishError``
        before sending if the entry reaches 256 KiB, ``AwsError`` if the call fails or EventBridge
        reports the entry failed (its code and message; throttling and internal failures marked
        retryable).
        """
        entry: dict[str, Any] = {
            "Source": self.source,
            "DetailType": detail_type or self.detail_type,
            "Detail": _json(detail),
            "EventBusName": self.event_bus,
        }
        resource_list = list(resources)
        if resource_list:
            entry["Resources"] = resource_list
        if time is not None:
            entry["Time"] = time
        size = entry_size(entry)
        if size >= MAX_EVENT_ENTRY_BYTES:
            raise PublishError(f"EventBridge entry is {size} bytes; it must be under {MAX_EVENT_ENTRY_BYTES}")
        answer = await self._clients.call("events", "PutEvents", Entries=[entry])
        results = answer.get("Entries") or [{}]
        first = results[0] if results else {}
        if int(answer.get("FailedEntryCount") or 0) > 0 or first.get("ErrorCode"):
            raise AwsError.from_code(
                str(first.get("ErrorCode") or "FailedEntry"),
                str(first.get("ErrorMessage") or "EventBridge did not accept the event"),
                service="events",
                operation="PutEvents",
            )
        return str(first.get("EventId", ""))


def entry_size(entry: Mapping[str, Any]) -> int:
    """A PutEvents entry's size as EventBridge counts it (UTF-8 bytes of source, detail-type,
    detail and each resource; 14 for a time)."""
    size = 14 if entry.get("Time") is not None else 0
    for key in ("Source", "DetailType", "Detail"):
        size += len(str(entry.get(key) or "").encode())
    size += sum(len(str(r).encode()) for r in entry.get("Resources") or [])
    return size
