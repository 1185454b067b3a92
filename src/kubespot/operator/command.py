"""``kubespot controller``: parse the settings, print the effective configuration, run until SIGTERM.

Settings come from flags > environment (kubespot's names, then the reference handler's) > the
``--config`` file > defaults; an invalid or missing value (a queue URL, or at least one AWS response
action for a controller without a queue) stops the controller before it starts, naming the setting
(exit code 2).
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
from kubespot.config.controller import ControllerSettings
from kubespot.config.http_calls import HttpCall
from kubespot.config.loader import Problem, SettingsError
from kubespot.config.notify import NotifyTarget
from kubespot.controllers.response.response_actions import enabled_actions
from kubespot.kube import KubeError
from kubespot.observability.logs import configure
from kubespot.operator.runtime import Operator
from kubespot.process.supervise import install_signal_handlers

log = logging.getLogger("kubespot.controller")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    loader.add_arguments(parser, ControllerSettings)


def load_settings(args: argparse.Namespace) -> ControllerSettings:
    settings = loader.load(ControllerSettings, namespace=args)
    # Without a queue the controller still has work when an AWS response action is on: the agents
    # fence the nodes (IMDS), the controller deregisters, isolates and publishes.
    if not settings.queue.url and not enabled_actions(settings):
        raise SettingsError(
            [
                Problem(
                    "queue.url",
                    "",
                    None,
                    "required but not set: set --queue-url, KUBESPOT_QUEUE_URL or QUEUE_URL (or, for a "
                    "controller without a queue, turn on an AWS response action: loadbalancer.enabled, "
                    "isolation.enabled, publish.sns_topic_arn or publish.event_bus)",
                )
            ]
        )
    return settings


async def run(
    settings: ControllerSettings,
    targets: tuple[NotifyTarget, ...] | None = None,
    calls: tuple[HttpCall, ...] | None = None,
) -> int:
    stop = asyncio.Event()
    install_signal_handlers(stop)
    try:
        controller = Operator(settings, targets=targets, calls=calls)
    except KubeError as err:
        log.critical("cannot start: %s", err)
        return 2
    return await controller.run(stop)


def main(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args)
        # Every notification target and HTTP call, templates compiled: a typo stops it now.
        targets, calls = load_outgoing(settings.notify, settings.webhook, settings.http_calls)
    except SettingsError as exc:
        print(f"kubespot controller: {exc}", flush=True, file=sys.stderr)
        return 2
    obs = settings.observability
    configure(json=obs.json_logging, level=obs.log_level)
    log.info("kubespot controller %s starting", __version__)
    log.info("effective configuration: %s", orjson.dumps(loader.redacted(settings)).decode())
    if targets or calls:
        log.info("outgoing: %s", describe_outgoing(targets, calls))
    return asyncio.run(run(settings, targets, calls))
