"""The provisioner over HTTP: kubesim (its scheduler marking pods Unschedulable, the chart's CRDs)
and ``FakeCloud`` with finite pools; the lifecycle controller's part (launch, delete on
insufficient capacity) is played by the test.

Sources: kubernetes-sigs/karpenter ``pkg/controllers/provisioning/provisioner.go`` (``Reconcile``,
``CreateNodeClaims``, ``Create``), ``scheduling/nodeclaimtemplate.go`` (``ToNodeClaim``),
``scheduling/events.go`` (``NominatePodEvent``), ``pkg/utils/pod/scheduling.go``
(``IsProvisionable``); aws/karpenter-provider-aws ``pkg/cache/unavailableofferings.go`` and
``pkg/providers/instance/instance.go`` (the insufficient-capacity pools left out of the next
launch); docs/designs/launching.md §2 (kubespot's immediate re-plan).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubespot.cloud import InsufficientCapacityError
from kubespot.scheduling import cluster
from kubespot.scheduling.api.nodeclaim import parse_nodeclaim
from kubespot.sim.kubesim.faults import FaultRule
from kubespot.sim.kubesim.testing import pod, until
from support.provisioning_env import NODECLAIMS, SMALL, Env, Obj, nodepool, ready_pool, requirement, running


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with running() as e:
        yield e


async def _true(value: bool) -> bool:
    return value


async def test_pending_pods_become_one_nodeclaim_and_are_not_planned_twice(env: Env) -> None:
    """provisioner.go Reconcile/Create and ToNodeClaim: pods kube-scheduler marked Unschedulable
    become one NodeClaim (generateName, owner NodePool, nodepool label, no finalizer, requests),
    each pod is told (Nominated); later batches count the pods on the in-flight claim instead of
    planning another one."""
    for i in range(3):
        await env.create("api/v1/namespaces/default/pods", pod(f"web-{i}", requests=SMALL))
    (claim,) = await env.wait_claims(1)
    meta = claim["metadata"]
    assert meta["name"].startswith("general-") and meta["generateName"] == "general-"
    assert meta["labels"]["karpenter.sh/nodepool"] == "general"
    owner = meta["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["blockOwnerDeletion"]) == ("NodePool", "general", True)
    assert not meta.get("finalizers")
    assert claim["spec"]["resources"]["requests"]["pods"] == "3"
    assert requirement(claim, "node.kubernetes.io/instance-type")[0] == "small"
    assert set(requirement(claim, "karpenter.sh/capacity-type")) == {"spot", "on-demand"}

    async def three() -> list[Obj]:
        found = await env.events("Nominated")
        return found if len(found) >= 3 else []

    events = await until(three, within=2.0, interval=0.02)
    assert {e["involvedObject"]["name"] for e in events} == {"web-0", "web-1", "web-2"}
    assert {e["message"] for e in events} == {f"Pod should schedule on: nodeclaim/{meta['name']}"}
    assert len(env.provisioner.nominations) == 3
    # Another batch (a new pod arrives; the pending three are still unbound): one more claim at
    # most for the new pod, none for the three.
    passes = env.provisioner.passes
    env.provisioner.batcher.trigger("again")
    await until(lambda: _true(env.provisioner.passes > passes), within=2.0, interval=0.02)
    await asyncio.sleep(0.1)
    assert len(await env.claims()) == 1
    last = env.provisioner.last_result
    assert last is not None and last.nominated == 3 and last.pending == 0 and not last.created


async def test_insufficient_capacity_replans_at_once_without_the_failed_pool(env: Env) -> None:
    """Fall back fast (docs/designs/launching.md §2; Karpenter's unavailableofferings.go): the
    claim's launch fails for insufficient capacity in the cheapest spot pool, the lifecycle
    controller deletes it; the pods are planned again at once (well within a second, no idle
    wait) and the new claim leaves the failed pool out."""
    env.cloud.capacity[("spot", "small", "z1")] = 0
    await env.create("api/v1/namespaces/default/pods", pod("api", requests=SMALL))
    (first,) = await env.wait_claims(1)
    # The lifecycle controller's launch: small spot is out, and marked.
    spec = parse_nodeclaim(first).spec
    if requirement(first, "node.kubernetes.io/instance-type") != ["small"]:
        pytest.fail(f"expected the first claim sized for small only: {first['spec']['requirements']}")
    with pytest.raises(InsufficientCapacityError):
        await env.cloud.create(spec)
    assert env.unavailable.is_unavailable("spot", "small", "z1")
    deleted_at = time.monotonic()
    await env.delete_claim(first["metadata"]["name"])
    (second,) = await env.wait_claims(1, within=2.0)
    took = time.monotonic() - deleted_at
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert took < 1.0, f"re-planned {took:.2f} s after the deletion"
    assert env.provisioner.batcher.last_close == "now"
    # The new claim is not the failed pool: medium spot (small's spot pool is out).
    launched = await env.cloud.create(parse_nodeclaim(second).spec)
    assert (launched.capacity_type, launched.instance_type) != ("spot", "small")
    # Planned for the next cheapest spot pool, medium: small is not in the claim at all.
    assert requirement(second, "node.kubernetes.io/instance-type") == ["medium"]
    assert (launched.capacity_type, launched.instance_type) == ("spot", "medium")


async def test_no_spot_pool_left_falls_back_to_on_demand(env: Env) -> None:
    """Fall back fast: every spot pool out of capacity. Each failed launch marks its pools and
    the re-plan, within a second of the deletion, leaves them out; once no spot pool is left the
    claim is on-demand (Karpenter's getCapacityType once no spot offering is left)."""
    for name in ("small", "medium"):
        env.cloud.capacity[("spot", name, "z1")] = 0
    await env.create("api/v1/namespaces/default/pods", pod("db", requests=SMALL))
    (claim,) = await env.wait_claims(1)
    fallbacks: list[float] = []
    for _ in range(3):  # small spot, then medium spot, then on-demand: at most two failures
        try:
            launched = await env.cloud.create(parse_nodeclaim(claim).spec)
            break
        except InsufficientCapacityError:
            pass
        deleted_at = time.monotonic()
        await env.delete_claim(claim["metadata"]["name"])
        (claim,) = await env.wait_claims(1, within=2.0)
        fallbacks.append(time.monotonic() - deleted_at)
    else:
        pytest.fail("still no launch after three claims")
    assert launched.capacity_type == "on-demand"
    assert requirement(claim, "karpenter.sh/capacity-type") == ["on-demand"]
    assert 1 <= len(fallbacks) <= 2 and max(fallbacks) < 1.0, fallbacks


async def test_limits_are_checked_again_against_live_usage() -> None:
    """provisioner.go Create: the NodePool's limits are checked again at creation. A claim that
    appeared after the pass's snapshot (here: hidden from the snapshot) counts; the planned claim
    that would exceed the cpu limit is not created, and the pass is retried."""
    async with running(limits={"cpu": "4"}) as env:
        provisioner = env.provisioner
        real_snapshot = provisioner._snapshot

        async def stale() -> dict[str, list[Obj]]:
            objects = await real_snapshot()
            objects["NodeClaim"] = []
            return objects

        provisioner._snapshot = stale  # type: ignore[method-assign]
        other = {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "general-other", "labels": {"karpenter.sh/nodepool": "general"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
            },
        }
        stored = await env.create(NODECLAIMS, other)
        stored["status"] = {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}
        async with env.http.put(f"/{NODECLAIMS}/general-other/status", json=stored) as r:
            assert r.status == 200, await r.text()
        await env.create("api/v1/namespaces/default/pods", pod("big", requests={"cpu": "1", "memory": "1Gi"}))

        async def refused() -> int:
            last = provisioner.last_result
            return provisioner.passes if last is not None and last.refused else 0

        first = await until(refused, within=3.0, interval=0.02)
        last = provisioner.last_result
        assert last is not None and last.refused == [("general", "limits exceeded: cpu")]
        # Retried (retry_after 0.3 s) and refused again: nothing was created meanwhile.
        await until(lambda: _true(provisioner.passes > first), within=3.0, interval=0.02)
        assert [c["metadata"]["name"] for c in await env.claims()] == ["general-other"]
        # Without the other claim the same pod gets its NodeClaim.
        await env.delete_claim("general-other")
        provisioner.batcher.trigger("go")
        await env.wait_claims(1)


async def test_the_limits_read_the_cluster_once_per_pass_and_once_at_admission(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """provisioner.go ``Schedule`` builds the scheduler's remaining resources of every NodePool
    from one cluster-state read (``scheduler.go`` ``NewScheduler`` → ``updateRemainingResources``
    over ``nodes.Active()``), and ``Create`` reads ``NodePoolResourcesFor`` once per claim from the
    counts kept: one read of every node per pass and one at admission, however many pools are
    limited (review 16c #4: one per pool made a pass 3-4x slower on big clusters)."""
    reads: list[int] = []
    real = cluster.state_nodes

    def counted(nodes: Any, nodeclaims: Any) -> list[cluster.StateNode]:
        reads.append(env.provisioner.passes)
        return real(nodes, nodeclaims)

    monkeypatch.setattr(cluster, "state_nodes", counted)
    async with running(limits={"cpu": "100"}) as env:
        for name in ("second", "third", "fourth"):
            await ready_pool(env, nodepool(name, limits={"cpu": "100"}))
        await asyncio.sleep(0.05)  # the pools in the provisioner's cache before the pod
        await env.create("api/v1/namespaces/default/pods", pod("w", requests=SMALL))
        await env.wait_claims(1)
    assert reads and max(Counter(reads).values()) <= 2, Counter(reads)


async def test_api_errors_are_survived_and_retried(env: Env) -> None:
    """Never crash on API errors: a 500 on the NodeClaim create is logged and the pass retried
    (Karpenter's Reconcile returns the error and is requeued); the claim is then created."""
    env.sim.faults.add(
        FaultRule(verb="create", resource="nodeclaims", error_rate=1.0, error_code=500, remaining=2)
    )
    await env.create("api/v1/namespaces/default/pods", pod("w", requests=SMALL))
    (claim,) = await env.wait_claims(1, within=3.0)
    assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == "general"
    assert env.provisioner.passes >= 2


async def test_a_pod_no_nodepool_can_take_is_told_why_and_retried(env: Env) -> None:
    """provisioner.go Schedule publishes PodFailedToScheduleEvent for the pods the simulation
    could not place (Warning FailedScheduling, "Failed to schedule pod, ..."); no NodeClaim is
    created and the pass is tried again later."""
    await env.create("api/v1/namespaces/default/pods", pod("huge", requests={"cpu": "64", "memory": "1Gi"}))

    async def warned() -> list[Obj]:
        return await env.events("FailedScheduling")

    (event,) = await until(warned, within=3.0, interval=0.02)
    assert event["source"]["component"] == "kubespot"
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "huge"
    assert event["message"].startswith("Failed to schedule pod, ")
    assert await env.claims() == []
    last = env.provisioner.last_result
    assert (
        last is not None and last.retry and "default/huge" in (last.plan.unschedulable if last.plan else {})
    )


async def test_a_pod_the_simulation_cannot_read_does_not_stop_the_others(env: Env) -> None:
    """Never crash on what the API holds: a pod whose spec the simulation cannot read is told
    (FailedScheduling) and left out; the pods around it get their NodeClaim (Karpenter's
    GetPendingPods rejects a pod that fails Validate the same way, one pod at a time)."""
    bad = pod("bad", requests={"cpu": "500m", "memory": "1Gi"})
    bad["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "team", "operator": "Gt", "values": ["x"]}]}
                ]
            }
        }
    }
    await env.create("api/v1/namespaces/default/pods", bad)
    await env.create("api/v1/namespaces/default/pods", pod("good", requests=SMALL))
    (claim,) = await env.wait_claims(1)
    assert claim["spec"]["resources"]["requests"]["pods"] == "1"

    async def warned() -> list[Obj]:
        return [e for e in await env.events("FailedScheduling") if e["source"]["component"] == "kubespot"]

    (event,) = await until(warned, within=3.0, interval=0.02)
    assert event["involvedObject"]["name"] == "bad" and "cannot be read" in event["message"]


