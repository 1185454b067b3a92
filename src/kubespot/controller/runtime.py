"""The running controller: builds every part from ``ControllerSettings`` and runs them until stopped.

- a node index (one list + watch of Nodes) answers "which node is instance i-…";
- the queue consumer long-polls SQS with several receivers and hands each message, in its own task,
  to the queue handler, which finds the node and gives the event to that node's ``NodeHandler``
  (the agent's state machine: same policy, same state annotation);
- the Kubernetes client puts fencing calls ahead of drain calls, so in a burst every affected node is
  tainted and cordoned before the drains take the API budget;
- the metrics and probe servers and the webhook sender are the agent's.

Several replicas may run: the queue hands each message to one of them at a time, and the state on
the Node (compare-and-set) keeps two replicas from starting two drains for one notice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import timedelta

from kubespot.actions.notify import WebhookNotifier
from kubespot.aws import AwsClients, InstanceDirectory, LifecycleActions, Queue
from kubespot.config.controller import ControllerSettings
from kubespot.handling.node_index import NodeIndex
from kubespot.handling.queue_handler import QueueHandler
from kubespot.kube import EventRecorder, KubeClient, connect
from kubespot.model import Clock
from kubespot.model.clock import SystemClock
from kubespot.observability.health import HealthReport, freshness, report
from kubespot.observability.metrics import Metrics
from kubespot.observability.process import shut_down, start_endpoints, supervise, tasks_check
from kubespot.observability.server import EndpointServer
from kubespot.sources.sqs.consumer import QueueConsumer

log = logging.getLogger("kubespot.controller")

#: Seconds in-flight messages get to finish at shutdown before they are left to reappear.
DRAIN_ON_STOP = 10.0


class Controller:
    """One controller replica. ``await run(stop)`` returns the process exit code."""

    def __init__(
        self, settings: ControllerSettings, *, clock: Clock | None = None, listen_host: str = "0.0.0.0"
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.metrics = Metrics()
        self._listen_host = listen_host
        self.kube: KubeClient = connect(settings.kube, on_error=self.metrics.kube_error)
        # Hundreds of drains at once: one pod watch for all of them, not one connection each.
        self.kube.share_pod_watch()
        self.aws = AwsClients(settings.aws)
        self.queue = Queue(self.aws, settings.queue.url)
        self.instances = InstanceDirectory(
            self.aws, cache_ttl=settings.queue.describe_cache_ttl, clock=self.clock
        )
        self.nodes = NodeIndex(self.kube)
        obs = settings.observability
        self.recorder = (
            EventRecorder(
                kube=self.kube,
                component="kubespot-controller",
                annotations=dict(obs.kubernetes_events_extra_annotations),
            )
            if obs.emit_kubernetes_events
            else None
        )
        self.notifier = (
            WebhookNotifier(settings.webhook, clock=self.clock, on_result=self.metrics.webhook)
            if settings.webhook.enabled and not settings.node_actions.dry_run
            else None
        )
        # An Auto Scaling lifecycle message only reaches the queue when its EventBridge rule exists,
        # and the group waits on the hook: in queue mode it is always handled.
        monitors = dataclasses.replace(settings.monitors, asg_lifecycle_draining=True)
        self.handler = QueueHandler(
            kube=self.kube,
            nodes=self.nodes,
            instances=self.instances,
            lifecycle=LifecycleActions(self.aws),
            queue=settings.queue,
            monitors=monitors,
            actions=settings.node_actions,
            drain=settings.drain,
            clock=self.clock,
            metrics=self.metrics,
            recorder=self.recorder,
            notifier=self.notifier,
        )
        self.consumer = QueueConsumer(
            self.queue, settings=settings.queue, handle=self.handler.handle, clock=self.clock
        )
        self._servers: list[EndpointServer] = []
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def health(self) -> HealthReport:
        """Healthy when the API server answered recently, the node index is synced and every part runs."""
        now = self.clock.now()
        max_age = timedelta(seconds=self.settings.observability.probes_stale_after)
        return report(
            freshness("kubernetes", self.kube.last_contact, now=now, max_age=max_age),
            freshness(
                "nodes",
                now if self.nodes.synced else None,
                now=now,
                max_age=max_age,
                detail=f"{len(self.nodes)} nodes",
            ),
            tasks_check(self._tasks, now=now, max_age=max_age),
        )

    async def run(self, stop: asyncio.Event) -> int:
        try:
            self._servers = await start_endpoints(
                self.settings.observability, metrics=self.metrics, health=self.health, host=self._listen_host
            )
        except OSError as exc:
            log.critical("cannot start the metrics or probe server: %s", exc)
            await self.close()
            return 1
        self._tasks = {
            "node-index": asyncio.create_task(self.nodes.run(), name="node-index"),
            "queue-consumer": asyncio.create_task(self.consumer.run(), name="queue-consumer"),
        }
        if self.notifier is not None:
            self._tasks["webhook"] = asyncio.create_task(self.notifier.run(), name="webhook")
        log.info("consuming %s with %d receivers", self.settings.queue.url, self.settings.queue.receivers)
        code = await supervise(self._tasks, stop)
        if code == 0:
            # Let messages being handled finish; the rest reappear for another replica.
            await self.consumer.drain(DRAIN_ON_STOP)
        await self.close()
        return code

    async def close(self) -> None:
        await shut_down(self._tasks, flush=self._flush, keep_until_flushed="webhook", servers=self._servers)
        await self.kube.close()
        await self.aws.close()

    async def _flush(self) -> None:
        await self.handler.aclose()
        if self.notifier is not None:
            await self.notifier.aclose(timeout=2.0)
