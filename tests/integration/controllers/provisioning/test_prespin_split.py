"""Pre-spin and the capacity split over HTTP: kubesim (its scheduler marking pods Unschedulable,
the chart's CRDs) and ``FakeCloud``, the provisioner's loops and the ``DoomWatch`` running; the
interruption handler's fence is written by the test, as the handler writes it.

Sources: kubernetes-sigs/karpenter ``pkg/controllers/provisioning/provisioner.go`` ``Schedule``
(the reschedulable pods of nodes marked for deletion are planned with the pending ones),
``pkg/utils/pod`` ``IsReschedulable``; docs/designs/launching.md §7 (kubespot's fence dooms a node
and starts a pass at once) and §6 (the capacity split, Auto Scaling's ``InstancesDistribution``).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from kubespot.actions.drain import drain_node
from kubespot.config.drain import DrainSettings
from kubespot.model import SystemClock
from kubespot.records.interruption import STATE_ANNOTATION
from kubespot.sim.kubesim import conventions
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import node, pod, replicaset, until
from support.provisioning_env import SMALL, Env, Obj, requirement, running

SPOT_ITN = {"key": "kubespot.io/spot-itn", "value": "2026-01-01T00-02-00Z", "effect": "NoSchedule"}
SPLIT = {"kubespot.io/capacity-split": "onDemandBase=2,onDemandPercentAboveBase=30"}
#: Fits the fake catalog's medium type (4 cpu) once and the small one (2 cpu) not at all.
ONE_PER_NODE = {"cpu": "2500m", "memory": "1Gi"}


def spot_node(name: str, capacity_type: str = "spot", **extra: Any) -> Obj:
    """A node of the pool as Karpenter's would be once initialized (no NodeClaim: adopted)."""
    labels = {
        "karpenter.sh/nodepool": "general",
        "karpenter.sh/capacity-type": capacity_type,
        "node.kubernetes.io/instance-type": "small",
        "topology.kubernetes.io/zone": "z1",
        "karpenter.sh/registered": "true",
        "karpenter.sh/initialized": "true",
    }
    return node(name, cpu="2", memory="8Gi", labels=labels, ready=True, **extra)


async def put_node(env: Env, name: str, change: Any) -> None:
    async with env.http.get(f"/api/v1/nodes/{name}") as r:
        obj = await r.json()
    change(obj)
    async with env.http.put(f"/api/v1/nodes/{name}", json=obj) as r:
        assert r.status == 200, await r.text()


def fence(obj: Obj) -> None:
    """What the handler does first (handling/node_patches.fence_patch): taint and cordon."""
    obj["spec"]["taints"] = [*(obj["spec"].get("taints") or []), SPOT_ITN]
    obj["spec"]["unschedulable"] = True


async def bound_pods(env: Env, host: str) -> list[str]:
    async with env.http.get("/api/v1/namespaces/default/pods") as r:
        items = (await r.json())["items"]
    return sorted(p["metadata"]["name"] for p in items if p["spec"].get("nodeName") == host)


async def with_workload(env: Env) -> None:
    await env.create("api/v1/nodes", spot_node("spot-1"))
    for i in range(2):
        await env.create("api/v1/namespaces/default/pods", pod(f"web-{i}", node="spot-1", requests=SMALL))
    # A DaemonSet's pod goes with its node: not planned for.
    ds = pod("agent-x", node="spot-1", requests=SMALL)
    ds["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds-uid", "controller": True}
    ]
    await env.create("api/v1/namespaces/default/pods", ds)


async def a_pass_after(env: Env) -> None:
    """A whole pass started after this call (one under way may have read an older snapshot)."""
    await until(lambda: _true(env.provisioner.pass_started is None), within=2.0, interval=0.01)
    passes = env.provisioner.passes
    env.provisioner.batcher.trigger_now("test")
    await until(lambda: _true(env.provisioner.passes > passes), within=2.0, interval=0.02)


async def _true(value: bool) -> bool:
    return value


#: kubesim with kubelets (graceful termination: an evicted pod stays Terminating for its shutdown
#: time) and the ReplicaSet controller (a terminating pod is replaced at once), on sub-second
#: timings; no kube-scheduler: the test plays it, so the replacements stay unjudged (as behind a busy
#: kube-scheduler) until the test marks them Unschedulable.
DRAINING = ControllerConfig(
    pod_start_seconds=0.05,
    lease_renew_seconds=0.1,
    node_status_seconds=0.2,
    node_ready_seconds=0.05,
    scheduler=False,
    kubelet=True,
    workloads=True,
)
#: Long enough that the old pods are surely still terminating when the claim is looked at, on a
#: loaded machine; the test then ends their shutdown early (the kubelet's final grace-0 delete).
SHUTDOWN = {conventions.SHUTDOWN_SECONDS: "20"}
#: Deadlines of the waits in the drain race: conditions, so a loaded machine only makes them slower.
GENEROUS = 15.0


