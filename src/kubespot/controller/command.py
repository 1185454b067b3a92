"""``kubespot controller``: parse the settings, print the effective configuration, run until SIGTERM.

Settings come from flags > environment (kubespot's names, then the reference handler's) > the
``--config`` file > defaults; an invalid or missing value (the queue URL is required) stops the
controller before it starts, naming the setting (exit code 2).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

import orjson

from kubespot import __version__
from kubespot.config import loader
from kubespot.config.controller import ControllerSettings
from kubespot.config.loader import Problem, SettingsError
from kubespot.kube import KubeError
from kubespot.observability.logs import configure
from kubespot.observability.process import install_signal_handlers

from .runtime import Controller

log = logging.getLogger("kubespot.controller")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    loader.add_arguments(parser, ControllerSettings)


def load_settings(args: argparse.Namespace) -> ControllerSettings:
    settings = loader.load(ControllerSettings, namespace=args)
    if not settings.queue.url:
        raise SettingsError(
            [
                Problem(
                    "queue.url",
                    "",
                    None,
                    "required but not set: set --queue-url, KUBESPOT_QUEUE_URL or QUEUE_URL",
                )
            ]
        )
    return settings


async def run(settings: ControllerSettings) -> int:
    stop = asyncio.Event()
    install_signal_handlers(stop)
    try:
        controller = Controller(settings)
    except KubeError as err:
        log.critical("cannot start: %s", err)
        return 2
    return await controller.run(stop)


def main(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args)
    except SettingsError as exc:
        print(f"kubespot controller: {exc}", flush=True, file=sys.stderr)
        return 2
    obs = settings.observability
    configure(json=obs.json_logging, level=obs.log_level)
    log.info("kubespot controller %s starting", __version__)
    log.info("effective configuration: %s", orjson.dumps(loader.redacted(settings)).decode())
    return asyncio.run(run(settings))
