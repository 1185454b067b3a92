"""``kubespot kubesim``: serve a synthetic or loaded cluster until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import time

from .app import KubeSim
from .controllers import ControllerConfig
from .controllers.pacing import DEFAULT_MIN_SHARE
from .faults import Faults, parse_rule


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=10, help="synthetic cluster size in nodes (default 10)")
    parser.add_argument(
        "--pods-per-node",
        type=int,
        default=10,
        help="workload pods per node, besides DaemonSet pods (default 10)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic cluster (default 0)")
    parser.add_argument(
        "--from",
        dest="from_file",
        metavar="DUMP.json",
        help="load objects from `kubectl get nodes,pods,pdb,deploy,rs,ds,sts,pvc,pv,sc -A -o json` output "
        "instead of generating a cluster",
    )
    parser.add_argument(
        "--kubeconfig-out",
        metavar="PATH",
        default="kubesim.kubeconfig",
        help="where to write the kubeconfig for clients (default ./kubesim.kubeconfig)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: a free port)")
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="RULE",
        help="fault rule, repeatable: e.g. 'verb=patch,resource=nodes,rate=0.2,code=409' or "
        "'resource=pods,latency=50' or 'resource=pods,drop_watch_after=30'",
    )
    parser.add_argument(
        "--qps", type=float, default=0.0, help="API QPS limit answering 429 beyond it (0: none)"
    )
    parser.add_argument("--burst", type=int, default=0, help="burst for --qps (default 2 x qps)")
    parser.add_argument(
        "--pod-start-seconds",
        type=float,
        default=1.0,
        help="seconds from binding to Ready for pods without the start annotation (default 1)",
    )
    parser.add_argument(
        "--control-plane-share",
        type=float,
        default=DEFAULT_MIN_SHARE,
        metavar="SHARE",
        help="least share of wall time (0-1] the simulated control plane keeps while API requests are "
        f"served ahead of it (default {DEFAULT_MIN_SHARE})",
    )
    parser.add_argument(
        "--no-api-first",
        action="store_true",
        help="let the simulated control plane run whenever it has work instead of serving API requests first",
    )
    parser.add_argument(
        "--eviction-write-seconds",
        type=float,
        default=ControllerConfig.eviction_write_seconds,
        metavar="S",
        help="seconds between an eviction's read of its PodDisruptionBudget and its write: concurrent "
        "evictions of one budget within it conflict and retry after 0.5 s as upstream's do; 0 turns "
        f"contention off (default {ControllerConfig.eviction_write_seconds})",
    )
    parser.add_argument(
        "--no-controllers",
        action="store_true",
        help="serve the API only: no kubelet, scheduler or workload controllers",
    )


def build(args: argparse.Namespace) -> KubeSim:
    """The ``KubeSim`` the CLI flags describe (raises ValueError on bad flags)."""
    faults = Faults(seed=args.seed)
    for text in args.fault:
        faults.add(parse_rule(text))
    if args.qps:
        faults.set_qps(args.qps, args.burst or None)
    on = not args.no_controllers
    if not 0.0 < args.control_plane_share <= 1.0:
        raise ValueError(f"--control-plane-share must be in (0, 1], not {args.control_plane_share}")
    controllers = ControllerConfig(
        pod_start_seconds=args.pod_start_seconds,
        scheduler=on,
        kubelet=on,
        workloads=on,
        api_first=not args.no_api_first,
        control_plane_share=args.control_plane_share,
        eviction_write_seconds=max(0.0, args.eviction_write_seconds),
    )
    objects = None
    if args.from_file:
        from .loader import load_dump

        objects = load_dump(args.from_file)
    return KubeSim(
        objects=objects,
        nodes=args.nodes,
        pods_per_node=args.pods_per_node,
        seed=args.seed,
        host=args.host,
        port=args.port,
        controllers=controllers,
        faults=faults,
        kubeconfig_path=args.kubeconfig_out,
    )


async def _serve(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        sim = build(args)
    except (ValueError, OSError) as exc:
        print(f"kubesim: {exc}", file=sys.stderr)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with sim:
        took = time.monotonic() - started
        print(f"kubesim serving {sim.loaded} objects at {sim.url} (loaded in {took:.1f}s)", flush=True)
        print(f"  export KUBECONFIG={sim.kubeconfig_path.resolve()}", flush=True)
        print("  kubectl get nodes   # Ctrl-C to stop", flush=True)
        await stop.wait()
    return 0


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return asyncio.run(_serve(args))
