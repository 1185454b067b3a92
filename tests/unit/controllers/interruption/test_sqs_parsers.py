"""Queue message bodies (every sample in FACTS.md's events/, bare and SNS-wrapped) to events, stable
ids, ignore reasons, and malformed bodies to ``MessageError``."""

from __future__ import annotations

import copy
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kubespot.controllers.interruption.sqs.errors import MessageError
from kubespot.controllers.interruption.sqs.parsers import (
    FORM_AUTOSCALING,
    FORM_EVENTBRIDGE,
    FORM_SNS,
    LifecycleAction,
    ParsedMessage,
    parse_message,
)
from kubespot.model import Kind, Source

SAMPLES = Path(__file__).resolve().parents[3] / "fixtures" / "eventbridge"
NOW = datetime(2026, 11, 20, 17, 3, 0, tzinfo=UTC)
LEAD = timedelta(minutes=10)
GRACE = timedelta(seconds=120)
ACCOUNT = "123456789012"


def sample(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((SAMPLES / f"{name}.json").read_text())
    return doc


def parse(body: str | bytes | dict[str, Any], *, now: datetime = NOW) -> ParsedMessage:
    text = json.dumps(body) if isinstance(body, dict) else body
    return parse_message(text, now=now, lead_time=LEAD, node_termination_grace=GRACE)


def sns(inner: dict[str, Any] | str, **extra: Any) -> dict[str, Any]:
    """``inner`` as SNS delivers it to an SQS subscriber without raw message delivery."""
    doc = {
        "Type": "Notification",
        "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
        "TopicArn": "arn:aws:sns:eu-west-1:210987654321:kubespot-interruptions",
        "Subject": None,
        "Message": inner if isinstance(inner, str) else json.dumps(inner),
        "Timestamp": "2026-11-20T17:02:14.000Z",
        "SignatureVersion": "1",
        "Signature": "EXAMPLE",
        "SigningCertURL": "https://sns.eu-west-1.amazonaws.com/cert.pem",
        "UnsubscribeURL": "https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe",
    }
    doc.update(extra)
    return doc


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def the_event(parsed: ParsedMessage) -> Any:
    assert parsed.ignore_reason is None
    assert len(parsed.events) == 1
    return parsed.events[0]


# --- every sample ----------------------------------------------------------------------------------

EXPECTED = {
    # name: (kind, instance, notice, act_at, deadline)
    "spot-interruption-warning": (
        Kind.SPOT_INTERRUPTION,
        "i-0a1b2c3d4e5f60001",
        at("2026-11-20T17:02:13"),
        NOW,
        at("2026-11-20T17:04:13"),
    ),
    # An interruption with a deadline, handled as a spot warning (as Karpenter does).
    "capacity-reservation-interruption-warning": (
        Kind.SPOT_INTERRUPTION,
        "i-0a1b2c3d4e5f60007",
        at("2026-11-20T17:02:13"),
        NOW,
        at("2026-11-20T17:04:13"),
    ),
    "rebalance-recommendation": (
        Kind.REBALANCE_RECOMMENDATION,
        "i-0a1b2c3d4e5f60002",
        at("2026-11-20T16:40:02"),
        NOW,
        None,
    ),
    "instance-state-change": (
        Kind.STATE_CHANGE,
        "i-0a1b2c3d4e5f60003",
        at("2026-11-20T17:10:54"),
        NOW,
        at("2026-11-20T17:10:54"),
    ),
    "asg-terminate-lifecycle-action": (
        Kind.ASG_LIFECYCLE,
        "i-0a1b2c3d4e5f60004",
        at("2026-11-20T17:20:00"),
        NOW,
        None,  # voluntary: the hook, not the message, bounds it
    ),
    "health-scheduled-change": (
        Kind.SCHEDULED_MAINTENANCE,
        "i-0a1b2c3d4e5f60005",
        at("2026-11-20T06:27:57"),
        at("2026-12-05T06:00:00") - LEAD,
        at("2026-12-05T06:00:00"),
    ),
    "asg-lifecycle-direct": (
        Kind.ASG_LIFECYCLE,
        "i-0a1b2c3d4e5f60006",
        at("2026-11-20T17:25:00.123"),
        NOW,
        None,
    ),
}


def test_every_sample_file_is_covered() -> None:
    names = {p.stem for p in SAMPLES.glob("*.json")}
    assert names == {*EXPECTED, "asg-test-notification"}


@pytest.mark.parametrize("wrapped", [False, True], ids=["bare", "sns"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_parses_to_the_expected_event(name: str, wrapped: bool) -> None:
    kind, instance, notice, act_at, deadline = EXPECTED[name]
    doc = sample(name)
    parsed = parse(sns(doc) if wrapped else doc)
    ev = the_event(parsed)
    assert (ev.kind, ev.instance_id, ev.notice_time, ev.act_at, ev.deadline) == (
        kind,
        instance,
        notice,
        act_at,
        deadline,
    )
    assert ev.source is Source.SQS and ev.node_name is None and not ev.cancelled
    assert ev.notice_time.tzinfo is not None and ev.id.startswith(f"{kind.value}-")
    assert ev.description and "\n" not in ev.description
    assert ev.raw == doc
    assert parsed.source_account == ACCOUNT
    assert parsed.via_sns is wrapped
    direct = name == "asg-lifecycle-direct"
    assert parsed.form == (FORM_AUTOSCALING if direct else FORM_EVENTBRIDGE)
    # The envelope's region, else the SNS topic's; the direct ASG form names none.
    assert parsed.region == ("eu-west-1" if wrapped and direct else None if direct else "us-east-1")
    assert (parsed.lifecycle is not None) is (kind is Kind.ASG_LIFECYCLE)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_ids_are_stable_across_deliveries_and_forms(name: str) -> None:
    doc = sample(name)
    first = parse(doc).events[0]
    # A redelivery later, read by another replica, re-serialised with other key order and spacing.
    reordered = json.dumps(dict(reversed(list(doc.items()))), indent=2)
    again = parse(reordered, now=NOW + timedelta(minutes=3)).events[0]
    wrapped = parse(sns(doc)).events[0]
    assert first.id == again.id == wrapped.id
    assert first == wrapped  # same notice, same moment: the same event whichever way it came


def test_spot_sample_details() -> None:
    ev = the_event(parse(sample("spot-interruption-warning")))
    assert ev.seconds_left(NOW) == 73
    assert ev.description == "spot interruption warning: terminate at 2026-11-20T17:04:13Z"


def test_capacity_reservation_warning_takes_its_termination_time() -> None:
    """EC2 User Guide, "Monitor interruptible Capacity Reservations with EventBridge and
    CloudTrail": sent 2 minutes before the instance is terminated, at ``instance-termination-time``."""
    doc = sample("capacity-reservation-interruption-warning")
    ev = the_event(parse(doc))
    assert ev.description == "capacity reservation interruption warning: terminate at 2026-11-20T17:04:13Z"
    later = copy.deepcopy(doc)
    later["detail"]["instance-termination-time"] = "2026-11-20T17:05:00.500Z"
    assert the_event(parse(later)).deadline == at("2026-11-20T17:05:00.500")
    # Without the time, or with one that cannot be read, the documented two minutes still hold.
    for value in (None, "soon", 17):
        odd = copy.deepcopy(doc)
        if value is None:
            del odd["detail"]["instance-termination-time"]
        else:
            odd["detail"]["instance-termination-time"] = value
        parsed = parse(odd)
        assert the_event(parsed).deadline == at("2026-11-20T17:04:13")
        assert bool(parsed.warnings) is (value is not None)
    with pytest.raises(MessageError, match="instance-id"):
        bad = copy.deepcopy(doc)
        del bad["detail"]["instance-id"]
        parse(bad)


def test_a_capacity_reservation_fallback_warning_names_the_notice_it_used() -> None:
    """EC2 User Guide, "Monitor interruptible Capacity Reservations with EventBridge and
    CloudTrail": the warning comes two minutes ahead; where its time cannot be read the deadline is
    the warning's time plus ``queue.interruption_notice``, and the warning says which notice that was
    (12 s in a simulated EC2 scaled tenfold), not always "2 minutes"."""
    doc = sample("capacity-reservation-interruption-warning")
    for value in ("soon", 17):
        odd = copy.deepcopy(doc)
        odd["detail"]["instance-termination-time"] = value
        body = json.dumps(odd)
        fast = timedelta(seconds=12)
        parsed = parse_message(body, now=NOW, lead_time=LEAD, node_termination_grace=GRACE, notice=fast)
        assert parsed.warnings and all("12 s after the notice" in w for w in parsed.warnings), parsed.warnings
        assert not any("2 minutes" in w for w in parsed.warnings)
        assert "120 s after the notice" in parse(odd).warnings[0]


def test_different_notices_get_different_ids() -> None:
    ids = set()
    for name in EXPECTED:
        doc = sample(name)
        ids.add(parse(doc).events[0].id)
        other = copy.deepcopy(doc)
        if "detail" in other:
            other["id"] = "00000000-0000-0000-0000-000000000000"
            other["detail"]["LifecycleActionToken"] = "aaaaaaaa-0000-0000-0000-000000000000"
            other["detail"]["eventArn"] = other["detail"].get("eventArn", "") + "-2"
        else:
            other["LifecycleActionToken"] = "aaaaaaaa-0000-0000-0000-000000000000"
        ids.add(parse(other).events[0].id)
    assert len(ids) == 2 * len(EXPECTED)


def test_same_instance_different_kinds_and_instances_differ() -> None:
    spot = sample("spot-interruption-warning")
    other_instance = copy.deepcopy(spot)
    other_instance["detail"]["instance-id"] = "i-0ffffffffffffffff"
    rebalance = copy.deepcopy(spot)
    rebalance["detail-type"] = "EC2 Instance Rebalance Recommendation"
    ids = {parse(d).events[0].id for d in (spot, other_instance, rebalance)}
    assert len(ids) == 3


# --- EventBridge EC2 -------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["terminate", "stop", "hibernate"])
def test_spot_actions(action: str) -> None:
    doc = sample("spot-interruption-warning")
    doc["detail"]["instance-action"] = action
    ev = the_event(parse(doc))
    assert action in ev.description and ev.deadline == at("2026-11-20T17:04:13")


@pytest.mark.parametrize(
    "time",
    [
        "2026-11-20T17:02:13Z",
        "2026-11-20T17:02:13+00:00",
        "2026-11-20T17:02:13.000Z",
        "2026-11-20T18:02:13+01:00",
        "2026-11-20 17:02:13Z",
    ],
)
def test_time_spellings(time: str) -> None:
    doc = sample("spot-interruption-warning")
    doc["time"] = time
    ev = the_event(parse(doc))
    assert ev.notice_time == at("2026-11-20T17:02:13") and ev.notice_time.utcoffset() == timedelta(0)


def test_zoneless_time_is_utc() -> None:
    doc = sample("rebalance-recommendation")
    doc["time"] = "2026-11-20T16:40:02"
    assert the_event(parse(doc)).notice_time == at("2026-11-20T16:40:02")


@pytest.mark.parametrize("state", ["stopping", "stopped", "shutting-down", "terminated"])
def test_state_changes_that_matter(state: str) -> None:
    doc = sample("instance-state-change")
    doc["detail"]["state"] = state
    ev = the_event(parse(doc))
    assert ev.kind is Kind.STATE_CHANGE and ev.act_at == NOW and state in ev.description
    assert ev.deadline == ev.notice_time, "stamped with the event's time, so redeliveries agree"


@pytest.mark.parametrize("state", ["running", "pending", "rebooting"])
def test_state_changes_that_do_not_matter_are_ignored(state: str) -> None:
    doc = sample("instance-state-change")
    doc["detail"]["state"] = state
    for body in (doc, sns(doc)):
        parsed = parse(body)
        assert parsed.events == () and parsed.ignore_reason
        assert state in parsed.ignore_reason and "i-0a1b2c3d4e5f60003" in parsed.ignore_reason
        assert parsed.source_account == ACCOUNT


def test_state_change_without_version_key_as_in_aws_docs() -> None:
    doc = sample("instance-state-change")
    del doc["version"]
    assert the_event(parse(doc)).kind is Kind.STATE_CHANGE


def test_envelope_without_account_as_moto_delivers() -> None:
    doc = sample("spot-interruption-warning")
    del doc["account"]
    parsed = parse(doc)
    assert parsed.source_account is None and len(parsed.events) == 1


@pytest.mark.parametrize(
    "detail_type",
    [
        "EC2 Instance Launch Successful",
        "EC2 Fleet Spot Instance Request Change",
        "AWS Health Abuse Event",
        "x" * 5000,
    ],
)
def test_unknown_detail_type_is_ignored(detail_type: str) -> None:
    # Well-formed but not ours: delete it, even when it has no detail we would understand.
    parsed = parse({"version": "0", "id": "1", "detail-type": detail_type, "source": "aws.ec2", "detail": {}})
    assert parsed.events == () and parsed.lifecycle is None
    assert parsed.ignore_reason is not None and "not an interruption" in parsed.ignore_reason
    assert len(parsed.ignore_reason) < 120


# --- Auto Scaling ----------------------------------------------------------------------------------


def test_eventbridge_lifecycle_action() -> None:
    parsed = parse(sample("asg-terminate-lifecycle-action"))
    assert parsed.lifecycle == LifecycleAction(
        group_name="ng-spot",
        hook_name="kubespot-terminate",
        token="87654321-4321-4321-4321-210987654321",
        instance_id="i-0a1b2c3d4e5f60004",
        started_at=at("2026-11-20T17:20:00"),
    )
    assert "ng-spot" in the_event(parsed).description


def test_direct_lifecycle_action() -> None:
    parsed = parse(sample("asg-lifecycle-direct"))
    assert parsed.lifecycle == LifecycleAction(
        group_name="ng-spot",
        hook_name="kubespot-terminate",
        token="11112222-3333-4444-5555-666677778888",
        instance_id="i-0a1b2c3d4e5f60006",
        started_at=at("2026-11-20T17:25:00.123"),
    )


def test_one_lifecycle_action_delivered_both_ways_is_one_event() -> None:
    direct = sample("asg-lifecycle-direct")
    bridged = sample("asg-terminate-lifecycle-action")
    bridged["detail"]["LifecycleActionToken"] = direct["LifecycleActionToken"]
    bridged["detail"]["EC2InstanceId"] = direct["EC2InstanceId"]
    assert parse(direct).events[0].id == parse(bridged).events[0].id


def test_lifecycle_action_without_token_is_still_handled() -> None:
    direct = sample("asg-lifecycle-direct")
    del direct["LifecycleActionToken"]
    parsed = parse(direct)
    assert parsed.lifecycle is not None and parsed.lifecycle.token is None
    other = dict(direct, RequestId="another-request")
    assert parse(other).events[0].id != parsed.events[0].id
    bridged = sample("asg-terminate-lifecycle-action")
    del bridged["detail"]["LifecycleActionToken"]
    assert parse(bridged).lifecycle == LifecycleAction(
        "ng-spot", "kubespot-terminate", None, "i-0a1b2c3d4e5f60004", at("2026-11-20T17:20:00")
    )


def test_a_scale_in_gets_no_invented_deadline_and_redeliveries_agree() -> None:
    """The hook holds the instance until it is completed or times out: the message carries no stop
    time, so none is made up from NODE_TERMINATION_GRACE_PERIOD (the controller bounds the drain by
    the hook's timeout instead)."""
    body = json.dumps(sample("asg-lifecycle-direct"))
    grace = timedelta(minutes=30)
    first = parse_message(body, now=NOW, lead_time=LEAD, node_termination_grace=grace).events[0]
    later = NOW + timedelta(minutes=7)
    again = parse_message(body, now=later, lead_time=LEAD, node_termination_grace=grace).events[0]
    assert first.deadline is None and again.deadline is None
    assert first.id == again.id and first.notice_time == again.notice_time


@pytest.mark.parametrize("wrapped", [False, True], ids=["bare", "sns"])
def test_test_notification_is_ignored(wrapped: bool) -> None:
    doc = sample("asg-test-notification")
    parsed = parse(sns(doc) if wrapped else doc)
    assert parsed.events == () and parsed.lifecycle is None
    assert parsed.ignore_reason is not None and "test notification" in parsed.ignore_reason
    assert parsed.form == FORM_AUTOSCALING and parsed.source_account == ACCOUNT
    assert parsed.region == "us-east-1"  # from the group ARN


def test_launch_lifecycle_is_a_launch_action_in_every_form() -> None:
    """EC2_INSTANCE_LAUNCHING, from EventBridge, straight from the hook or through SNS: no event to
    handle, the action to complete once the node is Ready (as aws-node-termination-handler does,
    pkg/monitor/sqsevent/asg-lifecycle-event.go createAsgInstanceLaunchEvent)."""
    bridged = sample("asg-terminate-lifecycle-action")
    bridged["detail-type"] = "EC2 Instance-launch Lifecycle Action"
    bridged["detail"]["LifecycleTransition"] = "autoscaling:EC2_INSTANCE_LAUNCHING"
    direct = sample("asg-lifecycle-direct")
    direct["LifecycleTransition"] = "autoscaling:EC2_INSTANCE_LAUNCHING"
    for doc in (bridged, direct, sns(direct)):
        parsed = parse(doc)
        assert parsed.events == () and parsed.lifecycle is None and parsed.ignore_reason is None
        assert parsed.launch is not None
        assert (
            parsed.launch.instance_id.startswith("i-")
            and parsed.launch.group_name
            and parsed.launch.hook_name
            and parsed.launch.token
        )


def test_terminate_detail_type_with_a_launch_transition_is_ignored() -> None:
    bridged = sample("asg-terminate-lifecycle-action")
    bridged["detail"]["LifecycleTransition"] = "autoscaling:EC2_INSTANCE_LAUNCHING"
    assert parse(bridged).ignore_reason


def test_plain_auto_scaling_notifications_are_ignored() -> None:
    doc = sample("asg-test-notification")
    doc["Event"] = "autoscaling:EC2_INSTANCE_TERMINATE"
    parsed = parse(doc)
    assert parsed.events == () and "not a lifecycle action" in (parsed.ignore_reason or "")


# --- Health ----------------------------------------------------------------------------------------


def health(*instances: str, **detail: Any) -> dict[str, Any]:
    doc = sample("health-scheduled-change")
    doc["detail"]["affectedEntities"] = [{"entityValue": i, "tags": {}} for i in instances]
    doc["detail"].update(detail)
    return doc


def test_health_with_several_entities_gives_one_event_each() -> None:
    ids = ["i-0a1b2c3d4e5f60005", "i-0a1b2c3d4e5f60007", "i-0a1b2c3d4e5f60008"]
    for body in (health(*ids), sns(health(*ids))):
        parsed = parse(body)
        assert [e.instance_id for e in parsed.events] == ids
        assert len({e.id for e in parsed.events}) == 3
        assert all(e.kind is Kind.SCHEDULED_MAINTENANCE for e in parsed.events)
        assert {e.deadline for e in parsed.events} == {at("2026-12-05T06:00:00")}
    # The same instance under the same Health event is the same event, whatever else is listed.
    alone = parse(health(ids[1])).events[0]
    assert alone.id == parse(health(*ids)).events[1].id


def test_health_ids_follow_the_event_arn_not_the_envelope() -> None:
    first = parse(health("i-0a1b2c3d4e5f60005")).events[0]
    update = health("i-0a1b2c3d4e5f60005", statusCode="open")
    update["id"] = "another-envelope"
    update["time"] = "2026-12-05T06:00:05Z"
    assert parse(update).events[0].id == first.id
    other = health("i-0a1b2c3d4e5f60005", eventArn="arn:aws:health:us-east-1::event/EC2/X/Y")
    assert parse(other).events[0].id != first.id


def test_health_duplicate_and_non_instance_entities() -> None:
    parsed = parse(health("i-0a1b2c3d4e5f60005", "vol-0123456789abcdef0", "i-0a1b2c3d4e5f60005"))
    assert [e.instance_id for e in parsed.events] == ["i-0a1b2c3d4e5f60005"]
    assert parsed.warnings == ()


def test_health_malformed_entity_is_a_warning_beside_good_ones() -> None:
    doc = health("i-0a1b2c3d4e5f60005")
    doc["detail"]["affectedEntities"].append({"entityValue": 7})
    doc["detail"]["affectedEntities"].append("i-0a1b2c3d4e5f60009")
    parsed = parse(doc)
    assert [e.instance_id for e in parsed.events] == ["i-0a1b2c3d4e5f60005"]
    assert len(parsed.warnings) == 2 and "affectedEntities[1]" in parsed.warnings[0]


def test_health_with_only_malformed_entities_is_an_error() -> None:
    doc = health()
    doc["detail"]["affectedEntities"] = [{"entity": "i-0a1b2c3d4e5f60005"}]
    with pytest.raises(MessageError, match="entityValue"):
        parse(doc)


def test_health_without_entities_falls_back_to_resources() -> None:
    doc = health()
    doc["resources"] = [
        "arn:aws:ec2:us-east-1:123456789012:instance/i-0a1b2c3d4e5f6000a",
        "i-0a1b2c3d4e5f6000b",
    ]
    assert [e.instance_id for e in parse(doc).events] == ["i-0a1b2c3d4e5f6000a", "i-0a1b2c3d4e5f6000b"]


def test_health_naming_no_instance_is_ignored() -> None:
    doc = health("vol-0123456789abcdef0")
    doc["resources"] = []
    parsed = parse(doc)
    assert parsed.events == () and "no EC2 instance" in (parsed.ignore_reason or "")


@pytest.mark.parametrize(
    ("service", "category"),
    [("EC2", "issue"), ("EC2", "accountNotification"), ("RDS", "scheduledChange"), (None, None)],
)
def test_other_health_events_are_ignored(service: str | None, category: str | None) -> None:
    doc = health("i-0a1b2c3d4e5f60005", service=service, eventTypeCategory=category)
    parsed = parse(doc)
    assert parsed.events == () and "not an EC2 scheduled change" in (parsed.ignore_reason or "")


def test_closed_health_event_withdraws_the_notice() -> None:
    upcoming = parse(health("i-0a1b2c3d4e5f60005")).events[0]
    closed = parse(health("i-0a1b2c3d4e5f60005", statusCode="closed")).events[0]
    assert closed.cancelled and not upcoming.cancelled
    assert closed.id == upcoming.id and closed.act_at == NOW


@pytest.mark.parametrize(
    "start",
    [
        "Sat, 05 Dec 2026 06:00:00 GMT",
        "05 Dec 2026 06:00:00 GMT",
        "Sat, 05 Dec 2026 07:00:00 +0100",
        "2026-12-05T06:00:00Z",
    ],
)
def test_health_time_spellings(start: str) -> None:
    ev = parse(health("i-0a1b2c3d4e5f60005", startTime=start)).events[0]
    assert ev.deadline == at("2026-12-05T06:00:00") and ev.act_at == ev.deadline - LEAD


def test_health_act_at_follows_the_lead_time() -> None:
    body = json.dumps(sample("health-scheduled-change"))
    ev = parse_message(body, now=NOW, lead_time=timedelta(hours=2), node_termination_grace=GRACE).events[0]
    assert ev.act_at == at("2026-12-05T04:00:00")


# --- SNS -------------------------------------------------------------------------------------------


def test_subscription_confirmation_is_ignored() -> None:
    doc = sns("You have chosen to subscribe to the topic", Type="SubscriptionConfirmation", Token="t")
    parsed = parse(doc)
    assert parsed.events == () and parsed.form == FORM_SNS and parsed.via_sns
    assert "SubscriptionConfirmation" in (parsed.ignore_reason or "")
    assert parsed.region == "eu-west-1" and parsed.source_account == "210987654321"


def test_sns_message_that_is_not_json() -> None:
    with pytest.raises(MessageError, match=r"^SNS Message is not JSON"):
        parse(sns("hello, world"))


def test_sns_message_of_unknown_shape() -> None:
    with pytest.raises(MessageError, match=r"^SNS Message: unknown message shape"):
        parse(sns({"hello": "world"}))


def test_sns_inside_sns_is_refused() -> None:
    with pytest.raises(MessageError, match="inside an SNS"):
        parse(sns(sns(sample("spot-interruption-warning"))))


def test_sns_errors_name_the_inner_problem() -> None:
    doc = sample("spot-interruption-warning")
    del doc["detail"]["instance-id"]
    with pytest.raises(MessageError, match=r"^SNS Message: spot interruption detail has no 'instance-id'"):
        parse(sns(doc))


# --- robustness ------------------------------------------------------------------------------------


def test_bom_whitespace_and_bytes() -> None:
    text = json.dumps(sample("spot-interruption-warning"))
    expected = parse(text).events
    for body in ("\ufeff" + text, "\n  " + text + "\r\n", ("\ufeff" + text).encode(), text.encode()):
        assert parse(body).events == expected
    inner_bom = sns("\ufeff " + text)
    assert parse(inner_bom).events == expected


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("", "message is empty"),
        ("   \ufeff ", "message is empty"),
        ("{", "not JSON"),
        ('{"detail-type": "EC2 Spot Instance Interruption Warning", "detail": {', "not JSON"),
        ("[1, 2]", "is an array, expected a JSON object"),
        ('"text"', "is a string, expected a JSON object"),
        ("null", "is null, expected a JSON object"),
        ("42", "is a number, expected a JSON object"),
        ("{}", "unknown message shape"),
        ('{"foo": 1, "bar": 2}', "keys: 'foo', 'bar'"),
        (b"\xff\xfe{}", "not UTF-8"),
        ('{"detail-type": 3}', "'detail-type' is a number, expected a string"),
        ('{"detail-type": ""}', "'detail-type' is empty"),
        ("[" * 5000 + "]" * 5000, "not JSON"),
        ('{"a": NaN}', "not JSON"),
    ],
)
def test_malformed_bodies(body: str | bytes, match: str) -> None:
    with pytest.raises(MessageError, match=match) as info:
        parse(body)
    assert isinstance(info.value, ValueError)


def spot_with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    doc = sample("spot-interruption-warning")
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (("detail",), _DELETE, "'detail' is null, expected an object"),
        (("detail",), [1], "'detail' is an array, expected an object"),
        (("id",), _DELETE, "has no 'id'"),
        (("time",), _DELETE, "has no 'time'"),
        (("time",), 1700000000, "'time' is a number"),
        (("time",), "yesterday", "'time' is 'yesterday', expected an ISO 8601 time"),
        (("time",), "2026-11-20", "expected an ISO 8601 time"),
        (("time",), "2026-13-20T00:00:00Z", "expected an ISO 8601 time"),
        (("time",), "9999-12-31T23:59:59Z", "out of range"),
        (("account",), 123456789012, "'account' is a number"),
        (("detail", "instance-id"), _DELETE, "has no 'instance-id'"),
        (("detail", "instance-id"), ["i-1"], "'instance-id' is an array"),
        (("detail", "instance-id"), "", "'instance-id' is empty"),
        (("detail", "instance-id"), "not-an-instance", "'not-an-instance', not an instance id"),
        (("detail", "instance-action"), True, "'instance-action' is a boolean"),
    ],
)
def test_malformed_spot_events(path: tuple[str, ...], value: Any, match: str) -> None:
    with pytest.raises(MessageError, match=match):
        parse(spot_with(path, value))


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("AutoScalingGroupName", _DELETE, "has no 'AutoScalingGroupName'"),
        ("LifecycleHookName", 5, "'LifecycleHookName' is a number"),
        ("EC2InstanceId", _DELETE, "has no 'EC2InstanceId'"),
        ("Time", _DELETE, "has no 'Time'"),
        ("Time", "soon", "'Time' is 'soon'"),
        ("LifecycleTransition", 1, "'LifecycleTransition' is a number"),
        ("LifecycleActionToken", {"t": 1}, "'LifecycleActionToken' is an object"),
    ],
)
def test_malformed_direct_lifecycle(field: str, value: Any, match: str) -> None:
    doc = sample("asg-lifecycle-direct")
    if value is _DELETE:
        del doc[field]
    else:
        doc[field] = value
    with pytest.raises(MessageError, match=match):
        parse(doc)


