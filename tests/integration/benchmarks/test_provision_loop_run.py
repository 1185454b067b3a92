"""The provisioning-loop benchmark runs the real controller against kubesim, moto's spot market and
the node joiner, and prints one JSON object with issue 14 §5's keys (tiny size, no timing
assertions: the figures come from running the benchmark itself, see docs/PERFORMANCE.md).

Sources: kubernetes-sigs/karpenter ``pkg/controllers/provisioning/provisioner.go`` (pending pods →
NodeClaims), aws/karpenter-provider-aws ``pkg/providers/instance/instance.go`` (CreateFleet, the
insufficient-capacity errors the fallback latency is timed from).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"
SIZE_KEYS = {"claims_created_s", "launched_s", "bound_s", "boot_delay_s", "fleet_calls", "fallback_p99_s"}


@pytest.mark.slow
def test_provision_loop_prints_its_figures(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            sys.executable,
            str(BENCH / "provision_loop.py"),
            *("--sizes", "20", "--time-scale", "20", "--timeout", "200", "--workdir", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=280,  # within pytest-timeout's 300 s
    )
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, res.stdout
    out = json.loads(lines[0])
    assert out.keys() >= {"20", "controller_cpu_s", "peak_rss_mib"}
    size = out["20"]
    assert size.keys() >= SIZE_KEYS
    # The order of the clock's marks, and the fallback phase met insufficient capacity.
    assert 0 < size["claims_created_s"] <= size["launched_s"] <= size["bound_s"]
    assert size["fleet_calls"] >= 1 and size["capacity_refusals"] >= 1
    assert size["fallback_p99_s"] is not None and size["fallback_p99_s"] >= 0
    assert out["controller_cpu_s"] > 0 and out["peak_rss_mib"] > 0
