"""The provision scenario's figures, verdicts and JSON (``kubespot sandbox --scenario provision``).

Pure: every figure is computed here from what a run recorded (``ProvisionRecord``: the pods' waits
from the API, the nodes at the end, the pods that lost service, and EC2's CreateFleet call log), so
the definitions in docs/sandbox.md ("The provision scenario") have one home and unit tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

PROVISION = "provision"
SHARES_NOTHING = "shares_nothing"
KUBESPOT = "kubespot"
RUNS = (SHARES_NOTHING, KUBESPOT)
#: A launch into a spot pool this long (story seconds) after a reclaim of that pool began counts as
#: a launch into a just-reclaimed pool: well past Karpenter's 3-minute unavailable-offerings cache.
RECLAIM_WINDOW_SECONDS = 600.0
#: The goal for the time from an insufficient-capacity answer to the provisioner's next launch call
#: (issue 14 §5: p99 ≤ 2 s). Real seconds: it is the controller's speed, not part of the story.
FALLBACK_GOAL_SECONDS = 2.0
#: EC2's answers that say a pool has no capacity (aws/karpenter-provider-aws
#: ``pkg/errors/errors.go`` ``IsUnfulfillableCapacity`` and the insufficient-capacity codes).
CAPACITY_ERRORS = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "VcpuLimitExceeded",
    }
)


@dataclass(frozen=True)
class NodeSnap:
    """One node running at the end of a run, as its labels and EC2's price say."""

    name: str
    nodepool: str
    capacity_type: str
    instance_type: str
    zone: str
    cpu: float
    price: float | None


@dataclass
class ProvisionRecord:
    """What one run recorded; times are epoch seconds (real)."""

    key: str
    time_scale: float
    #: Seconds each pod waited from its creation (first seen) to its binding; pods still pending at
    #: the end count with their wait so far.
    pending: list[float] = field(default_factory=list)
    unbound: int = 0
    nodes: list[NodeSnap] = field(default_factory=list)
    #: Pods still bound, not terminating, on a node when its instance went away ("ns/name").
    lost_service: list[str] = field(default_factory=list)
    fleet_calls: list[dict[str, Any]] = field(default_factory=list)
    ice_at: float | None = None  # the spot market ran dry (phase 2)
    reclaim_at: float | None = None  # the zone's spot pools were reclaimed (phase 3)
    reclaimed_pools: set[tuple[str, str]] = field(default_factory=set)  # (instance type, zone)
    phases: dict[str, float] = field(default_factory=dict)  # phase -> real seconds it took
    claims: int = 0
    problems: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0-100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def _launched(call: dict[str, Any]) -> int:
    return sum(int(x.get("Count", 0)) for x in call.get("Launched") or ())


def _capacity_refusal(call: dict[str, Any]) -> bool:
    """A call that launched nothing and was told the pools had no capacity."""
    codes = {e.get("ErrorCode") for e in call.get("Errors") or ()}
    return not _launched(call) and bool(codes & CAPACITY_ERRORS)


def next_call_times(calls: Iterable[dict[str, Any]], since: float | None) -> list[float]:
    """For each insufficient-capacity refusal after ``since``: seconds from its answer to the start
    of the provisioner's next CreateFleet call (issue 14 §5's fallback latency, goal p99 ≤ 2 s)."""
    ordered = sorted(calls, key=lambda c: float(c["Start"]))
    out: list[float] = []
    for i, call in enumerate(ordered):
        if (since is not None and float(call["Start"]) < since) or not _capacity_refusal(call):
            continue
        nxt = next((c for c in ordered[i + 1 :] if float(c["Start"]) >= float(call["End"])), None)
        if nxt is not None:
            out.append(float(nxt["Start"]) - float(call["End"]))
    return out


def time_to_fall_back(calls: Iterable[dict[str, Any]], since: float | None) -> float | None:
    """Seconds from the first insufficient-capacity refusal after ``since`` to the start of the
    first call after it that launched an instance (the fallback itself); None when there was none."""
    ordered = sorted(calls, key=lambda c: float(c["Start"]))
    first = next(
        (c for c in ordered if (since is None or float(c["Start"]) >= since) and _capacity_refusal(c)), None
    )
    if first is None:
        return None
    end = float(first["End"])
    launch = next((c for c in ordered if float(c["Start"]) >= end and _launched(c)), None)
    return None if launch is None else float(launch["Start"]) - end


def reclaimed_launches(rec: ProvisionRecord) -> list[dict[str, Any]]:
    """Spot launches into a reclaimed pool within the window after its reclaim began."""
    if rec.reclaim_at is None:
        return []
    until = rec.reclaim_at + RECLAIM_WINDOW_SECONDS / rec.time_scale
    out = []
    for call in rec.fleet_calls:
        if not rec.reclaim_at <= float(call["Start"]) <= until:
            continue
        for launch in call.get("Launched") or ():
            pool = (launch.get("InstanceType"), launch.get("AvailabilityZone"))
            if launch.get("CapacityType") == "spot" and pool in rec.reclaimed_pools:
                out.append({**launch, "AfterReclaimS": round(float(call["Start"]) - rec.reclaim_at, 3)})
    return out