async def test_a_static_nodepool_gets_no_nodeclaim_for_pending_pods(env: Env) -> None:
    """core pkg/controllers/provisioning/provisioner.go NewScheduler leaves out static NodePools
    (pkg/utils/nodepool/nodepool.go IsStatic: spec.replicas set); only the static provisioning
    controller sizes them. A pod that only the static pool could take is told, and no NodeClaim
    is made; a pod the dynamic pool can take still gets its claim."""
    static = nodepool("static", limits={"nodes": "5"})
    static["spec"]["replicas"] = 2
    await ready_pool(env, static)
    only_static = pod("pinned", requests=SMALL)
    only_static["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": "static"}
    await env.create("api/v1/namespaces/default/pods", only_static)
    await env.create("api/v1/namespaces/default/pods", pod("free", requests=SMALL))
    (claim,) = await env.wait_claims(1)
    assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == "general"

    async def warned() -> list[Obj]:
        return [e for e in await env.events("FailedScheduling") if e["involvedObject"]["name"] == "pinned"]

    await until(warned, within=3.0, interval=0.02)
    await asyncio.sleep(0.1)
    assert [c["metadata"]["labels"]["karpenter.sh/nodepool"] for c in await env.claims()] == ["general"]


@pytest.mark.parametrize(
    "expression",
    [
        {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["ip-10-0-0-1"]},
        {"key": "karpenter.sh/foo", "operator": "DoesNotExist"},
        {"key": "karpenter.k8s.aws/foo", "operator": "NotIn", "values": ["x"]},
    ],
)
async def test_a_pod_with_a_restricted_key_is_left_out_and_does_not_strand_others(
    env: Env, expression: Obj
) -> None:
    """core provisioner.go Validate (validateAffinity, validateNodeSelectorTerm,
    v1.ValidateRequirement, pkg/apis/v1/labels.go IsRestrictedLabel: kubernetes.io/hostname, and
    the karpenter.sh / karpenter.k8s.aws domains apart from their well-known keys) drops such a pod
    from the batch: the NodeClaim made for it would carry a requirement the CRD refuses
    (karpenter.sh_nodeclaims.yaml x-kubernetes-validations), stranding the pods packed with it.
    The pod is told why (FailedScheduling); the other pod gets a claim of its own, without the key."""
    bad = pod("bad", requests=SMALL)
    bad["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }
    await env.create("api/v1/namespaces/default/pods", bad)
    await env.create("api/v1/namespaces/default/pods", pod("good", requests=SMALL))
    (claim,) = await env.wait_claims(1)
    assert claim["spec"]["resources"]["requests"]["pods"] == "1"
    assert expression["key"] not in {r["key"] for r in claim["spec"]["requirements"]}

    async def warned() -> list[Obj]:
        return [e for e in await env.events("FailedScheduling") if e["involvedObject"]["name"] == "bad"]

    (event,) = await until(warned, within=3.0, interval=0.02)
    assert "restricted" in event["message"], event["message"]
    await asyncio.sleep(0.1)
    assert len(await env.claims()) == 1


async def test_a_claim_the_cache_has_not_shown_yet_still_counts_against_the_limits() -> None:
    """provisioner.go Create puts the NodeClaim it created in the cluster state at once
    (``cluster.UpdateNodeClaim``: "avoid eventual consistency delay races with our watcher"), so
    the next pass counts it even before the informer brings it. Here the NodeClaim watch is silent
    (half-open) before the first claim is created: the second pod's claim would take the pool over
    its cpu limit (2 cpu charged + 4 > 4) and is not created; the cache alone would let it through."""
    async with running(limits={"cpu": "4"}) as env:
        provisioner = env.provisioner
        await provisioner._cache["NodeClaim"].wait_synced()
        env.sim.faults.add(FaultRule(verb="watch", resource="nodeclaims", stall_watch_after_s=0))
        env.sim.store.drop_watches()
        await env.create("api/v1/namespaces/default/pods", pod("a", requests={"cpu": "1", "memory": "1Gi"}))
        (first,) = await env.wait_claims(1)
        assert requirement(first, "node.kubernetes.io/instance-type")[0] == "small"
        assert len(provisioner._cache["NodeClaim"]) == 0  # the cache has not seen it
        await env.create("api/v1/namespaces/default/pods", pod("b", requests={"cpu": "3", "memory": "1Gi"}))

        async def b_judged() -> bool:
            last = provisioner.last_result
            return (
                last is not None
                and last.plan is not None
                and (bool(last.refused) or "default/b" in last.plan.unschedulable)
            )

        await until(b_judged, within=3.0, interval=0.02)
        assert [c["metadata"]["name"] for c in await env.claims()] == [first["metadata"]["name"]]
        assert first["metadata"]["name"] in provisioner._charges


async def test_a_long_simulation_does_not_block_the_event_loop(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 15b #1: the simulation is pure CPU work that can take seconds on a big plan; it must
    not hold the asyncio loop that also renews the leader Lease (kubespot ``operator/leader.py``
    ``_renew``, after client-go ``tools/leaderelection/leaderelection.go`` ``renew``: a renewal
    missing ``renewDeadline`` drops leadership). A simulation slowed to 0.6 s on purpose: another
    coroutine on the loop keeps ticking meanwhile, and the claim is still created."""
    from kubespot.controllers.provisioning import provisioner as module

    real = module.plan_cluster
    slow = 0.6

    def slowed(*args: object, **kwargs: object) -> object:
        time.sleep(slow)  # stands for seconds of solver CPU: it blocks whichever thread runs it
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "plan_cluster", slowed)
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    try:
        await env.create("api/v1/namespaces/default/pods", pod("slow-0", requests=SMALL))
        await env.wait_claims(1, within=3.0)
    finally:
        task.cancel()
    assert gaps and max(gaps) < slow / 2, f"the loop stalled {max(gaps):.2f} s during the simulation"


async def test_a_node_up_but_not_registered_is_its_claims_capacity_no_duplicate_nor_overshoot() -> None:
    """Review 15b #2 end to end: Karpenter's pkg/controllers/state/statenode.go ``Labels`` (the
    NodeClaim's until ``Registered``) and ``Capacity``, read by ``scheduler.go``
    ``updateRemainingResources`` and ``existingnode.go`` ``NewExistingNode``. A launched claim's
    Node has come up without the claim's labels (custom user data) and is matched by provider
    ID: a pod selecting the claim's capacity type waits for it (no duplicate claim), and a pod
    that needs a new node (on-demand) is refused by the pool's cpu limit, which that node uses."""
    async with running(limits={"cpu": "4"}) as env:
        provisioner = env.provisioner
        pid, room = "aws:///z1/i-0feed", {"cpu": "4", "memory": "16Gi", "pods": "110"}
        labels = {"karpenter.sh/nodepool": "general", "karpenter.sh/capacity-type": "spot"}
        body = {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "general-inflight", "labels": labels},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
            },
        }
        stored = await env.create(NODECLAIMS, body)
        stored["status"] = {"providerID": pid, "capacity": room, "allocatable": room}
        async with env.http.put(f"/{NODECLAIMS}/general-inflight/status", json=stored) as r:
            assert r.status == 200, await r.text()
        taints = [
            {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        ]
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "ip-10-0-0-9", "labels": {"kubernetes.io/hostname": "ip-10-0-0-9"}},
            "spec": {"providerID": pid, "taints": taints},
        }
        # As a kubelet registers: the Node created with its status (none of the claim's labels).
        await env.create("api/v1/nodes", {**node, "status": {"capacity": room, "allocatable": room}})
        spot = {"karpenter.sh/capacity-type": "spot"}
        selecting = pod("a", requests={"cpu": "1", "memory": "1Gi"})
        selecting["spec"]["nodeSelector"] = spot
        await env.create("api/v1/namespaces/default/pods", selecting)
        on_demand = pod("b", requests={"cpu": "1", "memory": "1Gi"})
        on_demand["spec"]["nodeSelector"] = {"karpenter.sh/capacity-type": "on-demand"}
        await env.create("api/v1/namespaces/default/pods", on_demand)

        async def judged() -> bool:
            last = provisioner.last_result
            plan = last.plan if last is not None else None
            return (
                plan is not None
                and plan.existing.get("default/a") == "ip-10-0-0-9"
                and (bool(last and last.refused) or "default/b" in plan.unschedulable)
            )

        await until(judged, within=3.0, interval=0.02)
        assert [c["metadata"]["name"] for c in await env.claims()] == ["general-inflight"]
        async with env.http.get("/api/v1/nodes/ip-10-0-0-9") as r:
            assert (await r.json())["status"]["capacity"]["cpu"] == "4"  # the node is as set up


