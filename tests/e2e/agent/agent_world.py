"""End-to-end harness: kubesim and imdssim on loopback, and the real ``kubespot agent`` process.

``agent_world(...)`` loads a spot node (``spot-1``, instance ``i-0e2e00000000000001``) full of
workloads, plus spare on-demand nodes that stay cordoned until every workload pod runs on spot-1
(then they open, so evicted pods have somewhere to go). It hands over a ``World``: the simulators,
a real ``KubeClient`` for assertions over HTTP, and ``start_agent(**env)`` which runs
``python -m kubespot agent`` as a separate process with the given extra environment (NTH or
kubespot names). Everything the tests assert is observable state: the Node, Pods, Events, the
webhook receiver, the metrics endpoint — as in the reference handler's e2e suite.
"""

from __future__ import annotations

import asyncio
import copy
import signal
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from kubespot.config.kube import KubeSettings
from kubespot.kube import KubeClient, connect
from kubespot.sim.imdssim import ImdsSim, SimInstance
from kubespot.sim.kubesim import conventions
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import deployment, is_ready, node, pdb, pod, until
from support.kubespot_process import QUICK_ENV, STARTUP_WITHIN, clean_environ, spawn_kubespot

Obj = dict[str, Any]
NODE = "spot-1"
INSTANCE = "i-0e2e00000000000001"
STATE_ANNOTATION = "kubespot.io/interruption"
FAST = ControllerConfig(pod_start_seconds=0.1, lease_renew_seconds=5.0, node_status_seconds=30.0)

#: Every agent in these tests: quick polls and retries, events on, JSON logs (parsed by tests).
BASE_ENV = {
    "KUBESPOT_IMDS_POLL_INTERVAL": "0.2",
    "KUBESPOT_IMDS_RETRY_BACKOFF_BASE": "0.05",
    "KUBESPOT_IMDS_RETRY_BACKOFF_CAP": "0.2",
    **QUICK_ENV,
    "KUBESPOT_POD_NAME": "kubespot-agent-spot-1",
    "KUBESPOT_POD_NAMESPACE": "kube-system",
}


def web(name: str, replicas: int = 3, *, shutdown: float = 0.2, grace: int | None = None) -> Obj:
    """A deployment in ``default`` whose pods exit ``shutdown`` seconds after SIGTERM."""
    obj = deployment(name, replicas=replicas, namespace="default", grace=grace)
    notes = obj["spec"]["template"]["metadata"].setdefault("annotations", {})
    notes[conventions.SHUTDOWN_SECONDS] = str(shutdown)
    return obj


def budget(app: str, *, max_unavailable: int | None = None, min_available: int | None = None) -> Obj:
    """A PodDisruptionBudget over the pods labelled ``app``."""
    return pdb(
        f"{app}-pdb",
        namespace="default",
        selector={"matchLabels": {"app": app}},
        max_unavailable=max_unavailable,
        min_available=min_available,
    )


def bare_pod(name: str, *, node_name: str = NODE) -> Obj:
    return pod(name, namespace="default", node=node_name)


@dataclass
class AgentProcess:
    """One ``kubespot agent`` process; its stderr (the log) goes to ``log_path``."""

    proc: asyncio.subprocess.Process
    log_path: Path

    def lines(self) -> list[dict[str, Any]]:
        """The log lines so far that are JSON objects (all of them, with JSON logging on)."""
        out = []
        for raw in self.log_path.read_bytes().splitlines():
            try:
                doc = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(doc, dict):
                out.append(doc)
        return out

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    @property
    def running(self) -> bool:
        return self.proc.returncode is None

    async def stop(self, sig: int = signal.SIGTERM, *, within: float = 10.0) -> int:
        if self.proc.returncode is None:
            self.proc.send_signal(sig)
            try:
                await asyncio.wait_for(self.proc.wait(), within)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        assert self.proc.returncode is not None
        return self.proc.returncode

    async def kill(self) -> None:
        """SIGKILL: a crash, with no chance to clean up (what a restart must recover from)."""
        await self.stop(signal.SIGKILL)


