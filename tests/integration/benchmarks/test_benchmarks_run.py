"""The benchmarks run and print one JSON object with their documented keys (tiny sizes, no timing
assertions: figures are measured by running the benchmarks themselves, see docs/PERFORMANCE.md)."""

from __future__ import annotations

import pytest

from support.benchmarks import run_benchmark

_run = run_benchmark


def test_kubesim_throughput_prints_its_figures() -> None:
    out = _run(
        "kubesim_throughput.py",
        *("--nodes", "30", "--pods-per-node", "5", "--seconds", "0.5"),
        *(
            "--phases",
            "watch,gets,evictions,resume,schedule",
            "--schedule-pods",
            "24",
            "--schedule-groups",
            "8",
        ),
    )
    for key in (
        "load_s",
        "rss_mib",
        "evictions_per_s",
        "gets_per_s",
        "watch_events_per_s",
        "api_only_evictions_per_s",
    ):
        assert isinstance(out[key], (int, float)), key
    assert out["pods"] >= 150
    assert out["get_errors"] == 0 and out["eviction_other"] == 0
    assert out["evicted"] > 0 and out["watch_events"] == out["pods"]
    # The schedule phase: every pending pod bound, anti-affine and spread groups included.
    assert out["schedule_pods_created"] == out["schedule_pods_bound"] == 24
    assert out["pods_scheduled_per_s"] > 0 and out["pods_scheduled_per_server_cpu_s"] > 0


def test_moto_sqs_throughput_prints_its_figures() -> None:
    out = _run("moto_sqs_throughput.py", "--queued", "200", "--budget", "200", "--no-baseline")
    assert any("per_s" in k for k in out), out


def test_drain_vs_kubectl_prints_its_figures() -> None:
    out = _run("drain_vs_kubectl.py", "--deployments", "2", "--replicas", "2")
    for key in ("kubespot_s", "kubectl_s", "ratio"):
        assert isinstance(out[key], (int, float)) and out[key] > 0, key
    assert out["pods"] == 4


@pytest.mark.slow
def test_scheduling_prints_its_figures_and_bounds() -> None:
    out = run_benchmark("scheduling.py", "--sizes", "30", "--types", "30")
    assert out["instance_types"] == 30
    row = out["generic"]["30"]
    assert isinstance(row, dict)
    for key in ("seconds", "cpu_seconds", "pods_per_s", "nodes", "cost_per_hour", "ffd_cost_per_hour"):
        assert row[key] > 0, key
    # A lower bound is below every packing: the plan's, and Karpenter's FFD reference.
    assert row["summed_lp_bound_per_hour"] <= row["lp_bound_per_hour"] <= row["cost_per_hour"]
    assert row["lp_bound_per_hour"] <= row["ffd_cost_per_hour"]
    assert row["cost_ratio"] == pytest.approx(row["cost_per_hour"] / row["lp_bound_per_hour"], rel=1e-3)
    # The diverse mix (topology rules): planned with figures; its LP bound ignores topology, so it
    # is a reference below the plan, not a goal.
    diverse = out["diverse"]["30"]
    assert isinstance(diverse, dict)
    for key in ("seconds", "pods_per_s", "nodes", "cost_per_hour"):
        assert diverse[key] > 0, key
    assert diverse["lp_bound_per_hour"] <= diverse["cost_per_hour"]
    # The FFD reference packs by resources alone: not given for a mix with topology rules.
    assert diverse["ffd_cost_per_hour"] is None and diverse["ffd_nodes"] is None