async def test_a_claim_deleted_before_its_create_answer_is_handled_is_not_kept_in_flight() -> None:
    """review 15c #2: Karpenter's ``provisioner.go`` ``Create`` → ``cluster.UpdateNodeClaim``, and a
    delete event removes the claim from the cluster state whatever the order
    (``state/cluster.go`` ``DeleteNodeClaim``). A launch that fails within milliseconds gets its
    claim deleted before the create's answer is handled: it must not stay charged nor in flight, so
    the next pass plans its pod onto a new claim instead of the phantom."""
    async with running() as env:
        provisioner = env.provisioner
        await provisioner._cache["NodeClaim"].wait_synced()
        real_create = provisioner.nodeclaims.create
        lost: list[str] = []

        async def create_then_lose(obj: Obj) -> Obj:
            stored = await real_create(obj)
            if not lost:
                name = stored["metadata"]["name"]
                lost.append(name)
                await env.delete_claim(name)
                await until(lambda: _true(name in provisioner._gone), within=2.0, interval=0.01)
            return stored

        provisioner.nodeclaims.create = create_then_lose  # type: ignore[method-assign]
        await env.create("api/v1/namespaces/default/pods", pod("web", requests=SMALL))

        async def replaced() -> list[Obj]:
            return [c for c in await env.claims() if c["metadata"]["name"] not in lost]

        (claim,) = await until(replaced, within=3.0, interval=0.02)
        assert lost and lost[0] not in provisioner._charges
        assert claim["metadata"]["name"] != lost[0]