@dataclass
class World:
    kubesim: KubeSim
    imds: ImdsSim
    kube: KubeClient
    tmp: Path
    agents: list[AgentProcess] = field(default_factory=list)

    # --- the agent -----------------------------------------------------------------------------

    def agent_env(self, **extra: str) -> dict[str, str]:
        env = clean_environ("KUBESPOT_", "KUBECONFIG")
        env.update(BASE_ENV)
        env["KUBESPOT_NODE_NAME"] = NODE
        env["KUBESPOT_KUBECONFIG"] = str(self.kubesim.kubeconfig_path)
        env["KUBESPOT_IMDS_URL"] = self.imds.instance_url(INSTANCE)
        env.update(extra)
        return env

    async def start_agent(self, *, wait_ready: bool = True, **extra: str) -> AgentProcess:
        """Start an agent with ``extra`` env on top of the base; wait until it polls IMDS."""
        log_path = self.tmp / f"agent-{len(self.agents)}.log"
        with log_path.open("wb") as log:
            proc = await spawn_kubespot(
                "agent", env=self.agent_env(**extra), stdout=log, stderr=asyncio.subprocess.STDOUT
            )
        agent = AgentProcess(proc, log_path)
        self.agents.append(agent)
        if wait_ready:

            async def up() -> bool:
                return not agent.running or "IMDS monitor watching" in agent.text()

            await until(up, within=STARTUP_WITHIN)
            assert agent.running, agent.text()
        return agent

    async def run_agent_to_exit(self, *args: str, within: float = 20.0, **extra: str) -> tuple[int, str]:
        """Run ``kubespot agent ARGS`` until it exits (for start-up errors): (exit code, output)."""
        proc = await spawn_kubespot(
            "agent",
            *args,
            env=self.agent_env(**extra),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), within)
        assert proc.returncode is not None
        return proc.returncode, out.decode(errors="replace")

    # --- what the cluster shows ------------------------------------------------------------------

    def _rt(self, group: str, version: str, plural: str) -> Any:
        return self.kubesim.store.registry.lookup(group, version, plural)

    def node(self, name: str = NODE) -> Obj:
        found = self.kubesim.store.find(self._rt("", "v1", "nodes"), None, name)
        assert found is not None, f"node {name} not found"
        return copy.deepcopy(found)

    def taint_keys(self, name: str = NODE) -> set[str]:
        return {t["key"] for t in (self.node(name).get("spec") or {}).get("taints") or ()}

    def cordoned(self, name: str = NODE) -> bool:
        return bool((self.node(name).get("spec") or {}).get("unschedulable"))

    def state(self, name: str = NODE) -> dict[str, Any] | None:
        raw = (self.node(name)["metadata"].get("annotations") or {}).get(STATE_ANNOTATION)
        return None if raw is None else dict(orjson.loads(raw))

    def pods(self, node_name: str | None = NODE) -> list[Obj]:
        return [
            copy.deepcopy(p)
            for p in self.kubesim.store.list(self._rt("", "v1", "pods"))
            if node_name is None or (p.get("spec") or {}).get("nodeName") == node_name
        ]

    def workload_pods_on(self, node_name: str = NODE) -> list[Obj]:
        """Pods on the node that a drain must move (not DaemonSet pods)."""
        return [
            p
            for p in self.pods(node_name)
            if not any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences") or ())
        ]

    def events(self, reason: str | None = None) -> list[Obj]:
        return [
            e
            for e in self.kubesim.store.list(self._rt("", "v1", "events"))
            if reason is None or e.get("reason") == reason
        ]

    def reasons(self) -> set[str]:
        return {str(e.get("reason")) for e in self.events()}

    # --- firing signals -------------------------------------------------------------------------

    def fire_spot_itn(self, lead_seconds: float = 120.0) -> None:
        self.imds.fleet.fire_spot_itn(INSTANCE, lead_seconds=lead_seconds)


