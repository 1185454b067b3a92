"""The ``kubespot.io/actions`` record: round trip, compactness and caps, garbage, the patch builder,
and ``deregistration_for``, the function the drain uses to hold target pods."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from kubespot.records.actions import (
    ACTIONS_ANNOTATION,
    MAX_PODS,
    MAX_TARGETS,
    ActionsRecord,
    RecordError,
    StepState,
    TargetRef,
    decode_record,
    deregistration_for,
    isolation_step,
    loadbalancer_step,
    record_patch,
)

T0 = datetime(2026, 11, 20, 17, 4, 13, 250000, tzinfo=UTC)
TG = (
    "arn:aws:elasticloadbalancing:us-east-1:123456789012:"
    "targetgroup/k8s-default-web-0123456789/73e2d6bc24d8a067"
)


def _record(**fields: object) -> ActionsRecord:
    base: dict[str, object] = {
        "event": "spot-itn-abc",
        "runner": "ctl-0_1a2b",
        "at": T0,
        "kind": "spot-itn",
        "instance": "i-0123456789abcdef0",
        "source": "imds",
        "fenced": T0 - timedelta(seconds=1),
    }
    base.update(fields)
    return ActionsRecord(**base)  # type: ignore[arg-type]


def test_round_trip_of_a_full_record() -> None:
    record = _record(
        loadbalancer=loadbalancer_step(
            StepState.DRAINING,
            T0,
            settle=5.0,
            node=True,
            targets=[TargetRef(TG, "10.0.1.7", 8080), TargetRef(TG, "i-0123456789abcdef0", None)],
            pods=["default/web-1", "default/web-0"],
        ),
        isolation=isolation_step(StepState.DONE, T0, replaced={"eni-2": ["sg-b"], "eni-1": ["sg-a", "sg-c"]}),
        post=T0,
        published=(("eventbridge", "evt-1"), ("sns", "msg-1")),
        finished=T0 + timedelta(seconds=3),
    )
    text = record.encode()
    assert decode_record(text) == record
    data = orjson.loads(text)
    assert data["v"] == 1 and data["event"] == "spot-itn-abc" and data["runner"] == "ctl-0_1a2b"
    assert data["loadbalancer"]["state"] == "draining"
    assert data["loadbalancer"]["pods"] == ["default/web-0", "default/web-1"]  # sorted
    assert data["loadbalancer"]["targets"][1] == {"tg": TG, "id": "i-0123456789abcdef0"}  # no port: omitted
    assert data["isolation"]["replaced"] == {"eni-1": ["sg-a", "sg-c"], "eni-2": ["sg-b"]}
    assert data["published"] == {"eventbridge": "evt-1", "sns": "msg-1"}
    assert data["at"] == "2026-11-20T17:04:13.250+00:00"


def test_defaults_and_empties_are_left_out() -> None:
    data = orjson.loads(_record(loadbalancer=loadbalancer_step(StepState.DONE, T0)).encode())
    assert data["loadbalancer"] == {"state": "done", "at": T0.isoformat(timespec="milliseconds")}
    assert {"isolation", "post", "published", "finished"}.isdisjoint(data)


def test_lists_are_capped_and_what_is_cut_is_counted() -> None:
    targets = [TargetRef(TG, f"10.0.0.{i}", 80) for i in range(MAX_TARGETS + 5)]
    pods = [f"default/p-{i:03d}" for i in range(MAX_PODS + 7)]
    step = loadbalancer_step(StepState.PENDING, T0, targets=targets, pods=pods, error="x" * 500)
    assert len(step.targets) == MAX_TARGETS and step.more_targets == 5
    assert len(step.pods) == MAX_PODS and step.more_pods == 7
    assert len(step.error) == 200 and step.error.endswith("…")
    text = _record(loadbalancer=step).encode()
    assert len(text) < 8192
    back = decode_record(text)
    assert back is not None and back.loadbalancer is not None and back.loadbalancer.more_pods == 7


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"v": 2, "event": "e", "at": "2026-01-01T00:00:00+00:00"}',
        '{"v": 1, "event": "", "at": "2026-01-01T00:00:00+00:00"}',
        '{"v": 1, "event": "e", "at": "2026-01-01T00:00:00"}',
        '{"v": 1, "event": "e", "at": "2026-01-01T00:00:00+00:00", "loadbalancer": {"state": "odd"}}',
        '{"v": 1, "event": "e", "at": "2026-01-01T00:00:00+00:00", "published": []}',
    ],
)
def test_garbage_is_an_error_not_a_record(text: str) -> None:
    with pytest.raises(RecordError, match=ACTIONS_ANNOTATION):
        decode_record(text)


def test_absent_is_none() -> None:
    assert decode_record(None) is None and decode_record("") is None


def test_record_patch() -> None:
    record = _record()
    patch = record_patch({}, lambda old: record)
    assert patch == {"metadata": {"annotations": {ACTIONS_ANNOTATION: record.encode()}}}
    # The same record again: nothing to write; a refusal: nothing either.
    assert record_patch({ACTIONS_ANNOTATION: record.encode()}, lambda old: old) is None
    assert record_patch({ACTIONS_ANNOTATION: record.encode()}, lambda old: None) is None
    # Garbage reaches the change as None, and is replaced.
    seen: list[ActionsRecord | None] = []

    def change(old: ActionsRecord | None) -> ActionsRecord:
        seen.append(old)
        return record

    patch = record_patch({ACTIONS_ANNOTATION: "{oops"}, change)
    assert seen == [None] and patch is not None


def test_live_other() -> None:
    record = _record()
    assert record.live_other("other", T0 + timedelta(seconds=10), 60.0)
    assert not record.live_other("ctl-0_1a2b", T0, 60.0)  # ourselves
    assert not record.live_other("other", T0 + timedelta(seconds=61), 60.0)  # stale
    assert not record.live_other("other", T0, 0.0)  # exclusive runner: never follows
    assert not _record(finished=T0).live_other("other", T0, 60.0)


# --- the drain's side -------------------------------------------------------------------------------


def test_no_record_or_another_events_record_is_none() -> None:
    assert deregistration_for(None, "spot-itn-abc") is None
    assert deregistration_for("{garbage", "spot-itn-abc") is None
    assert deregistration_for(_record(), "spot-itn-other") is None


def test_a_record_without_load_balancer_step_holds_nothing() -> None:
    d = deregistration_for(_record(), "spot-itn-abc")
    assert d is not None and d.state is StepState.SKIPPED
    assert not d.holds("default/web-0", T0)


def test_pending_holds_exactly_the_target_pods_until_draining_plus_settle() -> None:
    pending = _record(
        loadbalancer=loadbalancer_step(StepState.PENDING, T0, settle=5.0, pods=["default/web-0"])
    )
    d = deregistration_for(pending.encode(), "spot-itn-abc")  # the annotation's text works too
    assert d is not None and d.state is StepState.PENDING and d.since is None and d.release_at is None
    assert d.held == frozenset({"default/web-0"})
    assert d.holds("default/web-0", T0 + timedelta(hours=1))  # pending: held (the drain bounds it)
    assert not d.holds("default/batch-0", T0)  # no target: evicted at once

    started = T0 + timedelta(seconds=2)
    draining = _record(
        loadbalancer=loadbalancer_step(StepState.DRAINING, started, settle=5.0, pods=["default/web-0"])
    )
    d = deregistration_for(draining, "spot-itn-abc")
    assert d is not None and d.since == started and d.release_at == started + timedelta(seconds=5)
    assert d.holds("default/web-0", started + timedelta(seconds=4.9))
    assert not d.holds("default/web-0", started + timedelta(seconds=5))


def test_node_target_or_capped_list_holds_every_pod() -> None:
    node = _record(loadbalancer=loadbalancer_step(StepState.PENDING, T0, node=True, pods=["a/b"]))
    d = deregistration_for(node, "spot-itn-abc")
    assert d is not None and d.held is None and d.holds("any/pod", T0)
    many = [f"ns/p{i}" for i in range(MAX_PODS + 1)]
    capped = _record(loadbalancer=loadbalancer_step(StepState.PENDING, T0, pods=many))
    d = deregistration_for(capped, "spot-itn-abc")
    assert d is not None and d.held is None


def test_failed_or_nothing_registered_releases_at_once() -> None:
    failed = _record(loadbalancer=loadbalancer_step(StepState.FAILED, T0, pods=["a/b"], error="AccessDenied"))
    d = deregistration_for(failed, "spot-itn-abc")
    assert d is not None and d.error == "AccessDenied" and not d.holds("a/b", T0)
    done = _record(loadbalancer=loadbalancer_step(StepState.DONE, T0))
    d = deregistration_for(done, "spot-itn-abc")
    assert d is not None and d.held == frozenset() and not d.holds("a/b", T0)
