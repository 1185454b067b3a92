"""PodDisruptionBudget status as kubesim's disruption controller computes it, read over HTTP.

Rules checked against upstream: kubernetes/kubernetes ``pkg/controller/disruption/disruption.go``
(``getExpectedPodCount``, ``getExpectedScale``, ``countHealthyPods``, ``buildDisruptedPodMap``,
``updatePdbStatus``, ``failSafe``) and the docs task "Specifying a Disruption Budget for your
Application" (rounding of percentages: up; only integer ``minAvailable`` for bare pods).

Workload controllers, scheduler and kubelet are off: the pods' readiness is set by the test through
the status subresource, so every number is deterministic.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.controllers.disruption import compute_pdb_status, controller_for, matching_pdbs
from kubespot.sim.kubesim.store import WatchEvent, rfc3339
from kubespot.sim.kubesim.testing import deployment, namespace, node, pdb, pod, replicaset, until

Obj = dict[str, Any]
NS = "shop"
QUIET = ControllerConfig(scheduler=False, kubelet=False, workloads=False)
MERGE = {"Content-Type": "application/merge-patch+json"}
WEB_LABELS = {"app": "web"}


class Clock:
    """A settable clock, so the 2-minute ``DeletionTimeout`` can pass instantly."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def sim(clock: Clock) -> AsyncIterator[KubeSim]:
    async with KubeSim(controllers=QUIET, clock=clock) as s:
        async with aiohttp.ClientSession(s.url) as http:
            r = await http.post("/api/v1/namespaces", json=namespace(NS))
            assert r.status == 201
        yield s


