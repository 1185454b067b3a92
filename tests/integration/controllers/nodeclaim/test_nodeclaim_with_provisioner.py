"""Both halves of issue 14 §1 over HTTP: the provisioner (pending pods → NodeClaims) and the NodeClaim
controller (launch, registration, initialization, insufficient capacity) on one ``FakeCloud`` and
one ``UnavailableOfferings`` cache, kubesim's scheduler binding the pods, and a stand-in kubelet
registering a Node for every launched instance (as the node joiner does over EC2).

Each test names the kubernetes-sigs/karpenter (core) or aws/karpenter-provider-aws (aws) function
it follows.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from nodeclaim_world import UNREGISTERED, Env, Obj, record_claims, running

from kubespot.cloud import FakeCloud, UnavailableOfferings, fake_type
from kubespot.controllers.nodeclaim.objects import NODECLAIMS
from kubespot.controllers.provisioning.batcher import Batcher
from kubespot.controllers.provisioning.nominations import Nominations
from kubespot.controllers.provisioning.pending import PODS, PendingWatch
from kubespot.controllers.provisioning.provisioner import Provisioner
from kubespot.kube.events import EventRecorder
from kubespot.model import SystemClock
from kubespot.scheduling.instance_types import InstanceType
from kubespot.sim.kubesim.testing import node as node_body
from kubespot.sim.kubesim.testing import pod, until
from support.provisioning_env import NODECLASSES, TYPES, nodeclass, nodepool, ready_pool


async def kubelets(env: Env) -> None:
    """For every launched claim, a Node as its kubelet registers one: the instance's provider id,
    its hostname label, the unregistered taint its user data asks for, the type's capacity."""
    joined: set[str] = set()
    while True:
        for claim in list(env.loop.claims.values()):
            status = claim.get("status") or {}
            pid = status.get("providerID")
            if not pid or pid in joined:
                continue
            joined.add(pid)
            name = "ip-" + pid.rsplit("/", 1)[1]
            capacity = status.get("capacity") or {}
            body = node_body(
                name,
                cpu=capacity.get("cpu", "2"),
                memory=capacity.get("memory", "8Gi"),
                taints=[UNREGISTERED],
            )
            body["spec"]["providerID"] = pid
            await env.call("POST", "/api/v1/nodes", body)
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def both_halves(
    types: list[InstanceType] | None = None, limits: Obj | None = None
) -> AsyncIterator[tuple[Env, FakeCloud]]:
    clock = SystemClock()
    unavailable = UnavailableOfferings(clock)
    cloud = FakeCloud(TYPES if types is None else types, unavailable=unavailable)
    async with running(cloud=cloud, unavailable=unavailable, scheduler=True) as env:
        await env.create(NODECLASSES, nodeclass())
        # Ready, as the status loop leaves a pool whose class is resolved.
        await ready_pool(env, nodepool(limits=limits))  # type: ignore[arg-type]
        batcher = Batcher(idle=0.05, max_duration=0.5)
        provisioner = Provisioner(
            kube=env.kube,
            cloud=cloud,
            batcher=batcher,
            nominations=Nominations(EventRecorder(kube=env.kube)),
            clock=clock,
            unavailable=unavailable,
            retry_after=0.3,
            # The operator's one set of informers: the provisioner and the lifecycle loop share them.
            informers=env.loop.informers,
        )
        # As the operator wires them: a claim refused for insufficient capacity is told to the
        # provisioner before it is deleted (launching.md §2b, "Widened relaunch").
        env.loop.on_insufficient_capacity = provisioner.capacity_refused
        env.tasks += [
            asyncio.create_task(provisioner.run()),
            asyncio.create_task(provisioner.watch_claims()),
            asyncio.create_task(
                # Fed by the informer the passes read, as the operator wires it (controller.build).
                PendingWatch(provisioner.informers.get(PODS), batcher.trigger, clock=clock).run()
            ),
            asyncio.create_task(kubelets(env)),
        ]
        yield env, cloud


@pytest.fixture
async def world() -> AsyncIterator[tuple[Env, FakeCloud]]:
    async with both_halves() as w:
        yield w


async def bound(env: Env, name: str) -> Obj:
    async def probe() -> Any:
        got = await env.get(f"/api/v1/namespaces/default/pods/{name}")
        return got if got and (got.get("spec") or {}).get("nodeName") else None

    found: Obj = await until(probe, within=8.0, interval=0.02)
    return found


