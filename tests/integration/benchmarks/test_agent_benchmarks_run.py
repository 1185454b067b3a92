"""The agent benchmarks run real agent processes and print one JSON object with their documented keys
(tiny sizes, no timing or memory assertions: figures come from running the benchmarks themselves,
see docs/PERFORMANCE.md)."""

from __future__ import annotations

import pytest

from support.benchmarks import run_benchmark

_run = run_benchmark


def _number(out: dict[str, object], key: str) -> float:
    value = out[key]
    assert isinstance(value, (int, float)) and not isinstance(value, bool), (key, value)
    return float(value)


@pytest.mark.slow
def test_agent_reaction_prints_its_figures() -> None:
    out = _run("agent_reaction.py", "--n", "3", "--settle", "1")
    assert out["n"] == 3 and out["fenced"] == 3 and out["missed"] == 0
    assert _number(out, "poll_interval_s") == 1.0
    assert _number(out, "goal_p99_s") == pytest.approx(1.15)
    for key in ("p50_s", "p99_s", "max_s", "detect_p99_s", "react_p99_s"):
        assert _number(out, key) >= 0, key
    assert _number(out, "p50_s") <= _number(out, "p99_s") <= _number(out, "max_s")
    assert isinstance(out["met"], bool)
    assert "listener" in str(out["measured_with"])
    latencies = out["latencies_s"]
    assert isinstance(latencies, list) and len(latencies) == 3


@pytest.mark.slow
def test_agent_memory_prints_its_figures() -> None:
    out = _run(
        "agent_memory.py", "--deployments", "2", "--replicas", "2", "--idle-seconds", "2", "--settle", "1"
    )
    assert out["pods"] == 4
    for key in ("idle_rss_mib", "peak_rss_mib", "sampled_peak_rss_mib"):
        assert 5 < _number(out, key) < 1024, key
    assert _number(out, "peak_rss_mib") >= _number(out, "sampled_peak_rss_mib") - 0.5
    assert 0 <= _number(out, "idle_cpu_percent") < 100
    assert _number(out, "drain_s") > 0
    assert _number(out, "goal_peak_rss_mib") == 48 and _number(out, "goal_idle_cpu_percent") == 1
    assert out["forbidden_modules"] == []
    assert isinstance(out["met"], bool)
