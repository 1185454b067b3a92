"""``kubespot controller``: parse the settings, print the effective configuration, run until SIGTERM.

Settings come from flags > environment (kubespot's names, then the reference handler's) > the
``--config`` file > defaults; an invalid or missing value (a queue URL, or at least one AWS response
action for a controller without a queue) stops the controller before it starts, naming the setting
(exit code 2).
"""

from __future__ import annotations

import argparse
import logging

from kubespot import __version__
from kubespot.config import loader
from kubespot.config.controller import ControllerSettings
from kubespot.config.loader import Problem, SettingsError
from kubespot.controllers.response.response_actions import enabled_actions
from kubespot.operator.runtime import Operator
from kubespot.process import command

log = logging.getLogger("kubespot.controller")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    loader.add_arguments(parser, ControllerSettings)


def load_settings(args: argparse.Namespace) -> ControllerSettings:
    settings = loader.load(ControllerSettings, namespace=args)
    # Without a queue the controller still has work when an AWS response action is on: the agents
    # fence the nodes (IMDS), the controller deregisters, isolates and publishes; or when it only
    # keeps the provisioning status.
    if not settings.queue.url and not enabled_actions(settings) and not settings.provisioning.enabled:
        raise SettingsError(
            [
                Problem(
                    "queue.url",
                    "",
                    None,
                    "required but not set: set --queue-url, KUBESPOT_QUEUE_URL or QUEUE_URL (or, for a "
                    "controller without a queue, turn on an AWS response action: loadbalancer.enabled, "
                    "isolation.enabled, publish.sns_topic_arn or publish.event_bus, or "
                    "provisioning.enabled)",
                )
            ]
        )
    return settings


def main(args: argparse.Namespace) -> int:
    return command.main(
        "controller",
        lambda: load_settings(args),
        lambda settings, targets, calls: Operator(settings, targets=targets, calls=calls),
        log=log,
        starting=lambda s: ("kubespot controller %s starting", __version__),
    )
