"""``kubespot sandbox --scenario provision`` as a user runs it: kubesim, moto's spot market and the
node joiner in the command's process, a real controller process per run with provisioning on.

One small run (30 replicas at 25x, about a minute on 2 cores): the JSON summary has the figures of
issue 14 §4 for both runs, the kubespot run launched nothing into the reclaimed pools and fell back
to on-demand when spot ran out, and no process is left behind.

Sources the scenario follows: aws/karpenter-provider-aws ``pkg/controllers/interruption/controller.go``
``markUnavailableOfferings`` (a spot interruption warning marks its pool unavailable: what the
shares-nothing run lacks, as Karpenter beside NTH), ``pkg/cache/unavailableofferings.go`` (the
3-minute cache the scenario waits out before the reclaim), ``pkg/providers/instance/instance.go``
(insufficient-capacity errors → the next launch without those offerings).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.sandbox import left_running, run_sandbox

pytestmark = pytest.mark.slow

FIGURES = {
    "pending_p50_s",
    "pending_p99_s",
    "fallback_s",
    "launches_into_reclaimed_pools",
    "spot_share",
    "cost_per_hour",
    "pods_lost_service",
}


def _explain(out: dict[str, Any]) -> str:
    runs = {k: {"reasons": out[k].get("reasons")} for k in ("shares_nothing", "kubespot") if k in out}
    return f"{runs} problems={out.get('problems')} error={out.get('error')} workdir={out.get('workdir')}"


def test_provision_scenario_kubespot_never_launches_into_a_reclaimed_pool(tmp_path: Path) -> None:
    code, out, stderr = run_sandbox(
        tmp_path, "--scenario", "provision", "--replicas", "30", "--time-scale", "25", timeout=240
    )
    assert out.get("scenario") == "provision", _explain(out) + stderr[-2000:]
    assert left_running(tmp_path) == []
    for key in ("shares_nothing", "kubespot"):
        run = out[key]
        assert run.keys() >= FIGURES | {"ok", "verdict", "reasons"}, key
        assert run["pods_unbound"] == 0, _explain(out)
        assert run["pods"] >= 30 + 3  # the Deployments and the database at least
        assert run["reclaimed_pools"], "the reclaim found spot instances to take"
        assert 0 < run["spot_share"] <= 1 and run["cost_per_hour"] > 0
        assert run["pending_p50_s"] <= run["pending_p99_s"]
        assert Path(run["controller_log"]).is_file()
    kubespot = out["kubespot"]
    # The promise: what the interruption handler learnt keeps the provisioner out of the reclaimed pools.
    assert kubespot["launches_into_reclaimed_pools"] == 0, _explain(out)
    # The reclaimed nodes were drained by the queue processor with its default managed-tag check:
    # kubespot's own instances count as managed (aws/ec2.py InstanceInfo.is_managed).
    assert kubespot["pods_lost_service"] == 0, _explain(out)
    # Spot ran dry: the provisioner fell back to on-demand after EC2's insufficient-capacity answers.
    detail = {
        k: kubespot.get(k) for k in ("capacity_refusals", "fleet_calls", "phases_s", "nodes_by_capacity_type")
    }
    assert kubespot["fallback_s"] is not None and kubespot["capacity_refusals"] > 0, (
        f"{_explain(out)} {detail}"
    )
    assert kubespot["nodes_by_capacity_type"].get("on-demand", 0) >= 2  # the database's and the fallback's
    assert (code == 0) == out["ok"]