def draining_state(kind: str = "spot-itn") -> str:
    """The state annotation the handler writes with a fence that drains (node_patches.fence_patch)."""
    return (
        f'{{"event_id":"e1","kind":"{kind}","phase":"draining","since":"2026-01-01T00:00:00Z",'
        f'"taints":["kubespot.io/{kind}"]}}'
    )


def handler_fence(obj: Obj) -> None:
    """handling/node_patches.fence_patch for a plan that drains: taint, cordon and the state."""
    fence(obj)
    obj["metadata"].setdefault("annotations", {})[STATE_ANNOTATION] = draining_state()


async def pods_of(env: Env, prefix: str) -> list[Obj]:
    async with env.http.get("/api/v1/namespaces/default/pods") as r:
        items = (await r.json())["items"]
    return [p for p in items if p["metadata"]["name"].startswith(prefix)]


async def two_pods(env: Env) -> list[Obj]:
    """The ReplicaSet's two pods once it has made them (an empty list before)."""
    pods = await pods_of(env, "web-")
    return pods if len(pods) == 2 else []


async def bind(env: Env, name: str, host: str) -> None:
    """What kube-scheduler does for a pod it placed: the binding subresource (pods/binding)."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name},
        "target": {"kind": "Node", "name": host},
    }
    async with env.http.post(f"/api/v1/namespaces/default/pods/{name}/binding", json=body) as r:
        assert r.status == 201, await r.text()


async def mark_unschedulable(env: Env, obj: Obj) -> None:
    """What kube-scheduler writes on a pod that fits nowhere (PodScheduled False, Unschedulable)."""
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}
    obj["status"] = {**(obj.get("status") or {}), "conditions": [cond]}
    name = obj["metadata"]["name"]
    async with env.http.put(f"/api/v1/namespaces/default/pods/{name}/status", json=obj) as r:
        assert r.status == 200, await r.text()


async def test_the_replacement_beats_a_drain_that_evicted_before_the_pass_read_the_cluster() -> None:
    """launching.md §7 against the real drain: the handler fences (taint, cordon, state
    ``draining``) and drains at once (handling/node_handler.py _execute; actions/drain.py
    drain_node evicts), while the provisioner's pass is still reading the cluster (its snapshot is
    held until both pods are evicted, as a list of a large cluster is slow). The ReplicaSet's
    evicted pods are terminating (Karpenter's IsReschedulable, pkg/utils/pod/scheduling.go, drops
    them) and their replacements are not yet judged by kube-scheduler (not IsProvisionable): the
    pass still plans them, so the replacement NodeClaim exists while the old pods are still
    terminating; once they are gone (their shutdown ended early by the test, as the kubelet's final
    grace-0 delete) and kube-scheduler marks the replacements Unschedulable, they count
    on the claim in flight and no second claim is created (provisioner.go Schedule: in-flight
    NodeClaims are capacity)."""
    async with running(doom=True, idle=5.0, max_duration=10.0, controllers=DRAINING) as env:
        await env.create("api/v1/nodes", spot_node("spot-1"))
        # The ReplicaSet makes its own two pods and the test binds them, as kube-scheduler would.
        # Pods created by the test with the ReplicaSet as owner would race its controller: while it
        # wants 0 replicas it deletes every pod it owns (replica_set.go manageReplicas), and once
        # it wants 2 before seeing them it creates two more.
        rs = replicaset("web", 2, requests=SMALL)
        rs["spec"]["template"]["metadata"]["annotations"] = dict(SHUTDOWN)
        await env.create("apis/apps/v1/namespaces/default/replicasets", rs)
        old_names = {p["metadata"]["name"] for p in await until(lambda: two_pods(env), within=GENEROUS)}
        for name in sorted(old_names):
            await bind(env, name, "spot-1")

        async def running_two() -> bool:
            pods = await pods_of(env, "web")
            return len(pods) == 2 and all(p.get("status", {}).get("phase") == "Running" for p in pods)

        await until(running_two, within=GENEROUS, interval=0.02)
        await asyncio.sleep(0.1)
        assert await env.claims() == []

        provisioner = env.provisioner
        real_snapshot = provisioner._snapshot
        fenced = asyncio.Event()

        async def evicted_first() -> dict[str, list[Obj]]:
            if fenced.is_set():

                async def both_evicted() -> bool:
                    old = [p for p in await pods_of(env, "web-") if p["metadata"]["name"] in old_names]
                    return all(p["metadata"].get("deletionTimestamp") for p in old)

                await until(both_evicted, within=GENEROUS, interval=0.01)
            return await real_snapshot()

        provisioner._snapshot = evicted_first  # type: ignore[method-assign]
        passes = provisioner.passes
        fenced.set()
        await put_node(env, "spot-1", handler_fence)
        drain = asyncio.create_task(
            drain_node(
                "spot-1",
                kube=env.kube,
                settings=DrainSettings(safety_margin=0.5, retry_backoff_base=0.05, retry_backoff_cap=0.3),
                deadline=datetime.now(UTC) + timedelta(seconds=60),
                clock=SystemClock(),
            )
        )
        try:
            (claim,) = await env.wait_claims(1, within=GENEROUS)
            # The old pods are still there, terminating: the claim came while they were evicted.
            old = [p for p in await pods_of(env, "web-") if p["metadata"]["name"] in old_names]
            assert len(old) == 2 and all(p["metadata"].get("deletionTimestamp") for p in old)
            assert claim["spec"]["resources"]["requests"]["pods"] == "2"
            # Made by the pass the fence started (the window closed at once, not after 5 s idle).
            assert provisioner.batcher.last_close == "now"
            await until(lambda: _true(provisioner.passes > passes), within=GENEROUS, interval=0.01)
            first = provisioner.last_result
            assert first is not None and first.moving == 2 and len(first.created) == 1
            # Their containers exit: the kubelet's final delete (grace 0), and the drain is done.
            for name in sorted(old_names):
                path = f"/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0"
                async with env.http.delete(path) as r:
                    assert r.status in (200, 404), await r.text()
            result = await asyncio.wait_for(drain, GENEROUS)
        finally:
            drain.cancel()
        assert result.emptied
        # kube-scheduler judges the replacements (nothing fits: the only node is cordoned).
        replacements = [p for p in await pods_of(env, "web-") if p["metadata"]["name"] not in old_names]
        assert len(replacements) == 2 and not any(p["spec"].get("nodeName") for p in replacements)
        for obj in replacements:
            await mark_unschedulable(env, obj)
        await a_pass_after(env)
        await a_pass_after(env)
        assert [c["metadata"]["name"] for c in await env.claims()] == [claim["metadata"]["name"]]
        last = provisioner.last_result
        assert last is not None and not last.created and last.nominated + last.pending == 2
        assert last.plan is None or not last.plan.unschedulable


async def test_pods_of_a_doomed_node_are_not_planned_twice_once_evicted() -> None:
    """The claim in flight holds them: while the node drains, its pods count on the replacement
    (nominated); once evicted and re-created by their ReplicaSet (new pods, Unschedulable), they fit
    the claim still in flight (Karpenter's in-flight NodeClaims are capacity to the scheduler), so
    no second claim is created."""
    async with running(doom=True) as env:
        await with_workload(env)
        await put_node(env, "spot-1", fence)
        (claim,) = await env.wait_claims(1, within=2.0)
        # Passes while the pods are still on the fenced node: counted on the claim.
        await a_pass_after(env)
        last = env.provisioner.last_result
        assert last is not None and last.nominated == 2 and not last.created
        # The drain evicts them; their ReplicaSet makes new ones, which nothing can run yet.
        for i in range(2):
            async with env.http.delete(f"/api/v1/namespaces/default/pods/web-{i}") as r:
                assert r.status == 200, await r.text()
            await env.create("api/v1/namespaces/default/pods", pod(f"web-new-{i}", requests=SMALL))

        async def planned_both() -> bool:
            result = env.provisioner.last_result
            return result is not None and result.pending == 2 and not result.retry

        await until(planned_both, within=3.0, interval=0.02)
        await a_pass_after(env)
        claims = await env.claims()
        assert [c["metadata"]["name"] for c in claims] == [claim["metadata"]["name"]]
        last = env.provisioner.last_result
        assert last is not None and not last.created and not last.plan.unschedulable  # type: ignore[union-attr]


async def test_without_learning_from_interruptions_the_fence_is_not_a_doom() -> None:
    """launch.learn_from_interruptions off (Karpenter + NTH, which share nothing): a fenced node's
    pods wait for the drain; only its NodeClaim's deletion dooms it (Karpenter's own Schedule)."""
    async with running(doom=True, prespin=False) as env:
        await with_workload(env)
        await put_node(env, "spot-1", fence)
        await asyncio.sleep(0.2)
        await a_pass_after(env)
        assert await env.claims() == []
        last = env.provisioner.last_result
        assert last is not None and last.moving == 0
        # Karpenter's own case: the node being deleted (its finalizer holds it while it drains).
        await put_node(env, "spot-1", lambda o: o["metadata"].update(finalizers=["karpenter.sh/termination"]))
        async with env.http.delete("/api/v1/nodes/spot-1") as r:
            assert r.status in (200, 202), await r.text()
        (claim,) = await env.wait_claims(1, within=2.0)
        assert claim["spec"]["resources"]["requests"]["pods"] == "2"


async def test_ten_claims_of_a_split_pool_follow_base_two_and_thirty_percent() -> None:
    """launching.md §6 (Auto Scaling InstancesDistribution, a fraction rounded up in favour of
    on-demand): base 2 / 30 %; four claims in one pass then six in another give 3 on-demand of 4,
    then 5 of 10; the counts of the second pass come from the claims the first created."""
    async with running(annotations=SPLIT) as env:
        for i in range(4):
            await env.create("api/v1/namespaces/default/pods", pod(f"a-{i}", requests=ONE_PER_NODE))
        first = await env.wait_claims(4)
        kinds = [requirement(c, "karpenter.sh/capacity-type") for c in first]
        assert sorted(k[0] for k in kinds) == ["on-demand"] * 3 + ["spot"]
        assert all(len(k) == 1 for k in kinds)
        for i in range(6):
            await env.create("api/v1/namespaces/default/pods", pod(f"b-{i}", requests=ONE_PER_NODE))
        claims = await env.wait_claims(10)
        await asyncio.sleep(0.1)
        claims = await env.claims()
        assert len(claims) == 10
        kinds = [requirement(c, "karpenter.sh/capacity-type") for c in claims]
        assert sorted(k[0] for k in kinds) == ["on-demand"] * 5 + ["spot"] * 5
        # Each narrowed claim says so (Normal CapacitySplit, kubespot's; launching.md §6): the
        # type and why, on the NodeClaim; on the NodePool once per capacity type and timeout.

        async def twelve() -> list[Obj]:
            found = await env.events("CapacitySplit")
            return found if len(found) >= 12 else []

        told = await until(twelve, within=2.0)
        on_claims = {
            e["involvedObject"]["name"]: e["message"]
            for e in told
            if e["involvedObject"]["kind"] == "NodeClaim"
        }
        assert set(on_claims) == {c["metadata"]["name"] for c in claims}
        for c in claims:
            kind = requirement(c, "karpenter.sh/capacity-type")[0]
            assert (
                f"Narrowed to {kind} by kubespot.io/capacity-split (onDemandBase=2"
                in on_claims[c["metadata"]["name"]]
            )
        on_pool = [e for e in told if e["involvedObject"]["kind"] == "NodePool"]
        assert len(on_pool) == 2 and all(e["type"] == "Normal" for e in told)


async def test_a_malformed_split_leaves_the_pool_in_use_without_a_split() -> None:
    """launching.md §6: never a crash; the claim is Karpenter's (open to both capacity types)."""
    async with running(annotations={"kubespot.io/capacity-split": "half and half"}) as env:
        await env.create("api/v1/namespaces/default/pods", pod("web", requests=SMALL))
        (claim,) = await env.wait_claims(1)
        assert set(requirement(claim, "karpenter.sh/capacity-type")) == {"spot", "on-demand"}


async def test_a_split_pools_replacement_does_not_count_the_node_it_replaces() -> None:
    """launching.md §6 and §7: the split counts the pool's live nodes; a doomed spot node is going,
    so its replacement in a base 0 / 50 % pool running one on-demand node is spot (counting the
    doomed node, the pool would look 1 + 1 and the replacement would be on-demand)."""
    half = {"kubespot.io/capacity-split": "onDemandBase=0,onDemandPercentAboveBase=50"}
    async with running(doom=True, annotations=half) as env:
        # An on-demand node of the pool that takes no pod (cordoned by someone, not fenced).
        await env.create("api/v1/nodes", spot_node("od-1", "on-demand", unschedulable=True))
        await with_workload(env)
        await put_node(env, "spot-1", fence)
        (claim,) = await env.wait_claims(1, within=2.0)
        assert requirement(claim, "karpenter.sh/capacity-type") == ["spot"]
