"""What the agent and the controller do alike as long-running processes: serve the metrics and probe
endpoints their settings ask for, run their parts as tasks until told to stop or one of them dies,
and shut down in the order that loses nothing (stop the work, flush notifications, close servers).
"""

from __future__ import annotations

import asyncio
import logging
import signal
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


async def open_endpoints(
    settings: ObservabilitySettings,
    *,
    metrics: Metrics,
    health: Callable[[], HealthReport],
    host: str,
    log: logging.Logger,
) -> list[EndpointServer] | None:
    """``start_endpoints``, or None (logged on ``log``, the process's own logger) when a port is in
    use: the caller closes what it opened and exits 1."""
    try:
        return await start_endpoints(settings, metrics=metrics, health=health, host=host)
    except OSError as exc:
        log.critical("cannot start the metrics or probe server: %s", exc)
        return None


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
