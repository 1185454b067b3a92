"""The load-balancer scenario's verdict and JSON: pure data and pure judgement, no I/O.

Two runs of the same spot interruption behind a simulated load balancer (``loadbalancer``): one
without deregistration (the agent drains as it always did, nobody touches the load balancer) and
one with it (the controller deregisters the node's targets, the agent holds those pods until the
load balancer stopped routing to them). Each run's ``LbRun`` holds the drain's ``ScenarioRecord``
(from the observer), the load balancer's counts (from lbsim, measured from the notice) and what the
sandbox saw of the node's targets. ``lb_run_summary`` turns the two into the JSON the command
prints and the tests read.

The promise: with deregistration no request fails, the controller recorded the deregistration, and
the drain met its deadline. Without it the drain must still meet its deadline; its failed requests
are what the comparison is for, expected but not required.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubespot.sim.lbsim import LoadBalancerResult

from .summary import ScenarioRecord, Verdict, judge, scenario_summary

LOAD_BALANCER = "load-balancer"
WITHOUT = "without_deregistration"
WITH = "with_deregistration"


@dataclass
class LbRun:
    """One run: the drain as the API showed it, and the requests as the load balancer counted them."""

    key: str  # WITHOUT or WITH
    deregistration: bool
    rec: ScenarioRecord
    result: LoadBalancerResult
    #: The node's pods that were load-balancer targets at the notice: pod IP -> ``namespace/name``.
    targets: dict[str, str]
    #: When the load balancer had stopped routing to every one of them (epoch), and how each left.
    stopped_routing_at: float | None = None
    left_rotation: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def _rel(rec: ScenarioRecord, t: float | None) -> float | None:
    return None if t is None else round(t - rec.notice_at, 3)


def deregistered_at(run: LbRun) -> float | None:
    """When AWS accepted kubespot's deregistration (the record's own time), else when the observer
    first saw the record say draining; None without one."""
    step = run.rec.deregistration or {}
    if step.get("state") in ("draining", "done") and isinstance(step.get("at"), str):
        try:
            return datetime.fromisoformat(step["at"]).timestamp()
        except ValueError:
            pass
    return run.rec.deregistered_at


def verdict(run: LbRun) -> Verdict:
    reasons = list(judge(run.rec).reasons)
    res = run.result
    if res.sent == 0:
        reasons.append("the load balancer sent no request")
    if not run.targets:
        reasons.append(f"no pod on {run.rec.node} was a load-balancer target: the run shows nothing")
    if run.deregistration:
        step = run.rec.deregistration
        if step is None:
            reasons.append("the controller never recorded a deregistration (kubespot.io/actions)")
        elif step.get("state") not in ("draining", "done"):
            reasons.append(
                f"the controller's deregistration ended {step.get('state')}: {step.get('error', '')}"
            )
        if res.failed:
            why = ", ".join(f"{n} {r}" for r, n in sorted(res.failures_by_reason.items()))
            reasons.append(
                f"{res.failed} of {res.sent} requests failed with deregistration "
                f"(error window {res.error_window_s:.2f}s: {why})"
            )
    return Verdict(not reasons, tuple(reasons))


def run_summary(run: LbRun) -> dict[str, Any]:
    """One run as JSON-ready data; times in seconds after the notice."""
    rec, res = run.rec, run.result
    v = verdict(run)
    drain = scenario_summary(rec)
    evicted = [p.terminating_at for p in rec.evictable() if p.label in run.targets.values()]
    held = [t for t in evicted if t is not None]
    out: dict[str, Any] = {
        "ok": v.ok,
        "verdict": v.text,
        "reasons": list(v.reasons),
        "sent": res.sent,
        "failed": res.failed,
        "error_window_s": round(res.error_window_s, 3),
        "first_failure_s": _rel(rec, res.first_failure_at),
        "last_failure_s": _rel(rec, res.last_failure_at),
        "failures_by_reason": dict(sorted(res.failures_by_reason.items())),
        "rate": res.rate,
        "measured_s": round(res.duration_s, 3),
        "node": rec.node,
        "instance_id": rec.instance_id,
        "target_pods": sorted(run.targets.values()),
        "deregistered_by_kubespot": rec.deregistration is not None,
        "deregistered_s": _rel(rec, deregistered_at(run)) if run.deregistration else None,
        "deregistration": rec.deregistration,
        "stopped_routing_s": _rel(rec, run.stopped_routing_at),
        "left_rotation": dict(sorted(run.left_rotation.items())),
        "first_target_evicted_s": _rel(rec, min(held)) if held else None,
        "lb_controller_deregistrations": len(res.deregistrations),
        "health_check_failures": sum(1 for e in res.health_events if not e.healthy),
        "notice_to_cordon_s": drain["notice_to_cordon_s"],
        "drain_time_s": drain["time_to_empty_s"],
        "deadline_s": drain["deadline_s"],
        "deadline_met": drain["deadline_met"],
        "margin_s": drain["margin_s"],
        "per_second": [[c.second, c.sent, c.failed] for c in res.per_second],
        "drain": drain,
        **run.extra,
    }
    return out


def lb_summary(runs: list[LbRun], **extra: Any) -> dict[str, Any]:
    """Both runs: ok only when each kept its promise (the one with deregistration: no failed request)."""
    by_key = {run.key: run_summary(run) for run in runs}
    ok = {WITHOUT, WITH} <= by_key.keys() and all(r["ok"] for r in by_key.values())
    return {"ok": ok, "scenario": LOAD_BALANCER, **by_key, **extra}