def cluster_objects(*workloads: Obj, spares: int = 2) -> list[Obj]:
    spot = node(NODE, labels={"karpenter.sh/capacity-type": "spot", "lifecycle": "Ec2Spot"})
    spot.setdefault("spec", {})["providerID"] = f"aws:///us-east-1a/{INSTANCE}"
    nodes = [spot, *(node(f"od-{i}", unschedulable=True) for i in range(spares))]
    return [*nodes, *workloads]


@asynccontextmanager
async def agent_world(
    *workloads: Obj,
    tmp: Path,
    spares: int = 2,
    require_v2: bool = False,
    settle: bool = True,
) -> AsyncIterator[World]:
    """kubesim with ``workloads`` settled on spot-1 (spares opened afterwards) and imdssim."""
    async with (
        KubeSim(objects=cluster_objects(*workloads, spares=spares), controllers=FAST) as kubesim,
        ImdsSim([SimInstance(INSTANCE, instance_type="m5.large")], require_v2=require_v2) as imds,
    ):
        kube = connect(KubeSettings(kubeconfig=str(kubesim.kubeconfig_path)))
        world = World(kubesim, imds, kube, tmp)
        try:
            if settle:

                async def settled() -> bool:
                    pods = world.pods(None)
                    return bool(pods) and all(is_ready(p) for p in pods)

                await until(settled, within=STARTUP_WITHIN)
                for i in range(spares):
                    await kube.uncordon(f"od-{i}")
            yield world
        finally:
            for agent in world.agents:
                await agent.stop()
            await kube.close()


def env_of(mapping: Mapping[str, object]) -> dict[str, str]:
    """Settings as env strings (True -> "true")."""
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in mapping.items()}


# --- helpers for the test_e2e_new_* suites (added; nothing above depends on them) ---------------------


def slow_start_web(name: str, replicas: int, *, start: float, shutdown: float = 0.2) -> Obj:
    """Like ``web``, but every pod (replacements included) takes ``start`` seconds to turn Ready."""
    obj = web(name, replicas, shutdown=shutdown)
    obj["spec"]["template"]["metadata"]["annotations"][conventions.START_SECONDS] = str(start)
    return obj


def log_messages(agent: AgentProcess) -> list[str]:
    """The ``message`` of every JSON log line so far."""
    return [str(line.get("message", "")) for line in agent.lines()]


def has_log(agent: AgentProcess, fragment: str) -> bool:
    return any(fragment in m for m in log_messages(agent))


def pod_events_with(world: World, reason: str) -> list[Obj]:
    """Events with ``reason`` recorded about Pods."""
    return [e for e in world.events(reason) if (e.get("involvedObject") or {}).get("kind") == "Pod"]


def node_events_with(world: World, reason: str) -> list[Obj]:
    """Events with ``reason`` recorded about the Node."""
    return [e for e in world.events(reason) if (e.get("involvedObject") or {}).get("kind") == "Node"]


def running_uids(world: World, node_name: str = NODE) -> set[str]:
    """UIDs of the workload pods on the node that are not terminating."""
    return {
        str(p["metadata"]["uid"])
        for p in world.workload_pods_on(node_name)
        if not p["metadata"].get("deletionTimestamp")
    }


async def scrape_agent_metrics(port: int) -> str:
    """The agent's /metrics page (Prometheus text format)."""
    import aiohttp as aiohttp_client

    async with (
        aiohttp_client.ClientSession() as session,
        session.get(
            f"http://127.0.0.1:{port}/metrics", timeout=aiohttp_client.ClientTimeout(total=5)
        ) as resp,
    ):
        assert resp.status == 200, resp.status
        return await resp.text()


def sample_sum(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels`` (0.0 when there are none)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        sample, _, rest = head.partition("{")
        if sample != name:
            continue
        found = dict(
            (k, v.strip('"')) for k, _, v in (p.partition("=") for p in rest.rstrip("}").split(",") if p)
        )
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(value)
    return total
