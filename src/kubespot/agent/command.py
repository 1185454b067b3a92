"""``kubespot agent``: parse the settings, print the effective configuration, run until SIGTERM.

Settings come from flags > environment (kubespot's names, then the reference handler's) > the
``--config`` file > defaults. An invalid or missing value stops the agent before it starts, with a
message naming the setting and where the bad value came from (exit code 2).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

import orjson

from kubespot import __version__
from kubespot.actions.outgoing import describe_outgoing, load_outgoing
from kubespot.config import loader
from kubespot.config.agent import AgentSettings
from kubespot.config.http_calls import HttpCall
from kubespot.config.loader import SettingsError
from kubespot.config.notify import NotifyTarget
from kubespot.kube import KubeError
from kubespot.observability.logs import configure
from kubespot.process.supervise import install_signal_handlers

from .runtime import Agent

log = logging.getLogger("kubespot.agent")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    loader.add_arguments(parser, AgentSettings)


def load_settings(args: argparse.Namespace) -> AgentSettings:
    """The settings, validated. Templates are checked by ``load_outgoing`` (an unreadable file stops
    the agent) and by the notifier (one that cannot be used is logged, naming the construct, and the
    default message is sent instead: NTH's templates must never crash-loop the agent on every node)."""
    return loader.load(AgentSettings, namespace=args)


async def run(
    settings: AgentSettings,
    targets: tuple[NotifyTarget, ...] | None = None,
    calls: tuple[HttpCall, ...] | None = None,
) -> int:
    stop = asyncio.Event()
    install_signal_handlers(stop)
    try:
        agent = Agent(settings, targets=targets, calls=calls)
    except KubeError as err:  # no kubeconfig, no in-cluster service account: a set-up problem
        log.critical("cannot start: %s", err)
        return 2
    return await agent.run(stop)


def main(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args)
        # Every notification target and HTTP call, templates compiled: a typo stops the agent now.
        targets, calls = load_outgoing(settings.notify, settings.webhook, settings.http_calls)
    except SettingsError as exc:
        print(f"kubespot agent: {exc}", flush=True, file=sys.stderr)
        return 2
    obs = settings.observability
    configure(json=obs.json_logging, level=obs.log_level)
    log.info("kubespot agent %s starting on node %s", __version__, settings.node_name)
    log.info("effective configuration: %s", orjson.dumps(loader.redacted(settings)).decode())
    if targets or calls:
        log.info("outgoing: %s", describe_outgoing(targets, calls))
    try:
        return asyncio.run(run(settings, targets, calls))
    except KeyboardInterrupt:  # pragma: no cover - SIGINT is handled; this is a second Ctrl-C
        return 130
