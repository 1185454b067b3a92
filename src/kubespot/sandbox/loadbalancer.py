"""``kubespot sandbox --scenario load-balancer``: one spot interruption, twice, behind a load balancer.

Owns the scenario's two runs and their order. Each run gets a fresh world so that the two are
equivalent (same nodes, same pods, same node interrupted): kubesim with the load-balancer cluster
(``cluster.lb_objects``), imdssim, one agent process per spot node, an ELBv2 target group in moto
holding the IPs of ``shop/web``'s pods, and lbsim's ``LoadBalancerSim`` sending a steady request
stream to it (health checks and the AWS Load Balancer Controller modelled, at the sandbox's time
scale). moto runs in this process, on a thread, for both runs (reset in between).

- **without deregistration**: no controller; the agents drain as they always did. Requests to the
  evicted pods fail until the health checks or the AWS Load Balancer Controller take them out.
- **with deregistration**: a real ``kubespot controller`` process without a queue and with
  ``loadbalancer.enabled`` deregisters the fenced node's targets and records it in
  ``kubespot.io/actions``; the agents run with ``loadbalancer_wait.enabled``, so the drain holds the
  target pods until their deregistration started plus the settle time.

A run ends once the node is empty, its workloads whole elsewhere and the load balancer no longer
routes to any of the node's former targets (plus a short tail), or at the instance-action time,
when the instance is terminated as in the spot-itn scenario. The counts start at the notice. The
verdict is ``lbsummary``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from rich.table import Table

from kubespot.sim.awssim import MotoServer
from kubespot.sim.imdssim import ImdsSim
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers.kubelet import kubelet_of
from kubespot.sim.lbsim import (
    ControllerModel,
    HealthCheck,
    LoadBalancerResult,
    LoadBalancerSim,
    TargetGroup,
    TargetView,
)

from . import cluster
from .lbsummary import WITH, WITHOUT, LbRun, lb_summary
from .observer import Obj, Observer, TimelineEntry, is_daemon_pod, pod_ready
from .processes import AgentProcess
from .run import TRAILING_EVENTS, Options, Sandbox, SandboxError, imds_instances
from .scenarios import NodeKit, World, terminate, wait_for
from .summary import SPOT_ITN, ScenarioRecord
from .timeline import Timeline
from .timing import (
    DEREGISTRATION_DELAY_SECONDS,
    HEALTH_CHECK_HEALTHY,
    HEALTH_CHECK_INTERVAL_SECONDS,
    HEALTH_CHECK_UNHEALTHY,
    LB_CONTROLLER_LAG_SECONDS,
    LB_PROPAGATION_SECONDS,
    LB_REFRESH_SECONDS,
    REQUEST_RATE,
    num,
)

#: Real seconds the stream runs before the notice (it must fail nothing), and after the end of a
#: run (the stream going on without failures is part of the picture).
WARMUP = 1.0
TAIL = 0.5
#: How often the follower looks at the load balancer (real seconds).
FOLLOW_EVERY = 0.05
#: Real seconds the controller may take to start its response actions.
CONTROLLER_START_TIMEOUT = 30.0
#: The tag the AWS Load Balancer Controller puts on its target groups; the sandbox's controller
#: considers only groups carrying it (as a cluster sharing its account should).
CLUSTER_TAG = ("elbv2.k8s.aws/cluster", "kubespot-sandbox")


@dataclass(frozen=True)
class Mode:
    key: str
    label: str
    deregistration: bool

    @property
    def title(self) -> str:
        return self.key.replace("_", " ")


MODES = (Mode(WITHOUT, "without", False), Mode(WITH, "with", True))


@dataclass
class _Row:
    """The live panel's line for one run."""

    label: str
    node: str = "—"
    state: str = "starting"
    sent: int = 0
    failed: int = 0


