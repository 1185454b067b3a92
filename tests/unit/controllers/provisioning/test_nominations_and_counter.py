"""Pod nominations (the record and the rate-limited events) and the NodePool counter.

Sources: kubernetes-sigs/karpenter ``pkg/controllers/provisioning/scheduling/events.go``
(``NominatePodEvent``: reason, message, dedupe per pod UID, ``PodNominationRateLimiter`` 5/s
burst 10), ``pkg/events/recorder.go`` (a rate-limited event is dropped: ``TryAccept``; the default
dedupe timeout); ``pkg/controllers/nodepool/counter/controller.go`` (the base resources, ``nodes``),
``pkg/controllers/state/cluster.go`` ``updateNodePoolResources`` and ``state/statenode.go``
``Capacity`` (capacity, not allocatable; zero figures of an uninitialized node from its NodeClaim;
one node each, v1.11+; deleting nodes left out, ``Deleted``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubespot.controllers.provisioning.nodepool_counter import pool_counts
from kubespot.controllers.provisioning.nodepool_status import nodepool_status
from kubespot.controllers.provisioning.nominations import Nominations
from kubespot.kube import ObjectRef
from kubespot.scheduling.api.conditions import Condition
from kubespot.scheduling.cluster import pool_in_use

Obj = dict[str, Any]


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def record(self, ref: ObjectRef, reason: str, message: str, *, warning: bool = False) -> None:
        self.events.append((ref.name, reason, message))


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def pods(n: int, prefix: str = "p") -> list[Obj]:
    return [
        {"metadata": {"name": f"{prefix}{i}", "namespace": "default", "uid": f"{prefix}{i}"}}
        for i in range(n)
    ]


async def test_nominated_events_burst_ten_then_five_per_second_dropped_not_delayed() -> None:
    """events.go NominatePodEvent with PodNominationRateLimiter (5/s, burst 10): of 30 nominations
    at once 10 are told, the rest dropped (recorded as nominated all the same); a second later
    five more tokens."""
    recorder, clock = Recorder(), Clock()
    noms = Nominations(recorder, monotonic=clock)  # type: ignore[arg-type]
    await noms.nominate(pods(30), "general-abc")
    assert len(recorder.events) == 10 and noms.dropped == 20
    assert recorder.events[0] == ("p0", "Nominated", "Pod should schedule on: nodeclaim/general-abc")
    assert len(noms) == 30 and noms.claim_of("p29") == "general-abc"
    clock.t += 1.0
    await noms.nominate(pods(30, "q"), "general-def")
    assert len(recorder.events) == 15


async def test_nominated_events_are_deduplicated_per_pod() -> None:
    """events.go DedupeValues [pod UID]: the same pod told of the same claim again within the
    dedupe timeout is not told twice; a pod released when its claim goes."""
    recorder, clock = Recorder(), Clock()
    noms = Nominations(recorder, monotonic=clock)  # type: ignore[arg-type]
    await noms.nominate(pods(2), "c1")
    clock.t += 10
    await noms.nominate(pods(2), "c1")
    assert len(recorder.events) == 2
    # recorder.go dedupeKey is (reason, UID): a new claim within the timeout is not told either
    # (the record is updated all the same).
    await noms.nominate(pods(1), "c2")
    assert len(recorder.events) == 2 and noms.claim_of("p0") == "c2"
    clock.t += 200  # past the two minutes
    await noms.nominate(pods(1), "c1")
    assert len(recorder.events) == 3
    assert noms.release("c2") == []  # p0 moved back to c1
    assert sorted(noms.release("c1")) == ["p0", "p1"] and len(noms) == 0


async def test_a_nomination_dropped_over_the_rate_limit_is_not_retried_within_the_timeout() -> None:
    """recorder.go publishEvent: the dedupe entry is armed before the rate limiter says no."""
    recorder, clock = Recorder(), Clock()
    noms = Nominations(recorder, monotonic=clock)  # type: ignore[arg-type]
    await noms.nominate(pods(11), "c1")  # the eleventh is over the burst
    assert len(recorder.events) == 10 and noms.dropped == 1
    clock.t += 5  # tokens again, but p10 is still within its two minutes
    await noms.nominate(pods(11), "c1")
    assert len(recorder.events) == 10


async def test_failed_scheduling_warnings_deduplicated_for_five_minutes() -> None:
    """events.go PodFailedToScheduleEvent: Warning FailedScheduling "Failed to schedule pod, <err>",
    DedupeTimeout 5 minutes per pod UID; not rate-limited."""
    recorder, clock = Recorder(), Clock()
    noms = Nominations(recorder, monotonic=clock)  # type: ignore[arg-type]
    await noms.failed_to_schedule((p, "too big") for p in pods(20))
    assert len(recorder.events) == 20
    assert recorder.events[0] == ("p0", "FailedScheduling", "Failed to schedule pod, too big")
    clock.t += 200
    await noms.failed_to_schedule((p, "still too big") for p in pods(1))
    assert len(recorder.events) == 20
    clock.t += 101
    await noms.failed_to_schedule((p, "still too big") for p in pods(1))
    assert len(recorder.events) == 21


def node(name: str, pool: str | None, cpu: str = "4", **meta: Any) -> Obj:
    labels = {"karpenter.sh/nodepool": pool} if pool else {}
    labels.update(meta.pop("labels", {}))
    return {
        "metadata": {"name": name, "labels": labels, **meta},
        "status": {
            "capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110", "ephemeral-storage": "20Gi"},
            "allocatable": {"cpu": "3", "memory": "14Gi", "pods": "110"},
        },
    }


def claim(name: str, pool: str, node_name: str = "", capacity: Obj | None = None, **meta: Any) -> Obj:
    return {
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}, **meta},
        "status": {"nodeName": node_name, "capacity": capacity or {}},
    }


async def test_capacity_split_events_once_per_claim_and_per_pool_type_within_the_timeout() -> None:
    """kubespot's CapacitySplit event (launching.md §6), de-duplicated as Karpenter's recorder
    de-duplicates (``pkg/events/recorder.go`` ``shouldCreateEvent``: per object, for the timeout):
    each NodeClaim once; its NodePool once per capacity type, and again after two minutes; over
    its own budget (5/s, burst 10) a NodeClaim's event is dropped, not delayed, and the nominations' budget
    stays whole."""
    recorder, clock = Recorder(), Clock()
    noms = Nominations(recorder, monotonic=clock)  # type: ignore[arg-type]
    pool = {"metadata": {"name": "general", "uid": "pool-1"}}
    await noms.capacity_split("general-a", pool, "on-demand", "why a")
    await noms.capacity_split("general-a", pool, "on-demand", "why a")
    await noms.capacity_split("general-b", pool, "on-demand", "why b")
    await noms.capacity_split("general-c", pool, "spot", "why c")
    assert recorder.events == [
        ("general-a", "CapacitySplit", "NodeClaim general-a: why a"),
        ("general", "CapacitySplit", "NodeClaim general-a: why a"),
        ("general-b", "CapacitySplit", "NodeClaim general-b: why b"),
        ("general-c", "CapacitySplit", "NodeClaim general-c: why c"),
        ("general", "CapacitySplit", "NodeClaim general-c: why c"),
    ]
    clock.t += 121.0
    await noms.capacity_split("general-d", pool, "on-demand", "why d")
    assert recorder.events[-1] == ("general", "CapacitySplit", "NodeClaim general-d: why d")
    for i in range(20):
        await noms.capacity_split(f"x-{i}", pool, "spot", "burst")
    assert noms.dropped == 11  # 9 tokens left of the burst: the NodeClaims past them dropped
    await noms.nominate(pods(10), "general-a")
    assert sum(1 for e in recorder.events if e[1] == "Nominated") == 10


def test_pool_counts_sum_capacity_of_non_deleting_state_nodes() -> None:
    """updateNodePoolResources: capacity (not allocatable) of the pool's nodes and in-flight
    claims, deleting ones left out; a node and its NodeClaim are one state node; an uninitialized
    node's missing figures come from its NodeClaim (statenode.go Capacity)."""
    nodes = [
        node("n1", "general", labels={"karpenter.sh/initialized": "true"}),
        node("n2", "general", deletionTimestamp="2026-01-01T00:00:00Z"),
        node("n3", "other", cpu="8"),
        node("starting", "general", cpu="0"),
        node("unmanaged", None),
    ]
    claims = [
        claim("c1", "general", "n1", {"cpu": "4"}),
        claim("c2", "general", "", {"cpu": "2", "memory": "8Gi", "pods": "29"}),  # launched, no node yet
        claim("c3", "general", "", {"cpu": "2"}, deletionTimestamp="2026-01-01T00:00:00Z"),
        claim("c4", "general", "starting", {"cpu": "2", "memory": "8Gi"}),
    ]
    counts = pool_counts(nodes, claims)
    resources, n = counts["general"]
    assert n == 3  # n1, c2, starting (c4)
    assert resources == {
        "cpu": "8",  # 4 (n1) + 2 (c2) + 2 (starting's 0 taken from c4); n2 and c3 are deleting
        "memory": f"{(16 + 8 + 16) * 1024}Mi",
        "pods": str(110 + 29 + 110),
        "ephemeral-storage": f"{40 * 1024}Mi",
        "nodes": "3",
    }
    assert counts["other"][1] == 1 and counts["other"][0]["cpu"] == "8"
    assert "unmanaged" not in counts and "" not in counts


