"""``kubespot agent``: parse the settings, print the effective configuration, run until SIGTERM.

Settings come from flags > environment (kubespot's names, then the reference handler's) > the
``--config`` file > defaults. An invalid or missing value stops the agent before it starts, with a
message naming the setting and where the bad value came from (exit code 2).
"""

from __future__ import annotations

import argparse
import logging

from kubespot import __version__
from kubespot.config import loader
from kubespot.config.agent import AgentSettings
from kubespot.process import command

from .runtime import Agent

log = logging.getLogger("kubespot.agent")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    loader.add_arguments(parser, AgentSettings)


def load_settings(args: argparse.Namespace) -> AgentSettings:
    """The settings, validated. Templates are checked by ``load_outgoing`` (an unreadable file stops
    the agent) and by the notifier (one that cannot be used is logged, naming the construct, and the
    default message is sent instead: NTH's templates must never crash-loop the agent on every node)."""
    return loader.load(AgentSettings, namespace=args)


def main(args: argparse.Namespace) -> int:
    return command.main(
        "agent",
        lambda: load_settings(args),
        lambda settings, targets, calls: Agent(settings, targets=targets, calls=calls),
        log=log,
        starting=lambda s: ("kubespot agent %s starting on node %s", __version__, s.node_name),
    )
