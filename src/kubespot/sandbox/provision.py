"""``kubespot sandbox --scenario provision``: the provisioner against a spot market, twice.

Owns the scenario's story and its two runs; the world is ``provision_world``'s, the figures and the
verdict ``provision_summary``'s. Each run gets a fresh world (moto reset, a new kubesim, a new
controller process) so the two are equivalent:

1. **scale**: the database (a StatefulSet pinned to on-demand) and two Deployments written as EKS
   users write them (preferring spot through node affinity, tolerating eksctl's
   ``spotInstance=true:PreferNoSchedule``) go from 0 to ``--replicas`` pods in all;
2. **insufficient capacity**: every spot pool of the market is full (capacity = what runs there),
   and the Deployments grow by a fifth: CreateFleet answers insufficient capacity, the provisioner
   must fall back to on-demand;
3. **reclaim**: the spot market has room again; the zone with the most spot nodes is reclaimed
   (rebalance recommendations and interruption warnings, the instances terminated two minutes later,
   scaled), and its pools keep room afterwards, so a provisioner that learns nothing from the warnings
   is free to launch right back into them.

The runs: ``shares_nothing`` (``launch.learn_from_interruptions=false``: the interruption handler
drains, the provisioner learns nothing from it, as NTH beside Karpenter) and ``kubespot``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from kubespot.config.launch import LaunchSettings
from kubespot.model.quantity import milli
from kubespot.scheduling.pods import pod_requests
from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import spot_prices

from . import provision_world as pw
from .observer import Obj, Observer, TimelineEntry, is_daemon_pod, is_terminating
from .provision_summary import (
    KUBESPOT,
    RUNS,
    SHARES_NOTHING,
    NodeSnap,
    ProvisionRecord,
    provision_summary,
    run_summary,
)
from .run import Options, Sandbox, SandboxError
from .summary import ScenarioRecord
from .timeline import Timeline

DEFAULT_REPLICAS = 500
MAX_REPLICAS = 5000
DEFAULT_TIME_SCALE = 10.0
#: Real seconds a phase may take before the run gives up on it (reported as a problem).
PHASE_TIMEOUT = 180.0
#: Real seconds the world stays as it is after the last phase (stragglers: a late launch).
TAIL = 1.0
#: Share of the Deployments' replicas in ``web`` (the rest in ``api``); the database's replicas.
WEB_SHARE = 0.6
#: The CPU requests of the web and api pods, in millicores.
WEB_CPU_MILLIS = 250
API_CPU_MILLIS = 500
DB_REPLICAS = 3
LEARN_SETTING = "learn_from_interruptions"
LEARN_ENV = "KUBESPOT_LAUNCH_LEARN_FROM_INTERRUPTIONS"
SPOT_TOLERATION = {"key": "spotInstance", "operator": "Equal", "value": "true", "effect": "PreferNoSchedule"}


def _prefers_spot() -> Obj:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                        ]
                    },
                }
            ]
        }
    }


def deployment(ns: str, name: str, cpu: str, memory: str, grace: int) -> Obj:
    """A Deployment as the seed material's users write them: spot preferred, the spot taint tolerated."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "affinity": _prefers_spot(),
                    "tolerations": [SPOT_TOLERATION],
                    "terminationGracePeriodSeconds": grace,
                    "containers": [
                        {
                            "name": name,
                            "image": f"{name}:1",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                },
            },
        },
    }


def database() -> Obj:
    """The database: a StatefulSet on on-demand capacity only, tolerating that pool's taint."""
    labels = {"app": "postgres"}
    taint = pw.DEDICATED_TAINT
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "postgres", "namespace": "db"},
        "spec": {
            "replicas": DB_REPLICAS,
            "serviceName": "postgres",
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"karpenter.sh/capacity-type": "on-demand"},
                    "tolerations": [
                        {
                            "key": taint["key"],
                            "operator": "Equal",
                            "value": taint["value"],
                            "effect": taint["effect"],
                        }
                    ],
                    "containers": [
                        {
                            "name": "postgres",
                            "image": "postgres:16",
                            "resources": {"requests": {"cpu": "1", "memory": "4Gi"}},
                        }
                    ],
                },
            },
        },
    }


