"""What the agent and the controller do alike as long-running processes: serve the metrics and probe
endpoints their settings ask for, run their parts as tasks until told to stop or one of them dies,
and shut down in the order that loses nothing (stop the work, flush notifications, close servers).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta

from kubespot.config.observability import ObservabilitySettings
from kubespot.kube.watchhealth import Watches
from kubespot.observability.health import Check, HealthReport, freshness, silence
from kubespot.observability.metrics import Metrics
from kubespot.observability.server import EndpointServer, health_handler, metrics_handler

log = logging.getLogger("kubespot.process")


async def start_endpoints(
    settings: ObservabilitySettings, *, metrics: Metrics, health: Callable[[], HealthReport], host: str
) -> list[EndpointServer]:
    """Bind the metrics and probe servers that are switched on (a port in use raises OSError)."""
    servers: list[EndpointServer] = []
    try:
        if settings.enable_prometheus_server:
            server = EndpointServer()
            server.route("/metrics", metrics_handler(metrics))
            await server.start(host, settings.prometheus_server_port)
            servers.append(server)
            log.info("metrics on http://%s:%d/metrics", host, server.port)
        if settings.enable_probes_server:
            server = EndpointServer()
            server.route(settings.probes_server_endpoint, health_handler(health))
            await server.start(host, settings.probes_server_port)
            servers.append(server)
            log.info("probes on http://%s:%d%s", host, server.port, settings.probes_server_endpoint)
    except OSError:
        for server in servers:
            await server.close()
        raise
    return servers


class Supervised(ABC):
    """The process side of the agent and the operator: the endpoints they serve, the tasks they
    supervise, and the shutdown of both (``shut_down``)."""

    def __init__(
        self, observability: ObservabilitySettings, *, listen_host: str, log: logging.Logger
    ) -> None:
        self.metrics = Metrics()
        self._observability = observability
        self._listen_host = listen_host
        self._log = log
        self._servers: list[EndpointServer] = []
        self._tasks: dict[str, asyncio.Task[None]] = {}

    @abstractmethod
    def health(self) -> HealthReport:
        """What the probe server answers."""

    @abstractmethod
    async def _flush(self) -> None:
        """Stop the work and send what is queued; the notifier's task still runs meanwhile."""

    @abstractmethod
    async def _close_clients(self) -> None:
        """Close the API and HTTP clients, once the tasks and servers are down."""

    async def _serve(self) -> bool:
        """Open the endpoints; False when a port is in use (logged on the process's own logger, and
        the process closed): the caller exits 1."""
        try:
            self._servers = await start_endpoints(
                self._observability, metrics=self.metrics, health=self.health, host=self._listen_host
            )
        except OSError as exc:
            self._log.critical("cannot start the metrics or probe server: %s", exc)
            await self.close()
            return False
        return True

    async def close(self) -> None:
        await shut_down(self._tasks, flush=self._flush, keep_until_flushed="webhook", servers=self._servers)
        await self._close_clients()


def install_signal_handlers(stop: asyncio.Event) -> None:
    """SIGTERM (the kubelet) and SIGINT (Ctrl-C) set ``stop``: a clean shutdown, exit code 0."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


def watches_and_tasks(
    watches: Watches, tasks: Mapping[str, asyncio.Task[None]], *, now: datetime, max_age: timedelta
) -> tuple[Check, Check]:
    """The two checks every process ends its report with: no watch stuck silent (a half-open stream
    that keeps coming back silent freezes what it feeds while every call still answers), and every
    part still running."""
    return (
        silence("watches", watches.silences(), now=now, limit=watches.health_limit),
        tasks_check(tasks, now=now, max_age=max_age),
    )


def tasks_check(tasks: Mapping[str, asyncio.Task[None]], *, now: datetime, max_age: timedelta) -> Check:
    """The health check that every part of the process is still running."""
    dead = sorted(name for name, task in tasks.items() if task.done())
    detail = ("stopped: " + ", ".join(dead)) if dead else "running"
    return freshness("tasks", None if dead else now, now=now, max_age=max_age, detail=detail)


async def supervise(tasks: Mapping[str, asyncio.Task[None]], stop: asyncio.Event) -> int:
    """Wait until ``stop`` is set (0) or a task ends, which it never should (1, logged)."""
    stopper = asyncio.create_task(stop.wait())
    try:
        done, _ = await asyncio.wait({stopper, *tasks.values()}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if stopper in done:
        return 0
    for task in done:
        error = task.exception() if not task.cancelled() else None
        log.critical("%s stopped unexpectedly: %r", task.get_name(), error, exc_info=error)
    return 1


async def shut_down(
    tasks: Mapping[str, asyncio.Task[None]],
    *,
    flush: Callable[[], Awaitable[None]],
    keep_until_flushed: str,
    servers: list[EndpointServer],
) -> None:
    """Cancel the tasks, except ``keep_until_flushed`` (the webhook sender) until ``flush()`` has
    run, then close the servers."""
    others = [t for name, t in tasks.items() if name != keep_until_flushed]
    for task in others:
        task.cancel()
    if others:
        await asyncio.wait(others)
    await flush()
    kept = tasks.get(keep_until_flushed)
    if kept is not None:
        kept.cancel()
        await asyncio.wait({kept})
    for server in servers:
        await server.close()