async def call(
    sim: KubeSim, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> Obj:
    async with aiohttp.ClientSession(sim.url) as http:
        r = await http.request(method, path, json=body, headers=headers)
        data: Obj = await r.json()
        assert r.status < 300, (method, path, r.status, data)
        return data


async def make_pod(
    sim: KubeSim,
    name: str,
    *,
    ready: bool,
    owner: Obj | None = None,
    labels: dict[str, str] | None = None,
) -> Obj:
    body = pod(name, namespace=NS, node="n1", labels=labels or WEB_LABELS, owner=owner)
    await call(sim, "POST", f"/api/v1/namespaces/{NS}/pods", body)
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return await call(sim, "PATCH", f"/api/v1/namespaces/{NS}/pods/{name}/status", {"status": status}, MERGE)


async def make_rs(sim: KubeSim, name: str, replicas: int, owner: Obj | None = None) -> Obj:
    body = replicaset(name, replicas, labels=WEB_LABELS, owner=owner)
    return await call(sim, "POST", f"/apis/apps/v1/namespaces/{NS}/replicasets", body)


async def make_pdb(sim: KubeSim, name: str, **rule: Any) -> None:
    body = pdb(name, selector={"matchLabels": WEB_LABELS}, **rule)
    await call(sim, "POST", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets", body)


async def status_until(sim: KubeSim, name: str, pred: Callable[[Obj], bool], within: float = 5.0) -> Obj:
    last: Obj = {}

    async def matched() -> Obj | None:
        nonlocal last
        budget = await call(sim, "GET", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/{name}")
        last = budget.get("status") or {}
        return last if pred(last) else None

    try:
        return await until(matched, within=within, interval=0.02)
    except AssertionError:
        # The last status, not until's None, is what tells why the numbers never matched.
        raise AssertionError(f"PDB {name} status never matched: {last}") from None


def numbers(status: Obj) -> tuple[int, int, int, int]:
    return (
        status.get("expectedPods", -1),
        status.get("desiredHealthy", -1),
        status.get("currentHealthy", -1),
        status.get("disruptionsAllowed", -1),
    )


def disruption_allowed(status: Obj) -> tuple[str, str]:
    cond = next(c for c in status["conditions"] if c["type"] == "DisruptionAllowed")
    return cond["status"], cond["reason"]


async def rs_with_pods(sim: KubeSim, replicas: int = 4, ready: int = 3) -> Obj:
    rs = await make_rs(sim, "web", replicas)
    for i in range(replicas):
        await make_pod(sim, f"web-{i}", ready=i < ready, owner=rs)
    return rs


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        # minAvailable int: expectedPods is the number of matching pods (getExpectedPodCount).
        ({"min_available": 2}, (4, 2, 3, 1)),
        # minAvailable %: scale of the controller (4), 50% rounded up -> 2.
        ({"min_available": "50%"}, (4, 2, 3, 1)),
        # minAvailable 60% of 4 = 2.4, rounded UP to 3 (docs: "Rounding logic when specifying percentages").
        ({"min_available": "60%"}, (4, 3, 3, 0)),
        # maxUnavailable int: desiredHealthy = expected - maxUnavailable.
        ({"max_unavailable": 1}, (4, 3, 3, 0)),
        # maxUnavailable 30% of 4 = 1.2, rounded UP to 2 -> desiredHealthy 2.
        ({"max_unavailable": "30%"}, (4, 2, 3, 1)),
    ],
)
async def test_numbers_for_replicaset_pods(
    sim: KubeSim, rule: Obj, expected: tuple[int, int, int, int]
) -> None:
    """disruption.go getExpectedPodCount/getExpectedScale/countHealthyPods; allowed = healthy - desired."""
    await rs_with_pods(sim)
    await make_pdb(sim, "budget", **rule)
    status = await status_until(sim, "budget", lambda s: numbers(s) == expected)
    assert status["observedGeneration"] == 1
    allowed = expected[3] > 0
    assert disruption_allowed(status) == (
        ("True", "SufficientPods") if allowed else ("False", "InsufficientPods")
    )


async def test_deployment_scale_is_the_denominator(sim: KubeSim) -> None:
    """getExpectedScale: a pod of a Deployment-owned ReplicaSet counts the Deployment's replicas."""
    d = await call(sim, "POST", f"/apis/apps/v1/namespaces/{NS}/deployments", deployment("web", 6))
    rs = await make_rs(sim, "web-abc", 4, owner=d)
    for i in range(4):
        await make_pod(sim, f"web-abc-{i}", ready=True, owner=rs)
    await make_pdb(sim, "budget", max_unavailable="50%")
    await status_until(sim, "budget", lambda s: numbers(s) == (6, 3, 4, 1))
    # Scaling the Deployment changes the denominator without any pod event.
    await call(
        sim, "PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/web", {"spec": {"replicas": 8}}, MERGE
    )
    await status_until(sim, "budget", lambda s: numbers(s) == (8, 4, 4, 0))


async def test_bare_pods_with_integer_min_available(sim: KubeSim) -> None:
    """Docs "Arbitrary workloads and arbitrary selectors": bare pods work with an integer minAvailable."""
    for i in range(3):
        await make_pod(sim, f"bare-{i}", ready=True)
    await make_pdb(sim, "budget", min_available=2)
    status = await status_until(sim, "budget", lambda s: numbers(s) == (3, 2, 3, 1))
    assert disruption_allowed(status) == ("True", "SufficientPods")


async def test_bare_pods_with_max_unavailable_allow_nothing(sim: KubeSim) -> None:
    """getExpectedScale skips unmanaged pods, so expectedPods is 0 and updatePdbStatus allows 0."""
    for i in range(3):
        await make_pod(sim, f"bare-{i}", ready=True)
    await make_pdb(sim, "budget", max_unavailable=1)
    status = await status_until(sim, "budget", lambda s: numbers(s) == (0, 0, 3, 0))
    assert disruption_allowed(status) == ("False", "InsufficientPods")


async def test_mixed_bare_and_managed_pods(sim: KubeSim) -> None:
    """Unmanaged pods are left out of expectedPods but a Ready one still counts as healthy."""
    await rs_with_pods(sim, replicas=2, ready=2)
    await make_pod(sim, "bare", ready=True)
    await make_pdb(sim, "budget", max_unavailable=1)
    await status_until(sim, "budget", lambda s: numbers(s) == (2, 1, 3, 2))


async def test_unknown_controller_fails_safe(sim: KubeSim) -> None:
    """failSafe: "found no controllers for pod" -> disruptionsAllowed 0, reason SyncFailed."""
    unknown = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "uid": str(uuid.uuid4())},
    }
    await make_pod(sim, "agent", ready=True, owner=unknown)
    await make_pdb(sim, "budget", max_unavailable=1)
    status = await status_until(sim, "budget", lambda s: bool(s.get("conditions")))
    assert status.get("disruptionsAllowed") == 0
    assert disruption_allowed(status) == ("False", "SyncFailed")
    assert "found no controllers" in next(c["message"] for c in status["conditions"])


