"""``kubespot sandbox``: flags, the exit code, and making sure nothing outlives the command.

Exit codes: 0 when every scenario kept its promise, 1 when one did not or the sandbox could not
run, 2 for bad flags, 130 after Ctrl-C (SIGTERM is handled the same way). Whatever ends the run,
every agent process is stopped before the command returns.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import signal
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console

from kubespot.handling.deregistration import DRAIN_RESERVE, wait_bound

from .lbsummary import LOAD_BALANCER
from .provision_summary import PROVISION
from .run import Options, Sandbox, SandboxError
from .summary import REBALANCE, SCENARIOS, SCHEDULED_REBOOT, SPOT_ITN
from .timeline import Timeline
from .timing import (
    DEFAULT_TIME_SCALE,
    LB_DEFAULT_TIME_SCALE,
    NODE_MONITOR_GRACE_SECONDS,
    SAFETY_MARGIN_SECONDS,
    Timing,
)

DEFAULT_SPOT_NODES = 6
#: The load-balancer scenario runs twice: fewer nodes keep it short (each still has two web pods).
LB_DEFAULT_SPOT_NODES = 4
MAX_SPOT_NODES = 40
#: Real seconds from the fence until AWS accepted the controller's deregistration, allowed for on
#: top of the settle time when checking that the agent's wait can last long enough.
DEREGISTRATION_ALLOWANCE = 3.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        choices=("all", *SCENARIOS, LOAD_BALANCER, PROVISION),
        default="all",
        help=(
            "which interruption to fire (default: all three, each on its own spot node, at once); "
            f"{LOAD_BALANCER}: one spot interruption behind a simulated load balancer, run without and "
            "with load-balancer deregistration, compared by failed requests; "
            f"{PROVISION}: the provisioner against a spot market (scale up, insufficient capacity, a zone "
            "reclaimed), run without and with the interruption handler teaching the provisioner"
        ),
    )
    parser.add_argument(
        "--nodes",
        type=int,
        default=None,
        metavar="N",
        help=(
            f"spot nodes, each with its own agent (default {DEFAULT_SPOT_NODES}, {LB_DEFAULT_SPOT_NODES} for "
            f"{LOAD_BALANCER}; plus 2 on-demand nodes)"
        ),
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=None,
        metavar="X",
        help=(
            "compress time X-fold: the 120 s spot notice, pod start and shutdown times, the agent's lead "
            f"and undo times (default {DEFAULT_TIME_SCALE:g}: the notice is 30 s and a run about a minute; "
            f"{LB_DEFAULT_TIME_SCALE:g} for {LOAD_BALANCER})"
        ),
    )
    parser.add_argument(
        "--node-monitor-grace-period",
        type=float,
        default=NODE_MONITOR_GRACE_SECONDS,
        metavar="S",
        help=(
            "real-world seconds from a vanished kubelet's last heartbeat to its Node's Ready Unknown, "
            "compressed by --time-scale like every duration (kube-controller-manager's flag; default "
            "%(default)g, upstream's; at least 40, 4 kubelet lease renewals); in --scenario provision a "
            "terminated instance's Node that was Ready is deleted only after it (the interruption "
            "scenarios delete it when the instance terminates)"
        ),
    )
    parser.add_argument("--json", action="store_true", help="print one JSON summary instead of the live view")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="after the summary, leave the cluster and agents up for kubectl until Ctrl-C",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="directory for the kubeconfig, agent logs and uptime files (default: a new temporary directory)",
    )
    parser.add_argument(
        "--agent-env",
        action="append",
        default=[],
        metavar="KUBESPOT_NAME=VALUE",
        help="extra agent setting, repeatable (e.g. KUBESPOT_DRAIN_PDB_DEADLINE_ACTION=keep)",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=None,
        metavar="N",
        help=f"{PROVISION}: the Deployments' pods in all after the scale-up (default 500)",
    )
    # The failing demo, for tests and the curious: a pod the drain can never move before the deadline.
    parser.add_argument("--blocking-pdb", action="store_true", help=argparse.SUPPRESS)


def _options(args: argparse.Namespace) -> Options:
    if args.scenario == PROVISION:
        return _provision_options(args)
    if args.replicas is not None:
        raise ValueError(f"--replicas applies to --scenario {PROVISION} only")
    lb = args.scenario == LOAD_BALANCER
    scenarios = SCENARIOS if args.scenario == "all" else (args.scenario,)
    nodes = args.nodes if args.nodes is not None else (LB_DEFAULT_SPOT_NODES if lb else DEFAULT_SPOT_NODES)
    scale = (
        args.time_scale
        if args.time_scale is not None
        else (LB_DEFAULT_TIME_SCALE if lb else DEFAULT_TIME_SCALE)
    )
    if not 1 <= nodes <= MAX_SPOT_NODES:
        raise ValueError(f"--nodes must be between 1 and {MAX_SPOT_NODES}, got {nodes}")
    if nodes < len(scenarios) + 1:
        raise ValueError(
            f"--nodes {nodes} is too few: {len(scenarios)} scenario(s) need a node each, plus one spot "
            "node for their pods to move to"
        )
    timing = Timing(scale, story_node_monitor_grace=args.node_monitor_grace_period)  # validates
    if lb:
        if args.blocking_pdb:
            raise ValueError(f"--blocking-pdb does not apply to --scenario {LOAD_BALANCER}")
        problem = lb_time_scale_problem(timing)
        if problem:
            raise ValueError(problem)
    env: dict[str, str] = {}
    for item in args.agent_env:
        name, sep, value = item.partition("=")
        if not sep or not name.startswith("KUBESPOT_"):
            raise ValueError(f"--agent-env takes KUBESPOT_NAME=VALUE, got {item!r}")
        env[name] = value
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kubespot-sandbox-"))
    return Options(
        scenarios=(LOAD_BALANCER,)
        if lb
        else tuple(s for s in (SPOT_ITN, REBALANCE, SCHEDULED_REBOOT) if s in scenarios),
        spot_nodes=nodes,
        time_scale=scale,
        workdir=workdir,
        keep=args.keep,
        blocking_pdb=args.blocking_pdb,
        agent_env=env,
        node_monitor_grace=args.node_monitor_grace_period,
    )


def _provision_options(args: argparse.Namespace) -> Options:
    from .provision import DEFAULT_REPLICAS, DEFAULT_TIME_SCALE, MAX_REPLICAS

    if args.nodes is not None or args.blocking_pdb or args.agent_env:
        raise ValueError(f"--nodes, --agent-env and --blocking-pdb do not apply to --scenario {PROVISION}")
    replicas = args.replicas if args.replicas is not None else DEFAULT_REPLICAS
    if not 10 <= replicas <= MAX_REPLICAS:
        raise ValueError(f"--replicas must be between 10 and {MAX_REPLICAS}, got {replicas}")
    scale = args.time_scale if args.time_scale is not None else DEFAULT_TIME_SCALE
    Timing(scale, story_node_monitor_grace=args.node_monitor_grace_period)  # validates
    return Options(
        scenarios=(PROVISION,),
        spot_nodes=0,
        time_scale=scale,
        workdir=args.workdir or Path(tempfile.mkdtemp(prefix="kubespot-sandbox-")),
        keep=args.keep,
        replicas=replicas,
        node_monitor_grace=args.node_monitor_grace_period,
    )


def _wait_room(timing: Timing) -> tuple[float, float]:
    """(how long the agent may hold target pods after the fence, how long the scenario needs)."""
    fence = datetime.now(tz=UTC)
    # The fence comes a poll or two after the notice, and IMDS shows the deadline in whole seconds.
    deadline = fence + timedelta(seconds=timing.spot_notice - 1.0)
    until = wait_bound(
        now=fence,
        max_delay=timing.lb_max_delay,
        deadline=deadline,
        safety_margin=timing.s(SAFETY_MARGIN_SECONDS),
    )
    return (until - fence).total_seconds(), timing.lb_settle + DEREGISTRATION_ALLOWANCE


def lb_time_scale_problem(timing: Timing) -> str | None:
    """Why the load-balancer scenario cannot run at this time scale, or None.

    The agent bounds its wait for deregistration by the deadline, keeping for the drain at least
    the safety margin plus ``DRAIN_RESERVE`` real seconds (a typical grace period, not compressed):
    a notice compressed much below two minutes leaves no room for the wait at all.
    """
    room, need = _wait_room(timing)
    if room >= need:
        return None
    fits = [x / 2 for x in range(int(timing.scale * 2) - 1, 0, -1) if _fits(x / 2)]
    advice = f"; use --time-scale {fits[0]:g} or less" if fits else ""
    return (
        f"--time-scale {timing.scale:g} is too fast for --scenario {LOAD_BALANCER}: the agent keeps the "
        f"safety margin plus {DRAIN_RESERVE:g}s of the {timing.spot_notice:.0f}s notice for the drain, which "
        f"leaves {max(room, 0.0):.1f}s to hold pods for deregistration, and the scenario needs {need:.1f}s"
        f"{advice}"
    )


def _fits(scale: float) -> bool:
    try:
        room, need = _wait_room(Timing(scale))
    except ValueError:
        return False
    return room >= need


def main(args: argparse.Namespace) -> int:
    try:
        opts = _options(args)
    except ValueError as err:
        print(f"kubespot sandbox: {err}", file=sys.stderr)
        return 2
    # Piped output gets a width that fits the summary table instead of rich's 80 columns.
    console = None if args.json else Console(highlight=False, width=None if sys.stdout.isatty() else 150)
    err_console = Console(stderr=True, highlight=False)
    sandbox: Sandbox
    if opts.scenarios == (PROVISION,):
        # Imported here: it brings moto and boto3, which the agent scenarios do without.
        from .provision import ProvisionSandbox

        sandbox = ProvisionSandbox(opts, lambda records: Timeline(console, records), replicas=opts.replicas)
    elif opts.scenarios == (LOAD_BALANCER,):
        # Imported here: it brings moto and boto3, which the other scenarios do without.
        from .loadbalancer import LoadBalancerSandbox

        sandbox = LoadBalancerSandbox(opts, lambda records: Timeline(console, records))
    else:
        sandbox = Sandbox(opts, lambda records: Timeline(console, records))
    # Last resort if the interpreter exits without the orderly teardown (it normally runs first).
    atexit.register(sandbox.agents.kill_all_now)
    result: dict[str, Any] = {}

    def on_summary(summary: dict[str, Any]) -> None:
        result.update(summary)
        if args.json:
            sys.stdout.write(orjson.dumps(summary).decode() + "\n")
            sys.stdout.flush()
        elif summary.get("scenario") == PROVISION:
            from .provision import print_summary

            sandbox.timeline.close()
            print_summary(console, summary, _footer(summary))
        elif summary.get("scenario") == LOAD_BALANCER:
            sandbox.timeline.print_loadbalancer_summary(summary, footer=_footer(summary))
        else:
            sandbox.timeline.print_summary(summary, footer=_footer(summary))
        if opts.keep:
            aws = ""
            if summary.get("scenario") == LOAD_BALANCER:
                arn = summary["with_deregistration"]["target_group_arn"]
                aws = (
                    f"  AWS_ENDPOINT_URL={summary['aws_endpoint_url']} AWS_ACCESS_KEY_ID=testing "
                    "AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1 \\\n"
                    f"    aws elbv2 describe-target-health --target-group-arn {arn}\n"
                )
            (console or err_console).print(
                f"\nCluster kept up. In another terminal:\n  export KUBECONFIG={summary['kubeconfig']}\n"
                "  kubectl get nodes -L karpenter.sh/capacity-type,topology.kubernetes.io/zone\n"
                f"  kubectl get pods -A -o wide\n{aws}"
                "Ctrl-C stops the agents and the cluster.",
                markup=False,
            )

    try:
        asyncio.run(_run(sandbox, on_summary))
    except KeyboardInterrupt:
        err_console.print("kubespot sandbox: interrupted; agents and simulators stopped")
        return 0 if (opts.keep and result.get("ok")) else 130
    except SandboxError as err:
        err_console.print(f"kubespot sandbox: {err}", markup=False)
        if args.json:
            sys.stdout.write(orjson.dumps({"ok": False, "error": str(err)}).decode() + "\n")
        return 1
    return 0 if result.get("ok") else 1


async def _run(sandbox: Sandbox, on_summary: Any) -> None:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    # SIGTERM ends the run like Ctrl-C does: cancel, so every `finally` stops what it started.
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        await sandbox.run(on_summary)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


def _footer(summary: dict[str, Any]) -> list[str]:
    lines = [f"run took {summary['duration_s']:.1f}s at time scale {summary['time_scale']:g}x"]
    for problem in summary.get("problems", ()):
        lines.append(f"problem: {problem}")
    if summary.get("scenario") == PROVISION:
        lines.append(
            f"controller logs: {Path(summary['workdir'])}/{{shares-nothing,kubespot}}/controller.log"
        )
    elif summary.get("scenario") == LOAD_BALANCER:
        lines.append(f"logs: {Path(summary['workdir'])}/*-deregistration/{{agent-*,controller}}.log")
    else:
        lines.append(
            f"agent logs: {Path(summary['workdir'])}/agent-*.log   kubeconfig: {summary['kubeconfig']}"
        )
    return lines