def spot_share(nodes: Iterable[NodeSnap], nodepool: str) -> float | None:
    """Spot vCPUs over all vCPUs of the nodes of ``nodepool`` (the pool allowed to be spot)."""
    mine = [n for n in nodes if n.nodepool == nodepool]
    total = sum(n.cpu for n in mine)
    if total <= 0:
        return None
    return sum(n.cpu for n in mine if n.capacity_type == "spot") / total


def run_summary(rec: ProvisionRecord, *, spot_pool: str) -> dict[str, Any]:
    """One run's JSON object: the figures of issue 14 §4, then the details behind them."""
    fallback = time_to_fall_back(rec.fleet_calls, rec.ice_at)
    next_calls = next_call_times(rec.fleet_calls, rec.ice_at)
    next_p99 = percentile(next_calls, 99)
    into = reclaimed_launches(rec)
    prices = [n.price for n in rec.nodes]
    cost = None if any(p is None for p in prices) else round(sum(p for p in prices if p is not None), 4)
    share = spot_share(rec.nodes, spot_pool)
    p50, p99 = percentile(rec.pending, 50), percentile(rec.pending, 99)
    out: dict[str, Any] = {
        "pending_p50_s": None if p50 is None else round(p50, 3),
        "pending_p99_s": None if p99 is None else round(p99, 3),
        "fallback_s": None if fallback is None else round(fallback, 3),
        "launches_into_reclaimed_pools": sum(int(x.get("Count", 0)) for x in into),
        "spot_share": None if share is None else round(share, 4),
        "cost_per_hour": cost,
        "pods_lost_service": len(rec.lost_service),
        "pods": len(rec.pending),
        "pods_unbound": rec.unbound,
        "capacity_refusals": len(next_calls),
        "refusal_to_next_call_p99_s": None if next_p99 is None else round(next_p99, 3),
        "reclaimed_pools": sorted(f"{t}/{z}" for t, z in rec.reclaimed_pools),
        "reclaimed_pool_launches": into,
        "nodes": len(rec.nodes),
        "nodes_by_capacity_type": _count(n.capacity_type for n in rec.nodes),
        "nodeclaims": rec.claims,
        "fleet_calls": len(rec.fleet_calls),
        "phases_s": {k: round(v, 3) for k, v in rec.phases.items()},
        "lost_service": sorted(rec.lost_service)[:20],
        "problems": list(rec.problems),
        **rec.extra,
    }
    reasons = judge(rec.key, out)
    return {"ok": not reasons, "verdict": "met" if not reasons else "missed", "reasons": reasons, **out}


def judge(key: str, run: dict[str, Any]) -> list[str]:
    """Why the run missed its promise (empty: met). Both runs must end with every pod placed; the
    kubespot run must also fall back in time, never launch into a just-reclaimed pool and lose no
    pod's service. The shares-nothing run's misses of those are what the comparison shows."""
    reasons = [f"problem: {p}" for p in run["problems"]]
    if run["pods_unbound"]:
        reasons.append(f"{run['pods_unbound']} pod(s) still pending at the end")
    if key != KUBESPOT:
        return reasons
    if run["fallback_s"] is None:
        reasons.append("no fallback after insufficient capacity was seen")
    goal = FALLBACK_GOAL_SECONDS
    if (run["refusal_to_next_call_p99_s"] or 0.0) > goal:
        reasons.append(
            f"the next launch call came {run['refusal_to_next_call_p99_s']:.2f}s (p99) after an "
            f"insufficient-capacity answer (goal {goal:g}s)"
        )
    if run["launches_into_reclaimed_pools"]:
        reasons.append(
            f"{run['launches_into_reclaimed_pools']} instance(s) launched into just-reclaimed pools: "
            + ", ".join(
                sorted(
                    {f"{x['InstanceType']}/{x['AvailabilityZone']}" for x in run["reclaimed_pool_launches"]}
                )
            )
        )
    if run["pods_lost_service"]:
        reasons.append(f"{run['pods_lost_service']} pod(s) lost service with their instance")
    return reasons


def provision_summary(runs: dict[str, dict[str, Any]], **head: Any) -> dict[str, Any]:
    """The JSON object: the runs side by side and ``ok`` when both met their promise."""
    problems = list(head.pop("problems", ()))
    ok = not problems and all(k in runs and runs[k]["ok"] for k in RUNS)
    return {"ok": ok, "scenario": PROVISION, **head, "problems": problems, **runs}


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))
