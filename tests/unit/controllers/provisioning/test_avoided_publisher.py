"""The status ConfigMap of what the launch path avoids (review 15a #6): when the publisher writes it,
and what a reader makes of it.

Source: Cluster Autoscaler ``utils/status`` ``WriteStatusConfigMap`` (get the ConfigMap, create it
when absent, else update it; the write time in an annotation), written from the leader's loop;
the marks are aws ``pkg/cache/unavailableofferings.go``'s (a reason, an end).
"""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from kubespot.cloud import UnavailableOfferings
from kubespot.cloud.avoided_status import DATA_KEY, UPDATED_ANNOTATION, configmap, entries, read
from kubespot.cloud.pool_risk import PoolRisk
from kubespot.controllers.provisioning.avoided_publisher import AvoidedPublisher
from kubespot.kube import KubeError
from kubespot.observability.metrics import POOL_RISK_SERIES
from kubespot.scheduling.explain import AVOIDED_RISK, AVOIDED_UNAVAILABLE, AvoidedOffering
from support.clocks import ManualClock, settle

Obj = dict[str, Any]
T0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


class _ConfigMaps:
    """``CustomObjects``' get, create and replace of one namespace's ConfigMaps, in memory."""

    def __init__(self) -> None:
        self.stored: Obj | None = None
        self.calls: list[str] = []
        self.conflicts = 0
        self.version = 0

    async def get(self, name: str) -> Obj | None:
        self.calls.append("get")
        return copy.deepcopy(self.stored)

    async def create(self, obj: Obj) -> Obj:
        self.calls.append("create")
        assert self.stored is None
        return self._store(obj)

    async def replace(self, obj: Obj) -> Obj:
        self.calls.append("update")
        assert self.stored is not None
        if (
            self.conflicts
            or obj["metadata"].get("resourceVersion") != self.stored["metadata"]["resourceVersion"]
        ):
            self.conflicts = max(self.conflicts - 1, 0)
            raise KubeError(409, "the object has been modified")
        return self._store(obj)

    def _store(self, obj: Obj) -> Obj:
        self.version += 1
        self.stored = copy.deepcopy(obj)
        self.stored["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.stored)


def _publisher(clock: ManualClock) -> tuple[AvoidedPublisher, _ConfigMaps, UnavailableOfferings, PoolRisk]:
    api = _ConfigMaps()
    unavailable, risk = UnavailableOfferings(clock), PoolRisk(clock)
    publisher = AvoidedPublisher(
        api,  # type: ignore[arg-type]
        "kubespot-status",
        "kube-system",
        unavailable=unavailable,
        risk=risk,
        clock=clock,
        interval=5.0,
        heartbeat=60.0,
    )
    return publisher, api, unavailable, risk


async def test_written_on_change_and_at_each_heartbeat_and_a_conflict_is_read_again() -> None:
    """Created when absent; an unchanged list is not written again until the heartbeat; a change is
    written at the next tick; an update refused with 409 (someone else wrote) is retried after
    reading the ConfigMap again, and the loop goes on."""
    clock = ManualClock(T0)
    publisher, api, unavailable, _ = _publisher(clock)
    unavailable.mark("spot", "c5.large", "z1", reason="InsufficientInstanceCapacity", ttl=120.0)
    task = asyncio.create_task(publisher.run())
    try:
        await settle()
        assert api.calls == ["get", "create"]
        assert api.stored is not None
        assert api.stored["metadata"]["annotations"][UPDATED_ANNOTATION] == "2026-11-26T09:00:00Z"
        (mark,) = json.loads(api.stored["data"][DATA_KEY])
        assert mark["expires"] == "2026-11-26T09:02:00Z" and mark["reason"] == "InsufficientInstanceCapacity"
        await clock.advance(50.0, step=5.0)
        assert api.calls == ["get", "create"]  # nothing changed, the heartbeat not due
        await clock.advance(10.0, step=5.0)
        assert api.calls == ["get", "create", "update"]  # the heartbeat
        assert api.stored["metadata"]["annotations"][UPDATED_ANNOTATION] == "2026-11-26T09:01:00Z"
        api.conflicts = 1
        unavailable.mark("on-demand", "m5.large", "z2", reason="InsufficientInstanceCapacity")
        await clock.advance(5.0)
        assert api.calls[-1] == "update" and publisher.writes == 2  # refused
        await clock.advance(5.0)
        assert api.calls[-2:] == ["get", "update"] and publisher.writes == 3
        assert "m5.large" in api.stored["data"][DATA_KEY]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_risky_pools_are_capped_as_the_metric_is() -> None:
    """At most POOL_RISK_SERIES risky pools, the riskiest (the kubespot_pool_risk metric's cap)."""
    clock = ManualClock(T0)
    publisher, api, _, risk = _publisher(clock)
    for i in range(POOL_RISK_SERIES + 10):
        for _ in range(1 + i % 3):
            risk.interruption_warning(f"t{i:03d}", "z1")
    await publisher.publish()
    assert api.stored is not None
    listed = json.loads(api.stored["data"][DATA_KEY])
    assert len(listed) == POOL_RISK_SERIES and all(e["kind"] == AVOIDED_RISK for e in listed)
    scores = [e["score"] for e in listed]
    assert scores == sorted(scores, reverse=True)


def test_a_reader_counts_the_seconds_left_from_the_marks_end_and_drops_ended_ones() -> None:
    avoided = [
        AvoidedOffering(AVOIDED_UNAVAILABLE, "spot", "c5.large", "z1", "InsufficientInstanceCapacity", 120),
        AvoidedOffering(AVOIDED_UNAVAILABLE, "spot", "m5.large", "z1", "MaxSpotInstanceCountExceeded", 10),
        AvoidedOffering(AVOIDED_RISK, "spot", "r5.large", "z2", score=0.75),
    ]
    cm = configmap("kubespot-status", "kube-system", entries(avoided, T0), T0)
    got = read(cm, T0 + timedelta(seconds=30), "kube-system/kubespot-status")
    assert got.age == 30.0 and got.why_unknown == ""
    assert got.avoided == [
        AvoidedOffering(AVOIDED_UNAVAILABLE, "spot", "c5.large", "z1", "InsufficientInstanceCapacity", 90),
        AvoidedOffering(AVOIDED_RISK, "spot", "r5.large", "z2", score=0.75),
    ]


def test_absent_unreadable_or_stale_is_not_known_and_says_why() -> None:
    where = "kube-system/kubespot-status"
    assert read(None, T0, where).avoided is None
    assert "no status ConfigMap kube-system/kubespot-status" in read(None, T0, where).why_unknown
    broken = configmap("kubespot-status", "kube-system", [], T0)
    broken["data"][DATA_KEY] = "{not json"
    assert "not readable" in read(broken, T0, where).why_unknown
    old = configmap("kubespot-status", "kube-system", [], T0)
    stale = read(old, T0 + timedelta(seconds=181), where)
    assert stale.avoided is None and stale.age == 181.0
    assert (
        stale.why_unknown
        == "the status ConfigMap kube-system/kubespot-status is 181 s old: no controller keeps it now"
    )
    assert read(old, T0 + timedelta(seconds=179), where).avoided == []


class _PhasedClock:
    """Wall and monotonic clocks advancing together at different sub-second phases, as real ones."""

    def __init__(self) -> None:
        self.mono, self.wall = 1000.0, T0 + timedelta(microseconds=300_000)

    def monotonic(self) -> float:
        return self.mono

    def now(self) -> datetime:
        return self.wall

    def tick(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += timedelta(seconds=seconds)


async def test_unchanged_marks_and_decaying_scores_are_not_rewritten_before_the_heartbeat() -> None:
    """Review 15b #4: twenty live marks (made at different sub-second phases) and a decaying risk
    score, published every 5.03 s for 100 s with nothing newly marked: written once and at the one
    heartbeat due, not at every tick where a mark's rounded end or the score's third decimal moved.
    A mark renewed (its end moved by minutes) and a score risen by a reclaim are written.
    Cluster Autoscaler ``utils/status`` writes its ConfigMap once per loop; kubespot's design
    (docs/designs/launching.md §2) writes on change plus the heartbeat."""
    clock = _PhasedClock()
    unavailable, risk = UnavailableOfferings(clock, ttl=180.0), PoolRisk(clock)  # type: ignore[arg-type]
    api = _ConfigMaps()
    publisher = AvoidedPublisher(
        api,  # type: ignore[arg-type]
        "kubespot-status",
        "kube-system",
        unavailable=unavailable,
        risk=risk,
        clock=clock,  # type: ignore[arg-type]
        heartbeat=60.0,
    )
    risk.interruption_warning("m5.large", "z2")
    for i in range(20):
        unavailable.mark("spot", f"m5.{i}xlarge", "z1", reason="InsufficientInstanceCapacity")
        clock.tick(0.37)
    writes = 0
    for _ in range(20):
        writes += await publisher.publish()
        clock.tick(5.03)
    assert writes == 2  # the first write and the heartbeat at 60 s
    unavailable.mark("spot", "m5.0xlarge", "z1", reason="InsufficientInstanceCapacity")  # renewed
    assert await publisher.publish()
    risk.interruption_warning("m5.large", "z2")
    assert await publisher.publish()
    assert not await publisher.publish()


def test_a_time_without_a_zone_is_not_readable_and_says_so() -> None:
    """Review 15b #5: a last-updated annotation or a mark's end without a zone (hand-edited, another
    tool) is not readable, said so, never a TypeError (RFC 3339 section 5.6 requires the offset)."""
    where = "kube-system/kubespot-status"
    mark = AvoidedOffering(AVOIDED_UNAVAILABLE, "spot", "c5.large", "z1", "InsufficientInstanceCapacity", 120)
    naive_annotation = configmap("kubespot-status", "kube-system", entries([mark], T0), T0)
    naive_annotation["metadata"]["annotations"][UPDATED_ANNOTATION] = "2026-11-26T09:00:00"
    got = read(naive_annotation, T0, where)
    assert got.avoided is None
    assert got.why_unknown == (
        f"the status ConfigMap {where} is not readable: its {UPDATED_ANNOTATION} annotation"
        " is not an RFC 3339 time with a time zone"
    )
    listed = entries([mark], T0)
    listed[0]["expires"] = "2026-11-26T09:02:00"
    got = read(configmap("kubespot-status", "kube-system", listed, T0), T0, where)
    assert got.avoided is None
    assert got.why_unknown.endswith(
        "not readable: an entry's expires is not an RFC 3339 time with a time zone"
    )