def test_auto_scaling_message_with_neither_transition_nor_event() -> None:
    with pytest.raises(MessageError, match="neither 'LifecycleTransition' nor 'Event'"):
        parse({"Service": "AWS Auto Scaling", "AccountId": ACCOUNT})


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("eventArn", _DELETE, "has no 'eventArn'"),
        ("startTime", _DELETE, "has no 'startTime'"),
        ("startTime", "next week", "expected a time like 'Sat, 05 Dec 2026 06:00:00 GMT'"),
        ("startTime", "Sat, 05 Foo 2026 06:00:00 GMT", "expected a time like"),
        ("affectedEntities", "i-0a1b2c3d4e5f60005", "'affectedEntities' is a string, expected a list"),
        ("service", 2, "'service' is a number"),
    ],
)
def test_malformed_health(field: str, value: Any, match: str) -> None:
    doc = sample("health-scheduled-change")
    if value is _DELETE:
        del doc["detail"][field]
    else:
        doc["detail"][field] = value
    with pytest.raises(MessageError, match=match):
        parse(doc)


def test_errors_carry_at_most_an_excerpt_of_the_body() -> None:
    doc = spot_with(("detail", "instance-id"), "x" * 100_000)
    doc["padding"] = "y" * 1_000_000
    with pytest.raises(MessageError) as info:
        parse(doc)
    assert len(str(info.value)) < 400 and "not an instance id" in info.value.reason
    assert len(info.value.body) > 1_000_000  # the whole body stays available to whoever stores it
    with pytest.raises(MessageError) as info:
        parse("{" + '"k": "' + "z" * 500_000)
    assert len(str(info.value)) < 600