async def test_a_pending_pod_gets_a_node_and_is_bound_to_it(world: tuple[Env, FakeCloud]) -> None:
    """core provisioning/provisioner.go Reconcile → a NodeClaim; lifecycle launch.go,
    registration.go, initialization.go → its Node registered and initialized; kube-scheduler binds
    the pod there (the scale-up path end to end)."""
    env, cloud = world
    await env.call(
        "POST", "/api/v1/namespaces/default/pods", pod("web", namespace=None, requests={"cpu": "500m"})
    )
    placed = await bound(env, "web")
    node = await env.get(f"/api/v1/nodes/{placed['spec']['nodeName']}")
    assert node is not None
    labels = node["metadata"]["labels"]
    assert labels["karpenter.sh/nodepool"] == "general" and labels["karpenter.sh/initialized"] == "true"
    assert (
        labels["karpenter.sh/capacity-type"] == "spot"
        and labels["node.kubernetes.io/instance-type"] == "small"
    )
    (claim,) = (await env.call("GET", f"/{NODECLAIMS}"))["items"]
    assert claim["status"]["nodeName"] == node["metadata"]["name"]
    assert cloud.create_calls == [claim["metadata"]["name"]]


async def test_insufficient_capacity_falls_back_to_on_demand_through_both_halves(
    world: tuple[Env, FakeCloud],
) -> None:
    """aws instance.go launchInstance (every spot pool insufficient: InsufficientCapacityError,
    the pools cached), core launch.go (the claim deleted with its event), provisioner.go (the pod
    planned again without those pools: on-demand, launching.md §2's fallback in the same loop)."""
    env, cloud = world
    for name in ("small", "medium"):
        cloud.capacity[("spot", name, "z1")] = 0
    await env.call(
        "POST", "/api/v1/namespaces/default/pods", pod("web", namespace=None, requests={"cpu": "500m"})
    )
    placed = await bound(env, "web")
    node = await env.get(f"/api/v1/nodes/{placed['spec']['nodeName']}")
    assert node is not None
    assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "on-demand"
    assert {(m.key[0], m.key[1]) for m in env.unavailable} == {("spot", "small"), ("spot", "medium")}
    # One claim per planned type band (docs/designs/provisioning.md): each spot band the cache
    # did not know yet failed and was deleted with its event, before the on-demand one launched.
    events = await env.call("GET", "/api/v1/namespaces/default/events")
    ice = [e for e in events["items"] if e["reason"] == "InsufficientCapacityError"]
    assert ice and {e["involvedObject"]["kind"] for e in ice} == {"NodeClaim"}
    assert len(cloud.create_calls) == len(ice) + 1 and len(cloud.launched) == 1


async def test_time_to_on_demand_is_one_replan_per_spot_price_band(world: tuple[Env, FakeCloud]) -> None:
    """The cost of the flexibility band on a spot insufficient-capacity storm (launching.md §2b,
    "Spot fallback per band"). Karpenter's NodeClaim offers up to 60 types (core
    nodeclaimtemplate.go ToNodeClaim, aws instance.go launchInstance: one CreateFleet over every
    spot pool, all marked at once by the ICE errors, then on-demand); kubespot's offers the
    claim's price band (docs/designs/provisioning.md), so each spot band costs one launch and one
    re-plan before on-demand. Measured here with two bands (small, then medium at twice the price):
    two failed launches, each re-planned at once (no batch wait), the pod on an on-demand node well
    within the fast-fallback budget. The first refusal's replacement is widened (§2b "Widened
    relaunch") but the only spot pool left to it, medium's, is empty too: a second refusal still."""
    env, cloud = world
    for name in ("small", "medium"):
        cloud.capacity[("spot", name, "z1")] = 0
    started = asyncio.get_running_loop().time()
    await env.call(
        "POST", "/api/v1/namespaces/default/pods", pod("web", namespace=None, requests={"cpu": "500m"})
    )
    placed = await bound(env, "web")
    took = asyncio.get_running_loop().time() - started
    node = await env.get(f"/api/v1/nodes/{placed['spec']['nodeName']}")
    assert node is not None and node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "on-demand"
    events = await env.call("GET", "/api/v1/namespaces/default/events")
    ice = [e for e in events["items"] if e["reason"] == "InsufficientCapacityError"]
    # One failed launch per spot band, in price order, then the on-demand launch.
    assert len(ice) == 2 and len(cloud.create_calls) == 3
    assert took < 4.0, f"on-demand after {took:.2f} s"


