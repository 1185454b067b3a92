"""``kubespot sandbox --scenario load-balancer`` as a user runs it: kubesim, imdssim, moto and the
simulated load balancer in the command's process, real agent processes and a real controller.

One run of the command (about 25 s on 2 cores at its default time scale, 2x): the JSON summary's
shape, no failed request with deregistration, requests sent in both runs, and no process left
behind. Its tolerances are the scenario's own (docs/sandbox.md): the settle time stays at least
1.5 real seconds above the balancer's refresh period plus propagation, so a loaded machine does not
turn the "with" run red; nothing here is timed tighter than the scenario itself.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.sandbox import left_running, run_sandbox

pytestmark = pytest.mark.slow

RUN_KEYS = {"sent", "failed", "error_window_s", "deregistered_s", "stopped_routing_s", "drain_time_s"}


def _sandbox(workdir: Path, *args: str, timeout: float = 150) -> tuple[int, dict[str, Any], str]:
    return run_sandbox(workdir, *args, timeout=timeout)


def _explain(out: dict[str, Any]) -> str:
    runs = {
        k: {"reasons": out[k].get("reasons"), "failed": out[k].get("failed")}
        for k in ("without_deregistration", "with_deregistration")
        if k in out
    }
    return f"{runs} problems={out.get('problems')} error={out.get('error')} workdir={out.get('workdir')}"


def test_deregistration_fails_no_request(tmp_path: Path) -> None:
    code, out, stderr = _sandbox(tmp_path, "--scenario", "load-balancer")
    assert code == 0 and out["ok"], _explain(out) + stderr[-2000:]
    assert left_running(tmp_path) == []
    assert out["scenario"] == "load-balancer" and out["problems"] == []

    without, with_ = out["without_deregistration"], out["with_deregistration"]
    for run in (without, with_):
        assert run.keys() >= RUN_KEYS
        assert run["sent"] > 0
        assert run["deadline_met"] is True
        assert len(run["target_pods"]) == 2  # two web pods on every spot node

    # The promise: not one request fails when kubespot deregisters first.
    assert with_["failed"] == 0 and with_["error_window_s"] == 0
    assert with_["deregistered_by_kubespot"] and with_["deregistration"]["state"] == "draining"
    assert sorted(with_["deregistration"]["pods"]) == with_["target_pods"]
    # The balancer stopped routing to the pods before the first of them was evicted.
    assert with_["stopped_routing_s"] < with_["first_target_evicted_s"]
    assert with_["lb_controller_deregistrations"] == 0

    # Without it, the same interruption costs requests until the AWS Load Balancer Controller (or
    # the health checks) take the evicted pods out: expected, though not part of the verdict.
    assert not without["deregistered_by_kubespot"] and without["controller_log"] is None
    assert without["failed"] > 0 and without["error_window_s"] > 0
    assert set(without["failures_by_reason"]) <= {"pod-terminating", "no-pod"}

    # Both runs interrupted equivalent nodes of equivalent worlds, in their own directories.
    assert without["node"] == with_["node"]
    assert Path(with_["controller_log"]).is_file()
    assert "with-deregistration" in with_["kubeconfig"] and "without-deregistration" in without["kubeconfig"]


def test_too_fast_a_time_scale_is_refused(tmp_path: Path) -> None:
    """At 4x the 120 s notice is 30 s, all of which the agent keeps for the drain: nothing to compare."""
    res = subprocess.run(
        [sys.executable, "-m", "kubespot", "sandbox", "--scenario", "load-balancer", "--time-scale", "4"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert "too fast for --scenario load-balancer" in res.stderr
