"""The load-balancer scenario's pure parts: the verdict per run, the JSON, the time scale, the cluster."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubespot.sandbox import cluster
from kubespot.sandbox.command import lb_time_scale_problem
from kubespot.sandbox.lbsummary import WITH, WITHOUT, LbRun, lb_summary, run_summary, verdict
from kubespot.sandbox.summary import SPOT_ITN, OwnerTrack, PodTrack, ScenarioRecord
from kubespot.sandbox.timing import Timing
from kubespot.sim.lbsim import Deregistration, LoadBalancerResult

T0 = 1_000_000.0
ARN = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-shop-web-sandbox/abc"
TARGETS = {"100.64.0.2": "shop/web-1", "100.64.0.6": "shop/web-2"}


def _rec() -> ScenarioRecord:
    rec = ScenarioRecord(SPOT_ITN, "spot-node-1", "i-0abc", notice_at=T0, deadline=T0 + 60, label="with")
    rec.tainted_at = rec.cordoned_at = T0 + 0.2
    rec.pods = {
        "u1": PodTrack(
            "shop", "web-1", "u1", "shop/ReplicaSet/web", terminating_at=T0 + 3.0, gone_at=T0 + 5.5
        ),
        "u2": PodTrack(
            "shop", "web-2", "u2", "shop/ReplicaSet/web", terminating_at=T0 + 4.8, gone_at=T0 + 7.3
        ),
        "u3": PodTrack(
            "shop", "api-1", "u3", "shop/ReplicaSet/api", terminating_at=T0 + 0.7, gone_at=T0 + 3.2
        ),
    }
    rec.owners = {
        "shop/ReplicaSet/web": OwnerTrack("shop/ReplicaSet/web", 8, 8, T0 + 6.0),
        "shop/ReplicaSet/api": OwnerTrack("shop/ReplicaSet/api", 4, 4, T0 + 2.0),
    }
    return rec


def _result(failed: int = 0, **kw: Any) -> LoadBalancerResult:
    base: dict[str, Any] = {
        "sent": 400,
        "failed": failed,
        "error_window_s": 0.0 if not failed else 4.5,
        "first_failure_at": None if not failed else T0 + 0.5,
        "last_failure_at": None if not failed else T0 + 5.0,
        "started_at": T0,
        "duration_s": 8.0,
        "rate": 50.0,
        "per_second": (),
        "failures_by_reason": {} if not failed else {"pod-terminating": failed},
        "sent_by_target": {},
    }
    base.update(kw)
    return LoadBalancerResult(**base)


def _with(failed: int = 0, state: str | None = "draining") -> LbRun:
    rec = _rec()
    if state is not None:
        at = datetime.fromtimestamp(T0 + 0.25, tz=UTC).isoformat()
        rec.deregistration = {
            "state": state,
            "at": at,
            "settle": 2.75,
            "targets": [{"tg": ARN, "id": ip, "port": 8080} for ip in TARGETS],
            "pods": sorted(TARGETS.values()),
        }
        rec.deregistered_at = T0 + 0.3
    return LbRun(WITH, True, rec, _result(failed), dict(TARGETS), stopped_routing_at=T0 + 1.3)


def test_with_deregistration_met_when_nothing_failed() -> None:
    run = _with()
    assert verdict(run).ok
    s = run_summary(run)
    assert (s["sent"], s["failed"], s["error_window_s"]) == (400, 0, 0.0)
    # The record's own time (AWS accepted the deregistration), not when the observer saw it.
    assert s["deregistered_s"] == pytest.approx(0.25)
    assert s["stopped_routing_s"] == pytest.approx(1.3)
    assert s["first_target_evicted_s"] == pytest.approx(3.0)  # web-1; api-1 is no target
    assert s["drain_time_s"] == pytest.approx(7.3) and s["deadline_met"]
    assert s["target_pods"] == ["shop/web-1", "shop/web-2"]


def test_with_deregistration_missed_on_one_failed_request() -> None:
    v = verdict(_with(failed=1))
    assert not v.ok
    assert any("1 of 400 requests failed with deregistration" in r for r in v.reasons)


def test_with_deregistration_missed_without_a_record_or_after_a_failure() -> None:
    assert any("never recorded a deregistration" in r for r in verdict(_with(state=None)).reasons)
    assert any("ended failed" in r for r in verdict(_with(state="failed")).reasons)


def test_without_deregistration_failures_are_expected_not_a_miss() -> None:
    rec = _rec()
    res = _result(
        failed=37,
        deregistrations=(Deregistration(T0 + 3.9, ARN, "100.64.0.2", 8080, "pod-terminating", True),),
    )
    run = LbRun(WITHOUT, False, rec, res, dict(TARGETS), stopped_routing_at=T0 + 5.5)
    assert verdict(run).ok
    s = run_summary(run)
    assert s["failed"] == 37 and s["first_failure_s"] == pytest.approx(0.5)
    assert s["deregistered_s"] is None and not s["deregistered_by_kubespot"]
    assert s["lb_controller_deregistrations"] == 1


def test_a_drain_past_the_deadline_fails_either_run() -> None:
    run = _with()
    run.rec.pods["u2"].gone_at = None
    assert not verdict(run).ok


def test_summary_ok_only_with_both_runs_ok() -> None:
    without = LbRun(WITHOUT, False, _rec(), _result(failed=20), dict(TARGETS), stopped_routing_at=T0 + 5)
    out = lb_summary([without, _with()], time_scale=2.0)
    assert out["ok"] and out["scenario"] == "load-balancer" and out["time_scale"] == 2.0
    assert {"sent", "failed", "error_window_s"} <= out[WITH].keys() & out[WITHOUT].keys()
    assert not lb_summary([without, _with(failed=3)])["ok"]
    assert not lb_summary([without])["ok"]


def test_time_scale_must_leave_the_agent_room_to_wait() -> None:
    assert lb_time_scale_problem(Timing(2.0)) is None
    problem = lb_time_scale_problem(Timing(4.0))
    assert problem is not None and "too fast" in problem


def test_settle_covers_the_balancer_with_room_to_spare() -> None:
    for scale in (1.0, 2.0, 3.0):
        t = Timing(scale)
        assert t.lb_settle >= t.s(2.0) + 0.25 + 1.5
        assert t.deregistration_delay >= 2 and isinstance(t.deregistration_delay, int)


def test_lb_cluster_spreads_web_over_identical_spot_nodes() -> None:
    objs = cluster.lb_objects(4, Timing(2.0), controller=True)
    nodes = [o for o in objs if o["kind"] == "Node"]
    spot = [n for n in nodes if n["metadata"]["labels"][cluster.CAPACITY_TYPE] == "spot"]
    assert len(spot) == 4 and len({n["metadata"]["labels"][cluster.INSTANCE_TYPE] for n in spot}) == 1
    web = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == cluster.LB_APP)
    assert web["spec"]["replicas"] == 8
    assert web["spec"]["template"]["spec"]["nodeSelector"] == {cluster.CAPACITY_TYPE: "spot"}
    assert any(o["metadata"]["name"] == cluster.CONTROLLER_NAME for o in objs)
    assert not any(
        o["metadata"]["name"] == cluster.CONTROLLER_NAME
        for o in cluster.lb_objects(4, Timing(2.0), controller=False)
    )
