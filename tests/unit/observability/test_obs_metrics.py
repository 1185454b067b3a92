"""Metrics as Prometheus sees them (the rendered exposition, parsed back), and the health verdict."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import orjson
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from kubespot.observability import (
    METRICS,
    NODE_PHASES,
    Check,
    Metrics,
    freshness,
    reference_markdown,
    report,
)
from support.metrics_scrape import samples, value


def exercise(metrics: Metrics) -> None:
    metrics.interruption("spot-itn", "imds")
    metrics.action("cordon", "success")
    metrics.drain_finished(12.0, "success")
    metrics.notice_to_cordon(0.2, "spot-itn")
    metrics.eviction("evicted")
    metrics.deadline_miss("spot-itn")
    metrics.imds_error("/latest/meta-data/spot/instance-action")
    metrics.kube_error(429)
    metrics.webhook("success")
    metrics.set_info(version="1.2.3", node="ip-10-0-0-1", instance_id="i-0abc", mode="imds")
    metrics.set_node_phase("draining")
    metrics.mark("imds", 1_700_000_000.0)
    metrics.set_leader("kubespot-controller", True)
    metrics.set_managed_instances({"spot": 3})
    metrics.node_cleanup("deleted")
    metrics.nodeclaim_created("default", "spot", "provisioned")
    metrics.insufficient_capacity(10.0)
    metrics.launched("spot", "m5.large", "us-east-1a", 14.0)
    metrics.launch_failure("spot", "m5.large", "us-east-1b", "InsufficientInstanceCapacity")
    metrics.fallback("ice_replan")
    metrics.nodeclaim_timeout("registration_timeout")
    metrics.garbage_collected("lost_claim")
    metrics.watch("kubespot_unavailable_offerings", lambda: {("spot",): 2})
    metrics.watch("kubespot_pool_risk", lambda: {("m5.large", "us-east-1a"): 1.5})
    metrics.watch("kubespot_nodeclaims", lambda: {("launched",): 1})


def test_counters_appear_with_their_labels_after_calls() -> None:
    m = Metrics()
    m.interruption("spot-itn", "imds")
    m.interruption("spot-itn", "imds")
    m.interruption("rebalance-recommendation", "sqs")
    m.action("taint", "success")
    m.action("drain", "dry_run")
    m.eviction("evicted", 3)
    m.eviction("deleted-at-deadline")
    m.deadline_miss("spot-itn")
    m.imds_error("/latest/api/token")
    m.kube_error(409)
    m.kube_error(409)
    m.webhook("dropped")

    assert value(m, "kubespot_interruptions_total", kind="spot-itn", source="imds") == 2
    assert value(m, "kubespot_interruptions_total", kind="rebalance-recommendation", source="sqs") == 1
    assert value(m, "kubespot_actions_total", action="taint", result="success") == 1
    assert value(m, "kubespot_actions_total", action="drain", result="dry_run") == 1
    assert value(m, "kubespot_evictions_total", result="evicted") == 3
    assert value(m, "kubespot_evictions_total", result="deleted-at-deadline") == 1
    assert value(m, "kubespot_deadline_misses_total", kind="spot-itn") == 1
    assert value(m, "kubespot_imds_errors_total", path="/latest/api/token") == 1
    assert value(m, "kubespot_kube_api_errors_total", code="409") == 2
    assert value(m, "kubespot_webhook_sends_total", result="dropped") == 1
    # Nothing recorded, nothing exported: no phantom series for combinations never seen.
    assert value(m, "kubespot_actions_total", action="taint", result="failure") is None


def test_histograms_use_the_documented_buckets() -> None:
    m = Metrics()
    m.drain_finished(12.0, "success")
    m.drain_finished(700.0, "deadline")
    m.notice_to_cordon(0.12, "spot-itn")

    assert value(m, "kubespot_drain_duration_seconds_bucket", result="success", le="10.0") == 0
    assert value(m, "kubespot_drain_duration_seconds_bucket", result="success", le="20.0") == 1
    assert value(m, "kubespot_drain_duration_seconds_sum", result="success") == 12.0
    assert value(m, "kubespot_drain_duration_seconds_bucket", result="deadline", le="600.0") == 0
    assert value(m, "kubespot_drain_duration_seconds_bucket", result="deadline", le="+Inf") == 1
    assert value(m, "kubespot_notice_to_cordon_seconds_bucket", kind="spot-itn", le="0.1") == 0
    assert value(m, "kubespot_notice_to_cordon_seconds_bucket", kind="spot-itn", le="0.15") == 1

    def bounds(name: str) -> list[float]:
        les = {dict(labels)["le"] for (sample, labels) in samples(m) if sample == f"{name}_bucket"} - {"+Inf"}
        return sorted(float(le) for le in les)

    assert bounds("kubespot_drain_duration_seconds") == [1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600]
    assert bounds("kubespot_notice_to_cordon_seconds") == [
        0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30,
    ]  # fmt: skip


def test_two_instances_are_independent_and_leave_the_global_registry_alone() -> None:
    a, b = Metrics(), Metrics()
    a.interruption("spot-itn", "imds")
    a.kube_error(500)
    assert value(a, "kubespot_interruptions_total", kind="spot-itn", source="imds") == 1
    assert value(b, "kubespot_interruptions_total", kind="spot-itn", source="imds") is None
    assert value(b, "kubespot_kube_api_errors_total", code="500") is None
    assert not [f for f in REGISTRY.collect() if f.name.startswith("kubespot_")]


def test_info_is_one_series_that_follows_the_latest_identity() -> None:
    m = Metrics()
    m.set_info(version="1.0", node="n1", instance_id="i-1", mode="imds")
    m.set_info(version="1.1", node="n1", instance_id="i-1", mode="queue")
    info = {labels: v for (name, labels), v in samples(m).items() if name == "kubespot_info"}
    assert info == {
        frozenset({"version": "1.1", "node": "n1", "instance_id": "i-1", "mode": "queue"}.items()): 1.0
    }


def test_node_phase_is_one_hot_and_starts_at_none() -> None:
    m = Metrics()

    def phases() -> dict[str, float]:
        return {
            dict(labels)["phase"]: v
            for (name, labels), v in samples(m).items()
            if name == "kubespot_node_interruption_phase"
        }

    assert phases() == {p: (1.0 if p == "none" else 0.0) for p in NODE_PHASES}
    m.set_node_phase("draining")
    assert phases() == {p: (1.0 if p == "draining" else 0.0) for p in NODE_PHASES}
    m.set_node_phase("quarantined")  # a phase the agent adds later still works, one-hot
    assert phases()["quarantined"] == 1.0
    assert sum(phases().values()) == 1.0
    m.set_node_phase(None)
    assert phases()["none"] == 1.0
    assert sum(phases().values()) == 1.0


def test_mark_exports_the_timestamp_and_remembers_it_for_health_checks() -> None:
    m = Metrics()
    assert m.last_success("kube") is None
    m.mark("kube", 1_700_000_000.25)
    m.mark("imds", 1_700_000_100.0)
    m.mark("imds", math.nan)  # ignored: not a time
    assert value(m, "kubespot_last_success_timestamp_seconds", component="kube") == 1_700_000_000.25
    assert value(m, "kubespot_last_success_timestamp_seconds", component="imds") == 1_700_000_100.0
    assert m.last_success("kube") == datetime.fromtimestamp(1_700_000_000.25, UTC)


def test_recording_never_raises_on_bad_input() -> None:
    m = Metrics()
    m.drain_finished(-3.0, "success")  # clock step: counted, in the first bucket
    m.notice_to_cordon(math.inf, "spot-itn")
    m.eviction("evicted", 0)
    m.eviction("evicted", -5)
    m.eviction("evicted", "many")  # type: ignore[arg-type]
    m.kube_error("teapot")  # type: ignore[arg-type]
    m.action(None, 7)  # type: ignore[arg-type]
    m.mark("kube", "yesterday")  # type: ignore[arg-type]
    m.set_info(version=None, node="n", instance_id="i", mode="m")  # type: ignore[arg-type]
    assert value(m, "kubespot_drain_duration_seconds_bucket", result="success", le="1.0") == 1
    assert value(m, "kubespot_evictions_total", result="evicted") is None
    assert value(m, "kubespot_kube_api_errors_total", code="teapot") == 1  # labels are str()'d
    assert value(m, "kubespot_actions_total", action="None", result="7") == 1


def test_render_is_text_format_without_created_series() -> None:
    m = Metrics()
    exercise(m)
    body, content_type = m.render()
    assert content_type.startswith("text/plain; version=0.0.4")
    # kubespot_nodeclaims_created_total is a name of ours, not prometheus_client's *_created series.
    assert not any(
        s.name.endswith("_created") for f in text_string_to_metric_families(body.decode()) for s in f.samples
    )
    assert b'kubespot_interruptions_total{kind="spot-itn",source="imds"} 1.0' in body


def test_metrics_table_documents_exactly_what_is_exposed() -> None:
    m = Metrics()
    exercise(m)
    body, _ = m.render()
    exposed = {f.name for f in text_string_to_metric_families(body.decode())}
    # The parser reports counters without their _total suffix.
    documented = {spec.name.removesuffix("_total") for spec in METRICS}
    assert exposed == documented
    for spec in METRICS:
        # Only a gauge may be a single number (kubespot_queue_messages_overdue): counters and
        # histograms are always broken down.
        assert spec.help and (spec.labels or spec.type == "gauge")
        assert spec.type in ("counter", "gauge", "histogram")
        assert (spec.type == "counter") == spec.name.endswith("_total")
        assert bool(spec.buckets) == (spec.type == "histogram")


def test_reference_markdown_has_one_row_per_metric() -> None:
    text = reference_markdown()
    lines = text.strip().splitlines()
    assert lines[0] == "| metric | type | labels | help |"
    assert len(lines) == 2 + len(METRICS)
    for spec, line in zip(METRICS, lines[2:], strict=True):
        assert line.startswith(f"| `{spec.name}` | {spec.type} | ")
        assert all(f"`{label}`" in line for label in spec.labels)
    assert "Buckets: 1, 2, 5, 10" in text


# -- health verdict --------------------------------------------------------------------------------

NOW = datetime(2026, 11, 22, 2, 33, tzinfo=UTC)


def test_freshness_is_ok_within_max_age_only() -> None:
    fresh = freshness("imds", NOW - timedelta(seconds=59), now=NOW, max_age=timedelta(seconds=60))
    edge = freshness("imds", NOW - timedelta(seconds=60), now=NOW, max_age=timedelta(seconds=60))
    stale = freshness("kube", NOW - timedelta(seconds=61), now=NOW, max_age=timedelta(seconds=60))
    never = freshness("kube", None, now=NOW, max_age=timedelta(seconds=60))
    assert fresh.ok and edge.ok
    assert not stale.ok and "61.0s ago" in stale.detail
    assert never == Check("kube", False, "no success yet", None)
    ahead = freshness("imds", NOW + timedelta(seconds=5), now=NOW, max_age=timedelta(seconds=1))
    assert ahead.ok
    custom = freshness("imds", None, now=NOW, max_age=timedelta(seconds=1), detail="waiting for token")
    assert custom.detail == "waiting for token"


def test_freshness_takes_naive_times_as_utc() -> None:
    naive = datetime(2026, 11, 22, 2, 32, 30)
    assert freshness("imds", naive, now=NOW, max_age=timedelta(seconds=60)).ok
    assert not freshness("imds", naive, now=NOW, max_age=timedelta(seconds=10)).ok


def test_report_is_ok_iff_all_checks_are_and_serializes() -> None:
    good = Check("imds", True, "fine", NOW)
    bad = Check("kube", False, "stale", None)
    assert report(good).ok
    assert report().ok
    verdict = report(good, bad)
    assert not verdict.ok
    assert verdict.checks == (good, bad)
    assert orjson.loads(verdict.to_json()) == {
        "ok": False,
        "checks": [
            {"name": "imds", "ok": True, "detail": "fine", "last_success": "2026-11-22T02:33:00+00:00"},
            {"name": "kube", "ok": False, "detail": "stale", "last_success": None},
        ],
    }
