"""IMDS bodies to ``InterruptionEvent``s: pure functions, no I/O, time passed in.

Ids come from ``model.event_id`` over the notice's identifying content, so every poll of the same
notice yields the same id: the spot body (action and time), the rebalance body, a scheduled event's
EventId (its state changes keep the id; ``cancelled`` carries the change), the ASG state.
A body that is not what the path serves raises ``ImdsParseError`` naming the path and the problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from kubespot.model import InterruptionEvent, Kind, Source, event_id
from kubespot.sources.imds import paths
from kubespot.sources.imds.errors import ImdsParseError

#: Scheduled-event codes after which the instance is gone or down at NotBefore: those get a deadline.
#: system-maintenance keeps the instance running (network or power work), so it has none.
STOPPING_CODES = frozenset({"instance-reboot", "system-reboot", "instance-retirement", "instance-stop"})
ACTIVE = "active"
FINISHED_STATES = frozenset({"canceled", "completed"})
ASG_TERMINATED = "Terminated"

# Spelled out rather than strptime("%b"), which follows the process locale.
_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES, 1)}


def parse_spot_instance_action(
    body: str, *, instance_id: str, now: datetime, node_name: str | None = None
) -> InterruptionEvent:
    """``{"action": "terminate", "time": "...Z"}``: act now, the instance goes at ``time``."""
    path = paths.SPOT_INSTANCE_ACTION
    doc = _json_object(path, body)
    action = _string(path, doc, "action", body)
    deadline = _iso_time(path, _string(path, doc, "time", body), body)
    return InterruptionEvent(
        id=event_id(Kind.SPOT_INTERRUPTION, instance_id, doc),
        kind=Kind.SPOT_INTERRUPTION,
        instance_id=instance_id,
        source=Source.IMDS,
        # IMDS does not say when the notice was posted; the first sight of it is the best we know.
        notice_time=now,
        act_at=now,
        deadline=deadline,
        node_name=node_name,
        description=f"spot interruption: {action} at {_iso(deadline)}",
        raw=doc,
    )


def parse_rebalance(
    body: str, *, instance_id: str, now: datetime, node_name: str | None = None
) -> InterruptionEvent:
    """``{"noticeTime": "...Z"}``: a recommendation, no deadline; act on it now."""
    path = paths.REBALANCE
    doc = _json_object(path, body)
    notice = _iso_time(path, _string(path, doc, "noticeTime", body), body)
    return InterruptionEvent(
        id=event_id(Kind.REBALANCE_RECOMMENDATION, instance_id, doc),
        kind=Kind.REBALANCE_RECOMMENDATION,
        instance_id=instance_id,
        source=Source.IMDS,
        notice_time=notice,
        act_at=now,
        node_name=node_name,
        description=f"rebalance recommendation at {_iso(notice)}",
        raw=doc,
    )


def parse_scheduled_events(
    body: str,
    *,
    instance_id: str,
    now: datetime,
    lead_time: timedelta,
    node_name: str | None = None,
) -> tuple[list[InterruptionEvent], list[ImdsParseError]]:
    """The scheduled-events array: one event per entry, and one error per malformed entry.

    A body that is not a JSON array raises; a bad entry is reported beside the good ones, so one
    odd entry cannot hide a real reboot. Active events act at NotBefore minus ``lead_time``;
    canceled and completed ones come out ``cancelled`` (act now: undo).
    """
    path = paths.SCHEDULED_EVENTS
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ImdsParseError(path, f"not JSON: {exc}", body) from None
    if not isinstance(doc, list):
        raise ImdsParseError(path, f"expected a JSON array, got {type(doc).__name__}", body)
    events: list[InterruptionEvent] = []
    errors: list[ImdsParseError] = []
    for entry in doc:
        try:
            events.append(_scheduled(entry, instance_id, now, lead_time, node_name))
        except ImdsParseError as exc:
            errors.append(exc)
    return events, errors


def _scheduled(
    entry: object, instance_id: str, now: datetime, lead_time: timedelta, node_name: str | None
) -> InterruptionEvent:
    path = paths.SCHEDULED_EVENTS
    text = orjson.dumps(entry).decode()
    if not isinstance(entry, dict):
        raise ImdsParseError(path, "scheduled event is not an object", text)
    ev_id = _string(path, entry, "EventId", text)
    # An unknown code is still a notice (AWS may add codes): handled, without a deadline.
    code = _string(path, entry, "Code", text)
    state = _string(path, entry, "State", text)
    if state != ACTIVE and state not in FINISHED_STATES:
        raise ImdsParseError(path, f"unknown scheduled event state {state!r}", text)
    not_before = parse_event_date(path, _string(path, entry, "NotBefore", text), text)
    cancelled = state in FINISHED_STATES
    description = entry.get("Description")
    return InterruptionEvent(
        id=event_id(Kind.SCHEDULED_MAINTENANCE, instance_id, ev_id),
        kind=Kind.SCHEDULED_MAINTENANCE,
        instance_id=instance_id,
        source=Source.IMDS,
        notice_time=now,
        act_at=now if cancelled else not_before - lead_time,
        deadline=not_before if code in STOPPING_CODES else None,
        node_name=node_name,
        description=(
            f"{code} {ev_id} ({state}) not before {_iso(not_before)}"
            + (f": {description}" if isinstance(description, str) and description else "")
        ),
        cancelled=cancelled,
        raw=entry,
    )


def parse_asg_target_state(
    body: str, *, instance_id: str, now: datetime, node_name: str | None = None
) -> InterruptionEvent | None:
    """``Terminated`` is an event (the group is taking the instance away); any other state is not."""
    state = body.strip()
    if not state or any(c.isspace() for c in state) or not state.isprintable():
        raise ImdsParseError(paths.ASG_TARGET_LIFECYCLE_STATE, "not a lifecycle state", body)
    if state != ASG_TERMINATED:
        return None
    return InterruptionEvent(
        id=event_id(Kind.ASG_LIFECYCLE, instance_id, state),
        kind=Kind.ASG_LIFECYCLE,
        instance_id=instance_id,
        source=Source.IMDS,
        notice_time=now,
        act_at=now,
        node_name=node_name,
        description="auto scaling target lifecycle state: Terminated",
        raw={"target-lifecycle-state": state},
    )


def parse_identity_document(body: str) -> dict[str, Any]:
    """The identity document as a dict; it must at least name the instance."""
    path = paths.IDENTITY_DOCUMENT
    doc = _json_object(path, body)
    _string(path, doc, "instanceId", body)
    return doc


def parse_event_date(path: str, value: str, body: str = "") -> datetime:
    """``21 Nov 2026 09:00:00 GMT`` (the scheduled-events format) as an aware UTC datetime."""
    parts = value.split()
    try:
        if len(parts) != 5 or parts[4] not in ("GMT", "UTC"):
            raise ValueError
        day, month, year = int(parts[0]), _MONTHS[parts[1]], int(parts[2])
        hh, mm, ss = (int(x) for x in parts[3].split(":"))
        return datetime(year, month, day, hh, mm, ss, tzinfo=UTC)
    except (ValueError, KeyError):
        reason = f"bad date {value!r}, expected like '21 Nov 2026 09:00:00 GMT'"
        raise ImdsParseError(path, reason, body) from None


def _json_object(path: str, body: str) -> dict[str, Any]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ImdsParseError(path, f"not JSON: {exc}", body) from None
    if not isinstance(doc, dict):
        raise ImdsParseError(path, f"expected a JSON object, got {type(doc).__name__}", body)
    return doc


def _string(path: str, doc: Mapping[str, Any], key: str, body: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise ImdsParseError(path, f"missing or non-string {key!r}", body)
    return value


def _iso_time(path: str, value: str, body: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ImdsParseError(path, f"bad time {value!r}, expected ISO 8601", body) from None
    # IMDS times are UTC; a zoneless one is read as UTC rather than as local time.
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")
