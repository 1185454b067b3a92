"""The provisioning end-to-end harness (``tests/e2e/provisioning``): a ``ProvisionWorld`` (kubesim,
awssim's spot market, the node joiner, a real ``kubespot controller`` process) on a compressed clock,
and what a test reads from it through the wire: pods, NodeClaims, Nodes, events, the fleet call log
and the controller's JSON log.

Owns starting and stopping that world (``running``) and the tests' vocabulary. Tests share a world
(``tests/e2e/provisioning/conftest.py`` says how they keep out of each other's way), so each brings
its own NodePools (``pool``: labelled with the test's name), its own namespace and pods selecting
that label (``workload``). Every wait (``E2E.until``) fails with the controller's log tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families

from kubespot.sandbox import provision_world as pw
from kubespot.sandbox.timing import Timing
from kubespot.sim.awssim import MotoServer
from support.kubespot_process import free_port

Obj = dict[str, Any]
T = TypeVar("T")

#: The story's clock runs 25 times faster: the node's 35 s boot takes 1.4 s, its 5 s to Ready 0.2 s.
SCALE = 25.0
#: Settings every provisioning end-to-end controller runs with: short batch windows (real seconds,
#: the provisioner's own pace: Karpenter's 1 s idle / 10 s max would be most of a test) and a short
#: queue long poll (the process stops within a second of SIGTERM instead of the 5 s kill).
FAST_ENV = {
    "KUBESPOT_LAUNCH_BATCH_IDLE_DURATION": "0.2",
    "KUBESPOT_LAUNCH_BATCH_MAX_DURATION": "2",
    "KUBESPOT_QUEUE_WAIT_TIME": "1",
}
#: The registration timeout of the shared world (Karpenter's 15 minutes would be 36 s at ``SCALE``):
#: a node registers 1.4 s after its launch, and the launch call takes up to ~2 s on a loaded
#: machine, so 8 s leaves the other tests' nodes a wide margin and keeps the timeout's test short.
REGISTRATION_TIMEOUT = 8.0
#: The settings of the package's shared world (``tests/e2e/provisioning/conftest.py``).
SHARED_ENV = {
    "KUBESPOT_LAUNCH_REGISTRATION_TIMEOUT": str(REGISTRATION_TIMEOUT),
    # The garbage collector's 10 s between passes and 30 s of grace, on the story's clock (its test
    # waits for both; the grace still spares every launch whose claim status is being written).
    "KUBESPOT_LAUNCH_GARBAGE_COLLECTION_INTERVAL": str(10.0 / SCALE),
    "KUBESPOT_LAUNCH_GARBAGE_COLLECTION_MIN_AGE": str(30.0 / SCALE),
}
#: The instance types whose spot pools the fallback test empties; every other test keeps to
#: ``SHARED_TYPES``, so the market and the unavailable-offerings cache look the same to them.
FALLBACK_TYPES = ("r5.xlarge", "r5.2xlarge")
SHARED_TYPES = tuple(t for t in pw.INSTANCE_TYPES if t not in FALLBACK_TYPES)
#: The mark of a test that restarts the controller with other settings (``E2E.restarted``): the
#: package's conftest runs those tests after the others.
RESTARTS = "restarts_controller"
#: The NodePool template label a test's pools carry and its pods select (value: the test's name).
TEST_LABEL = "e2e.kubespot.io/test"
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
NODECLASSES = "/apis/karpenter.k8s.aws/v1/ec2nodeclasses"
UNREGISTERED_TAINT = "karpenter.sh/unregistered"
#: Real seconds the first catalog read may take (DescribeInstanceTypes over moto's ~1400 types, on
#: a loaded 2-core machine); later worlds of the session read it from awssim's cache.
CATALOG_TIMEOUT = 60.0


@dataclass
class E2E:
    """One module's world and the test vocabulary over it."""

    world: pw.ProvisionWorld
    aws: MotoServer
    metrics_port: int = 0
    #: (namespace, name) of every Deployment a test made, for ``finish``.
    deployed: list[tuple[str, str]] = field(default_factory=list)
    #: The controller's settings beyond the world's (``FAST_ENV``, the metrics server, the shared
    #: settings), for a restart.
    env: Mapping[str, str] = field(default_factory=dict)
    #: The settings of the controller running now (``restarted`` may have changed them).
    running_env: Mapping[str, str] = field(default_factory=dict)

    # -- failure messages ---------------------------------------------------------------------------

    def log_records(self) -> list[Obj]:
        """The controller's JSON log records, oldest first (non-JSON lines left out)."""
        records: list[Obj] = []
        with contextlib.suppress(OSError):
            for line in (self.world.workdir / "controller.log").read_text(errors="replace").splitlines():
                if line.startswith("{"):
                    with contextlib.suppress(ValueError):
                        records.append(json.loads(line))
        return records

    def log_messages(self) -> list[str]:
        return [str(r.get("message", "")) for r in self.log_records()]

    def log_tail(self, lines: int = 25) -> str:
        """The controller's last messages (time, level, message), for a failure to show."""
        tail = self.log_records()[-lines:]
        return "\n".join(f"{r.get('time')} {r.get('level')} {r.get('message')}" for r in tail)

    async def until(self, probe: Callable[[], Awaitable[T]], what: str, *, within: float = 10.0) -> T:
        """Poll ``probe`` until it is truthy; else fail naming ``what``, its last value and the log."""
        deadline = time.monotonic() + within
        while True:
            result = await probe()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{what}: not within {within}s (last: {result!r})\n"
                    f"controller log tail:\n{self.log_tail()}"
                )
            await asyncio.sleep(0.1)

    async def metric(self, name: str, **labels: str) -> float:
        """The sum of the controller's ``/metrics`` samples called ``name`` (a counter's
        ``_total``, a histogram's ``_count``) whose labels include ``labels``."""

        def scrape() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
                return str(r.read().decode())

        text = await asyncio.to_thread(scrape)
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name and labels.items() <= sample.labels.items()
        )

    # -- the controller process ----------------------------------------------------------------------

    async def kill_controller(self) -> Path:
        """SIGKILL the controller (no shutdown hook runs, as in a node crash or an OOM kill); its
        log is moved aside, and its new path returned, so a restart starts a log of its own."""
        proc = self.world.controller
        assert proc is not None and proc.proc is not None, "no controller running"
        proc.proc.kill()
        await proc.proc.wait()
        proc.proc = None
        log = self.world.workdir / "controller.log"
        kept = log.with_name(f"controller-killed-{proc.starts}-{int(time.time() * 1000)}.log")
        log.rename(kept)
        return kept

    async def restart_controller(self, *, catalog: bool = False) -> None:
        """A new controller process with ``env`` (returns once its pools are Ready, and with
        ``catalog`` once it has read its instance type catalog)."""
        self.running_env = {}
        await self.world.start_controller(self.env)
        self.running_env = dict(self.env)
        if catalog:
            await self.catalog_read()

    async def catalog_read(self) -> None:
        """Until the controller has read its instance type catalog (its first launch needs it)."""

        async def read() -> bool:
            return any(m.startswith("catalog refreshed") for m in self.log_messages())

        await self.until(read, "the controller's first catalog read", within=CATALOG_TIMEOUT)

    async def restarted(self, changes: Mapping[str, str]) -> None:
        """The controller stopped and started again with ``changes`` over ``env`` (a test's twin
        run, e.g. under dry run), once it has read its catalog. It keeps them until
        ``as_package`` (the package's fixture, before each test) starts it with ``env`` again;
        tests marked ``RESTARTS`` run last in the package, so it pays for one restart, not two."""
        await self._stop_controller()
        self.running_env = {}
        await self.world.start_controller({**self.env, **changes})
        self.running_env = {**self.env, **changes}
        await self.catalog_read()

    async def as_package(self) -> None:
        """The controller with ``env`` (restarted only if it runs with other settings)."""
        if self.running_env != self.env:
            await self._stop_controller()
            await self.restart_controller(catalog=True)

    async def _stop_controller(self) -> None:
        proc = self.world.controller
        if proc is not None and proc.running:
            await proc.stop()

    # -- building a test's objects ------------------------------------------------------------------

    async def add_pools(self, *pools: Obj) -> None:
        """Create NodePools and wait until the controller has made them Ready (only Ready pools
        are planned for)."""
        for p in pools:
            await self.world.create(NODEPOOLS, p)
        names = {p["metadata"]["name"] for p in pools}

        async def all_ready() -> bool:
            items = (await self.world.get(NODEPOOLS))["items"]
            return sum(1 for p in items if p["metadata"]["name"] in names and pw.ready(p)) == len(names)

        await self.until(all_ready, f"NodePools {sorted(names)} Ready")

    async def namespace(self, name: str) -> None:
        await self.world.create("/api/v1/namespaces", {"metadata": {"name": name}})

    async def deploy(self, ns: str, body: Obj) -> Obj:
        created = await self.world.create(f"/apis/apps/v1/namespaces/{ns}/deployments", body)
        self.deployed.append((ns, body["metadata"]["name"]))
        return created

    async def finish(self) -> None:
        """Scale every Deployment made so far to zero: what a test leaves pending must not keep
        the shared world's provisioner launching."""
        while self.deployed:
            ns, name = self.deployed.pop()
            with contextlib.suppress(pw.WorldError):
                await self.scale(ns, name, 0)

    async def scale(self, ns: str, name: str, replicas: int) -> None:
        path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"
        await self.world.patch(path, {"spec": {"replicas": replicas}})

    # -- reading the world --------------------------------------------------------------------------

    async def pods(self, ns: str) -> list[Obj]:
        items = (await self.world.get(f"/api/v1/namespaces/{ns}/pods"))["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    async def bound(self, ns: str, count: int) -> list[Obj] | None:
        """The namespace's pods when exactly ``count`` exist and all are bound, else None."""
        pods = await self.pods(ns)
        if len(pods) == count and all(p["spec"].get("nodeName") for p in pods):
            return pods
        return None

    async def claims(self, test: str | None = None) -> list[Obj]:
        """NodeClaims (of the pools labelled for ``test`` when given)."""
        items: list[Obj] = (await self.world.get(NODECLAIMS))["items"]
        if test is None:
            return items
        return [c for c in items if (c["metadata"].get("labels") or {}).get(TEST_LABEL) == test]

    async def nodes(self, test: str | None = None) -> list[Obj]:
        items: list[Obj] = (await self.world.get("/api/v1/nodes"))["items"]
        if test is None:
            return items
        return [n for n in items if (n["metadata"].get("labels") or {}).get(TEST_LABEL) == test]

    async def nodepool(self, name: str) -> Obj:
        return await self.world.get(f"{NODEPOOLS}/{name}")

    async def events(self, ns: str, reason: str | None = None) -> list[Obj]:
        items: list[Obj] = (await self.world.get(f"/api/v1/namespaces/{ns}/events"))["items"]
        return [e for e in items if reason is None or e.get("reason") == reason]

    def fleet_calls(self, since: float = 0.0) -> list[Obj]:
        """CreateFleet ``instant`` calls answered since ``since`` (epoch seconds), oldest first."""
        return [c for c in self.aws.fleet_call_log() if c["Start"] >= since]

    def instances(self, *pools: str) -> list[Obj]:
        """The EC2 instances (any state) launched for the NodeClaims of ``pools`` (tagged
        ``karpenter.sh/nodepool`` at launch)."""
        ec2 = self.aws.client("ec2")
        found = ec2.describe_instances(Filters=[{"Name": "tag:karpenter.sh/nodepool", "Values": list(pools)}])
        return [i for r in found["Reservations"] for i in r["Instances"]]


def pool(test: str, name: str, capacity_types: list[str], **kw: Any) -> Obj:
    """A NodePool for ``test``: labelled ``TEST_LABEL=<test>`` (its pods select that),
    ``SHARED_TYPES`` unless told, the world's zones; ``kw`` as ``provision_world.nodepool``'s."""
    labels = {TEST_LABEL: test, **kw.pop("labels", {})}
    kw.setdefault("instance_types", SHARED_TYPES)
    return pw.nodepool(name, capacity_types, labels=labels, **kw)


def workload(
    name: str, test: str, replicas: int, *, cpu: str = "500m", memory: str = "256Mi", **spec: Any
) -> Obj:
    """A Deployment whose pods select ``test``'s pools; ``spec`` goes into the pod spec."""
    labels = {"app": name}
    pod_spec: Obj = {
        "nodeSelector": {TEST_LABEL: test},
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {"name": name, "image": f"{name}:1", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        ],
        **spec,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def condition(obj: Obj, type_: str) -> str | None:
    """The status of ``obj``'s condition ``type_`` (None: not set)."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return str(c.get("status"))
    return None


def taint_keys(node: Obj) -> set[str]:
    return {str(t.get("key")) for t in node["spec"].get("taints") or []}


def label(obj: Obj, key: str) -> str | None:
    value = (obj["metadata"].get("labels") or {}).get(key)
    return None if value is None else str(value)


@contextlib.asynccontextmanager
async def running(workdir: Path, aws: MotoServer, env: Mapping[str, str] | None = None) -> AsyncIterator[E2E]:
    """A world with no NodePools (tests add theirs) and the controller started with ``FAST_ENV`` and
    ``env``; returns once the controller has read its instance type catalog. Stopped (the
    controller process too) whatever happens."""
    aws.reset()
    world = pw.ProvisionWorld(workdir, Timing(SCALE), aws, nodepools=())
    e2e = E2E(world, aws, metrics_port=free_port())
    metrics = {
        "KUBESPOT_OBSERVABILITY_ENABLE_PROMETHEUS_SERVER": "true",
        "KUBESPOT_OBSERVABILITY_PROMETHEUS_SERVER_PORT": str(e2e.metrics_port),
    }
    e2e.env = {**FAST_ENV, **metrics, **(env or {})}
    try:
        await world.start()
        await world.start_controller(e2e.env)
        e2e.running_env = dict(e2e.env)
        await e2e.catalog_read()
        yield e2e
    finally:
        await world.stop()
