"""EventRecorder: repeats are aggregated into one Event, failures never reach the caller."""

from __future__ import annotations

from datetime import UTC, datetime

from kubespot.kube import EventRecorder, KubeError, PodView
from support.fake_kube import FakeKube

#: Events forbidden (a common RBAC omission), the node unreadable too.
BROKEN = {"create_event": KubeError(500, "boom"), "get_node": KubeError(0, "unreachable")}


POD = PodView(namespace="shop", name="web-1", uid="u1")


async def test_repeats_are_one_event_with_a_growing_count() -> None:
    kube = FakeKube()
    rec = EventRecorder(kube=kube, now=lambda: datetime(2026, 1, 1, tzinfo=UTC))  # type: ignore[arg-type]
    for _ in range(3):
        await rec.pod(POD, "EvictionBlocked", "budget", warning=True)
    await rec.pod(POD, "Evicted", "bye")
    assert [e["reason"] for e in kube.created] == ["EvictionBlocked", "Evicted"]
    assert kube.created[0]["type_"] == "Warning" and kube.created[0]["namespace"] == "shop"
    name = kube.created[0]["name"]
    assert kube.bumped == [(name, 2), (name, 3)]


async def test_failures_are_logged_not_raised() -> None:
    rec = EventRecorder(kube=FakeKube(faults=BROKEN))  # type: ignore[arg-type]
    await rec.pod(POD, "Evicted", "bye")
    await rec.node("n1", "DrainStarted", "go")  # node uid lookup fails too: still no exception


async def test_events_that_cannot_be_written_leave_no_state_behind() -> None:
    """With events forbidden (a common RBAC omission), thousands of distinct messages keep no locks."""
    rec = EventRecorder(kube=FakeKube(faults=BROKEN))  # type: ignore[arg-type]
    for i in range(2000):
        await rec.pod(POD, "EvictionBlocked", f"attempt {i}", warning=True)
    assert rec._locks == {} and rec._seen == {}
