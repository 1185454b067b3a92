"""The NodeClaim controller's test world: kubesim serving the chart's CRDs (its kubelet posting
Node readiness and killing evicted pods, its scheduler off), a cloud (``FakeCloud`` unless given),
the lifecycle loop and the garbage collector on sub-second timings (recording into ``metrics`` when
given), and HTTP helpers.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from kubespot.cloud.fake import FakeCloud, fake_type
from kubespot.cloud.provider import CloudProvider
from kubespot.cloud.unavailable import UnavailableOfferings
from kubespot.config.drain import DrainSettings
from kubespot.config.kube import KubeSettings
from kubespot.config.launch import LaunchSettings
from kubespot.controllers.nodeclaim.garbage_collection import GarbageCollector
from kubespot.controllers.nodeclaim.loop import NodeClaimLoop
from kubespot.controllers.nodeclaim.objects import NODECLAIMS, NODES
from kubespot.controllers.nodeclaim.termination import Terminator
from kubespot.kube import EventRecorder, KubeClient, connect
from kubespot.kube.custom import CustomObjects
from kubespot.kube.informer import Informers
from kubespot.model import SystemClock
from kubespot.observability.metrics import Metrics
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import node as node_body

Obj = dict[str, Any]

ROOT = Path(__file__).resolve().parents[4]
CRDS = ROOT / "deploy" / "helm" / "kubespot" / "crds"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MERGE = {"Content-Type": "application/merge-patch+json"}
Obj = dict[str, Any]

FAST = ControllerConfig(
    pod_start_seconds=0.05,
    lease_renew_seconds=0.1,
    node_status_seconds=0.2,
    node_ready_seconds=0.05,
    node_monitor_grace_seconds=5.0,
    pod_gc_check_seconds=0.1,
    pod_gc_quarantine_seconds=0.4,
    scheduler=False,
    workloads=False,
)


@dataclass
class Env:
    sim: KubeSim
    http: aiohttp.ClientSession
    kube: KubeClient
    cloud: Any
    unavailable: UnavailableOfferings
    settings: LaunchSettings
    loop: NodeClaimLoop
    gc: GarbageCollector
    tasks: list[asyncio.Task[None]]

    async def call(self, method: str, path: str, body: Any = None, *, expect: int | None = None) -> Obj:
        headers = MERGE if method == "PATCH" else None
        async with self.http.request(method, path, json=body, headers=headers) as r:
            data: Obj = await r.json()
            assert (r.status == expect) if expect is not None else r.status < 300, (
                method,
                path,
                r.status,
                data,
            )
            return data

    async def create(self, path: str, body: Obj) -> Obj:
        """POST ``body`` to ``path`` (no leading slash), as support.provisioning_env's helpers ask."""
        return await self.call("POST", f"/{path}", body, expect=201)

    async def get(self, path: str) -> Obj | None:
        async with self.http.get(path) as r:
            return dict(await r.json()) if r.status == 200 else None

    async def until(self, path: str, check: Callable[[Obj | None], bool], within: float = 5.0) -> Obj | None:
        deadline = time.monotonic() + within
        while True:
            obj = await self.get(path)
            if check(obj):
                return obj
            if time.monotonic() > deadline:
                raise AssertionError(f"{path}: {obj}")
            await asyncio.sleep(0.02)

    async def create_claim(self, name: str = "general-abc", **spec: Any) -> Obj:
        return await self.call("POST", f"/{NODECLAIMS}", nodeclaim(name, **spec))

    async def create_node(self, name: str, provider_id: str, *, taints: list[Obj] | None = None) -> Obj:
        body = node_body(name, taints=taints if taints is not None else [UNREGISTERED])
        body["spec"]["providerID"] = provider_id
        return await self.call("POST", "/api/v1/nodes", body)

    def start_loop(self) -> None:
        self.loop = make_loop(self.kube, self.cloud, self.settings, informers=self.loop.informers)
        self.tasks.append(asyncio.create_task(self.loop.run()))

    async def stop_loop(self) -> None:
        """The lease lost: the loop stops and the informers drop their caches (``Informers.run``
        stops them with the leader's other duties); a new loop lists again through them."""
        task = self.tasks.pop(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await stop_informers(self.loop.informers)


async def stop_informers(informers: Informers) -> None:
    await asyncio.gather(*(i.stop() for i in informers))


UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}


def nodeclaim(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "general", "team": "a"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}
            ],
            "resources": {"requests": {"cpu": "1"}},
            **spec,
        },
    }


