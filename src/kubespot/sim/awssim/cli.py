"""Command line for awssim (wired as ``kubespot aws-sim``): moto with kubespot's extensions until a signal.

For local development, game days and tests of other tools: ``kubespot aws-sim --port 5000``, then
``export AWS_ENDPOINT_URL=http://127.0.0.1:5000`` (the command prints the variables to set) and any
AWS SDK or the AWS CLI reaches moto, with the Pricing API, the synthetic spot market, the EKS AMI
SSM parameters and the other extensions of ``docs/simulators/awssim.md``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import TextIO

from kubespot.sim.awssim.server import DEFAULT_REGION, MotoServer

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 5000  # moto's own default port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register awssim's flags on ``parser``."""
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to bind (default %(default)s)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="port; 0 picks a free one (default %(default)s)"
    )
    parser.add_argument("--region", default=DEFAULT_REGION, help="default region (default %(default)s)")
    parser.add_argument(
        "--ondemand-prices",
        metavar="FILE",
        default=None,
        help="on-demand price JSON (shaped like aws-ondemand-prices.json) for the spot price model "
        "(default: the packaged table)",
    )


def print_banner(server: MotoServer, out: TextIO) -> None:
    print(f"awssim: moto with kubespot's extensions at {server.endpoint_url}", file=out)
    for name, value in server.env().items():
        print(f"  export {name}={value}", file=out)
    out.flush()


def serve(server: MotoServer, *, out: TextIO = sys.stdout, stop: threading.Event | None = None) -> None:
    """Run ``server`` until SIGINT or SIGTERM (or ``stop`` is set)."""
    stop = stop or threading.Event()

    def on_signal(_signum: int, _frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with server:
            print_banner(server, out)
            stop.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("awssim: stopped", file=out, flush=True)


def main(args: argparse.Namespace) -> int:
    """Entry point for ``kubespot aws-sim``; returns the process exit code."""
    server = MotoServer(
        host=args.host, port=args.port, region=args.region, ondemand_prices=args.ondemand_prices
    )
    try:
        serve(server)
    except OSError as exc:
        print(f"awssim: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="awssim", description="moto with kubespot's extensions")
    add_arguments(_parser)
    sys.exit(main(_parser.parse_args()))
