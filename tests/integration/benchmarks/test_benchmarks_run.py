"""The benchmarks run and print one JSON object with their documented keys (tiny sizes, no timing
assertions: figures are measured by running the benchmarks themselves, see docs/PERFORMANCE.md)."""

from __future__ import annotations

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
