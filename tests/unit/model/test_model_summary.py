"""The interruption summary: its wire form is a contract (stable names, RFC 3339 times, seconds)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from kubespot.actions.drain import Outcome as PodOutcome
from kubespot.model import InterruptionEvent, Kind, Source
from kubespot.model.summary import (
    SCHEMA_VERSION,
    ActionResult,
    ActionSummary,
    InterruptionSummary,
    Outcome,
    PodCounts,
    Stage,
    rfc3339,
)

NOTICE = datetime(2026, 11, 20, 17, 2, 13, tzinfo=UTC)
EVENT = InterruptionEvent(
    id="spot-itn-1",
    kind=Kind.SPOT_INTERRUPTION,
    instance_id="i-0123",
    source=Source.IMDS,
    notice_time=NOTICE,
    act_at=NOTICE,
    deadline=NOTICE + timedelta(seconds=120),
    description="Spot ITN received",
)

#: The wire form's keys. Changing this set is changing a published contract: raise SCHEMA_VERSION
#: when a key changes meaning or goes away, and say so in docs/notifications.md.
SUMMARY_KEYS = {
    "schema_version", "event_id", "kind", "node", "instance_id", "source", "description", "stage",
    "outcome", "dry_run", "notice_time", "deadline", "started", "finished", "duration", "margin",
    "actions", "pods", "failures", "error",
}  # fmt: skip
ACTION_KEYS = {"name", "result", "started", "duration", "detail", "status"}
POD_KEYS = {"evicted", "deleted", "deleted_at_deadline", "gone", "skipped", "still_running", "moved"}


def finished() -> InterruptionSummary:
    return InterruptionSummary.for_event(
        EVENT,
        node="node-a",
        stage=Stage.FINISHED,
        started=NOTICE + timedelta(seconds=1.25),
        finished=NOTICE + timedelta(seconds=75),
        actions=(
            ActionSummary(name="drain", result=ActionResult.SUCCESS, started=NOTICE, duration=72.12345),
            ActionSummary(name="http:mute", result=ActionResult.TIMEOUT, detail="no answer", status=None),
        ),
        pods=PodCounts(evicted=3, deleted_at_deadline=1, skipped=2),
        failures=("pod default/web-0: deleted at the deadline",),
    )


def test_wire_form_has_the_documented_keys_and_is_json() -> None:
    data = finished().to_dict()
    assert set(data) == SUMMARY_KEYS
    assert all(set(a) == ACTION_KEYS for a in data["actions"])
    assert set(data["pods"]) == POD_KEYS
    assert json.loads(json.dumps(data)) == data  # plain JSON types only
    assert data["schema_version"] == SCHEMA_VERSION == 1


def test_values_are_rfc3339_seconds_and_enum_values() -> None:
    data = finished().to_dict()
    assert data["kind"] == "spot-itn" and data["source"] == "imds"
    assert (data["stage"], data["outcome"]) == ("finished", "done")
    assert data["notice_time"] == "2026-11-20T17:02:13Z"
    assert data["started"] == "2026-11-20T17:02:14.250Z"
    assert data["deadline"] == "2026-11-20T17:04:13Z"
    assert data["duration"] == 73.75
    assert data["margin"] == 45.0
    assert data["actions"][0]["duration"] == 72.123  # milliseconds
    assert data["actions"][1] == {
        "name": "http:mute",
        "result": "timeout",
        "started": None,
        "duration": None,
        "detail": "no answer",
        "status": None,
    }
    assert data["pods"]["moved"] == 4


@pytest.mark.parametrize(
    ("stage", "outcome"),
    [(Stage.STARTED, Outcome.IN_PROGRESS), (Stage.FINISHED, Outcome.DONE), (Stage.FAILED, Outcome.FAILED)],
)
def test_the_stage_implies_a_default_outcome(stage: Stage, outcome: Outcome) -> None:
    summary = InterruptionSummary.for_event(EVENT, node="n", stage=stage)
    assert summary.outcome is outcome
    assert summary.duration is None and summary.margin is None  # not finished
    assert summary.to_dict()["pods"] is None  # no drain yet


def test_pod_counts_cover_every_outcome_a_real_drain_reports() -> None:
    # Dry-run outcomes never reach a summary of a real drain; everything else must be counted.
    real = {o.value for o in PodOutcome if not o.value.startswith("would-")}
    assert real <= set(PodCounts.FROM_OUTCOMES)
    counts = PodCounts.from_outcomes(
        {"evicted": 2, "deleted-bare": 1, "still-running": 1, "refused": 1, "x": 9}
    )
    assert counts == PodCounts(evicted=2, deleted=1, still_running=2)


def test_rfc3339_takes_naive_times_as_utc() -> None:
    assert rfc3339(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05Z"
    assert rfc3339(None) is None
