"""One sandbox run, start to end: simulators up, sample cluster settled, agents started, scenarios
fired, verdict, and everything torn down again (or kept, with ``--keep``).

Owns the order of things and their cleanup. kubesim and imdssim run on this process's event loop
(they are asyncio servers; the agents reach them over loopback HTTP like any client); the agents are
separate processes (``processes``); the observer watches the API (``observer``); the scenario drivers
play EC2's part (``scenarios``); the timeline draws it (``timeline``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubespot.sim.imdssim import ImdsSim, SimInstance
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers.kubelet import kubelet_of

from . import cluster
from .observer import Observer, TimelineEntry
from .processes import AgentProcess, ProcessGroup, UptimeFile
from .scenarios import NodeKit, World, assign_nodes, rebalance, scheduled_reboot, spot_interruption, wait_for
from .summary import REBALANCE, SCHEDULED_REBOOT, SPOT_ITN, ScenarioRecord, run_summary
from .timeline import Timeline
from .timing import NODE_MONITOR_GRACE_SECONDS, Timing

#: Real seconds the sample cluster may take to settle, and an agent to start polling IMDS.
SETTLE_TIMEOUT = 30.0
AGENT_START_TIMEOUT = 30.0
TRAILING_EVENTS = 0.5


class SandboxError(Exception):
    """The sandbox itself could not run (not a verdict): a simulator or an agent failed to start."""


@dataclass
class Options:
    scenarios: tuple[str, ...]
    spot_nodes: int
    time_scale: float
    workdir: Path
    keep: bool = False
    blocking_pdb: bool = False
    agent_env: dict[str, str] = field(default_factory=dict)
    #: The provision scenario's Deployment replicas in all (0: its default).
    replicas: int = 0
    #: Real-world seconds of kube-controller-manager's ``--node-monitor-grace-period`` (scaled).
    node_monitor_grace: float = NODE_MONITOR_GRACE_SECONDS


def imds_instances(spot: list[cluster.NodeSpec]) -> list[SimInstance]:
    """imdssim's instances for the spot nodes, launched a day ago."""
    launched = time.time() - 86_400
    return [
        SimInstance(
            instance_id=s.instance_id,
            instance_type=s.instance_type,
            availability_zone=s.zone,
            private_ip=f"10.0.{i // 250}.{10 + i % 250}",
            life_cycle="spot",
            launched_at=launched,
        )
        for i, s in enumerate(spot)
    ]