class ProvisionTracker(Observer):
    """Pods, Nodes and NodeClaims from their watches: each pod's wait for a node, the pods a
    vanished instance took with it, the NodeClaims made (module ``observer``'s watch loop)."""

    PATHS = ("/api/v1/nodes", "/api/v1/pods", "/apis/karpenter.sh/v1/nodeclaims")

    def __init__(self, url: str, emit: Callable[[TimelineEntry], None]) -> None:
        super().__init__(url, emit)
        self.first_seen: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}
        self.lost: dict[str, str] = {}  # pod uid -> "ns/name"
        self.gone_nodes: set[str] = set()
        self.claims: dict[str, Obj] = {}
        self.claim_seen: dict[str, float] = {}  # NodeClaim name -> first seen
        self.launched_at: dict[str, float] = {}  # NodeClaim name -> its providerID first seen
        #: (instance type, zone) of the pools reclaimed so far: a spot launch into one is flagged.
        self.reclaimed_pools: set[tuple[str, str]] = set()

    async def start(self) -> None:
        import httpx2

        self._client = httpx2.AsyncClient(
            base_url=self.url,
            headers={"Authorization": "Bearer kubesim"},
            timeout=httpx2.Timeout(10.0, read=None),
        )
        handlers = (self._on_node, self._on_pod, self._on_claim)
        for path, handler in zip(self.PATHS, handlers, strict=True):
            self.synced[path] = asyncio.Event()
            self._tasks.append(asyncio.create_task(self._watch(path, handler), name=f"watch {path}"))
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in self.synced.values())), 30)

    def _on_pod(self, kind: str, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid"))
        if kind == "DELETED":
            self.pods.pop(uid, None)
            return
        if is_daemon_pod(pod):
            return
        self.pods[uid] = pod
        now = self.clock()
        self.first_seen.setdefault(uid, now)
        if (pod.get("spec") or {}).get("nodeName") and uid not in self.bound_at:
            self.bound_at[uid] = now

    def _on_node(self, kind: str, node: Obj) -> None:
        name = str((node.get("metadata") or {}).get("name"))
        if kind != "DELETED":
            self.nodes[name] = node
        ready = next(
            (
                c.get("status")
                for c in (node.get("status") or {}).get("conditions") or ()
                if c.get("type") == "Ready"
            ),
            None,
        )
        if (kind == "DELETED" or ready == "Unknown") and name not in self.gone_nodes:
            self.gone_nodes.add(name)
            lost = [
                p
                for p in self.pods.values()
                if (p.get("spec") or {}).get("nodeName") == name and not is_terminating(p)
            ]
            for p in lost:
                m = p.get("metadata") or {}
                self.lost[str(m.get("uid"))] = f"{m.get('namespace')}/{m.get('name')}"
            labels = (node.get("metadata") or {}).get("labels") or {}
            style = "red" if lost else "dim"
            self.emit(
                TimelineEntry(
                    self.clock(),
                    name,
                    f"instance gone ({labels.get('karpenter.sh/capacity-type', '?')} "
                    f"{labels.get('node.kubernetes.io/instance-type', '?')} "
                    f"{labels.get('topology.kubernetes.io/zone', '?')}); "
                    f"{len(lost)} pod(s) still running there lost service",
                    style,
                )
            )
        if kind == "DELETED":
            self.nodes.pop(name, None)

    def _on_claim(self, kind: str, claim: Obj) -> None:
        name = str((claim.get("metadata") or {}).get("name"))
        if kind == "DELETED":
            return
        self.claims[name] = claim
        now = self.clock()
        self.claim_seen.setdefault(name, now)
        pid = (claim.get("status") or {}).get("providerID")
        if pid and name not in self.launched_at:
            self.launched_at[name] = now
            labels = (claim.get("metadata") or {}).get("labels") or {}
            ct = labels.get("karpenter.sh/capacity-type", "?")
            pool = (
                labels.get("node.kubernetes.io/instance-type", "?"),
                labels.get("topology.kubernetes.io/zone", "?"),
            )
            doomed = ct == "spot" and pool in self.reclaimed_pools
            self.emit(
                TimelineEntry(
                    now,
                    name,
                    f"launched {ct} {pool[0]} in {pool[1]}"
                    + (": into a just-reclaimed pool" if doomed else ""),
                    "red" if doomed else ("green" if ct == "spot" else ""),
                )
            )

    # -- what the phases wait for ---------------------------------------------------------------

    def unbound(self) -> int:
        return sum(1 for uid in self.pods if uid not in self.bound_at)

    def waits(self, until: float) -> list[float]:
        return [self.bound_at.get(uid, until) - seen for uid, seen in self.first_seen.items()]


class ProvisionSandbox(Sandbox):
    """The two runs, each in its own world, one summary (module docstring)."""

    def __init__(
        self,
        opts: Options,
        timeline_factory: Callable[[Callable[[], dict[str, ScenarioRecord]]], Timeline],
        *,
        replicas: int = DEFAULT_REPLICAS,
    ) -> None:
        super().__init__(opts, timeline_factory)
        self.replicas = replicas
        self._row: dict[str, dict[str, Any]] = {k: {"phase": "waiting"} for k in RUNS}
        self._tracker: ProvisionTracker | None = None
        self._run_start = 0.0
        self._label = ""
        self._world: pw.ProvisionWorld | None = None
        self.timeline.panel = self._panel

    def _panel(self) -> Table:
        table = Table(box=None, show_header=True, header_style="dim", padding=(0, 1))
        for col in ("run", "phase", "pods bound", "nodes", "nodeclaims"):
            table.add_column(col)
        for key in RUNS:
            row = self._row[key]
            tracker = self._tracker if self._label == key else None
            if tracker is not None:
                row["pods"] = f"{len(tracker.pods) - tracker.unbound()}/{len(tracker.pods)}"
                row["nodes"] = str(len(tracker.nodes))
                row["claims"] = str(len(tracker.claims))
            table.add_row(
                key, row["phase"], row.get("pods", "—"), row.get("nodes", "—"), row.get("claims", "—")
            )
        return table

    def _say(self, text: str, style: str = "dim") -> None:
        rel = time.time() - self._run_start
        self.timeline.note(f"{rel:+7.1f}s [{self._label}] {text}", style)

    def _emit(self, entry: TimelineEntry) -> None:
        rel = entry.at - self._run_start
        self.timeline.note(f"{rel:+7.1f}s [{self._label}] {entry.node}: {entry.text}", entry.style or "")

    async def run(self, on_summary: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        opts = self.opts
        opts.workdir.mkdir(parents=True, exist_ok=True)
        runs: dict[str, dict[str, Any]] = {}
        summary: dict[str, Any] = {}
        with self.timeline:
            aws = MotoServer()
            try:
                await asyncio.to_thread(aws.start)
                for i, key in enumerate(RUNS):
                    if i:
                        await asyncio.to_thread(aws.reset)
                    last = i == len(RUNS) - 1
                    runs[key] = await self._run_once(key, aws, keep=opts.keep and last)
                    if last:
                        summary.update(self._provision_summary(runs))
                        summary["aws_endpoint_url"] = aws.endpoint_url
                        on_summary(summary)
                        if opts.keep:
                            await asyncio.Event().wait()  # until Ctrl-C / SIGTERM cancels us
            finally:
                if self._world is not None:
                    await self._world.stop()
                await asyncio.to_thread(aws.stop)
        return summary

    def _provision_summary(self, runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
        return provision_summary(
            runs,
            time_scale=self.timing.scale,
            replicas=self.replicas,
            duration_s=round(time.time() - self.started, 1),
            workdir=str(self.opts.workdir),
            kubeconfig=str(self.kubeconfig),
            problems=self.problems,
            timeline=self.timeline.lines,
        )

    async def _run_once(self, key: str, aws: MotoServer, *, keep: bool) -> dict[str, Any]:
        t = self.timing
        rundir = self.opts.workdir / key.replace("_", "-")
        self._label, self._run_start = key, time.time()
        row = self._row[key]
        row["phase"] = "starting"
        world = self._world = pw.ProvisionWorld(rundir, t, aws)
        rec = ProvisionRecord(key=key, time_scale=t.scale)
        self.kubeconfig = world.kubeconfig
        self.timeline.note(f"── {key.replace('_', ' ')} ──", "bold")
        tracker: ProvisionTracker | None = None
        try:
            try:
                await world.start()
                extra = self._controller_extra(key, rec)
                await world.start_controller(extra)
            except pw.WorldError as err:
                raise SandboxError(f"{key}: {err}") from None
            tracker = self._tracker = ProvisionTracker(world.api_url, self._emit)
            await tracker.start()
            self._say(
                f"kubesim {world.api_url}, moto {aws.endpoint_url}, "
                f"controller pid {world.controller.pid if world.controller else '?'}; "
                f"time scale {t.scale:g}x (boot {t.s(pw.BOOT_SECONDS):.1f}s, "
                f"spot notice {t.spot_notice:.1f}s)",
            )
            await self._phases(world, aws, tracker, rec, row)
            await asyncio.sleep(TAIL)
            rec.unbound = tracker.unbound()
            rec.pending = tracker.waits(time.time())
            rec.lost_service = list(tracker.lost.values())
            rec.claims = len(tracker.claims)
            rec.nodes = _snapshot(tracker.nodes.values(), tracker.gone_nodes)
            rec.fleet_calls = await asyncio.to_thread(aws.fleet_call_log)
            rec.extra["controller_log"] = str(world.workdir / "controller.log")
            if world.controller is not None and not world.controller.running:
                rec.problems.append(f"the controller exited; its log: {world.controller.log_path}")
            row["phase"] = "done"
            result = run_summary(rec, spot_pool=pw.GENERAL_POOL)
            row["phase"] = result["verdict"]
            self._say(_story(result), "green" if result["ok"] else "red")
            return result
        finally:
            if tracker is not None:
                await tracker.stop()
                self._tracker = None
            if not keep:
                await world.stop()
                self._world = None

    def _controller_extra(self, key: str, rec: ProvisionRecord) -> dict[str, str]:
        known = {f.name for f in dataclasses.fields(LaunchSettings)}
        if LEARN_SETTING not in known:
            if key == SHARES_NOTHING:
                rec.problems.append(
                    f"this build has no launch.{LEARN_SETTING}: the shares-nothing run cannot switch "
                    "the learning off"
                )
            return {}
        return {LEARN_ENV: "false" if key == SHARES_NOTHING else "true"}

    async def _phases(
        self,
        world: pw.ProvisionWorld,
        aws: MotoServer,
        tracker: ProvisionTracker,
        rec: ProvisionRecord,
        row: dict[str, Any],
    ) -> None:
        for ns in ("shop", "db"):
            await world.create(
                "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            )
        web = round(self.replicas * WEB_SHARE)
        api = self.replicas - web
        await world.create(
            "/apis/apps/v1/namespaces/shop/deployments",
            deployment("shop", "web", f"{WEB_CPU_MILLIS}m", "512Mi", self.timing.grace(30)),
        )
        await world.create(
            "/apis/apps/v1/namespaces/shop/deployments",
            deployment("shop", "api", f"{API_CPU_MILLIS}m", "1Gi", self.timing.grace(30)),
        )

        # 1. scale 0 -> replicas
        row["phase"] = "scale"
        start = time.time()
        self._say(
            f"scale: db/postgres {DB_REPLICAS} (on-demand), shop/web 0→{web}, shop/api 0→{api} (prefer spot)",
            "bold",
        )
        await world.create("/apis/apps/v1/namespaces/db/statefulsets", database())
        await self._scale(world, web, api)
        await self._all_bound(tracker, rec, "scale", self.replicas + DB_REPLICAS)
        rec.phases["scale"] = time.time() - start

        # 2. the spot market runs dry
        row["phase"] = "insufficient capacity"
        start = time.time()
        await pw.exhaust_spot(aws)
        rec.ice_at = time.time()
        # A fifth more of each, and more api pods if that would still fit the room the nodes have
        # left: the phase must need a launch (how full the nodes are depends on how the scale-up was
        # batched, which a busy machine changes), or there is no refusal to fall back from.
        more_web, more_api = round(web * 1.2), round(api * 1.2)
        room = free_cpu_millis(tracker.nodes.values(), tracker.pods.values())
        added = (more_web - web) * WEB_CPU_MILLIS + (more_api - api) * API_CPU_MILLIS
        if added <= room:
            more_api += (room - added) // API_CPU_MILLIS + 1
        self._say(
            f"insufficient capacity: every spot pool full; shop/web {web}→{more_web}, "
            f"shop/api {api}→{more_api}",
            "bold",
        )
        await self._scale(world, more_web, more_api)
        await self._all_bound(tracker, rec, "insufficient capacity", more_web + more_api + DB_REPLICAS)
        rec.phases["insufficient_capacity"] = time.time() - start

        # 3. room again, then a zone's spot pools reclaimed
        row["phase"] = "reclaim"
        t = self.timing
        await asyncio.to_thread(aws.set_pool_capacity, None, capacity_type="spot")
        # The market recovers and the story moves on past the insufficient-capacity cache, so the
        # reclaim's replacements may go to spot again (else both runs would simply stay on-demand).
        pause = t.s(pw.UNAVAILABLE_TTL_SECONDS) + 0.5
        self._say(
            f"the spot market has room again; {pause:.1f}s later (the insufficient-capacity cache expired):"
        )
        await asyncio.sleep(pause)
        pools = (await asyncio.to_thread(aws.pool_stats))["Pools"]
        by_zone: dict[str, int] = {}
        for p in pools:
            if p["CapacityType"] == "spot" and p["Used"]:
                by_zone[p["AvailabilityZone"]] = by_zone.get(p["AvailabilityZone"], 0) + int(p["Used"])
        if not by_zone:
            rec.problems.append("no spot instance ran before the reclaim")
            return
        zone = max(sorted(by_zone), key=lambda z: by_zone[z])
        rec.reclaimed_pools = {
            (p["InstanceType"], zone)
            for p in pools
            if p["CapacityType"] == "spot" and p["AvailabilityZone"] == zone and p["Used"]
        }
        tracker.reclaimed_pools = set(rec.reclaimed_pools)
        start = rec.reclaim_at = time.time()
        reclaim = await asyncio.to_thread(aws.reclaim_spot, zone, rebalance=True)
        # The pools keep room: what a provisioner does with the warnings is what the run shows.
        await asyncio.to_thread(aws.set_pool_capacity, None, capacity_type="spot", zone=zone)
        self._say(
            f"reclaim: {zone}'s spot pools ({', '.join(sorted(t for t, _ in rec.reclaimed_pools))}), "
            f"{len(reclaim.instances)} instance(s) warned, terminated in "
            f"{reclaim.terminate_at - time.time():.1f}s",
            "bold",
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PHASE_TIMEOUT
        doomed = set(reclaim.instances)
        while loop.time() < deadline:
            alive = {
                _instance_id(n) for k, n in tracker.nodes.items() if k not in tracker.gone_nodes
            } & doomed
            if time.time() >= reclaim.terminate_at and not alive and tracker.unbound() == 0:
                break
            await asyncio.sleep(0.2)
        else:
            rec.problems.append(
                f"reclaim: not settled within {PHASE_TIMEOUT:.0f}s ({tracker.unbound()} pods pending)"
            )
        rec.phases["reclaim"] = time.time() - start

    async def _scale(self, world: pw.ProvisionWorld, web: int, api: int) -> None:
        for name, n in (("web", web), ("api", api)):
            await world.patch(f"/apis/apps/v1/namespaces/shop/deployments/{name}", {"spec": {"replicas": n}})

    async def _all_bound(
        self, tracker: ProvisionTracker, rec: ProvisionRecord, phase: str, pods: int
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PHASE_TIMEOUT
        while loop.time() < deadline:
            if len(tracker.pods) >= pods and tracker.unbound() == 0:
                self._say(f"{phase}: all {len(tracker.pods)} pods bound, {len(tracker.nodes)} nodes")
                return
            await asyncio.sleep(0.2)
        rec.problems.append(
            f"{phase}: {tracker.unbound()} of {len(tracker.pods)} pods still pending after "
            f"{PHASE_TIMEOUT:.0f}s"
        )


def free_cpu_millis(nodes: Iterable[Obj], pods: Iterable[Obj]) -> int:
    """Millicores the live nodes have left for more pods: allocatable less the requests of the
    pods bound to them (the pods given: the tracker leaves out daemon pods, so this is an upper
    bound, which is the safe side for making a phase need a launch)."""
    alive: dict[str, int] = {}  # node name -> millicores left
    for n in nodes:
        meta = n.get("metadata") or {}
        if not meta.get("deletionTimestamp"):
            allocatable = (n.get("status") or {}).get("allocatable") or {}
            alive[str(meta.get("name"))] = milli(allocatable.get("cpu", 0))
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node in alive and not is_terminating(pod):
            alive[node] -= pod_requests(pod.get("spec") or {}).get("cpu", 0)
    return sum(max(0, left) for left in alive.values())


def _instance_id(node: Obj) -> str:
    return str((node.get("spec") or {}).get("providerID", "")).rsplit("/", 1)[-1]


def _snapshot(nodes: Any, gone: set[str]) -> list[NodeSnap]:
    out = []
    for node in nodes:
        meta = node.get("metadata") or {}
        if meta.get("name") in gone:
            continue
        labels = meta.get("labels") or {}
        ct = labels.get("karpenter.sh/capacity-type", "")
        itype = labels.get("node.kubernetes.io/instance-type", "")
        zone = labels.get("topology.kubernetes.io/zone", "")
        price = spot_prices.price_for(itype, zone) if ct == "spot" else spot_prices.ondemand_price(itype)
        cpu = str(((node.get("status") or {}).get("capacity") or {}).get("cpu", "0"))
        out.append(
            NodeSnap(
                name=str(meta.get("name")),
                nodepool=labels.get("karpenter.sh/nodepool", ""),
                capacity_type=ct,
                instance_type=itype,
                zone=zone,
                cpu=float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu),
                price=price,
            )
        )
    return out


def _story(r: dict[str, Any]) -> str:
    def s(v: Any) -> str:
        return "—" if v is None else f"{v:.2f}s"

    return (
        f"pending p50 {s(r['pending_p50_s'])} p99 {s(r['pending_p99_s'])}, fallback {s(r['fallback_s'])}, "
        f"{r['launches_into_reclaimed_pools']} launch(es) into reclaimed pools, spot share "
        f"{'—' if r['spot_share'] is None else format(r['spot_share'], '.0%')}, "
        f"${r['cost_per_hour'] or 0:.2f}/h, {r['pods_lost_service']} pod(s) lost service"
        + ("" if r["ok"] else "; " + "; ".join(r["reasons"]))
    )


def print_summary(console: Any, summary: dict[str, Any], footer: list[str]) -> None:
    """The table of the two runs, then the verdict."""
    if console is None:
        return
    table = Table(
        title="kubespot sandbox: provisioning against a spot market",
        title_justify="left",
        header_style="bold",
    )
    cols = (
        "run",
        "pending p50",
        "pending p99",
        "fallback",
        "into reclaimed",
        "spot share",
        "$/h",
        "lost service",
        "verdict",
    )
    for col in cols:
        table.add_column(col, justify="left" if col in ("run", "verdict") else "right", no_wrap=True)
    notes: list[Text] = []
    for key in RUNS:
        r = summary.get(key)
        if r is None:
            continue

        def sec(v: Any) -> str:
            return "—" if v is None else f"{v:.2f}s"

        table.add_row(
            key.replace("_", " "),
            sec(r["pending_p50_s"]),
            sec(r["pending_p99_s"]),
            sec(r["fallback_s"]),
            Text(
                str(r["launches_into_reclaimed_pools"]),
                style="red" if r["launches_into_reclaimed_pools"] else "green",
            ),
            "—" if r["spot_share"] is None else f"{r['spot_share']:.0%}",
            "—" if r["cost_per_hour"] is None else f"{r['cost_per_hour']:.2f}",
            str(r["pods_lost_service"]),
            Text(r["verdict"], style="green" if r["ok"] else "bold red"),
        )
        for reason in r["reasons"]:
            notes.append(Text(f"  {key}: {reason}", style="red" if key == KUBESPOT else "yellow"))
    overall = (
        Text(
            "kubespot fell back in time and launched nothing into a just-reclaimed pool (exit 0)",
            style="bold green",
        )
        if summary["ok"]
        else Text("the provision scenario missed (exit 1)", style="bold red")
    )
    console.print(Group(Text(""), table, *notes, overall, *(Text(f, style="dim") for f in footer)))