def test_huge_but_valid_fields_do_not_flood_reasons() -> None:
    doc = sample("instance-state-change")
    doc["detail"]["state"] = "s" * 100_000
    parsed = parse(doc)
    assert parsed.ignore_reason is not None and len(parsed.ignore_reason) < 200


def test_fuzz_only_message_errors() -> None:
    """Truncations, byte flips and type swaps of every sample: a result or a MessageError, never else."""
    rng = random.Random(20261120)
    odd_values: list[Any] = [None, 0, -1, 1e308, True, "", "x" * 300, [], [None], {}, {"a": []}]
    bodies: list[str | bytes] = []
    for path in sorted(SAMPLES.glob("*.json")):
        text = path.read_text()
        doc = json.loads(text)
        bodies += [text[:n] for n in range(0, len(text), 7)]
        for _ in range(60):
            pos = rng.randrange(len(text))
            bodies.append(text[:pos] + rng.choice('{}[]":,\\x0 \u00e9\ud800') + text[pos + 1 :])
        for key in doc:
            for value in odd_values:
                bodies.append(json.dumps({**doc, key: value}))
                bodies.append(json.dumps(sns({**doc, key: value})))
        detail = doc.get("detail")
        if isinstance(detail, dict):
            for key in detail:
                for value in odd_values:
                    bodies.append(json.dumps({**doc, "detail": {**detail, key: value}}))
        bodies.append(json.dumps(sns(text[: len(text) // 2])))
    outcomes = {"parsed": 0, "error": 0}
    for body in bodies:
        try:
            parse(body)
        except MessageError:
            outcomes["error"] += 1
        else:
            outcomes["parsed"] += 1
    assert outcomes["parsed"] and outcomes["error"]


def test_a_spot_warning_deadline_is_its_time_plus_the_notice() -> None:
    """EC2 User Guide, "Spot Instance interruption notices": the warning comes two minutes before
    the instance is interrupted, and its detail carries no time of its own, so the deadline is the
    event's ``time`` plus two minutes; ``queue.interruption_notice`` replaces those two minutes for
    an EC2 simulated faster (the sandbox's market: 120 s / the time scale)."""
    body = json.dumps(sample("spot-interruption-warning"))
    sent = at(sample("spot-interruption-warning")["time"])
    default = the_event(parse(body))
    assert default.deadline == sent + timedelta(minutes=2)
    fast = the_event(
        parse_message(
            body, now=NOW, lead_time=LEAD, node_termination_grace=GRACE, notice=timedelta(seconds=12)
        )
    )
    assert fast.deadline == sent + timedelta(seconds=12)
    assert fast.notice_time == default.notice_time == sent  # the event's time itself is kept
