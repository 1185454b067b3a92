"""The ``kubespot`` command: one entry point for the product and its simulators.

This module is the composition root: it is the only module allowed to reach both the product
packages and ``kubespot.sim``, and it imports each subcommand lazily so ``kubespot agent`` never
loads simulator code (or its dependencies) into the per-node agent's memory.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import __version__

#: subcommand -> (module with add_arguments/main, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "kubesim": ("kubespot.sim.kubesim.cli", "serve a simulated Kubernetes API with a sample cluster"),
    "imds-sim": ("kubespot.sim.imdssim.cli", "serve a simulated EC2 instance metadata service"),
    "agent": ("kubespot.agent.command", "the per-node agent: watch instance metadata, fence and drain"),
    "controller": ("kubespot.controller.command", "the cluster-wide queue processor (SQS/EventBridge)"),
    "aws": ("kubespot.aws_cli", "AWS set-up for the controller: queue, EventBridge rules, IAM policy"),
    "drain": ("kubespot.drain_cli", "deadline-aware drain of one node, like kubectl drain"),
    "sandbox": ("kubespot.sandbox.command", "a simulated cluster with real agents under interruptions"),
}


def _parser(selected: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubespot", description="Kubernetes on spot instances, safely.")
    parser.add_argument("--version", action="version", version=f"kubespot {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("version", help="print the version")
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        # Only the chosen subcommand's module is imported (its flags are needed to parse).
        if selected == name:
            importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if args.command in (None, "version"):
        if args.command is None:
            parser.print_help()
            return 2
        print(f"kubespot {__version__}")
        return 0
    module = importlib.import_module(SUBCOMMANDS[args.command][0])
    return int(module.main(args))


if __name__ == "__main__":
    raise SystemExit(main())
