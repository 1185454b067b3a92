"""What the metadata tree shows for an instance at a given instant (pure lookup, fake time).

Paths and bodies follow FACTS.md ("EC2 instance metadata service") and the category list in the EC2
User Guide "Instance metadata categories" (spot/instance-action, spot/termination-time,
events/maintenance/scheduled, events/recommendations/rebalance, autoscaling/target-lifecycle-state).
A ``[Completed]`` description prefix follows the EC2 API reference for InstanceStatusEvent.
"""

from __future__ import annotations

import json

from kubespot.sim.imdssim.clock import FakeClock
from kubespot.sim.imdssim.fleet import Fleet
from kubespot.sim.imdssim.instance import SimInstance, hostname_for, region_of, synthetic_instance
from kubespot.sim.imdssim.metadata import VERSIONS, lookup

IID = "i-0123456789abcdef0"


def _fleet() -> tuple[Fleet, FakeClock, SimInstance]:
    clock = FakeClock()
    inst = SimInstance(
        instance_id=IID, availability_zone="eu-west-1b", private_ip="10.1.2.3", launched_at=clock()
    )
    return Fleet([inst], clock=clock), clock, inst


def test_identity_values_and_derived_names() -> None:
    _, clock, inst = _fleet()
    now = clock()
    assert lookup(inst, now, "/latest/meta-data/instance-id") == IID
    assert lookup(inst, now, "/latest/meta-data/instance-type") == "m5.large"
    assert lookup(inst, now, "/latest/meta-data/local-ipv4") == "10.1.2.3"
    assert lookup(inst, now, "/latest/meta-data/local-hostname") == "ip-10-1-2-3.eu-west-1.compute.internal"
    assert lookup(inst, now, "/latest/meta-data/placement/availability-zone") == "eu-west-1b"
    assert lookup(inst, now, "/latest/meta-data/instance-life-cycle") == "spot"
    doc = json.loads(lookup(inst, now, "/latest/dynamic/instance-identity/document") or "")
    assert doc["region"] == "eu-west-1" and doc["instanceId"] == IID and doc["privateIp"] == "10.1.2.3"
    assert doc["pendingTime"] == "2026-11-20T16:00:00Z"


def test_region_and_hostname_helpers() -> None:
    assert region_of("us-west-2c") == "us-west-2"
    assert hostname_for("10.0.0.1", "us-east-1") == "ip-10-0-0-1.ec2.internal"


def test_listings_hide_absent_signals() -> None:
    _, clock, inst = _fleet()
    top = (lookup(inst, clock(), "/latest/meta-data/") or "").split("\n")
    assert "spot/" not in top and "autoscaling/" not in top and "events/" in top
    assert lookup(inst, clock(), "/latest/meta-data/spot/instance-action") is None
    assert lookup(inst, clock(), "/latest/meta-data/events/recommendations/rebalance") is None
    assert lookup(inst, clock(), "/latest/meta-data/events/maintenance/scheduled") == "[]"
    assert lookup(inst, clock(), "/latest/meta-data/autoscaling/target-lifecycle-state") is None


def test_root_and_version_listings() -> None:
    _, clock, inst = _fleet()
    assert (lookup(inst, clock(), "/") or "").split("\n") == list(VERSIONS)
    assert lookup(inst, clock(), "/latest") == "dynamic/\nmeta-data/"
    assert lookup(inst, clock(), "/2016-09-02/meta-data/instance-id") == IID
    assert lookup(inst, clock(), "/1999-01-01/meta-data/instance-id") is None
    assert lookup(inst, clock(), "/latest//meta-data") is None
    assert lookup(inst, clock(), "latest/meta-data") is None
    assert lookup(inst, clock(), "/latest/meta-data/instance-id/more") is None


def test_spot_notice_appears_at_its_time_with_action_two_minutes_later() -> None:
    fleet, clock, inst = _fleet()
    fleet.fire_spot_itn(IID, "stop", at=clock() + 5)
    assert lookup(inst, clock() + 4.9, "/latest/meta-data/spot/instance-action") is None
    body = lookup(inst, clock() + 5, "/latest/meta-data/spot/instance-action")
    assert json.loads(body or "") == {"action": "stop", "time": "2026-11-20T16:02:05Z"}
    assert lookup(inst, clock() + 5, "/latest/meta-data/spot/termination-time") == "2026-11-20T16:02:05Z"
    assert lookup(inst, clock() + 5, "/latest/meta-data/spot/") == "instance-action\ntermination-time"