class Sandbox:
    def __init__(
        self, opts: Options, timeline_factory: Callable[[Callable[[], dict[str, ScenarioRecord]]], Timeline]
    ):
        self.opts = opts
        self.timing = Timing(opts.time_scale, story_node_monitor_grace=opts.node_monitor_grace)
        self.timeline = timeline_factory(self._records)
        self.agents = ProcessGroup()
        self.agent_down: set[str] = set()
        self.problems: list[str] = []
        self.kubeconfig = opts.workdir / "kubeconfig"
        self.started = time.time()
        self._observer: Observer | None = None
        self._uptime_task: asyncio.Task[None] | None = None

    def _records(self) -> dict[str, ScenarioRecord]:
        return self._observer.records if self._observer is not None else {}

    def _emit(self, entry: TimelineEntry) -> None:
        self.timeline.add(entry)

    async def run(self, on_summary: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Run everything; ``on_summary`` gets the summary before teardown (``--keep`` waits after it)."""
        opts, t = self.opts, self.timing
        opts.workdir.mkdir(parents=True, exist_ok=True)
        objects = cluster.build_objects(opts.spot_nodes, t)
        specs = cluster.node_specs(opts.spot_nodes)
        spot = [s for s in specs if s.spot]
        kubesim = KubeSim(
            objects=objects,
            controllers=cluster.controller_config(t),
            kubeconfig_path=self.kubeconfig,
        )
        imds = ImdsSim(imds_instances(spot))
        with self.timeline:
            try:
                await kubesim.start()
                await imds.start()
                self.timeline.note(f"kubesim {kubesim.url}  imdssim {imds.url}  run directory {opts.workdir}")
                observer = self._observer = Observer(kubesim.url, self._emit)
                await observer.start()
                await self._settle(observer, "sample cluster")
                assigned = assign_nodes(opts.scenarios, [s.name for s in spot], observer.pods_on)
                await self._extra_pods(observer, assigned)
                kits = await self._start_agents(observer, imds, kubesim.url, spot)
                self.timeline.note(
                    f"{len(spot)} spot + {cluster.ON_DEMAND_NODES} on-demand nodes, "
                    f"{len(observer.pods)} pods, {len(kits)} agents polling IMDS; time scale {t.scale:g}x "
                    f"(spot notice {t.spot_notice:.1f}s)",
                    "bold",
                )
                world = World(
                    imds.fleet, kubelet_of(kubesim.controllers), observer, t, self._emit, self.agent_down
                )
                drivers = []
                for scenario, node in assigned.items():
                    kit = kits[node]
                    if scenario == SPOT_ITN:
                        drivers.append(spot_interruption(world, kit))
                    elif scenario == REBALANCE:
                        drivers.append(rebalance(world, kit))
                    elif scenario == SCHEDULED_REBOOT:
                        drivers.append(scheduled_reboot(world, kit, kit.agent.start))
                watchdog = asyncio.create_task(self._watch_agents())
                try:
                    # Records appear as the drivers open them; keep them in the order they were asked for.
                    results = await asyncio.gather(*drivers)
                finally:
                    watchdog.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watchdog
                # The agent's Event about its last step trails the node change it records: let it land.
                await asyncio.sleep(TRAILING_EVENTS)
                summary = self._summary(results, kits, kubesim.url)
                on_summary(summary)
                if opts.keep:
                    await asyncio.Event().wait()  # until Ctrl-C / SIGTERM cancels us
                return summary
            finally:
                if self._uptime_task is not None:
                    self._uptime_task.cancel()
                await self.agents.stop_all()
                if self._observer is not None:
                    await self._observer.stop()
                await imds.stop()
                await kubesim.stop()

    # -- steps ----------------------------------------------------------------------------------

    async def _settle(self, observer: Observer, what: str) -> None:
        ok = await wait_for(lambda: observer.settled() is None, observer, time.time() + SETTLE_TIMEOUT)
        if not ok:
            raise SandboxError(f"{what} did not settle within {SETTLE_TIMEOUT:.0f}s: {observer.settled()}")

    async def _extra_pods(self, observer: Observer, assigned: dict[str, str]) -> None:
        """The bare pod on the interrupted node, and the failing demo's pinned pod under a stubborn PDB."""
        target = assigned.get(SPOT_ITN) or next(iter(assigned.values()), None)
        if target is None:
            return
        extra: list[tuple[str, dict[str, Any]]] = []
        if SPOT_ITN in assigned:
            extra.append(("/api/v1/namespaces/default/pods", cluster.bare_pod(target, self.timing)))
        if self.opts.blocking_pdb:
            dep, budget = cluster.blocking_workload(target, self.timing)
            ns = cluster.BLOCKING_NAMESPACE
            extra.append((f"/apis/apps/v1/namespaces/{ns}/deployments", dep))
            extra.append((f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", budget))
        for path, obj in extra:
            resp = await observer.request("POST", path, obj)
            if resp.status_code >= 300:
                raise SandboxError(
                    f"creating {obj['kind']} {obj['metadata']['name']}: HTTP {resp.status_code} {resp.text}"
                )
        if extra:
            await self._settle(observer, "extra pods")

    async def _start_agents(
        self,
        observer: Observer,
        imds: ImdsSim,
        kube_url: str,
        spot: list[cluster.NodeSpec],
        *,
        rundir: Path | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> dict[str, NodeKit]:
        """One agent per spot node, logs and uptime files in ``rundir`` (the workdir), with the
        sandbox's settings, then ``extra_env``, then ``--agent-env`` (the user's word is last)."""
        t, opts = self.timing, self.opts
        rundir = rundir or opts.workdir
        kits: dict[str, NodeKit] = {}
        for spec in spot:
            agent_pod = next(
                (
                    p
                    for p in observer.pods_on(spec.name)
                    if (p.get("metadata") or {}).get("namespace") == cluster.AGENT_NAMESPACE
                    and ((p.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/name")
                    == cluster.AGENT_DAEMONSET
                ),
                None,
            )
            uptime = UptimeFile(rundir / f"uptime-{spec.name}")
            uptime.write()
            env = {
                "KUBESPOT_NODE_NAME": spec.name,
                "KUBESPOT_KUBECONFIG": str(self.kubeconfig),
                "KUBESPOT_IMDS_URL": imds.instance_url(spec.instance_id),
                "KUBESPOT_IMDS_REBALANCE_MONITORING": "true",
                "KUBESPOT_IMDS_UPTIME_FROM_FILE": str(uptime.path),
                "KUBESPOT_OBSERVABILITY_EMIT_KUBERNETES_EVENTS": "true",
                "KUBESPOT_OBSERVABILITY_JSON_LOGGING": "true",
                "KUBESPOT_OBSERVABILITY_LOG_LEVEL": "info",
                **t.agent_env(),
            }
            if agent_pod is not None:
                env["KUBESPOT_POD_NAME"] = str(agent_pod["metadata"]["name"])
                env["KUBESPOT_POD_NAMESPACE"] = cluster.AGENT_NAMESPACE
            if opts.blocking_pdb:
                # The failing demo: the drain must respect the budget to the end.
                env["KUBESPOT_DRAIN_PDB_DEADLINE_ACTION"] = "keep"
            env.update(extra_env or {})
            env.update(opts.agent_env)
            agent = self.agents.add(AgentProcess(spec.name, env, rundir / f"agent-{spec.name}.log"))
            kits[spec.name] = NodeKit(spec.name, spec.instance_id, agent, uptime)
        await self.agents.start_all()
        self._uptime_task = asyncio.create_task(self._tick_uptimes([k.uptime for k in kits.values()]))

        def polling(kit: NodeKit) -> bool:
            # An agent polling IMDSv2 holds a session token from its instance: that is "up".
            return len(imds.fleet.tokens(kit.instance_id)) > 0

        deadline = time.time() + AGENT_START_TIMEOUT
        while not all(polling(k) for k in kits.values()):
            dead = [k.agent for k in kits.values() if k.agent.proc is not None and not k.agent.running]
            if dead:
                a = dead[0]
                code = a.proc.returncode if a.proc is not None else None
                raise SandboxError(
                    f"agent for {a.node} exited with code {code} at start; log {a.log_path}:\n{a.log_tail()}"
                )
            if time.time() > deadline:
                slow = [k.node for k in kits.values() if not polling(k)]
                raise SandboxError(
                    f"agents for {', '.join(slow)} did not reach IMDS within {AGENT_START_TIMEOUT:.0f}s; "
                    f"log {kits[slow[0]].agent.log_path}:\n{kits[slow[0]].agent.log_tail()}"
                )
            await asyncio.sleep(0.1)
        return kits

    async def _tick_uptimes(self, files: list[UptimeFile]) -> None:
        while True:
            for f in files:
                with contextlib.suppress(OSError):
                    f.write()
            await asyncio.sleep(0.5)

    async def _watch_agents(self) -> None:
        """An agent that dies on its own is a finding: note it on its node's record."""
        reported: set[tuple[str, int]] = set()
        while True:
            await asyncio.sleep(0.2)
            for agent in self.agents.agents.values():
                if agent.node in self.agent_down or agent.proc is None or agent.running:
                    continue
                key = (agent.node, agent.starts)
                if key in reported:
                    continue
                reported.add(key)
                msg = (
                    f"{agent.label} exited on its own with code {agent.proc.returncode} "
                    f"(log {agent.log_path})"
                )
                self.problems.append(msg)
                rec = self._records().get(agent.node)
                if rec is not None:
                    rec.problems.append(msg)
                self._emit(TimelineEntry(time.time(), agent.node, msg, "red"))

    def _summary(self, results: list[ScenarioRecord], kits: dict[str, NodeKit], url: str) -> dict[str, Any]:
        order = (SPOT_ITN, REBALANCE, SCHEDULED_REBOOT)
        summary = run_summary(
            sorted(results, key=lambda r: order.index(r.scenario)),
            time_scale=self.timing.scale,
            spot_nodes=self.opts.spot_nodes,
            on_demand_nodes=cluster.ON_DEMAND_NODES,
            duration_s=round(time.time() - self.started, 2),
            workdir=str(self.opts.workdir),
            kubeconfig=str(self.kubeconfig),
            api_url=url,
            agent_logs={k.node: str(k.agent.log_path) for k in kits.values()},
            problems=list(self.problems),
            timeline=self.timeline.lines,
        )
        if self.problems:
            summary["ok"] = False
        return summary
