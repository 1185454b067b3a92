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
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console

from .run import Options, Sandbox, SandboxError
from .summary import REBALANCE, SCENARIOS, SCHEDULED_REBOOT, SPOT_ITN
from .timeline import Timeline
from .timing import DEFAULT_TIME_SCALE, Timing

DEFAULT_SPOT_NODES = 6
MAX_SPOT_NODES = 40


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        choices=("all", *SCENARIOS),
        default="all",
        help="which interruption to fire (default: all three, each on its own spot node, at once)",
    )
    parser.add_argument(
        "--nodes",
        type=int,
        default=DEFAULT_SPOT_NODES,
        metavar="N",
        help=f"spot nodes, each with its own agent (default {DEFAULT_SPOT_NODES}; plus 2 on-demand nodes)",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=DEFAULT_TIME_SCALE,
        metavar="X",
        help=(
            "compress time X-fold: the 120 s spot notice, pod start and shutdown times, the agent's lead "
            f"and undo times (default {DEFAULT_TIME_SCALE:g}: the notice is 30 s and a run about a minute)"
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
    # The failing demo, for tests and the curious: a pod the drain can never move before the deadline.
    parser.add_argument("--blocking-pdb", action="store_true", help=argparse.SUPPRESS)


def _options(args: argparse.Namespace) -> Options:
    scenarios = SCENARIOS if args.scenario == "all" else (args.scenario,)
    if not 1 <= args.nodes <= MAX_SPOT_NODES:
        raise ValueError(f"--nodes must be between 1 and {MAX_SPOT_NODES}, got {args.nodes}")
    if args.nodes < len(scenarios) + 1:
        raise ValueError(
            f"--nodes {args.nodes} is too few: {len(scenarios)} scenario(s) need a node each, plus one spot "
            "node for their pods to move to"
        )
    Timing(args.time_scale)  # validates
    env: dict[str, str] = {}
    for item in args.agent_env:
        name, sep, value = item.partition("=")
        if not sep or not name.startswith("KUBESPOT_"):
            raise ValueError(f"--agent-env takes KUBESPOT_NAME=VALUE, got {item!r}")
        env[name] = value
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kubespot-sandbox-"))
    return Options(
        scenarios=tuple(s for s in (SPOT_ITN, REBALANCE, SCHEDULED_REBOOT) if s in scenarios),
        spot_nodes=args.nodes,
        time_scale=args.time_scale,
        workdir=workdir,
        keep=args.keep,
        blocking_pdb=args.blocking_pdb,
        agent_env=env,
    )


def main(args: argparse.Namespace) -> int:
    try:
        opts = _options(args)
    except ValueError as err:
        print(f"kubespot sandbox: {err}", file=sys.stderr)
        return 2
    # Piped output gets a width that fits the summary table instead of rich's 80 columns.
    console = None if args.json else Console(highlight=False, width=None if sys.stdout.isatty() else 150)
    err_console = Console(stderr=True, highlight=False)
    sandbox = Sandbox(opts, lambda records: Timeline(console, records))
    # Last resort if the interpreter exits without the orderly teardown (it normally runs first).
    atexit.register(sandbox.agents.kill_all_now)
    result: dict[str, Any] = {}

    def on_summary(summary: dict[str, Any]) -> None:
        result.update(summary)
        if args.json:
            sys.stdout.write(orjson.dumps(summary).decode() + "\n")
            sys.stdout.flush()
        else:
            sandbox.timeline.print_summary(summary, footer=_footer(summary))
        if opts.keep:
            (console or err_console).print(
                f"\nCluster kept up. In another terminal:\n  export KUBECONFIG={summary['kubeconfig']}\n"
                "  kubectl get nodes -L karpenter.sh/capacity-type,topology.kubernetes.io/zone\n"
                "  kubectl get pods -A -o wide\n"
                "Ctrl-C stops the agents and the cluster."
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
    lines.append(f"agent logs: {Path(summary['workdir'])}/agent-*.log   kubeconfig: {summary['kubeconfig']}")
    return lines
