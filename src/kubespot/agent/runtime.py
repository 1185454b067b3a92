"""The running agent: builds every part from ``AgentSettings`` and runs them until told to stop.

Parts and the tasks that drive them:

- the IMDS monitor polls metadata and puts each new ``InterruptionEvent`` on a queue;
- the node handler resumes from the node's state annotation (retrying while the API server is
  unreachable), then takes events off the queue — nothing the monitor sees is lost meanwhile;
- the notifier posts notifications (the webhook, named targets) in the background; outgoing HTTP
  calls are made by the node handler as steps of each event's timeline;
- the metrics and probe servers answer on their ports; a keep-alive reads the node now and then
  while idle, so ``/healthz`` knows whether the API server is reachable.

A task that ends unexpectedly stops the agent with exit code 1 (the kubelet restarts it, and the
state on the node makes the new process resume); SIGTERM stops it with 0.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kubespot import __version__
from kubespot.actions.notify import Notifier
from kubespot.actions.outgoing import given_or_configured
from kubespot.config.agent import AgentSettings
from kubespot.config.http_calls import HttpCall
from kubespot.config.notify import NotifyTarget
from kubespot.handling.node_handler import NodeHandler
from kubespot.kube import KubeClient, KubeError, connect
from kubespot.kube.events import recorder_for
from kubespot.model import Clock, InterruptionEvent
from kubespot.model.clock import SystemClock
from kubespot.model.summary import InterruptionSummary, Stage
from kubespot.observability.health import HealthReport, freshness, report
from kubespot.process.collector import settle_after_startup
from kubespot.process.supervise import Supervised, supervise, watches_and_tasks
from kubespot.sources.imds import ImdsClient, ImdsMonitor

from .template_context import TemplateContext
from .uptime import boot_time_reader

if TYPE_CHECKING:
    from kubespot.actions.http_call import HttpCalls

log = logging.getLogger("kubespot.agent")

#: Listen address of the metrics and probe servers. The agent runs with hostNetwork, and Prometheus
#: and the kubelet reach it on the node's address, as they do the reference handler.
LISTEN_HOST = "0.0.0.0"


class _DryRunNotifier:
    """Stands in for the notifier under DRY_RUN: says what would be sent, and to whom; sends nothing."""

    def __init__(self, targets: Sequence[NotifyTarget]) -> None:
        self._targets = tuple(targets)

    def notify(
        self,
        event: InterruptionEvent,
        *,
        node_name: str,
        extra: Mapping[str, Any] | None = None,
        stage: Stage | None = None,
        summary: InterruptionSummary | None = None,
    ) -> None:
        stage = stage or (summary.stage if summary is not None else Stage.STARTED)
        names = [t.name for t in self._targets if t.wants(event.kind, stage)]
        if names:
            log.info(
                "dry run: would send the %s message to %s for %s",
                stage.value,
                ", ".join(names),
                event.id,
                extra={"event_id": event.id, "stage": stage.value},
            )


class Agent(Supervised):
    """One node's agent. ``await run(stop)`` returns the process exit code."""

    def __init__(
        self,
        settings: AgentSettings,
        *,
        clock: Clock | None = None,
        listen_host: str = LISTEN_HOST,
        targets: Sequence[NotifyTarget] | None = None,
        calls: Sequence[HttpCall] | None = None,
    ) -> None:
        """``targets`` and ``calls``: as ``kubespot agent`` read and checked them at start-up (None:
        read from the settings and the environment now)."""
        super().__init__(settings.observability, listen_host=listen_host, log=log)
        self.settings = settings
        self.clock = clock or SystemClock()
        self._events: asyncio.Queue[InterruptionEvent] = asyncio.Queue()
        self.kube: KubeClient = connect(settings.kube, on_error=self.metrics.kube_error)
        self.imds = ImdsClient(settings.imds, clock=self.clock)
        self.monitor = ImdsMonitor(
            self.imds,
            settings=settings.imds,
            monitors=settings.monitors,
            clock=self.clock,
            sink=self._events,
            node_name=settings.node_name,
            on_error=self.metrics.imds_error,
        )
        self.recorder = recorder_for(
            self.kube, settings.observability, component="kubespot-agent", host=settings.node_name
        )
        targets, calls = given_or_configured(
            targets, calls, notify=settings.notify, webhook=settings.webhook, http=settings.http_calls
        )
        self.notifier: Notifier | None = None
        notifier: Notifier | _DryRunNotifier | None = None
        if targets:
            if settings.node_actions.dry_run:
                notifier = _DryRunNotifier(targets)
            else:
                notifier = self.notifier = Notifier(
                    targets,
                    clock=self.clock,
                    on_result=self.metrics.webhook,
                    on_delivery=self.metrics.notification,
                    max_queue=settings.notify.queue_size,
                    # Templates get the node's labels and pods and the instance's metadata, as NTH's.
                    context=TemplateContext(self.kube, lambda: self.monitor.identity),
                )
        self.http_calls: HttpCalls | None = None
        if calls:
            # Imported only when there are calls: the agent's memory is paid on every node.
            from kubespot.actions.http_call import HttpCalls

            # Under DRY_RUN the calls are rendered and logged, never sent.
            self.http_calls = HttpCalls(
                calls, clock=self.clock, on_result=self.metrics.action, dry_run=settings.node_actions.dry_run
            )
        own_pod = (
            (settings.pod_namespace, settings.pod_name)
            if settings.pod_namespace and settings.pod_name
            else None
        )
        self.handler = NodeHandler(
            node_name=settings.node_name,
            kube=self.kube,
            actions=settings.node_actions,
            monitors=settings.monitors,
            drain=settings.drain,
            clock=self.clock,
            metrics=self.metrics,
            recorder=self.recorder,
            notifier=notifier,
            http_calls=self.http_calls,
            loadbalancer_wait=settings.loadbalancer_wait,
            own_pod=own_pod,
            boot_time=boot_time_reader(settings.monitors.uptime_from_file, self.clock.now),
            # The pod name survives container restarts, so a restarted agent resumes at once
            # instead of waiting for its own old mark on the node to go stale.
            identity=settings.pod_name or "",
        )

    # --- health ------------------------------------------------------------------------------------

    def health(self) -> HealthReport:
        """Healthy when IMDS and the API server answered recently, no watch is stuck silent and every
        part is running."""
        now = self.clock.now()
        max_age = timedelta(seconds=self.settings.observability.probes_stale_after)
        imds = self.monitor.health
        return report(
            freshness("imds", imds.last_contact, now=now, max_age=max_age, detail=imds.last_error or ""),
            freshness("kubernetes", self.kube.last_contact, now=now, max_age=max_age),
            # A drain's pod watch that went silent (half-open) and keeps coming back silent.
            *watches_and_tasks(self.kube.watches, self._tasks, now=now, max_age=max_age),
        )

    # --- lifecycle -----------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> int:
        """Run until ``stop`` is set (exit 0) or a part fails for good (exit 1)."""
        if not await self._serve():
            return 1
        self._tasks = {
            "imds-monitor": asyncio.create_task(self.monitor.run(), name="imds-monitor"),
            "node-handler": asyncio.create_task(self._handle(), name="node-handler"),
            "keepalive": asyncio.create_task(self._keepalive(), name="keepalive"),
        }
        if self.notifier is not None:
            self._tasks["webhook"] = asyncio.create_task(self.notifier.run(), name="webhook")
        code = await supervise(self._tasks, stop)
        await self.close()
        return code

    async def _close_clients(self) -> None:
        await self.kube.close()
        await self.imds.aclose()
        if self.http_calls is not None:
            await self.http_calls.aclose()

    async def _flush(self) -> None:
        await self.handler.aclose()
        if self.notifier is not None:
            # The webhook sender is still up: what is queued (or in flight) goes out.
            await self.notifier.aclose(timeout=2.0)

    async def _handle(self) -> None:
        await self.handler.start()
        await self.handler.run(self._events)

    async def _keepalive(self) -> None:
        """While idle the agent makes no API calls; one light read keeps ``/healthz`` truthful."""
        interval = self.settings.observability.probes_stale_after / 2
        info_set = False
        while True:
            identity = self.monitor.identity
            if identity is not None and not info_set:
                self.metrics.set_info(
                    version=__version__,
                    node=self.settings.node_name,
                    instance_id=identity.instance_id,
                    mode="imds",
                )
                info_set = True
                settle_after_startup()
            now = self.clock.now()
            if self.monitor.health.last_contact is not None:
                self.metrics.mark("imds", self.monitor.health.last_contact.timestamp())
            last = self.kube.last_contact
            if self.settings.observability.enable_probes_server and (
                last is None or (now - last).total_seconds() >= interval
            ):
                try:
                    await self.kube.get_node(self.settings.node_name)
                except KubeError as err:
                    log.warning("the API server did not answer: %s", err)
            if self.kube.last_contact is not None:
                self.metrics.mark("kube", self.kube.last_contact.timestamp())
            # Quick ticks until the first poll has read the identity, so kubespot_info appears early.
            await self.clock.sleep(interval if info_set else 0.5)
