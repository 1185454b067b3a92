"""What ``kubespot agent`` and ``kubespot controller`` do alike as commands: read and check the
settings and every outgoing target (a typo stops the process before it starts: exit code 2), set up
the logs, say what is configured, then run the process until SIGTERM or SIGINT. And what the
one-shot commands (``kubespot drain``, ``kubespot plan``) do alike: ``one_shot``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

import orjson

from kubespot.actions.outgoing import describe_outgoing, load_outgoing
from kubespot.config import loader
from kubespot.config.http_calls import HttpCall, HttpCallSettings
from kubespot.config.loader import SettingsError
from kubespot.config.notify import NotifySettings, NotifyTarget
from kubespot.config.observability import ObservabilitySettings
from kubespot.config.webhook import WebhookSettings
from kubespot.kube import KubeError
from kubespot.observability.logs import configure

from .supervise import install_signal_handlers


class ProcessSettings(Protocol):
    """What both processes' settings have that this module reads."""

    @property
    def observability(self) -> ObservabilitySettings: ...

    @property
    def notify(self) -> NotifySettings: ...

    @property
    def webhook(self) -> WebhookSettings: ...

    @property
    def http_calls(self) -> HttpCallSettings: ...


class Process(Protocol):
    async def run(self, stop: asyncio.Event) -> int: ...


S = TypeVar("S", bound=ProcessSettings)
#: Builds the process from its settings and the checked targets and calls (KubeError: no cluster).
Build = Callable[[S, tuple[NotifyTarget, ...], tuple[HttpCall, ...]], Process]


def main(
    name: str,
    load: Callable[[], S],
    build: Build[S],
    *,
    log: logging.Logger,
    starting: Callable[[S], tuple[object, ...]],
) -> int:
    """``name``: the command (``agent``, ``controller``) for error messages. ``load``: the settings
    (raises ``SettingsError``). ``starting(settings)``: the format and arguments of the first log
    line. Returns the exit code."""
    try:
        settings = load()
        # Every notification target and HTTP call, templates compiled: a typo stops it now.
        targets, calls = load_outgoing(settings.notify, settings.webhook, settings.http_calls)
    except SettingsError as exc:
        print(f"kubespot {name}: {exc}", flush=True, file=sys.stderr)
        return 2
    obs = settings.observability
    configure(json=obs.json_logging, level=obs.log_level, logger_levels=obs.logger_levels)
    log.info(*starting(settings))
    log.info("effective configuration: %s", orjson.dumps(loader.redacted(settings)).decode())
    if targets or calls:
        log.info("outgoing: %s", describe_outgoing(targets, calls))
    try:
        return asyncio.run(run(settings, targets, calls, build, log=log))
    except KeyboardInterrupt:  # pragma: no cover - SIGINT is handled; this is a second Ctrl-C
        return 130


async def run(
    settings: S,
    targets: tuple[NotifyTarget, ...],
    calls: tuple[HttpCall, ...],
    build: Build[S],
    *,
    log: logging.Logger,
) -> int:
    stop = asyncio.Event()
    install_signal_handlers(stop)
    try:
        process = build(settings, targets, calls)
    except KubeError as err:  # no kubeconfig, no in-cluster service account: a set-up problem
        log.critical("cannot start: %s", err)
        return 2
    return await process.run(stop)


def one_shot(name: str, run: Callable[[], Coroutine[Any, Any, int]], *, verbose: bool) -> int:
    """Run a one-shot command: plain logs on stderr (INFO with ``-v``, else warnings), its exit
    code; a settings error is exit 2 with a message naming the command."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return asyncio.run(run())
    except SettingsError as exc:
        print(f"kubespot {name}: {exc}", file=sys.stderr)
        return 2