async def test_a_replica_leading_again_forgets_the_claims_of_its_last_term() -> None:
    """Review 15e #1. The lease lost (the provisioner's loop cancelled, the informers dropping their
    caches), the claim this replica created is deleted by the time it leads again: the fresh LIST
    does not have it and no DELETED event comes, so nothing of the last term may keep it in flight
    or charged. Karpenter exits on a lost lease (controller-runtime's leader election) and
    rebuilds its cluster state (pkg/controllers/state/cluster.go) from the API: the pod gets a new
    claim at once."""
    async with running() as env:
        p = env.provisioner
        claims = p.informers.get(NODECLAIMS)
        await claims.wait_synced()
        await env.create("api/v1/namespaces/default/pods", pod("web", requests=SMALL))
        (claim,) = await until(env.claims, within=3.0, interval=0.02)
        first = claim["metadata"]["name"]
        env.tasks["run"].cancel()  # the lease lost
        await asyncio.gather(env.tasks["run"], return_exceptions=True)
        await claims.stop()
        await env.delete_claim(first)
        env.tasks["run"] = asyncio.create_task(p.run())  # leading again: a fresh LIST

        async def replaced() -> list[str]:
            names = [c["metadata"]["name"] for c in await env.claims()]
            return names if names and first not in names else []

        assert await until(replaced, within=5.0, interval=0.05)