async def test_readiness_and_termination_change_health(sim: KubeSim) -> None:
    """countHealthyPods: only Ready pods without deletionTimestamp are healthy."""
    await rs_with_pods(sim, replicas=4, ready=4)
    await make_pdb(sim, "budget", min_available=3)
    await status_until(sim, "budget", lambda s: numbers(s) == (4, 3, 4, 1))
    await call(sim, "DELETE", f"/api/v1/namespaces/{NS}/pods/web-0")  # bound: graceful, stays terminating
    await status_until(sim, "budget", lambda s: numbers(s) == (4, 3, 3, 0))
    await call(
        sim,
        "PATCH",
        f"/api/v1/namespaces/{NS}/pods/web-1/status",
        {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
        MERGE,
    )
    status = await status_until(sim, "budget", lambda s: numbers(s) == (4, 3, 2, 0))
    assert disruption_allowed(status) == ("False", "InsufficientPods")


async def test_disrupted_pods_are_kept_then_dropped(sim: KubeSim, clock: Clock) -> None:
    """buildDisruptedPodMap: an entry stays while its pod lives, unterminated, for DeletionTimeout (2 min)."""
    await rs_with_pods(sim, replicas=4, ready=4)
    await make_pdb(sim, "budget", max_unavailable=1)
    await status_until(sim, "budget", lambda s: numbers(s) == (4, 3, 4, 1))
    pdb_rt = sim.store.registry.lookup("policy", "v1", "poddisruptionbudgets")
    assert pdb_rt is not None
    now = rfc3339(clock())

    def record(o: Obj) -> None:  # what the eviction subresource writes
        o["status"]["disruptedPods"] = {"web-0": now, "web-1": now}
        o["status"]["disruptionsAllowed"] = 0

    sim.store.mutate(pdb_rt, NS, "budget", record)
    status = await status_until(sim, "budget", lambda s: s.get("currentHealthy") == 2)
    assert set(status["disruptedPods"]) == {"web-0", "web-1"}
    # Once the pod is terminating its entry goes (and it is unhealthy for being deleted instead).
    await call(sim, "DELETE", f"/api/v1/namespaces/{NS}/pods/web-0")
    status = await status_until(sim, "budget", lambda s: set(s.get("disruptedPods") or {}) == {"web-1"})
    assert numbers(status) == (4, 3, 2, 0)
    # After DeletionTimeout an entry whose pod was never deleted is dropped and the pod healthy again.
    clock.offset += 121
    ctrl = controller_for(sim.store)
    assert ctrl is not None
    fresh = ctrl.refresh(NS, "budget")
    assert fresh is not None and "disruptedPods" not in fresh
    assert numbers(fresh) == (4, 3, 3, 0)


async def test_pure_compute_matches_controller(sim: KubeSim) -> None:
    """compute_pdb_status (the eviction subresource's entry point) agrees with the written status."""
    await rs_with_pods(sim, replicas=4, ready=3)
    await make_pdb(sim, "budget", min_available="50%")
    written = await status_until(sim, "budget", lambda s: numbers(s) == (4, 2, 3, 1))
    pdb_rt = sim.store.registry.lookup("policy", "v1", "poddisruptionbudgets")
    assert pdb_rt is not None
    pdb = sim.store.get(pdb_rt, NS, "budget")
    before_rv = sim.store.resource_version
    assert compute_pdb_status(sim.store, pdb) == written
    ctrl = controller_for(sim.store)
    assert ctrl is not None and ctrl.status_for(pdb) == written
    assert sim.store.resource_version == before_rv  # no writes
    pod_rt = sim.store.registry.lookup("", "v1", "pods")
    assert pod_rt is not None
    assert [p["metadata"]["name"] for p in matching_pdbs(sim.store, sim.store.get(pod_rt, NS, "web-0"))] == [
        "budget"
    ]


async def test_burst_of_pod_changes_is_coalesced(sim: KubeSim) -> None:
    """1 000 pod changes in one tick recompute (and write) each PDB once, not 1 000 times."""
    await rs_with_pods(sim, replicas=4, ready=4)
    await make_pdb(sim, "budget", max_unavailable=1)
    await make_pdb(sim, "other", min_available=1)
    await status_until(sim, "budget", lambda s: numbers(s) == (4, 3, 4, 1))
    await status_until(sim, "other", lambda s: numbers(s) == (4, 1, 4, 3))
    pdb_writes: list[str] = []

    def count(ev: WatchEvent) -> None:
        if ev.rkey == ("policy", "poddisruptionbudgets"):
            pdb_writes.append(ev.obj["metadata"]["name"])

    sim.store.add_listener(count)
    pod_rt = sim.store.registry.lookup("", "v1", "pods")
    assert pod_rt is not None
    for i in range(1000):
        ready = "False" if i % 2 == 0 else "True"

        def flip(o: Obj, ready: str = ready) -> None:
            o["status"]["conditions"] = [{"type": "Ready", "status": ready}]

        sim.store.mutate(pod_rt, NS, f"web-{i % 4}", flip)
    await status_until(sim, "budget", lambda s: numbers(s) == (4, 3, 2, 0))
    await asyncio.sleep(0.1)
    sim.store.remove_listener(count)
    assert pdb_writes.count("budget") <= 2
    assert pdb_writes.count("other") <= 2


async def test_drain_sequence_waits_for_ready_replacement() -> None:
    """What ``kubectl drain`` relies on: an eviction is replaced at once, the PDB blocks the next
    eviction (429) until the replacement is Ready, then lets it through.

    Upstream: the ReplicaSet controller counts only active (non-terminating) pods, so the evicted
    pod's replacement is created immediately; the disruption controller counts only Ready,
    non-terminating pods as healthy (``countHealthyPods``).
    """
    fast = ControllerConfig(
        pod_start_seconds=0.3, lease_renew_seconds=5.0, node_status_seconds=30.0, node_ready_seconds=0.05
    )
    async with KubeSim(controllers=fast) as sim, aiohttp.ClientSession(sim.url) as http:
        for i in range(3):
            r = await http.post("/api/v1/nodes", json=node(f"node-{i}"))
            assert r.status == 201
        await call(sim, "POST", "/api/v1/namespaces", namespace(NS))
        await call(sim, "POST", f"/apis/apps/v1/namespaces/{NS}/deployments", deployment("web", 3))
        await make_pdb(sim, "budget", max_unavailable=1)
        await status_until(sim, "budget", lambda s: numbers(s) == (3, 2, 3, 1), within=10)
        pods = (await call(sim, "GET", f"/api/v1/namespaces/{NS}/pods?labelSelector=app=web"))["items"]
        first, second = (p["metadata"]["name"] for p in pods[:2])

        async def evict(name: str) -> int:
            body = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": NS},
            }
            r = await http.post(f"/api/v1/namespaces/{NS}/pods/{name}/eviction", json=body)
            return r.status

        assert await evict(first) == 201
        assert await evict(second) == 429
        # The replacement exists while the evicted pod terminates; once it is Ready the budget reopens.
        await status_until(sim, "budget", lambda s: numbers(s) == (3, 2, 3, 1), within=10)
        assert await evict(second) == 201
