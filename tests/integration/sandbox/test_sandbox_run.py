"""``kubespot sandbox`` end to end: kubesim + imdssim + real agent processes, run as a user runs it.

Each test runs the command as a subprocess at a high time scale and reads its one-line JSON summary.
Besides the verdicts, every test checks that no agent process outlives the command.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from support.sandbox import left_running, run_sandbox, sandbox_command

pytestmark = pytest.mark.slow

FAST = "10"  # the 120 s notice becomes 12 s


def _sandbox(workdir: Path, *args: str, timeout: float = 120) -> tuple[int, dict[str, Any], str]:
    return run_sandbox(workdir, "--time-scale", FAST, *args, timeout=timeout)


def _explain(summary: dict[str, Any]) -> str:
    parts = [f"{name}: {s['reasons']}" for name, s in summary.get("scenarios", {}).items()]
    return "; ".join(parts) + f" problems={summary.get('problems')} logs={summary.get('workdir')}"


def test_every_scenario_meets_its_deadline(tmp_path: Path) -> None:
    code, out, stderr = _sandbox(tmp_path, "--nodes", "4")
    assert code == 0 and out["ok"], _explain(out) + stderr[-2000:]
    assert left_running(tmp_path) == []
    scenarios = out["scenarios"]
    assert set(scenarios) == {"spot-itn", "rebalance", "scheduled-reboot"}
    nodes = {s["node"] for s in scenarios.values()}
    assert len(nodes) == 3  # each on its own spot node

    spot = scenarios["spot-itn"]
    assert spot["deadline_met"] and spot["verdict"] == "met"
    assert 0 < spot["notice_to_cordon_s"] < 3
    assert spot["pods_to_move"] > 0 and spot["pods_moved"] == spot["pods_to_move"]
    assert spot["bare_pods_deleted"] == 1  # the bare pod is deleted, not moved
    assert spot["evictions"] == spot["pods_on_node"]
    assert spot["time_to_empty_s"] < spot["deadline_s"] and spot["margin_s"] > 0
    assert {"SpotInterruption", "DrainStarted", "DrainCompleted"} <= set(spot["agent_events"])

    rebalance = scenarios["rebalance"]
    assert rebalance["ok"] and rebalance["undone"] and rebalance["evictions"] == 0
    assert rebalance["notice_to_cordon_s"] is not None
    assert rebalance["undone_s"] >= rebalance["undo_after_s"] - 1.5

    reboot = scenarios["scheduled-reboot"]
    assert reboot["deadline_met"] and reboot["uncordoned_after_reboot"]
    assert reboot["fenced_s"] >= reboot["expected_fence_s"] - 1.5  # waited for NotBefore - lead
    assert reboot["pods_moved"] == reboot["pods_to_move"]
    assert reboot["cleaned_up_s"] > reboot["back_up_s"]

    lines = [line for line in out["timeline"] if line.get("scenario") == "spot-itn"]
    assert any("notice" in line["text"] for line in lines)
    assert all(Path(p).exists() for p in out["agent_logs"].values())


def test_a_budget_that_never_allows_disruption_misses_the_deadline(tmp_path: Path) -> None:
    code, out, _ = _sandbox(tmp_path, "--scenario", "spot-itn", "--nodes", "3", "--blocking-pdb")
    assert code == 1 and not out["ok"]
    assert left_running(tmp_path) == []
    spot = out["scenarios"]["spot-itn"]
    assert not spot["deadline_met"] and spot["verdict"] != "met"
    why = " ".join(spot["reasons"])
    assert "payments/ledger" in why and "PodDisruptionBudget refused" in why, why
    assert spot["pdb_429s"] > 0


def test_ctrl_c_stops_every_agent(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        sandbox_command(tmp_path, "--time-scale", FAST),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(left_running(tmp_path)) < 6:  # the default 6 spot nodes, one agent each
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "agents did not start"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert left_running(tmp_path) == []
