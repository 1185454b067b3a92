"""Command line for the joiner (wired as ``kubespot node-joiner``): flags -> the loop until a signal.

``kubespot node-joiner --ec2-endpoint http://127.0.0.1:5000 --kube-url http://127.0.0.1:6443
--cluster demo --boot-delay 5``: every running instance tagged for ``demo`` becomes a Node.
``--time-scale X`` runs its timeline X times faster, as ``kubespot sandbox --time-scale`` does:
every duration flag but ``--poll-interval`` (the joiner's own pace) is divided by X.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal

from kubespot.sim.joiner.ec2 import Ec2Reader
from kubespot.sim.joiner.joiner import Joiner, JoinerConfig
from kubespot.sim.joiner.kube import KubeWriter


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"seconds must be a finite number >= 0, got {text!r}")
    return value


def _scale(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time scale: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"the time scale must be a finite number > 0, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the joiner's flags on ``parser``."""
    parser.add_argument("--ec2-endpoint", required=True, help="EC2 endpoint URL (moto / kubespot aws-sim)")
    parser.add_argument("--region", default="us-east-1", help="AWS region (default %(default)s)")
    parser.add_argument("--kube-url", required=True, help="Kubernetes API URL (kubesim)")
    parser.add_argument("--cluster", required=True, help="cluster name the instances are tagged with")
    defaults = JoinerConfig(cluster="")
    parser.add_argument(
        "--boot-delay",
        type=_seconds,
        default=defaults.boot_delay,
        metavar="S",
        help="seconds from an instance's LaunchTime to its Node's registration (default %(default)s)",
    )
    parser.add_argument(
        "--ready-delay",
        type=_seconds,
        default=defaults.ready_delay,
        metavar="S",
        help="seconds from registration to Ready (default %(default)s)",
    )
    parser.add_argument(
        "--jitter",
        type=_seconds,
        default=defaults.jitter,
        metavar="S",
        help="up to this many more boot seconds per instance, seeded (default %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=defaults.seed, help="jitter seed (default %(default)s)")
    parser.add_argument(
        "--node-monitor-grace-period",
        type=_seconds,
        default=defaults.node_monitor_grace,
        metavar="S",
        help=(
            "seconds from a machine going down to its Node's Ready Unknown, as kube-controller-manager's "
            "flag of that name (default %(default)s, upstream's)"
        ),
    )
    parser.add_argument(
        "--node-monitor-period",
        type=_seconds,
        default=defaults.node_monitor_period,
        metavar="S",
        help=(
            "seconds between the cloud node lifecycle controller's passes, which delete the Nodes of "
            "terminated instances, as cloud-controller-manager's flag of that name (default %(default)s)"
        ),
    )
    parser.add_argument(
        "--time-scale",
        type=_scale,
        default=1.0,
        metavar="X",
        help=(
            "run the timeline X times faster: every duration flag but --poll-interval is divided by X "
            "(default %(default)s: real time)"
        ),
    )
    parser.add_argument(
        "--poll-interval",
        type=_seconds,
        default=defaults.poll_interval,
        metavar="S",
        help="seconds between DescribeInstances polls (default %(default)s)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every registration and deletion")


def config_from(args: argparse.Namespace) -> JoinerConfig:
    scale = args.time_scale
    return JoinerConfig(
        cluster=args.cluster,
        boot_delay=args.boot_delay / scale,
        ready_delay=args.ready_delay / scale,
        jitter=args.jitter / scale,
        seed=args.seed,
        poll_interval=max(args.poll_interval, 0.05),
        node_monitor_grace=args.node_monitor_grace_period / scale,
        node_monitor_period=args.node_monitor_period / scale,
    )


async def _serve(args: argparse.Namespace) -> None:
    config = config_from(args)
    ec2 = Ec2Reader(args.ec2_endpoint, config.cluster, region=args.region)
    async with KubeWriter(args.kube_url) as kube:
        task = asyncio.ensure_future(Joiner(ec2, kube, config).run())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, task.cancel)
        print(
            f"node-joiner: cluster {config.cluster}, EC2 {args.ec2_endpoint}, Kubernetes {args.kube_url}",
            flush=True,
        )
        with contextlib.suppress(asyncio.CancelledError):
            await task


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(message)s"
    )
    asyncio.run(_serve(args))
    return 0