class LoadBalancerSandbox(Sandbox):
    """The two runs, each in its own world, one summary (module docstring)."""

    def __init__(
        self, opts: Options, timeline_factory: Callable[[Callable[[], dict[str, ScenarioRecord]]], Timeline]
    ):
        super().__init__(opts, timeline_factory)
        self._rows: dict[str, _Row] = {m.key: _Row(m.label) for m in MODES}
        self._live: tuple[str, LoadBalancerSim] | None = None
        self.timeline.panel = self._panel

    async def run(self, on_summary: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        opts = self.opts
        opts.workdir.mkdir(parents=True, exist_ok=True)
        runs: list[LbRun] = []
        summary: dict[str, Any] = {}

        async def last(run: LbRun) -> None:
            # The summary goes out while the last world is still up, so --keep can keep it.
            summary.update(self._lb_summary([*runs, run]))
            summary["aws_endpoint_url"] = aws.endpoint_url
            on_summary(summary)
            if opts.keep:
                await asyncio.Event().wait()  # until Ctrl-C / SIGTERM cancels us

        with self.timeline:
            aws = MotoServer()
            try:
                await asyncio.to_thread(aws.start)
                for i, mode in enumerate(MODES):
                    if i:
                        await asyncio.to_thread(aws.reset)
                    runs.append(await self._run_once(mode, aws, last if i == len(MODES) - 1 else None))
            finally:
                await asyncio.to_thread(aws.stop)
        return summary

    # -- one run --------------------------------------------------------------------------------

    async def _run_once(
        self, mode: Mode, aws: MotoServer, then: Callable[[LbRun], Awaitable[None]] | None
    ) -> LbRun:
        t, opts = self.timing, self.opts
        rundir = opts.workdir / mode.key.replace("_", "-")
        rundir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = rundir / "kubeconfig"
        spot = [s for s in cluster.node_specs(opts.spot_nodes, uniform=True) if s.spot]
        kubesim = KubeSim(
            objects=cluster.lb_objects(opts.spot_nodes, t, controller=mode.deregistration),
            controllers=cluster.controller_config(t),
            kubeconfig_path=self.kubeconfig,
        )
        imds = ImdsSim(imds_instances(spot))
        lb: LoadBalancerSim | None = None
        row = self._rows[mode.key]
        self.timeline.note(f"── {mode.title} ──", "bold")
        try:
            await kubesim.start()
            await imds.start()
            observer = self._observer = Observer(kubesim.url, self._emit)
            await observer.start()
            await self._settle(observer, f"the cluster of the run {mode.title}")
            web = _web_pods(observer)
            node = _busiest(observer, [s.name for s in spot])
            targets = {ip: label for ip, (label, on) in web.items() if on == node}
            arn = await asyncio.to_thread(self._target_group, aws, list(web))
            row.node, row.state = node, "starting agents"
            controller = self._add_controller(observer, aws, rundir) if mode.deregistration else None
            extra = (
                {
                    "KUBESPOT_LOADBALANCER_WAIT_ENABLED": "true",
                    "KUBESPOT_LOADBALANCER_WAIT_MAX_DELAY": num(t.lb_max_delay),
                }
                if mode.deregistration
                else {}
            )
            kits = await self._start_agents(observer, imds, kubesim.url, spot, rundir=rundir, extra_env=extra)
            if controller is not None:
                await self._controller_ready(controller)
            lb = LoadBalancerSim(
                kube_url=kubesim.url,
                elbv2=aws.client("elbv2"),
                target_groups=[
                    TargetGroup(arn, namespace=cluster.LB_NAMESPACE, selector={"app": cluster.LB_APP})
                ],
                rate=REQUEST_RATE,
                health_check=HealthCheck(
                    HEALTH_CHECK_INTERVAL_SECONDS, HEALTH_CHECK_UNHEALTHY, HEALTH_CHECK_HEALTHY
                ),
                controller=ControllerModel(LB_CONTROLLER_LAG_SECONDS),
                refresh_s=LB_REFRESH_SECONDS,
                propagation_s=LB_PROPAGATION_SECONDS,
                time_scale=t.scale,
            )
            await lb.start()
            self._live = (mode.key, lb)
            self.timeline.note(f"kubesim {kubesim.url}  moto {aws.endpoint_url}  run directory {rundir}")
            controller_note = (
                ", kubespot controller (load balancers, no queue)" if controller is not None else ""
            )
            self.timeline.note(
                f"{len(spot)} spot + {cluster.ON_DEMAND_NODES} on-demand nodes, {len(web)} "
                f"{cluster.LB_NAMESPACE}/{cluster.LB_APP} pods in target group {arn.rsplit(':', 1)[-1]}, "
                f"{len(kits)} agents{controller_note}; {REQUEST_RATE:g} requests/s; time scale {t.scale:g}x "
                f"(spot notice {t.spot_notice:.1f}s)",
                "bold",
            )
            await asyncio.sleep(WARMUP)
            before = lb.result()
            if before.failed:
                self.problems.append(
                    f"{mode.title}: {before.failed} request(s) failed before the notice: "
                    f"{dict(before.failures_by_reason)}"
                )
            world = World(
                imds.fleet, kubelet_of(kubesim.controllers), observer, t, self._emit, self.agent_down
            )
            watchdog = asyncio.create_task(self._watch_agents())
            try:
                run = await self._interrupt(world, kits[node], lb, mode, targets)
            finally:
                watchdog.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watchdog
            await asyncio.sleep(TRAILING_EVENTS)
            run.extra.update(
                {
                    "target_group_arn": arn,
                    "kubeconfig": str(self.kubeconfig),
                    "agent_logs": {k.node: str(k.agent.log_path) for k in kits.values()},
                    "controller_log": str(controller.log_path) if controller is not None else None,
                }
            )
            if then is not None:
                await then(run)
            return run
        finally:
            self._live = None
            if lb is not None:
                await lb.stop()
            if self._uptime_task is not None:
                self._uptime_task.cancel()
                self._uptime_task = None
            await self.agents.stop_all()
            self.agents.agents.clear()
            self.agent_down.clear()
            if self._observer is not None:
                await self._observer.stop()
            await imds.stop()
            await kubesim.stop()

    def _target_group(self, aws: MotoServer, ips: list[str]) -> str:
        """An ip target group holding the web pods, as the AWS Load Balancer Controller makes one."""
        elbv2 = aws.client("elbv2")
        ec2 = aws.client("ec2")
        vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
        key, value = CLUSTER_TAG
        arn = elbv2.create_target_group(
            Name=f"k8s-{cluster.LB_NAMESPACE}-{cluster.LB_APP}-sandbox",
            Protocol="HTTP",
            Port=cluster.LB_PORT,
            VpcId=vpc,
            TargetType="ip",
            Tags=[{"Key": key, "Value": value}],
        )["TargetGroups"][0]["TargetGroupArn"]
        elbv2.modify_target_group_attributes(
            TargetGroupArn=arn,
            Attributes=[
                {
                    "Key": "deregistration_delay.timeout_seconds",
                    "Value": str(self.timing.deregistration_delay),
                }
            ],
        )
        elbv2.register_targets(
            TargetGroupArn=arn, Targets=[{"Id": ip, "Port": cluster.LB_PORT} for ip in ips]
        )
        return str(arn)

    def _add_controller(self, observer: Observer, aws: MotoServer, rundir: Path) -> AgentProcess:
        """The controller process (started with the agents), named after its Deployment's pod."""
        t = self.timing
        pod = next(
            (
                p
                for p in observer.pods.values()
                if (p.get("metadata") or {}).get("name", "").startswith(cluster.CONTROLLER_NAME + "-")
            ),
            None,
        )
        key, value = CLUSTER_TAG
        env = {
            **aws.env(),
            "KUBESPOT_KUBECONFIG": str(self.kubeconfig),
            "KUBESPOT_QUEUE_URL": "",
            "KUBESPOT_AWS_ENDPOINT_URL": aws.endpoint_url,
            "KUBESPOT_AWS_REGION": aws.region,
            "KUBESPOT_LOADBALANCER_ENABLED": "true",
            "KUBESPOT_LOADBALANCER_SETTLE": num(t.lb_settle),
            "KUBESPOT_LOADBALANCER_MAX_DELAY": num(t.lb_max_delay),
            "KUBESPOT_LOADBALANCER_TARGET_GROUP_TAG_KEY": key,
            "KUBESPOT_LOADBALANCER_TARGET_GROUP_TAG_VALUE": value,
            # One replica: no Lease to win before the duties start.
            "KUBESPOT_LEADER_ELECTION_ENABLED": "false",
            "KUBESPOT_OBSERVABILITY_EMIT_KUBERNETES_EVENTS": "true",
            "KUBESPOT_OBSERVABILITY_JSON_LOGGING": "true",
            "KUBESPOT_OBSERVABILITY_LOG_LEVEL": "info",
            "KUBESPOT_POD_NAMESPACE": cluster.AGENT_NAMESPACE,
        }
        if pod is not None:
            env["KUBESPOT_POD_NAME"] = str(pod["metadata"]["name"])
        proc = AgentProcess(
            "controller", env, rundir / "controller.log", role="controller", drop_env=("AWS_",)
        )
        return self.agents.add(proc)

    async def _controller_ready(self, proc: AgentProcess) -> None:
        """Until the response-action duty runs (its first log line), or a SandboxError."""
        deadline = time.time() + CONTROLLER_START_TIMEOUT
        while True:
            if not proc.running:
                raise SandboxError(f"the controller exited at start; log {proc.log_path}:\n{proc.log_tail()}")
            if any(
                r.get("logger") == "kubespot.controller.actions"
                and str(r.get("message", "")).startswith("response actions")
                for r in _log_records(proc.log_path)
            ):
                return
            if time.time() > deadline:
                raise SandboxError(
                    "the controller did not start its response actions within "
                    f"{CONTROLLER_START_TIMEOUT:.0f}s; "
                    f"log {proc.log_path}:\n{proc.log_tail()}"
                )
            await asyncio.sleep(0.1)

    # -- the interruption -----------------------------------------------------------------------

    async def _interrupt(
        self, world: World, kit: NodeKit, lb: LoadBalancerSim, mode: Mode, targets: dict[str, str]
    ) -> LbRun:
        """The spot notice, then watch the drain and the traffic until the run's end (module docstring)."""
        now = time.time()
        # IMDS shows whole seconds: put the action time on one, so the deadline the agent reads is exact.
        deadline = float(math.ceil(now + world.timing.spot_notice))
        rec = ScenarioRecord(
            SPOT_ITN, kit.node, kit.instance_id, notice_at=now, deadline=deadline, label=mode.label
        )
        world.observer.track(rec)
        lb.reset_counts()
        world.fleet.fire_spot_itn(kit.instance_id, "terminate", at=now, lead_seconds=deadline - now)
        names = ", ".join(label.split("/", 1)[-1] for label in sorted(targets.values()))
        world.emit(
            TimelineEntry(
                now,
                kit.node,
                f"notice: spot interruption (deadline +{deadline - now:.1f}s); "
                f"{len(targets)} load-balancer target(s) here: {names}",
                "bold red",
            )
        )
        run = LbRun(mode.key, mode.deregistration, rec, lb.result(), dict(targets))
        row = self._rows[mode.key]
        row.state = "interrupted"
        follow = asyncio.create_task(self._follow(lb, run, world.emit))

        def finished() -> bool:
            return (
                rec.emptied_at is not None
                and rec.restored_at is not None
                and run.stopped_routing_at is not None
            )

        try:
            done = await wait_for(finished, world.observer, deadline)
            if done:
                await asyncio.sleep(TAIL)
            else:
                await terminate(world, kit, rec)
                lb.mark_node_down(kit.node)
            rec.timed_out = not done
            rec.finished_at = time.time()
        finally:
            follow.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follow
        run.result = lb.result()
        res = run.result
        row.sent, row.failed, row.state = res.sent, res.failed, "done"
        world.emit(
            TimelineEntry(
                time.time(),
                kit.node,
                f"lb: {res.failed} of {res.sent} requests failed"
                + (f", error window {res.error_window_s:.2f}s" if res.failed else ""),
                "bold red" if res.failed else "bold green",
            )
        )
        return run

    async def _follow(self, lb: LoadBalancerSim, run: LbRun, emit: Callable[[TimelineEntry], None]) -> None:
        """Turn what the load balancer does with the node's targets into timeline lines."""
        node = run.rec.node
        reasons: set[str] = set()
        routed = {ip: True for ip in run.targets}
        row = self._rows[run.key]
        while True:
            now = time.time()
            res = lb.result()
            row.sent, row.failed, row.state = res.sent, res.failed, _state(run)
            for reason in sorted(set(res.failures_by_reason) - reasons):
                reasons.add(reason)
                emit(TimelineEntry(now, node, f"lb: requests failing ({reason})", "red"))
            views = {v.target_id: v for v in lb.targets() if v.port == cluster.LB_PORT}
            for ip, was in routed.items():
                if not was or lb.routed(ip, cluster.LB_PORT):
                    continue
                routed[ip] = False
                why = _left_rotation(ip, views.get(ip), run, res)
                run.left_rotation[run.targets[ip]] = why
                name = run.targets[ip].split("/", 1)[-1]
                emit(TimelineEntry(now, node, f"lb: no more requests to {name} ({ip}): {why}", "yellow"))
            if run.stopped_routing_at is None and not any(routed.values()):
                run.stopped_routing_at = now
            await asyncio.sleep(FOLLOW_EVERY)

    # -- summary and panel ----------------------------------------------------------------------

    def _lb_summary(self, runs: list[LbRun]) -> dict[str, Any]:
        t = self.timing
        summary = lb_summary(
            runs,
            time_scale=t.scale,
            spot_nodes=self.opts.spot_nodes,
            on_demand_nodes=cluster.ON_DEMAND_NODES,
            duration_s=round(time.time() - self.started, 2),
            workdir=str(self.opts.workdir),
            kubeconfig=str(self.kubeconfig),
            balancer={
                "rate": REQUEST_RATE,
                "refresh_s": LB_REFRESH_SECONDS,
                "health_check_interval_s": round(t.s(HEALTH_CHECK_INTERVAL_SECONDS), 3),
                "unhealthy_threshold": HEALTH_CHECK_UNHEALTHY,
                "healthy_threshold": HEALTH_CHECK_HEALTHY,
                "lb_controller_lag_s": round(t.s(LB_CONTROLLER_LAG_SECONDS), 3),
                "propagation_s": round(t.s(LB_PROPAGATION_SECONDS), 3),
                "deregistration_delay_s": t.deregistration_delay,
                "story_deregistration_delay_s": DEREGISTRATION_DELAY_SECONDS,
                "settle_s": round(t.lb_settle, 3),
                "max_delay_s": round(t.lb_max_delay, 3),
            },
            problems=list(self.problems),
            timeline=self.timeline.lines,
        )
        if self.problems:
            summary["ok"] = False
        return summary

    def _panel(self) -> Table:
        table = Table(box=None, show_header=True, header_style="dim", padding=(0, 1))
        for col in ("run", "node", "state", "sent", "failed"):
            table.add_column(col)
        for key, row in self._rows.items():
            if self._live is not None and self._live[0] == key:
                res = self._live[1].result()
                row.sent, row.failed = res.sent, res.failed
            table.add_row(row.label, row.node, row.state, str(row.sent), str(row.failed))
        return table


# -- helpers (pure) -----------------------------------------------------------------------------


def _web_pods(observer: Observer) -> dict[str, tuple[str, str]]:
    """pod IP -> (``namespace/name``, node) of the load-balanced Deployment's Ready pods."""
    out: dict[str, tuple[str, str]] = {}
    for pod in observer.pods.values():
        meta = pod.get("metadata") or {}
        ip = (pod.get("status") or {}).get("podIP")
        if (
            meta.get("namespace") == cluster.LB_NAMESPACE
            and (meta.get("labels") or {}).get("app") == cluster.LB_APP
            and ip
            and pod_ready(pod)
        ):
            out[str(ip)] = (
                f"{meta['namespace']}/{meta['name']}",
                str((pod.get("spec") or {}).get("nodeName")),
            )
    return out


def _busiest(observer: Observer, spot_nodes: list[str]) -> str:
    """The spot node with the most load-balanced pods (then the most pods; the first name on ties)."""

    def weight(node: str) -> tuple[int, int, str]:
        pods = [p for p in observer.pods_on(node) if not is_daemon_pod(p)]
        web = sum(
            1 for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get("app") == cluster.LB_APP
        )
        return (-web, -len(pods), node)

    return min(spot_nodes, key=weight)


def _left_rotation(ip: str, view: TargetView | None, run: LbRun, res: LoadBalancerResult) -> str:
    """Why the load balancer stopped routing to a target, in a few words."""
    ours = {t.get("id") for t in (run.rec.deregistration or {}).get("targets") or ()}
    if view is None:
        return "deregistered (no longer listed)"
    if view.state == "draining":
        if ip in ours:
            return "draining: deregistered by kubespot"
        if any(d.target_id == ip for d in res.deregistrations):
            return "draining: deregistered by the AWS Load Balancer Controller"
        return "draining"
    if not view.lb_healthy:
        return "failed its health checks"
    return str(view.state)


def _state(run: LbRun) -> str:
    """A few words for the live panel."""
    rec = run.rec
    if rec.fenced_at is None:
        return "notice; waiting for fence"
    left = [p for p in rec.evictable() if p.gone_at is None]
    routing = "routed" if run.stopped_routing_at is None else "out of rotation"
    if left:
        return f"draining ({len(left)} pods left); targets {routing}"
    return f"empty; targets {routing}"


def _log_records(path: Path) -> list[Obj]:
    records: list[Obj] = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return records
    for line in text.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(orjson.JSONDecodeError):
                data = orjson.loads(line)
                if isinstance(data, dict):
                    records.append(data)
    return records