def _types_of(claim: Obj) -> list[str]:
    for r in claim["spec"]["requirements"]:
        if r["key"] == "node.kubernetes.io/instance-type":
            return list(r["values"])
    raise AssertionError("no instance-type requirement")


async def test_a_relaunch_after_insufficient_capacity_carries_every_type_that_fits() -> None:
    """launching.md §2b "Widened relaunch", as Karpenter's NodeClaims always are (core
    scheduling/nodeclaimtemplate.go ToNodeClaim: every compatible type, cheapest first, up to 60;
    aws instance.go filterInstanceTypes / getOverrides: one CreateFleet over all their pools).
    Three spot bands, the two cheapest empty: the first claim carries its band only (an ordinary
    launch) and is refused; its replacement lists every type that fits and lands in the third
    band in one launch, where band by band it would take a second refusal and a third claim."""
    types = [
        fake_type("a", 2, 8, od=0.10, spot=0.03, zones=("z1",)),
        fake_type("b", 4, 16, od=0.20, spot=0.05, zones=("z1",)),
        fake_type("c", 4, 16, od=0.30, spot=0.07, zones=("z1",)),
        fake_type("tiny", 1, 1, od=0.01, spot=0.005, zones=("z1",)),  # too small: never listed
    ]
    async with both_halves(types) as (env, cloud):
        seen = record_claims(env)
        cloud.capacity[("spot", "a", "z1")] = 0
        cloud.capacity[("spot", "b", "z1")] = 0
        await env.call(
            "POST",
            "/api/v1/namespaces/default/pods",
            pod("web", namespace=None, requests={"cpu": "1500m", "memory": "2Gi"}),
        )
        placed = await bound(env, "web")
        node = await env.get(f"/api/v1/nodes/{placed['spec']['nodeName']}")
        assert node is not None
        labels = node["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "c"
        assert labels["karpenter.sh/capacity-type"] == "spot"
        first, second = cloud.create_calls[0], cloud.create_calls[1]
        assert len(cloud.create_calls) == 2 and len(cloud.launched) == 1
        by_name = {c["metadata"]["name"]: c for c in seen}
        assert _types_of(by_name[first]) == ["a"]  # the band: an ordinary first launch
        # Every type that holds the pod ("a" too: its on-demand pool is available), not "tiny".
        assert sorted(_types_of(by_name[second])) == ["a", "b", "c"]
        events = await env.call("GET", "/api/v1/namespaces/default/events")
        assert len([e for e in events["items"] if e["reason"] == "InsufficientCapacityError"]) == 1


async def test_a_widened_relaunch_stays_within_the_nodepool_limits() -> None:
    """Review 15a #1. Core scheduling/scheduler.go filterByRemainingResources drops every type
    whose capacity exceeds what the NodePool's limits leave before nodeclaimtemplate.go ToNodeClaim
    lists the types, so a Karpenter NodeClaim never carries one. A pool limited to 4 CPUs whose
    small spot pool is refused: the replacement lists the types within the limits (here the small
    type again, for its on-demand pool), never the 16-CPU type EC2 would otherwise pick."""
    types = [
        fake_type("small", 2, 8, od=0.10, spot=0.03, zones=("z1",)),
        fake_type("big", 16, 64, od=0.80, spot=0.20, zones=("z1",)),
    ]
    async with both_halves(types, limits={"cpu": "4"}) as (env, cloud):
        seen = record_claims(env)
        cloud.capacity[("spot", "small", "z1")] = 0
        await env.call(
            "POST", "/api/v1/namespaces/default/pods", pod("web", namespace=None, requests={"cpu": "1"})
        )
        placed = await bound(env, "web")
        node = await env.get(f"/api/v1/nodes/{placed['spec']['nodeName']}")
        assert node is not None
        assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "small"
        assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "on-demand"
        assert len(cloud.create_calls) == 2
        by_name = {c["metadata"]["name"]: c for c in seen}
        assert _types_of(by_name[cloud.create_calls[1]]) == ["small"]
        assert "big" not in {i.instance_type for i in cloud.launched.values()}
