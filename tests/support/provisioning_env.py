"""The provisioner over HTTP for integration tests: kubesim (its scheduler marking pods
Unschedulable, the chart's CRDs) and ``FakeCloud`` with finite pools, the provisioner's loops
running (the pending-pod watch, the NodeClaim watch, and optionally the ``DoomWatch`` of pre-spin);
the lifecycle controller's part (launch, delete on insufficient capacity) is played by the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from kubespot.cloud import FakeCloud, UnavailableOfferings, fake_type
from kubespot.config.kube import KubeSettings
from kubespot.controllers.provisioning.batcher import Batcher
from kubespot.controllers.provisioning.doomed import DoomWatch
from kubespot.controllers.provisioning.nominations import Nominations
from kubespot.controllers.provisioning.pending import PODS, PendingWatch
from kubespot.controllers.provisioning.provisioner import NODECLAIMS, Provisioner
from kubespot.kube import KubeClient, connect
from kubespot.kube.events import EventRecorder
from kubespot.model import SystemClock
from kubespot.observability.metrics import Metrics
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "deploy" / "helm" / "kubespot" / "crds"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NODEPOOLS = "apis/karpenter.sh/v1/nodepools"
NODECLASSES = "apis/karpenter.k8s.aws/v1/ec2nodeclasses"
Obj = dict[str, Any]

SMALL = {"cpu": "500m", "memory": "1Gi"}
TYPES = [
    fake_type("small", 2, 8, od=0.10, spot=0.03, zones=("z1",)),
    fake_type("medium", 4, 16, od=0.20, spot=0.06, zones=("z1",)),
]


@dataclass
class Env:
    sim: KubeSim
    http: aiohttp.ClientSession
    cloud: FakeCloud
    unavailable: UnavailableOfferings
    provisioner: Provisioner
    kube: KubeClient
    #: The provisioner's loops, by name (``run``, ``watch_claims``, ``pending``, ``doom``): a test
    #: cancels and restarts one to play a lost and won-back lease.
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    async def create(self, path: str, body: Obj) -> Obj:
        async with self.http.post(f"/{path}", json=body) as r:
            assert r.status == 201, await r.text()
            return dict(await r.json())

    async def claims(self) -> list[Obj]:
        async with self.http.get(f"/{NODECLAIMS}") as r:
            return list((await r.json())["items"])

    async def wait_claims(self, n: int, within: float = 3.0) -> list[Obj]:
        deadline = time.monotonic() + within
        while True:
            found = [c for c in await self.claims() if not c["metadata"].get("deletionTimestamp")]
            if len(found) >= n:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(found)} NodeClaims after {within} s, wanted {n}")
            await asyncio.sleep(0.01)

    async def delete_claim(self, name: str) -> None:
        async with self.http.delete(f"/{NODECLAIMS}/{name}") as r:
            assert r.status in (200, 202), await r.text()

    async def events(self, reason: str) -> list[Obj]:
        async with self.http.get("/api/v1/events") as r:
            return [e for e in (await r.json())["items"] if e.get("reason") == reason]


def nodeclass() -> Obj:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "subnetSelectorTerms": [{"tags": {"k": "v"}}],
            "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "role": "KarpenterNodeRole",
        },
    }


def nodepool(
    name: str = "general", limits: Obj | None = None, annotations: dict[str, str] | None = None
) -> Obj:
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    spec: Obj = {
        "template": {
            "spec": {
                "nodeClassRef": ref,
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}
                ],
            }
        }
    }
    if limits:
        spec["limits"] = limits
    meta: Obj = {"name": name}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": meta, "spec": spec}


READY = [
    {
        "type": "Ready",
        "status": "True",
        "reason": "Ready",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
]


async def ready_pool(env: Env, body: Obj) -> Obj:
    """A NodePool as the status loop leaves it once its class is resolved: Ready."""
    stored = await env.create(NODEPOOLS, body)
    stored["status"] = {"conditions": READY}
    async with env.http.put(f"/{NODEPOOLS}/{body['metadata']['name']}/status", json=stored) as r:
        assert r.status == 200, await r.text()
    return stored


@contextlib.asynccontextmanager
async def running(
    *,
    limits: Obj | None = None,
    annotations: dict[str, str] | None = None,
    idle: float = 0.05,
    max_duration: float = 0.5,
    prespin: bool = True,
    doom: bool = False,
    controllers: ControllerConfig | None = None,
    metrics: Metrics | None = None,
    dry_run: bool = False,
) -> AsyncIterator[Env]:
    """kubesim with the CRDs, a class and a Ready pool, the provisioner's loops running; ``doom``
    adds the pre-spin ``DoomWatch`` (fenced or deleted nodes start a pass at once); ``controllers``:
    kubesim's control plane (default: the scheduler only, no kubelets nor workload controllers);
    ``dry_run``: the provisioner under ``node_actions.dry_run``."""
    controllers = controllers or ControllerConfig(kubelet=False, workloads=False)
    async with KubeSim(controllers=controllers) as sim, aiohttp.ClientSession(sim.url) as http:
        for path in sorted(CRDS.glob("*.yaml")):
            for crd in yaml.safe_load_all(path.read_text()):
                async with http.post(CRD_PATH, json=crd) as r:
                    assert r.status == 201, await r.text()
        clock = SystemClock()
        unavailable = UnavailableOfferings(clock)
        cloud = FakeCloud(TYPES, unavailable=unavailable)
        kube = connect(KubeSettings(kubeconfig=str(sim.kubeconfig_path)))
        batcher = Batcher(idle=idle, max_duration=max_duration)
        provisioner = Provisioner(
            kube=kube,
            cloud=cloud,
            batcher=batcher,
            nominations=Nominations(EventRecorder(kube=kube)),
            clock=clock,
            unavailable=unavailable,
            retry_after=0.3,
            prespin=prespin,
            metrics=metrics,
            dry_run=dry_run,
        )
        env = Env(sim, http, cloud, unavailable, provisioner, kube)
        await env.create(NODECLASSES, nodeclass())
        await ready_pool(env, nodepool(limits=limits, annotations=annotations))
        env.tasks = {
            "run": asyncio.create_task(provisioner.run()),
            "watch_claims": asyncio.create_task(provisioner.watch_claims()),
            # Fed by the informer the passes read, as the operator wires it (controller.build).
            "pending": asyncio.create_task(
                PendingWatch(provisioner.informers.get(PODS), batcher.trigger, clock=clock).run()
            ),
        }
        if doom:
            watch = DoomWatch(
                provisioner.informers.get("api/v1/nodes"),
                provisioner.informers.get(NODECLAIMS),
                lambda node: batcher.trigger_now(f"node/{node}"),
                clock=clock,
                fence=prespin,
            )
            env.tasks["doom"] = asyncio.create_task(watch.run())
        try:
            yield env
        finally:
            for task in env.tasks.values():
                task.cancel()
            await asyncio.gather(*env.tasks.values(), return_exceptions=True)
            await asyncio.gather(*(i.stop() for i in provisioner.informers))
            await kube.close()


def requirement(claim: Obj, key: str) -> list[str]:
    """The values of ``claim``'s requirement on ``key`` (empty without one)."""
    found = [r for r in claim["spec"]["requirements"] if r["key"] == key]
    return list(found[0].get("values") or []) if found else []