def conditions(obj: Obj | None) -> dict[str, Obj]:
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def is_(type_: str, status: str) -> Callable[[Obj | None], bool]:
    return lambda obj: conditions(obj).get(type_, {}).get("status") == status


def gone(obj: Obj | None) -> bool:
    return obj is None


def make_loop(
    kube: KubeClient,
    cloud: CloudProvider,
    settings: LaunchSettings,
    *,
    drain: DrainSettings | None = None,
    informers: Informers | None = None,
    **kwargs: Any,
) -> NodeClaimLoop:
    """The loop as the operator wires it, reading the process's informers (``informers``, or its own)."""
    claims, nodes = CustomObjects(kube, NODECLAIMS), CustomObjects(kube, NODES)
    clock = SystemClock()
    recorder = EventRecorder(kube=kube, component="kubespot")
    terminator = Terminator(
        kube=kube,
        claims=claims,
        nodes=nodes,
        cloud=cloud,
        drain=drain or DrainSettings(retry_backoff_base=0.05, retry_backoff_cap=0.2),
        clock=clock,
        recorder=recorder,
        events=recorder,
        recheck=0.1,
        volume_recheck=0.1,
    )
    return NodeClaimLoop(
        claims=claims,
        nodes=nodes,
        informers=informers if informers is not None else Informers(kube),
        cloud=cloud,
        terminator=terminator,
        settings=settings,
        clock=clock,
        recorder=recorder,
        retry_base=0.3,
        retry_cap=0.3,
        idle_wake=0.5,
        rng=lambda: 1.0,
        **kwargs,
    )


@contextlib.asynccontextmanager
async def running(
    settings: LaunchSettings | None = None,
    *,
    gc_min_age: float = 30.0,
    cloud: CloudProvider | None = None,
    unavailable: UnavailableOfferings | None = None,
    drain: DrainSettings | None = None,
    metrics: Metrics | None = None,
    **controllers: Any,
) -> AsyncIterator[Env]:
    """The world for a test; ``drain`` the Terminator's drain settings; ``controllers`` change
    kubesim's (``scheduler=True``...)."""
    settings = settings or LaunchSettings()
    async with (
        KubeSim(controllers=dataclasses.replace(FAST, **controllers)) as sim,
        aiohttp.ClientSession(sim.url) as http,
    ):
        for path in sorted(CRDS.glob("*.yaml")):
            for crd in yaml.safe_load_all(path.read_text()):
                async with http.post(CRD_PATH, json=crd) as r:
                    assert r.status == 201, await r.text()
        kube = connect(KubeSettings(kubeconfig=str(sim.kubeconfig_path)))
        if unavailable is None:
            unavailable = UnavailableOfferings(SystemClock())
        if cloud is None:
            cloud = FakeCloud([fake_type("m5.large", 2, 8, od=0.096, spot=0.04)], unavailable=unavailable)
        loop = make_loop(kube, cloud, settings, drain=drain, metrics=metrics)
        gc = GarbageCollector(
            metrics=metrics,
            cloud=cloud,
            claims=CustomObjects(kube, NODECLAIMS),
            nodes=CustomObjects(kube, NODES),
            clock=SystemClock(),
            intervals=(0.1, 1000, 0.1),
            min_age=gc_min_age,
            informers=loop.informers,
        )
        tasks = [asyncio.create_task(loop.run()), asyncio.create_task(gc.run())]
        env = Env(sim, http, kube, cloud, unavailable, settings, loop, gc, tasks)
        try:
            yield env
        finally:
            for task in env.tasks:
                task.cancel()
            await asyncio.gather(*env.tasks, return_exceptions=True)
            await stop_informers(env.loop.informers)
            await kube.close()


CLAIM = f"/{NODECLAIMS}/general-abc"


def record_claims(env: Env) -> list[Obj]:
    """Every version of every NodeClaim kubesim stores from now on (polling could miss one)."""
    seen: list[Obj] = []

    def record(ev: Any) -> None:
        if ev.obj.get("kind") == "NodeClaim":
            seen.append(ev.obj)

    env.sim.store.add_listener(record)
    return seen


async def ready_claim(env: Env) -> tuple[Obj, str]:
    """A claim launched, registered and initialized; its Node's name."""
    await env.create_claim()
    claim = await env.until(CLAIM, is_("Launched", "True"))
    assert claim is not None
    pid = claim["status"]["providerID"]
    await env.create_node("ip-10-0-0-1", pid)
    claim = await env.until(CLAIM, is_("Ready", "True"))
    assert claim is not None
    return claim, "ip-10-0-0-1"
