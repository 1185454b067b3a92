"""The provision scenario's figures and verdict (``kubespot.sandbox.provision_summary``), from
hand-made records: the definitions docs/sandbox.md gives, each checked where it could go wrong.

Sources: aws/karpenter-provider-aws ``pkg/errors/errors.go`` (the insufficient-capacity codes a
refusal carries), ``pkg/cache/unavailableofferings.go`` (the 3-minute cache the reclaim window
outlasts); issue 14 §4-§5 (the figures and the 2 s fallback goal).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubespot.sandbox.provision_summary import (
    KUBESPOT,
    SHARES_NOTHING,
    NodeSnap,
    ProvisionRecord,
    next_call_times,
    percentile,
    provision_summary,
    run_summary,
    spot_share,
    time_to_fall_back,
)

T0 = 1_800_000_000.0


def call(
    start: float, *, launched: Sequence[tuple[str, str, str]] = (), errors: str | None = None
) -> dict[str, Any]:
    return {
        "Start": T0 + start,
        "End": T0 + start + 0.05,
        "Launched": [
            {"CapacityType": ct, "InstanceType": it, "AvailabilityZone": z, "Count": 1}
            for ct, it, z in launched
        ],
        "Errors": []
        if errors is None
        else [
            {"CapacityType": "spot", "InstanceType": "m5.large", "AvailabilityZone": "a", "ErrorCode": errors}
        ],
    }


def node(ct: str, cpu: float, pool: str = "general", price: float | None = 0.1) -> NodeSnap:
    return NodeSnap("n", pool, ct, "m5.large", "a", cpu, price)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0], 99) == 3.0
    assert percentile([], 50) is None


def test_fallback_is_the_first_refusal_to_the_first_launch_after_it() -> None:
    """Refusals that launched nothing count; a call that launched beside errors is no refusal."""
    calls = [
        call(0, launched=[("spot", "m5.large", "a")]),
        call(
            10, launched=[("spot", "m5.large", "b")], errors="InsufficientInstanceCapacity"
        ),  # not a refusal
        call(20, errors="UnfulfillableCapacity"),
        call(20.5, errors="InsufficientInstanceCapacity"),
        call(21.25, launched=[("on-demand", "m5.large", "a")]),
    ]
    assert round(time_to_fall_back(calls, since=T0 + 5) or 0, 3) == 1.2
    assert [round(x, 3) for x in next_call_times(calls, since=T0 + 5)] == [0.45, 0.7]
    # Before ``since`` nothing counts; another error code is no capacity refusal.
    assert time_to_fall_back(calls, since=T0 + 22) is None
    assert (
        time_to_fall_back(
            [call(1, errors="InvalidParameterValue"), call(2, launched=[("spot", "x", "a")])], None
        )
        is None
    )


def test_launches_into_reclaimed_pools_count_spot_launches_in_the_window_only() -> None:
    rec = ProvisionRecord(key=SHARES_NOTHING, time_scale=10.0, reclaim_at=T0 + 100, ice_at=T0)
    rec.reclaimed_pools = {("m5.large", "b")}
    rec.pending = [1.0, 2.0]
    rec.nodes = [node("spot", 4), node("on-demand", 4)]
    rec.fleet_calls = [
        call(90, launched=[("spot", "m5.large", "b")]),  # before the reclaim
        call(102, launched=[("spot", "m5.large", "b"), ("spot", "m5.large", "c")]),  # one counts
        call(103, launched=[("on-demand", "m5.large", "b")]),  # on-demand: not the spot pool
        call(100 + 600 / 10 + 1, launched=[("spot", "m5.large", "b")]),  # past the 10 story minutes
    ]
    run = run_summary(rec, spot_pool="general")
    assert run["launches_into_reclaimed_pools"] == 1
    assert run["reclaimed_pool_launches"][0]["AfterReclaimS"] == 2.0
    assert run["ok"]  # shares nothing: the loop is what it shows, not a miss


def test_spot_share_counts_the_pool_allowed_spot_by_vcpu() -> None:
    nodes = [node("spot", 8), node("on-demand", 2), node("on-demand", 16, pool="on-demand")]
    assert spot_share(nodes, "general") == 0.8
    assert spot_share([], "general") is None


def test_kubespot_verdict_and_top_level_ok() -> None:
    good = ProvisionRecord(key=KUBESPOT, time_scale=10.0, ice_at=T0, pending=[1.0])
    good.nodes = [node("spot", 4, price=0.05), node("on-demand", 4, price=0.2)]
    good.fleet_calls = [
        call(1, errors="UnfulfillableCapacity"),
        call(1.5, launched=[("on-demand", "m5.large", "a")]),
    ]
    met = run_summary(good, spot_pool="general")
    assert met["ok"] and met["cost_per_hour"] == 0.25 and met["fallback_s"] == 0.45

    slow = ProvisionRecord(key=KUBESPOT, time_scale=10.0, ice_at=T0, pending=[1.0], unbound=2)
    slow.fleet_calls = [
        call(1, errors="UnfulfillableCapacity"),
        call(4, launched=[("on-demand", "m5.large", "a")]),
    ]
    slow.lost_service = ["shop/web-1"]
    missed = run_summary(slow, spot_pool="general")
    assert not missed["ok"]
    text = " ".join(missed["reasons"])
    assert "still pending" in text and "lost service" in text and "goal 2s" in text
    # The same misses in the shares-nothing run are only its pending pods.
    slow.key = SHARES_NOTHING
    assert run_summary(slow, spot_pool="general")["reasons"] == ["2 pod(s) still pending at the end"]

    summary = provision_summary({KUBESPOT: met, SHARES_NOTHING: met}, time_scale=10.0)
    assert summary["ok"] and summary["scenario"] == "provision"
    assert not provision_summary({KUBESPOT: met, SHARES_NOTHING: missed}, time_scale=10.0)["ok"]
    assert not provision_summary({KUBESPOT: met}, time_scale=10.0)["ok"]


def test_free_cpu_is_allocatable_less_the_bound_pods_on_live_nodes() -> None:
    """The insufficient-capacity phase adds pods beyond this room so it always needs a launch: a
    deleting node has no room, a terminating pod frees its share, a pod on another node none."""
    from kubespot.sandbox.provision import free_cpu_millis

    def node(name: str, cpu: str, deleting: bool = False) -> dict[str, object]:
        meta: dict[str, object] = {"name": name}
        if deleting:
            meta["deletionTimestamp"] = "2026-11-26T00:00:00Z"
        return {"metadata": meta, "status": {"allocatable": {"cpu": cpu}}}

    def pod(on: str, cpu: str, terminating: bool = False) -> dict[str, object]:
        meta: dict[str, object] = {"name": f"p-{on}-{cpu}"}
        if terminating:
            meta["deletionTimestamp"] = "2026-11-26T00:00:00Z"
        container = {"resources": {"requests": {"cpu": cpu}}}
        return {"metadata": meta, "spec": {"nodeName": on, "containers": [container]}}

    nodes = [node("a", "1930m"), node("b", "2"), node("gone", "4", deleting=True)]
    pods = [pod("a", "500m"), pod("a", "250m", terminating=True), pod("b", "1500m"), pod("gone", "1")]
    assert free_cpu_millis(nodes, pods) == 1930 - 500 + 2000 - 1500
    assert free_cpu_millis(nodes, [*pods, pod("b", "2")]) == 1430  # b overfull: it takes no room from a
