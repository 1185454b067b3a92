"""IMDS bodies (every shape in FACTS.md) to events, stable ids, and malformed bodies to parse errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from kubespot.model import Kind, Source
from kubespot.sources.imds import ImdsParseError, paths
from kubespot.sources.imds.parsers import (
    parse_asg_target_state,
    parse_event_date,
    parse_identity_document,
    parse_rebalance,
    parse_scheduled_events,
    parse_spot_instance_action,
)

IID = "i-0123456789abcdef0"
NOW = datetime(2026, 11, 20, 17, 2, 13, tzinfo=UTC)
LEAD = timedelta(minutes=5)


def scheduled(**overrides: str) -> dict[str, str]:
    entry = {
        "Code": "system-reboot",
        "Description": "scheduled reboot",
        "EventId": "instance-event-0d59937288b749b32",
        "NotAfter": "21 Nov 2026 11:00:00 GMT",
        "NotBefore": "21 Nov 2026 09:00:00 GMT",
        "State": "active",
    }
    entry.update(overrides)
    return entry


# --- spot ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["terminate", "stop", "hibernate"])
def test_spot_instance_action(action: str) -> None:
    body = json.dumps({"action": action, "time": "2026-11-20T17:04:13Z"})
    ev = parse_spot_instance_action(body, instance_id=IID, now=NOW, node_name="node-a")
    assert ev.kind is Kind.SPOT_INTERRUPTION and ev.source is Source.IMDS
    assert ev.instance_id == IID and ev.node_name == "node-a"
    assert ev.deadline == datetime(2026, 11, 20, 17, 4, 13, tzinfo=UTC)
    assert ev.notice_time == ev.act_at == NOW
    assert ev.seconds_left(NOW) == 120
    assert action in ev.description and ev.raw == {"action": action, "time": "2026-11-20T17:04:13Z"}
    assert not ev.cancelled


def test_spot_id_is_stable_across_polls_and_changes_with_the_notice() -> None:
    body = '{"action": "terminate", "time": "2026-11-20T17:04:13Z"}'
    reordered = '{"time":"2026-11-20T17:04:13Z","action":"terminate"}'
    first = parse_spot_instance_action(body, instance_id=IID, now=NOW)
    later = parse_spot_instance_action(reordered, instance_id=IID, now=NOW + timedelta(seconds=5))
    assert first.id == later.id and first.id.startswith("spot-itn-")
    other_time = parse_spot_instance_action(body.replace("17:04", "18:04"), instance_id=IID, now=NOW)
    other_instance = parse_spot_instance_action(body, instance_id="i-0fedcba9876543210", now=NOW)
    assert len({first.id, other_time.id, other_instance.id}) == 3


# --- rebalance -------------------------------------------------------------------------------------


def test_rebalance_has_no_deadline() -> None:
    ev = parse_rebalance('{"noticeTime": "2026-11-20T16:40:02Z"}', instance_id=IID, now=NOW)
    assert ev.kind is Kind.REBALANCE_RECOMMENDATION
    assert ev.notice_time == datetime(2026, 11, 20, 16, 40, 2, tzinfo=UTC)
    assert ev.act_at == NOW and ev.deadline is None and ev.seconds_left(NOW) is None
    again = parse_rebalance('{"noticeTime":"2026-11-20T16:40:02Z"}', instance_id=IID, now=NOW + LEAD)
    assert again.id == ev.id


# --- scheduled -------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["instance-reboot", "system-reboot", "instance-retirement", "instance-stop"])
def test_scheduled_stopping_codes_act_lead_time_before_not_before(code: str) -> None:
    events, errors = parse_scheduled_events(
        json.dumps([scheduled(Code=code)]), instance_id=IID, now=NOW, lead_time=LEAD
    )
    assert errors == []
    (ev,) = events
    not_before = datetime(2026, 11, 21, 9, 0, 0, tzinfo=UTC)
    assert ev.kind is Kind.SCHEDULED_MAINTENANCE
    assert ev.deadline == not_before
    assert ev.act_at == not_before - LEAD
    assert not ev.cancelled and code in ev.description


def test_system_maintenance_keeps_the_instance_so_has_no_deadline() -> None:
    (ev,), _ = parse_scheduled_events(
        json.dumps([scheduled(Code="system-maintenance")]), instance_id=IID, now=NOW, lead_time=LEAD
    )
    assert ev.deadline is None
    assert ev.act_at == datetime(2026, 11, 21, 8, 55, tzinfo=UTC)


@pytest.mark.parametrize("state", ["canceled", "completed"])
def test_canceled_and_completed_keep_the_id_and_are_cancelled(state: str) -> None:
    (active,), _ = parse_scheduled_events(json.dumps([scheduled()]), instance_id=IID, now=NOW, lead_time=LEAD)
    (done,), _ = parse_scheduled_events(
        json.dumps([scheduled(State=state, Description=f"[{state.title()}] scheduled reboot")]),
        instance_id=IID,
        now=NOW,
        lead_time=LEAD,
    )
    assert done.id == active.id and done.cancelled and not active.cancelled
    assert done.act_at == NOW  # undoing does not wait for NotBefore


def test_scheduled_id_is_per_event_id_and_not_deadline_extras() -> None:
    body = json.dumps(
        [
            scheduled(),
            scheduled(
                EventId="instance-event-0aaaaaaaaaaaaaaaa", NotBeforeDeadline="25 Nov 2026 09:00:00 GMT"
            ),
        ]
    )
    events, errors = parse_scheduled_events(body, instance_id=IID, now=NOW, lead_time=LEAD)
    assert errors == [] and len({e.id for e in events}) == 2
    assert events[1].raw["NotBeforeDeadline"] == "25 Nov 2026 09:00:00 GMT"


def test_empty_scheduled_list_is_no_events() -> None:
    assert parse_scheduled_events("[]", instance_id=IID, now=NOW, lead_time=LEAD) == ([], [])


def test_a_bad_entry_does_not_hide_a_good_one() -> None:
    body = json.dumps([scheduled(NotBefore="tomorrow-ish"), 7, scheduled(State="weird"), scheduled()])
    events, errors = parse_scheduled_events(body, instance_id=IID, now=NOW, lead_time=LEAD)
    assert len(events) == 1 and len(errors) == 3
    assert all(e.path == paths.SCHEDULED_EVENTS for e in errors)
    assert (
        "tomorrow-ish" in str(errors[0]) and "not an object" in str(errors[1]) and "weird" in str(errors[2])
    )


def test_unknown_code_is_still_an_event_without_deadline() -> None:
    (ev,), errors = parse_scheduled_events(
        json.dumps([scheduled(Code="instance-frobnicate")]), instance_id=IID, now=NOW, lead_time=LEAD
    )
    assert errors == [] and ev.deadline is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("21 Nov 2026 09:00:00 GMT", datetime(2026, 11, 21, 9, 0, tzinfo=UTC)),
        ("1 Jan 2027 00:00:59 GMT", datetime(2027, 1, 1, 0, 0, 59, tzinfo=UTC)),
    ],
)
def test_event_dates(text: str, expected: datetime) -> None:
    assert parse_event_date(paths.SCHEDULED_EVENTS, text) == expected


@pytest.mark.parametrize(
    "text", ["", "21 Nov 2026 09:00:00", "21 Foo 2026 09:00:00 GMT", "32 Nov 2026 09:00:00 GMT", "2026-11-21"]
)
def test_bad_event_dates(text: str) -> None:
    with pytest.raises(ImdsParseError, match="bad date"):
        parse_event_date(paths.SCHEDULED_EVENTS, text)


# --- ASG -------------------------------------------------------------------------------------------


def test_asg_terminated_is_an_event_other_states_are_not() -> None:
    ev = parse_asg_target_state("Terminated", instance_id=IID, now=NOW)
    assert ev is not None and ev.kind is Kind.ASG_LIFECYCLE and ev.deadline is None and ev.act_at == NOW
    again = parse_asg_target_state("Terminated\n", instance_id=IID, now=NOW + LEAD)
    assert again is not None and again.id == ev.id
    for state in ("InService", "Pending", "Warmed:Terminated", "Standby"):
        assert parse_asg_target_state(state, instance_id=IID, now=NOW) is None


@pytest.mark.parametrize("body", ["", "  ", "<html>oops</html> x", "\x00\x01"])
def test_asg_garbage(body: str) -> None:
    with pytest.raises(ImdsParseError) as info:
        parse_asg_target_state(body, instance_id=IID, now=NOW)
    assert info.value.path == paths.ASG_TARGET_LIFECYCLE_STATE


# --- malformed -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("<?xml version='1.0'?><html><title>500</title></html>", "not JSON"),
        ('{"action": "terminate"', "not JSON"),
        ("[]", "expected a JSON object"),
        ('{"time": "2026-11-20T17:04:13Z"}', "'action'"),
        ('{"action": "terminate"}', "'time'"),
        ('{"action": "terminate", "time": 5}', "'time'"),
        ('{"action": "terminate", "time": "soon"}', "bad time"),
    ],
)
def test_malformed_spot_bodies(body: str, reason: str) -> None:
    with pytest.raises(ImdsParseError, match=reason) as info:
        parse_spot_instance_action(body, instance_id=IID, now=NOW)
    assert info.value.path == paths.SPOT_INSTANCE_ACTION
    assert body[:20] in str(info.value)  # the log line shows what came back


@pytest.mark.parametrize("body", ["garbage", "{}", '{"noticeTime": ""}', '{"noticeTime": "yesterday"}'])
def test_malformed_rebalance_bodies(body: str) -> None:
    with pytest.raises(ImdsParseError):
        parse_rebalance(body, instance_id=IID, now=NOW)


@pytest.mark.parametrize("body", ["garbage", "{}", '{"a": 1}', "null"])
def test_malformed_scheduled_bodies(body: str) -> None:
    with pytest.raises(ImdsParseError):
        parse_scheduled_events(body, instance_id=IID, now=NOW, lead_time=LEAD)


def test_naive_times_are_read_as_utc() -> None:
    ev = parse_spot_instance_action(
        '{"action": "stop", "time": "2026-11-20T17:04:13"}', instance_id=IID, now=NOW
    )
    assert ev.deadline == datetime(2026, 11, 20, 17, 4, 13, tzinfo=UTC)


def test_identity_document() -> None:
    doc = parse_identity_document(json.dumps({"instanceId": IID, "region": "us-east-1"}, indent=2))
    assert doc["instanceId"] == IID
    with pytest.raises(ImdsParseError):
        parse_identity_document('{"region": "us-east-1"}')
