"""Interruption-queue message bodies to ``InterruptionEvent``s: pure functions, no I/O, time passed in.

This module owns the shapes that arrive on the queue and what each one means for the controller:

- EventBridge events (``detail-type``): spot interruption warnings, interruptible Capacity
  Reservation interruption warnings, rebalance recommendations, instance state changes, Auto Scaling
  terminate and launch lifecycle actions (a launch action is no interruption: ``ParsedMessage.launch``),
  AWS Health EC2 scheduled changes; any other detail-type is understood as "nothing to do".
- Auto Scaling notifications sent straight to SQS (``Service: AWS Auto Scaling``): lifecycle
  actions and the test notification.
- Either of those wrapped in an SNS envelope (``Type: Notification``, ``Message`` a JSON string).

``parse_message`` returns a ``ParsedMessage``: events to handle (one per affected instance), or an
``ignore_reason`` (understood, nothing to do: delete it), plus the lifecycle action to complete for
Auto Scaling. Anything else raises ``MessageError`` naming what is wrong.

Ids come from ``model.event_id`` over the notice's identifying content, so redeliveries (SQS is
at-least-once, several replicas read the queue) dedupe and different notices do not: the
EventBridge envelope ``id`` for EC2 events; the ``LifecycleActionToken`` for lifecycle actions, in
both the EventBridge and the direct form, so one action delivered both ways is one event; the
Health ``eventArn`` for scheduled changes, per instance, so a Health update (a later status) keeps
the id and ``cancelled`` carries the change, as the IMDS source does for scheduled events.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import orjson

from kubespot.config.queue import SPOT_NOTICE
from kubespot.controllers.interruption.sqs.errors import MessageError
from kubespot.model import InterruptionEvent, Kind, Source, event_id

#: The spot interruption warning comes two minutes before EC2 acts (``config.queue.SPOT_NOTICE``,
#: ``queue.interruption_notice``'s default).
SPOT_WARNING = timedelta(seconds=SPOT_NOTICE)
#: State-change states after which the instance is going or gone.
GOING_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"
LAUNCHING = "autoscaling:EC2_INSTANCE_LAUNCHING"
TEST_NOTIFICATION = "autoscaling:TEST_NOTIFICATION"
AUTOSCALING_SERVICE = "AWS Auto Scaling"
#: A Health event's status once it is over; handled as a withdrawal of the notice (undo).
HEALTH_CLOSED = "closed"

DETAIL_SPOT = "EC2 Spot Instance Interruption Warning"
#: An instance in an interruptible Capacity Reservation whose owner reclaims the capacity: terminated
#: two minutes later, at ``detail.instance-termination-time`` (EC2 User Guide, "Monitor
#: interruptible Capacity Reservations with EventBridge and CloudTrail"). Karpenter's interruption
#: controller acts on it as on a spot warning (cordon and drain); so does kubespot, as ``spot-itn``.
DETAIL_CAPACITY_RESERVATION = "EC2 Capacity Reservation Instance Interruption Warning"
DETAIL_REBALANCE = "EC2 Instance Rebalance Recommendation"
DETAIL_STATE_CHANGE = "EC2 Instance State-change Notification"
DETAIL_ASG_TERMINATE = "EC2 Instance-terminate Lifecycle Action"
DETAIL_ASG_LAUNCH = "EC2 Instance-launch Lifecycle Action"
DETAIL_HEALTH = "AWS Health Event"

#: ``ParsedMessage.form`` values: which shape the message had (a metrics label for the controller).
FORM_EVENTBRIDGE = "eventbridge"
FORM_AUTOSCALING = "autoscaling"
FORM_SNS = "sns"

_SNS_TYPES = frozenset({"Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation"})
_INSTANCE_ID = re.compile(r"i-[0-9A-Za-z]{1,40}")
_MAX_TIME_CHARS = 64
_SHORT = 60


@dataclass(frozen=True, slots=True)
class LifecycleAction:
    """What ``CompleteLifecycleAction`` and ``RecordLifecycleActionHeartbeat`` need.

    ``token`` may be None (the calls then name the instance instead); ``started_at`` is the
    notification time, the best known start of the hook's timeout.
    """

    group_name: str
    hook_name: str
    token: str | None
    instance_id: str
    started_at: datetime | None


@dataclass(frozen=True, slots=True)
class ParsedMessage:
    """One queue message understood.

    ``events`` has one event per affected instance (a Health event can name several); it is empty
    when ``ignore_reason`` says why there is nothing to do (delete the message). ``lifecycle`` is
    set for Auto Scaling terminate actions; ``launch`` (with no events) for a launch action, to
    complete once the instance's node is Ready. ``form`` is the shape (``FORM_*``); ``via_sns`` says it
    came wrapped in an SNS notification. ``warnings`` name parts skipped as malformed while the rest
    was usable (e.g. one bad Health entity beside good ones): log them.
    """

    events: tuple[InterruptionEvent, ...]
    ignore_reason: str | None = None
    lifecycle: LifecycleAction | None = None
    launch: LifecycleAction | None = None
    source_account: str | None = None
    region: str | None = None
    form: str = ""
    via_sns: bool = False
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Context:
    now: datetime
    lead_time: timedelta
    grace: timedelta
    notice: timedelta = SPOT_WARNING


def parse_message(
    body: str | bytes,
    *,
    now: datetime,
    lead_time: timedelta,
    node_termination_grace: timedelta,
    notice: timedelta = SPOT_WARNING,
) -> ParsedMessage:
    """One SQS message body to what the controller needs; raises only ``MessageError``.

    ``lead_time`` is how long before a Health scheduled change to act; ``node_termination_grace``
    is kept for callers and unused: an Auto Scaling termination gets no invented deadline.
    ``notice`` is how long after an interruption warning's time the instance ends when the warning
    does not say (``queue.interruption_notice``: AWS's two minutes unless EC2 is simulated faster).
    """
    text = _text(body)
    doc = _json_object(text, "message")
    return _parse_doc(doc, text, _Context(now, lead_time, node_termination_grace, notice), in_sns=False)


# --- shapes ----------------------------------------------------------------------------------------


def _parse_doc(doc: dict[str, Any], text: str, ctx: _Context, *, in_sns: bool) -> ParsedMessage:
    if "detail-type" in doc:
        return _eventbridge(doc, text, ctx)
    if doc.get("Type") in _SNS_TYPES and ("Message" in doc or "TopicArn" in doc):
        if in_sns:
            raise MessageError("an SNS notification inside an SNS notification", text)
        return _sns(doc, text, ctx)
    if doc.get("Service") == AUTOSCALING_SERVICE or "LifecycleTransition" in doc:
        return _autoscaling(doc, text, ctx)
    keys = ", ".join(_short(k) for k in list(doc)[:8]) + (", …" if len(doc) > 8 else "")
    raise MessageError(
        "unknown message shape: neither an EventBridge event ('detail-type'), an SNS notification "
        f"nor an Auto Scaling notification (keys: {keys or 'none'})",
        text,
    )


def _sns(doc: dict[str, Any], text: str, ctx: _Context) -> ParsedMessage:
    kind = doc["Type"]
    topic = doc.get("TopicArn")
    account, region = _arn_account_region(topic)
    if kind != "Notification":
        where = f" for {_short(topic)}" if isinstance(topic, str) else ""
        return ParsedMessage(
            (),
            ignore_reason=f"SNS {kind}{where}: nothing to handle (confirm subscriptions with SubscribeURL)",
            source_account=account,
            region=region,
            form=FORM_SNS,
            via_sns=True,
        )
    message = _string(doc, "Message", "SNS notification", text)
    inner_text = _strip(message)
    try:
        inner = _json_object(inner_text, "SNS Message")
        parsed = _parse_doc(inner, inner_text, ctx, in_sns=True)
    except MessageError as exc:
        reason = exc.reason if exc.reason.startswith("SNS Message") else f"SNS Message: {exc.reason}"
        raise MessageError(reason, inner_text) from None
    return replace(
        parsed,
        via_sns=True,
        source_account=parsed.source_account or account,
        region=parsed.region or region,
    )


@dataclass(frozen=True, slots=True)
class _Envelope:
    doc: dict[str, Any]
    text: str
    id: str
    time: datetime
    detail: dict[str, Any]
    account: str | None
    region: str | None

    def ignore(self, reason: str, warnings: tuple[str, ...] = ()) -> ParsedMessage:
        return ParsedMessage(
            (),
            ignore_reason=reason,
            source_account=self.account,
            region=self.region,
            form=FORM_EVENTBRIDGE,
            warnings=warnings,
        )

    def result(
        self,
        events: tuple[InterruptionEvent, ...],
        lifecycle: LifecycleAction | None = None,
        warnings: tuple[str, ...] = (),
    ) -> ParsedMessage:
        return ParsedMessage(
            events,
            lifecycle=lifecycle,
            source_account=self.account,
            region=self.region,
            form=FORM_EVENTBRIDGE,
            warnings=warnings,
        )


def _eventbridge(doc: dict[str, Any], text: str, ctx: _Context) -> ParsedMessage:
    detail_type = _string(doc, "detail-type", "EventBridge event", text)
    account = _optional_string(doc, "account", "EventBridge event", text)
    region = _optional_string(doc, "region", "EventBridge event", text)
    handler = _EVENTBRIDGE.get(detail_type)
    if handler is None:
        return ParsedMessage(
            (),
            ignore_reason=f"detail-type {_short(detail_type)} is not an interruption",
            source_account=account,
            region=region,
            form=FORM_EVENTBRIDGE,
        )
    detail = doc.get("detail")
    if not isinstance(detail, dict):
        raise MessageError(f"{detail_type} event: 'detail' is {_type(detail)}, expected an object", text)
    env = _Envelope(
        doc=doc,
        text=text,
        id=_string(doc, "id", f"{detail_type} event", text),
        time=_iso_time(_string(doc, "time", f"{detail_type} event", text), "time", text),
        detail=detail,
        account=account,
        region=region,
    )
    return handler(env, ctx)


def _spot(env: _Envelope, ctx: _Context) -> ParsedMessage:
    iid = _instance_id(env.detail, "instance-id", "spot interruption detail", env.text)
    action = _optional_string(env.detail, "instance-action", "spot interruption detail", env.text)
    deadline = _shift(env.time, ctx.notice, env.text)
    return env.result((_termination_warning(env, ctx, iid, action, deadline, "spot interruption"),))


def _termination_warning(
    env: _Envelope, ctx: _Context, iid: str, action: str | None, deadline: datetime, what: str
) -> InterruptionEvent:
    """A two-minute warning that the instance goes (spot, or an interruptible Capacity Reservation
    reclaimed): one spot-itn event, as Karpenter handles both."""
    verb = _short(action or "terminate", quote=False)
    return InterruptionEvent(
        id=event_id(Kind.SPOT_INTERRUPTION, iid, env.id),
        kind=Kind.SPOT_INTERRUPTION,
        instance_id=iid,
        source=Source.SQS,
        notice_time=env.time,
        act_at=ctx.now,
        deadline=deadline,
        description=f"{what} warning: {verb} at {_iso(deadline)}",
        raw=env.doc,
    )


def _capacity_reservation(env: _Envelope, ctx: _Context) -> ParsedMessage:
    what = "capacity reservation interruption detail"
    iid = _instance_id(env.detail, "instance-id", what, env.text)
    action = _optional_string(env.detail, "instance-action", what, env.text)
    when = env.detail.get("instance-termination-time")
    warnings: tuple[str, ...] = ()
    deadline = _shift(env.time, ctx.notice, env.text)  # "2 minutes before" (the documented notice)
    fallback = f"deadline taken as {ctx.notice.total_seconds():g} s after the notice"
    if isinstance(when, str) and when:
        try:
            deadline = _iso_time(when, "instance-termination-time", env.text)
        except MessageError as exc:
            # The instance is still going: act with the documented notice rather than drop it.
            warnings = (f"{exc.reason}; {fallback}",)
    elif when is not None and when != "":
        warnings = (f"'instance-termination-time' is {_type(when)}; {fallback}",)
    event = _termination_warning(env, ctx, iid, action, deadline, "capacity reservation interruption")
    return env.result((event,), warnings=warnings)


def _rebalance(env: _Envelope, ctx: _Context) -> ParsedMessage:
    iid = _instance_id(env.detail, "instance-id", "rebalance recommendation detail", env.text)
    event = InterruptionEvent(
        id=event_id(Kind.REBALANCE_RECOMMENDATION, iid, env.id),
        kind=Kind.REBALANCE_RECOMMENDATION,
        instance_id=iid,
        source=Source.SQS,
        notice_time=env.time,
        act_at=ctx.now,
        description=f"rebalance recommendation at {_iso(env.time)}",
        raw=env.doc,
    )
    return env.result((event,))


def _state_change(env: _Envelope, ctx: _Context) -> ParsedMessage:
    iid = _instance_id(env.detail, "instance-id", "state-change detail", env.text)
    state = _string(env.detail, "state", "state-change detail", env.text)
    if state not in GOING_STATES:
        return env.ignore(f"instance {iid} is {_short(state)}: not an interruption")
    event = InterruptionEvent(
        id=event_id(Kind.STATE_CHANGE, iid, env.id),
        kind=Kind.STATE_CHANGE,
        instance_id=iid,
        source=Source.SQS,
        notice_time=env.time,
        act_at=ctx.now,
        # The instance is already going: act at once. Stamped with the event's own time (not the
        # receipt) so every redelivery carries the same deadline and dedupes.
        deadline=env.time,
        description=f"instance state {state} at {_iso(env.time)}",
        raw=env.doc,
    )
    return env.result((event,))


def _asg_terminate(env: _Envelope, ctx: _Context) -> ParsedMessage:
    what = "terminate lifecycle action detail"
    transition = _optional_string(env.detail, "LifecycleTransition", what, env.text)
    if transition is not None and transition != TERMINATING:
        return env.ignore(f"lifecycle transition {_short(transition)} is not a termination")
    action = _lifecycle(env.detail, what, env.text, env.time)
    event = _asg_event(action, action.token or env.id, env.time, ctx, env.doc)
    return env.result((event,), lifecycle=action)


def _asg_launch(env: _Envelope, ctx: _Context) -> ParsedMessage:
    what = "launch lifecycle action detail"
    transition = _optional_string(env.detail, "LifecycleTransition", what, env.text)
    if transition is not None and transition != LAUNCHING:
        return env.ignore(f"lifecycle transition {_short(transition)} is not a launch")
    action = _lifecycle(env.detail, what, env.text, env.time)
    return replace(env.result(()), launch=action)


def _health(env: _Envelope, ctx: _Context) -> ParsedMessage:
    what = "Health event detail"
    service = _optional_string(env.detail, "service", what, env.text)
    category = _optional_string(env.detail, "eventTypeCategory", what, env.text)
    type_code = _optional_string(env.detail, "eventTypeCode", what, env.text) or "?"
    if service != "EC2" or category != "scheduledChange":
        return env.ignore(
            f"Health event {_short(type_code, quote=False)} ({_short(service)}, {_short(category)}) "
            "is not an EC2 scheduled change"
        )
    arn = _string(env.detail, "eventArn", what, env.text)
    start = _health_time(_string(env.detail, "startTime", what, env.text), "startTime", env.text)
    status = _optional_string(env.detail, "statusCode", what, env.text) or "upcoming"
    instances, warnings = _health_instances(env)
    if not instances:
        if warnings:
            raise MessageError(f"Health event {arn[:_SHORT]}: {'; '.join(warnings)}", env.text)
        return env.ignore(f"Health event {_short(type_code, quote=False)} names no EC2 instance", warnings)
    cancelled = status == HEALTH_CLOSED
    act_at = ctx.now if cancelled else _shift(start, -ctx.lead_time, env.text)
    events = tuple(
        InterruptionEvent(
            id=event_id(Kind.SCHEDULED_MAINTENANCE, iid, arn),
            kind=Kind.SCHEDULED_MAINTENANCE,
            instance_id=iid,
            source=Source.SQS,
            notice_time=env.time,
            act_at=act_at,
            deadline=start,
            description=(
                f"{_short(type_code, quote=False)} ({_short(status, quote=False)}) "
                f"starting {_iso(start)}" + _health_summary(env.detail)
            ),
            cancelled=cancelled,
            raw=env.doc,
        )
        for iid in instances
    )
    return env.result(events, warnings=warnings)


_EVENTBRIDGE: dict[str, Callable[[_Envelope, _Context], ParsedMessage]] = {
    DETAIL_SPOT: _spot,
    DETAIL_CAPACITY_RESERVATION: _capacity_reservation,
    DETAIL_REBALANCE: _rebalance,
    DETAIL_STATE_CHANGE: _state_change,
    DETAIL_ASG_TERMINATE: _asg_terminate,
    DETAIL_ASG_LAUNCH: _asg_launch,
    DETAIL_HEALTH: _health,
}


def _health_instances(env: _Envelope) -> tuple[list[str], tuple[str, ...]]:
    """Instance ids among ``affectedEntities`` (else ``resources``), deduplicated, in order.

    A malformed entry is a warning, not a failure, so one odd entry cannot hide the others; an
    entity that is not an instance (Health may name other resources) is skipped quietly.
    """
    entities = env.detail.get("affectedEntities")
    values: list[str] = []
    warnings: list[str] = []
    if entities is not None and entities != []:
        if not isinstance(entities, list):
            raise MessageError(f"'affectedEntities' is {_type(entities)}, expected a list", env.text)
        for n, entry in enumerate(entities):
            value = entry.get("entityValue") if isinstance(entry, dict) else None
            if isinstance(value, str):
                values.append(value)
            else:
                warnings.append(f"affectedEntities[{n}] has no string 'entityValue'")
    else:
        resources = env.doc.get("resources")
        if isinstance(resources, list):
            # Bare ids or instance ARNs (arn:aws:ec2:region:account:instance/i-...).
            values = [r.rsplit("/", 1)[-1] for r in resources if isinstance(r, str)]
    seen: dict[str, None] = {}
    for value in values:
        if _INSTANCE_ID.fullmatch(value):
            seen.setdefault(value)
    return list(seen), tuple(warnings)


def _health_summary(detail: Mapping[str, Any]) -> str:
    descriptions = detail.get("eventDescription")
    if isinstance(descriptions, list):
        for entry in descriptions:
            text = entry.get("latestDescription") if isinstance(entry, dict) else None
            if isinstance(text, str) and text.strip():
                first = " ".join(text.split())
                return ": " + (first if len(first) <= 120 else first[:119] + "…")
    return ""


def _autoscaling(doc: dict[str, Any], text: str, ctx: _Context) -> ParsedMessage:
    what = "Auto Scaling notification"
    account = _optional_string(doc, "AccountId", what, text)
    _, region = _arn_account_region(doc.get("AutoScalingGroupARN"))

    def ignore(reason: str) -> ParsedMessage:
        return ParsedMessage(
            (), ignore_reason=reason, source_account=account, region=region, form=FORM_AUTOSCALING
        )

    notice = doc.get("Event")
    transition = doc.get("LifecycleTransition")
    if notice == TEST_NOTIFICATION:
        group = doc.get("AutoScalingGroupName")
        return ignore("Auto Scaling test notification" + (f" for {_short(group)}" if group else ""))
    if transition is None:
        if isinstance(notice, str):
            return ignore(f"Auto Scaling notification {_short(notice)} is not a lifecycle action")
        raise MessageError(f"{what} with neither 'LifecycleTransition' nor 'Event'", text)
    if not isinstance(transition, str):
        raise MessageError(f"{what}: 'LifecycleTransition' is {_type(transition)}, expected a string", text)
    if transition not in (TERMINATING, LAUNCHING):
        return ignore(f"lifecycle transition {_short(transition)} is not a termination")
    started = _iso_time(_string(doc, "Time", what, text), "Time", text)
    action = _lifecycle(doc, what, text, started)
    if transition == LAUNCHING:
        return ParsedMessage((), launch=action, source_account=account, region=region, form=FORM_AUTOSCALING)
    request = _optional_string(doc, "RequestId", what, text)
    key = action.token or request or f"{action.group_name}\x00{action.hook_name}\x00{doc['Time']}"
    event = _asg_event(action, key, started, ctx, doc)
    return ParsedMessage(
        (event,),
        lifecycle=action,
        source_account=account,
        region=region,
        form=FORM_AUTOSCALING,
    )


def _lifecycle(fields: Mapping[str, Any], what: str, text: str, started: datetime) -> LifecycleAction:
    return LifecycleAction(
        group_name=_string(fields, "AutoScalingGroupName", what, text),
        hook_name=_string(fields, "LifecycleHookName", what, text),
        token=_optional_string(fields, "LifecycleActionToken", what, text),
        instance_id=_instance_id(fields, "EC2InstanceId", what, text),
        started_at=started,
    )


def _asg_event(
    action: LifecycleAction, key: str, notice: datetime, ctx: _Context, raw: Mapping[str, Any]
) -> InterruptionEvent:
    return InterruptionEvent(
        id=event_id(Kind.ASG_LIFECYCLE, action.instance_id, key),
        kind=Kind.ASG_LIFECYCLE,
        instance_id=action.instance_id,
        source=Source.SQS,
        notice_time=notice,
        act_at=ctx.now,
        # No deadline: a scale-in is voluntary (the hook holds the instance until it is completed or
        # times out); the controller bounds it by the hook's timeout (its ``lifecycle_hooks``).
        description=(
            f"auto scaling group {_short(action.group_name, quote=False)} terminating the instance "
            f"(hook {_short(action.hook_name, quote=False)})"
        ),
        raw=raw,
    )


# --- fields ----------------------------------------------------------------------------------------


def _text(body: str | bytes) -> str:
    if isinstance(body, bytes | bytearray):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MessageError(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    if not isinstance(body, str):
        raise MessageError(f"message body is {_type(body)}, expected text")
    return _strip(body)


def _strip(text: str) -> str:
    return text.strip().lstrip("\ufeff").strip()


def _json_object(text: str, what: str) -> dict[str, Any]:
    if not text:
        raise MessageError(f"{what} is empty")
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise MessageError(f"{what} is not JSON: {exc}", text) from None
    if not isinstance(doc, dict):
        raise MessageError(f"{what} is {_type(doc)}, expected a JSON object", text)
    return doc


def _string(doc: Mapping[str, Any], key: str, what: str, text: str) -> str:
    value = doc.get(key)
    if value is None:
        raise MessageError(f"{what} has no {key!r}", text)
    if not isinstance(value, str):
        raise MessageError(f"{what}: {key!r} is {_type(value)}, expected a string", text)
    if not value.strip():
        raise MessageError(f"{what}: {key!r} is empty", text)
    return value


def _optional_string(doc: Mapping[str, Any], key: str, what: str, text: str) -> str | None:
    """None when absent, null or empty; a present value of another type is an error."""
    value = doc.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise MessageError(f"{what}: {key!r} is {_type(value)}, expected a string", text)
    return value


def _instance_id(doc: Mapping[str, Any], key: str, what: str, text: str) -> str:
    value = _string(doc, key, what, text)
    if not _INSTANCE_ID.fullmatch(value):
        raise MessageError(f"{what}: {key!r} is {_short(value)}, not an instance id", text)
    return value


def _iso_time(value: str, key: str, text: str) -> datetime:
    """ISO 8601 (``...Z``, ``+00:00``, fractions) as aware UTC; a zoneless time is read as UTC."""
    try:
        # A date alone is not a notice time: ask for the time of day too.
        if len(value) > _MAX_TIME_CHARS or value[10:11] not in ("T", "t", " "):
            raise ValueError
        parsed = datetime.fromisoformat(value)
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise MessageError(f"{key!r} is {_short(value)}, expected an ISO 8601 time", text) from None


def _health_time(value: str, key: str, text: str) -> datetime:
    """RFC 1123 (``Sat, 05 Dec 2026 06:00:00 GMT``), as Health sends; ISO 8601 accepted too."""
    if len(value) <= _MAX_TIME_CHARS:
        try:
            parsed = parsedate_to_datetime(value)
        except (ValueError, TypeError, IndexError, OverflowError):
            pass
        else:
            return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    try:
        return _iso_time(value, key, text)
    except MessageError:
        reason = f"{key!r} is {_short(value)}, expected a time like 'Sat, 05 Dec 2026 06:00:00 GMT'"
        raise MessageError(reason, text) from None


def _shift(t: datetime, delta: timedelta, text: str) -> datetime:
    try:
        return t + delta
    except OverflowError:
        raise MessageError(f"time {_iso(t)} is out of range", text) from None


def _arn_account_region(arn: object) -> tuple[str | None, str | None]:
    """``arn:partition:service:region:account:...`` → (account, region); Nones when not an ARN."""
    if not isinstance(arn, str) or not arn.startswith("arn:"):
        return None, None
    parts = arn.split(":", 5)
    if len(parts) < 6:
        return None, None
    return parts[4] or None, parts[3] or None


def _short(value: object, *, quote: bool = True) -> str:
    """A value for a message: repr'd (or bare), cut so a huge field cannot flood a log line."""
    text = repr(value) if quote else str(value)
    return text if len(text) <= _SHORT else text[: _SHORT - 1] + "…"


def _type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")