def test_rebalance_notice_time() -> None:
    fleet, clock, inst = _fleet()
    fleet.fire_rebalance(IID, at=clock() + 2)
    assert lookup(inst, clock() + 1, "/latest/meta-data/events/recommendations/rebalance") is None
    body = lookup(inst, clock() + 3, "/latest/meta-data/events/recommendations/rebalance")
    assert json.loads(body or "") == {"noticeTime": "2026-11-20T16:00:02Z"}


def test_scheduled_event_state_changes_over_time() -> None:
    fleet, clock, inst = _fleet()
    event = fleet.add_scheduled_event(IID, "instance-stop", not_before=clock() + 600, not_after=clock() + 900)
    fleet.set_scheduled_state(IID, event.event_id, "canceled", at=clock() + 60)
    path = "/latest/meta-data/events/maintenance/scheduled"
    (before,) = json.loads(lookup(inst, clock() + 59, path) or "")
    assert before == {
        "Code": "instance-stop",
        "Description": "scheduled stop",
        "EventId": event.event_id,
        "NotAfter": "20 Nov 2026 16:15:00 GMT",
        "NotBefore": "20 Nov 2026 16:10:00 GMT",
        "State": "active",
    }
    (after,) = json.loads(lookup(inst, clock() + 60, path) or "")
    assert after["State"] == "canceled" and after["Description"] == "[Canceled] scheduled stop"
    history = json.loads(lookup(inst, clock() + 60, "/latest/meta-data/events/maintenance/history") or "")
    assert [h["EventId"] for h in history] == [event.event_id]


def test_scheduled_event_deadline_is_optional() -> None:
    fleet, clock, inst = _fleet()
    fleet.add_scheduled_event(IID, not_before_deadline=clock() + 86400)
    (event,) = json.loads(lookup(inst, clock(), "/latest/meta-data/events/maintenance/scheduled") or "")
    assert event["NotBeforeDeadline"] == "21 Nov 2026 16:00:00 GMT"


def test_asg_lifecycle_state_timeline() -> None:
    fleet, clock, inst = _fleet()
    fleet.set_asg_state(IID, "Terminated", at=clock() + 3)
    path = "/latest/meta-data/autoscaling/target-lifecycle-state"
    assert lookup(inst, clock(), path) == "InService"
    assert lookup(inst, clock() + 3, path) == "Terminated"


def test_clear_events_removes_one_kind() -> None:
    fleet, clock, inst = _fleet()
    fleet.fire_spot_itn(IID)
    fleet.fire_rebalance(IID)
    fleet.clear_events(IID, "spot-itn")
    assert lookup(inst, clock(), "/latest/meta-data/spot/instance-action") is None
    assert lookup(inst, clock(), "/latest/meta-data/events/recommendations/rebalance") is not None
    fleet.clear_events(IID)
    assert lookup(inst, clock(), "/latest/meta-data/events/recommendations/rebalance") is None


def test_user_data_only_when_set() -> None:
    _, clock, inst = _fleet()
    assert lookup(inst, clock(), "/latest/user-data") is None
    inst.user_data = "#!/bin/sh\necho hi\n"
    assert lookup(inst, clock(), "/latest/user-data") == "#!/bin/sh\necho hi\n"


def test_synthetic_instances_are_distinct() -> None:
    a, b = synthetic_instance(0, launched_at=0), synthetic_instance(1, launched_at=0)
    assert a.instance_id != b.instance_id and a.private_ip != b.private_ip
    assert a.availability_zone != b.availability_zone
    assert len(a.instance_id) == len("i-0123456789abcdef0")


def test_bad_signal_arguments_are_refused() -> None:
    fleet, _, _ = _fleet()
    for call in (
        lambda: fleet.fire_spot_itn(IID, "explode"),  # type: ignore[arg-type]
        lambda: fleet.add_scheduled_event(IID, "coffee-break"),  # type: ignore[arg-type]
        lambda: fleet.set_asg_state(IID, "Sleeping"),
        lambda: fleet.add_scheduled_event(IID, not_before=10, not_after=5),
    ):
        try:
            call()
        except ValueError:
            continue
        raise AssertionError("expected ValueError")