def test_pool_counts_match_a_node_and_its_claim_by_provider_id() -> None:
    """state/cluster.go keys a Node and its NodeClaim by provider ID: a Node registered before its
    NodeClaim's ``Registered`` write (no ``status.nodeName`` yet) is one state node, not two."""
    pid = "aws:///z1/i-0123"
    registered = node("n1", "general")
    registered["spec"] = {"providerID": pid}
    launched = claim("c1", "general", "", {"cpu": "4"})
    launched["status"]["providerID"] = pid
    resources, n = pool_counts([registered], [launched])["general"]
    assert n == 1 and resources["cpu"] == "4"


def test_nodepool_status_carries_the_counts_with_its_conditions() -> None:
    """counter/controller.go: status.resources (base keys always present) and status.nodes, in the
    same status the readiness conditions live in."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    ok = Condition("ValidationSucceeded", "True", "ValidationSucceeded")
    resources, n = pool_counts([], [claim("c", "general", "", {"cpu": "2"})])["general"]
    status = nodepool_status(None, ok, None, generation=1, now=now, counts=(resources, n))
    assert status["nodes"] == 1
    assert status["resources"] == {
        "cpu": "2",
        "memory": "0Mi",
        "pods": "0",
        "ephemeral-storage": "0Mi",
        "nodes": "1",
    }
    assert {c["type"] for c in status["conditions"]} >= {"ValidationSucceeded", "NodeClassReady", "Ready"}
    # Without counts (the counter has not run) the old figures stay.
    kept = nodepool_status(status, ok, None, generation=1, now=now)
    assert kept["resources"] == status["resources"] and kept["nodes"] == 1


def test_a_claim_not_launched_counts_in_the_status_as_in_the_limits_check() -> None:
    """Review 16: ``status.nodes`` skipped a NodeClaim not launched yet while the ``limits.nodes``
    check counted it. Karpenter HEAD (v1.11+): ``state/statenode.go`` ``Capacity`` gives every
    state node ``nodes: 1`` and ``scheduler.go`` ``updateRemainingResources`` subtracts it; a claim
    without a provider ID is no state node yet, but ``state/cluster.go`` ``Synced`` is false while
    one exists, and both ``provisioner.go`` ``Reconcile`` and ``nodepool/counter/controller.go``
    ``Reconcile`` wait for it, so neither acts on a figure without it. kubespot waits for neither:
    both count it, as one node with no resources (a claim keeping on failing to launch too)."""
    claims = [
        claim("launched", "p", "", {"cpu": "2", "memory": "8Gi", "pods": "29"}),
        claim("not-yet", "p"),
        {"metadata": {"name": "bare", "labels": {"karpenter.sh/nodepool": "p"}}, "status": {}},
    ]
    resources, n = pool_counts([], claims)["p"]
    assert n == 3 and resources["nodes"] == "3" and resources["cpu"] == "2"
    used = pool_in_use([], "p", claims)
    assert used["nodes"] == n and used["cpu"] == 2000
    assert pool_counts([], [claim("only", "q")])["q"] == (
        {"cpu": "0", "memory": "0Mi", "pods": "0", "ephemeral-storage": "0Mi", "nodes": "1"},
        1,
    )


def test_a_node_deleted_before_its_claim_still_counts_until_the_claim_goes() -> None:
    """Karpenter ``state/statenode.go`` ``Deleted``: a managed node is deleted when its NodeClaim
    is (a ``deletionTimestamp``, or ``InstanceTerminating`` True); the Node's own deletion counts
    only for a Node no claim owns. So a Node deleted first (``kubectl delete node``, held by its
    finalizer) still counts, in ``status.nodes`` (``updateNodePoolResources`` leaves out
    ``MarkedForDeletion`` nodes only) and against the limits alike."""
    gone = "2026-01-01T00:00:00Z"
    terminating = claim("c3", "general", "n3", {"cpu": "4"})
    terminating["status"]["conditions"] = [{"type": "InstanceTerminating", "status": "True"}]
    nodes = [
        node("n1", "general", deletionTimestamp=gone),  # deleted before its claim c1
        node("n2", "general"),
        node("n3", "general"),
        node("orphan", "general", deletionTimestamp=gone),  # no claim: its own deletion counts
    ]
    claims = [
        claim("c1", "general", "n1", {"cpu": "4"}),
        claim("c2", "general", "n2", {"cpu": "4"}, deletionTimestamp=gone),
        terminating,
    ]
    resources, n = pool_counts(nodes, claims)["general"]
    assert n == 1 and resources["cpu"] == "4"  # n1 alone
    assert pool_in_use(nodes, "general", claims) == {
        "nodes": 1,
        "cpu": 4000,
        "memory": 16 << 30,
        "pods": 110,
        "ephemeral-storage": 20 << 30,
    }


async def test_the_counter_publishes_nothing_from_a_nodeclaim_list_answered_404() -> None:
    """kubernetes-sigs/karpenter ``pkg/controllers/nodepool/counter/controller.go`` ``Reconcile``
    requeues while ``state/cluster.go`` ``Synced`` is false, and ``Synced`` is false when its
    NodeClaim list fails: a 404 (a CRD not installed, or its handler not ready) publishes no
    ``{}`` (every pool's figures written as zero); once the claims are served, they are counted."""
    import asyncio

    from kubespot.controllers.provisioning.nodepool_counter import NodePoolCounter
    from kubespot.kube.informer import Informer
    from kubespot.model import SystemClock

    claim = {
        "metadata": {"name": "general-a", "labels": {"karpenter.sh/nodepool": "general"}},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi"}},
    }

    class Kube:
        served = False

        async def list_versioned(self, path: str, **kw: Any) -> tuple[list[Any], str] | None:
            if "nodeclaims" in path:
                return ([claim], "5") if self.served else None
            return [], "5"

        async def _watch(self, *args: Any, **kw: Any) -> Any:
            await asyncio.Event().wait()
            yield None  # pragma: no cover - never reached

    kube = Kube()
    nodes = Informer(kube, "api/v1/nodes")  # type: ignore[arg-type]
    claims = Informer(kube, "apis/karpenter.sh/v1/nodeclaims", unserved_retry=0.01)  # type: ignore[arg-type]
    published: list[Any] = []
    counter = NodePoolCounter(nodes, claims, published.append, clock=SystemClock())
    counting = asyncio.create_task(counter.count_once())
    try:
        await asyncio.sleep(0.05)
        assert claims.synced.is_set() and not claims.served and published == []
        kube.served = True
        await asyncio.wait_for(counting, 1.0)
        assert published[-1]["general"][1] == 1
    finally:
        counting.cancel()
        await nodes.stop()
        await claims.stop()
