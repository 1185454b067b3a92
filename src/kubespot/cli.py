"""The ``kubespot`` command: one entry point for the product and its simulators.

This module is the composition root: it is the only module allowed to reach both the product
packages and ``kubespot.sim``, and it imports each subcommand lazily so ``kubespot agent`` never
loads simulator code (or its dependencies) into the per-node agent's memory. A subcommand whose
optional dependencies are not installed (``kubespot[sim]``, ``kubespot[controller]``) says in one line
which extra to install and exits 2, instead of a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from . import __version__

#: subcommand -> (module with add_arguments/main, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "kubesim": ("kubespot.sim.kubesim.cli", "serve a simulated Kubernetes API with a sample cluster"),
    "imds-sim": ("kubespot.sim.imdssim.cli", "serve a simulated EC2 instance metadata service"),
    "aws-sim": ("kubespot.sim.awssim.cli", "serve moto with kubespot's extensions (Pricing, spot, AMIs)"),
    "node-joiner": ("kubespot.sim.joiner.cli", "boot a cluster's EC2 instances as Nodes in kubesim"),
    "agent": ("kubespot.agent.command", "the per-node agent: watch instance metadata, fence and drain"),
    "controller": ("kubespot.operator.command", "the cluster-wide queue processor (SQS/EventBridge)"),
    "aws": ("kubespot.aws_cli", "AWS set-up for the controller: queue, EventBridge rules, IAM policy"),
    "drain": ("kubespot.drain_cli", "deadline-aware drain of one node, like kubectl drain"),
    "convert": (
        "kubespot.convert_cli",
        "old Karpenter manifests (Provisioner, AWSNodeTemplate, v1beta1) and eksctl node groups to v1 YAML",
    ),
    "plan": ("kubespot.plan_cli", "what the provisioner would launch for the pending pods, and its cost"),
    "sandbox": ("kubespot.sandbox.command", "a simulated cluster with real agents under interruptions"),
}


#: subcommand -> the optional dependency group (``pip install 'kubespot[<extra>]'``) it needs.
EXTRAS: dict[str, str] = {
    "kubesim": "sim",
    "imds-sim": "sim",
    "aws-sim": "sim",
    "node-joiner": "sim",
    "sandbox": "sim",
    "controller": "controller",
    "aws": "controller",
    "plan": "controller",
}


class MissingExtra(Exception):
    """A subcommand's third-party module is not installed: the user needs an extra, not a traceback."""

    def __init__(self, command: str, module: str) -> None:
        extra = EXTRAS.get(command)
        if extra:
            need = (
                f"needs the '{extra}' extra (module {module!r} is not installed): "
                f"pip install 'kubespot[{extra}]'"
            )
        else:
            need = f"module {module!r} is not installed: reinstall kubespot"
        super().__init__(f"kubespot {command} {need}")


def _import(command: str) -> Any:
    """The subcommand's module; ``MissingExtra`` when a dependency outside kubespot is missing."""
    try:
        return importlib.import_module(SUBCOMMANDS[command][0])
    except ModuleNotFoundError as exc:
        _reraise_missing(command, exc)


def _reraise_missing(command: str, exc: ModuleNotFoundError) -> NoReturn:
    top = (exc.name or "").split(".")[0]
    if not top or top == "kubespot":
        raise exc  # a bug in kubespot itself: the traceback is what a developer needs
    raise MissingExtra(command, top) from None


def _parser(selected: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubespot", description="Kubernetes on spot instances, safely.")
    parser.add_argument("--version", action="version", version=f"kubespot {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("version", help="print the version")
    for name, (_module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        # Only the chosen subcommand's module is imported (its flags are needed to parse).
        if selected == name:
            _import(name).add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = _parser(argv[0] if argv else None)
        args = parser.parse_args(argv)
        if args.command in (None, "version"):
            if args.command is None:
                parser.print_help()
                return 2
            print(f"kubespot {__version__}")
            return 0
        module = _import(args.command)
        try:
            return int(module.main(args))
        except ModuleNotFoundError as exc:  # a subcommand that imports its dependencies lazily
            _reraise_missing(args.command, exc)
    except MissingExtra as exc:
        print(exc, file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
