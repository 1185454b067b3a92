"""The running operator: builds the shared parts from ``ControllerSettings``, its controllers from
them (``controllers``: the list), and runs them until stopped.

- a node index (one list + watch of Nodes) answers "which node is instance i-…";
- the queue consumer long-polls SQS with several receivers and hands each message, in its own task,
  to the queue handler, which finds the node and gives the event to that node's ``NodeHandler``
  (the agent's state machine: same policy, same state annotation);
- the Kubernetes client puts fencing calls ahead of drain calls, so in a burst every affected node is
  tainted and cordoned before the drains take the API budget;
- the metrics and probe servers, the notifier (webhook and named targets) and the outgoing HTTP calls
  are the agent's; with ``loadbalancer.enabled`` the drains also wait for the deregistration
  (``ControllerSettings.drain_wait``);
- the singleton duties (managed-instance gauge, node clean-up, the AWS response actions) run on the
  replica that holds the leader-election Lease (``leader``; the controllers' leader-only runnables).

The queue is optional when an AWS response action is on (IMDS-only clusters: the agents fence, the
controller deregisters, isolates and publishes): then no consumer runs.

Several replicas may run: the queue hands each message to one of them at a time, and the state on
the Node (compare-and-set) keeps two replicas from starting two drains for one notice.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from datetime import timedelta

from kubespot.actions.http_call import HttpCalls
from kubespot.actions.notify import Notifier
from kubespot.actions.outgoing import given_or_configured
from kubespot.aws import AwsClients, InstanceDirectory
from kubespot.cloud.signals import capacity_signals
from kubespot.config.controller import ControllerSettings
from kubespot.config.http_calls import HttpCall
from kubespot.config.notify import NotifyTarget
from kubespot.controllers.interruption.template_context import QueueTemplateContext
from kubespot.controllers.response.response_actions import enabled_actions
from kubespot.handling.node_index import NodeIndex
from kubespot.kube import KubeClient, Leases, connect
from kubespot.kube.events import recorder_for
from kubespot.model import Clock
from kubespot.model.clock import SystemClock
from kubespot.observability.health import HealthReport, freshness, report
from kubespot.operator.controllers import Controller, Shared, new_controllers
from kubespot.operator.leader import Duties, LeaderElector, SoleLeader, identity, lease_namespace
from kubespot.process.collector import BURST_THRESHOLDS, collect_periodically, settle_after_startup
from kubespot.process.supervise import Supervised, supervise, watches_and_tasks

log = logging.getLogger("kubespot.controller")


class Operator(Supervised):
    """One operator replica. ``await run(stop)`` returns the process exit code."""

    def __init__(
        self,
        settings: ControllerSettings,
        *,
        clock: Clock | None = None,
        listen_host: str = "0.0.0.0",
        targets: Sequence[NotifyTarget] | None = None,
        calls: Sequence[HttpCall] | None = None,
    ) -> None:
        """``targets`` and ``calls``: as ``kubespot controller`` read and checked them at start-up
        (None: read from the settings and the environment now)."""
        super().__init__(settings.observability, listen_host=listen_host, log=log)
        self.settings = settings
        self.clock = clock or SystemClock()
        # aiohttp for the pod and node calls: a burst is thousands of them a second (kube.transport).
        self.kube: KubeClient = connect(settings.kube, on_error=self.metrics.kube_error, http="aiohttp")
        # Hundreds of drains at once: one pod watch for all of them, not one connection each.
        self.kube.share_pod_watch()
        self.aws = AwsClients(settings.aws)
        self.instances = InstanceDirectory(
            self.aws, cache_ttl=settings.queue.describe_cache_ttl, clock=self.clock
        )
        self.nodes = NodeIndex(self.kube)
        self.recorder = recorder_for(
            self.kube, settings.observability, component="kubespot-controller", host=settings.pod_name
        )
        targets, calls = given_or_configured(
            targets, calls, notify=settings.notify, webhook=settings.webhook, http=settings.http_calls
        )
        self.notifier = (
            Notifier(
                targets,
                clock=self.clock,
                on_result=self.metrics.webhook,
                on_delivery=self.metrics.notification,
                max_queue=settings.notify.queue_size,
                # Templates get the node's labels and pods and what EC2 says of the instance.
                context=QueueTemplateContext(self.kube, self.instances, settings.aws.region or ""),
            )
            if targets and not settings.node_actions.dry_run
            else None
        )
        # Under DRY_RUN the calls are rendered and logged, never sent.
        self.http_calls = (
            HttpCalls(
                calls, clock=self.clock, on_result=self.metrics.action, dry_run=settings.node_actions.dry_run
            )
            if calls
            else None
        )
        #: This replica's identity: its Lease holder name and the runner named in the actions record.
        self.identity = identity(settings.pod_name)
        self.controllers: list[Controller] = new_controllers(
            Shared(
                settings=settings,
                clock=self.clock,
                metrics=self.metrics,
                kube=self.kube,
                aws=self.aws,
                instances=self.instances,
                nodes=self.nodes,
                recorder=self.recorder,
                notifier=self.notifier,
                http_calls=self.http_calls,
                identity=self.identity,
                capacity=capacity_signals(settings.launch, self.clock),
            )
        )
        self.leadership = self._leadership()

    def controller(self, name: str) -> Controller | None:
        """The running controller called ``name``, if these settings switch it on."""
        return next((c for c in self.controllers if c.name == name), None)

    def _leadership(self) -> LeaderElector | SoleLeader:
        """The singleton duties, run by the replica holding the Lease (by this one if election is off)."""
        s = self.settings
        duties = Duties(
            {r.name: r.run for c in self.controllers for r in c.runnables if r.leader_only},
            clock=self.clock,
        )
        lease = s.leader_election.lease_name
        self.metrics.set_leader(lease, False)
        on_change = functools.partial(self.metrics.set_leader, lease)
        if not s.leader_election.enabled:
            return SoleLeader(duties, on_change=on_change)
        return LeaderElector(
            Leases(self.kube),
            namespace=lease_namespace(s.leader_election, s.pod_namespace),
            name=lease,
            identity=self.identity,
            settings=s.leader_election,
            duties=duties,
            clock=self.clock,
            on_change=on_change,
        )

    def health(self) -> HealthReport:
        """Healthy when the API server answered recently, the node index is synced, no watch is stuck
        silent, every part runs and every controller's own checks pass."""
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
            # The node index's and the shared pod watch's streams.
            *watches_and_tasks(self.kube.watches, self._tasks, now=now, max_age=max_age),
            *(check for c in self.controllers for check in c.checks(now)),
        )

    async def run(self, stop: asyncio.Event) -> int:
        if not await self._serve():
            return 1
        response = self.controller("response")
        if response is not None:
            actions = ",".join(enabled_actions(self.settings))
            log.info(
                "response actions: %s (IAM: kubespot aws policy --actions %s)",
                response.describe,
                actions,
            )
        for controller in self.controllers:
            problems = await controller.problems() if controller.problems is not None else []
            if problems:
                for problem in problems:
                    log.critical("cannot start: %s", problem)
                await self.close()
                return 2
        self._tasks = {
            "node-index": asyncio.create_task(self.nodes.run(), name="node-index"),
            "collector": asyncio.create_task(self._collector(), name="collector"),
        }
        for controller in self.controllers:
            for runnable in controller.runnables:
                if not runnable.leader_only:
                    self._tasks[runnable.name] = asyncio.create_task(runnable.run(), name=runnable.name)
        if self.notifier is not None:
            self._tasks["webhook"] = asyncio.create_task(self.notifier.run(), name="webhook")
        # Always running, leader or not: a standby replica is healthy.
        self._tasks["leader-election"] = asyncio.create_task(self.leadership.run(), name="leader-election")
        if self.controller("interruption") is not None:
            log.info("consuming %s with %d receivers", self.settings.queue.url, self.settings.queue.receivers)
        else:
            duties = enabled_actions(self.settings)
            if self.settings.provisioning.enabled:
                duties.append("provisioning")
            log.info("running without a queue: %s only", ", ".join(duties))
        code = await supervise(self._tasks, stop)
        if code == 0:
            # Release the Lease first, so another replica takes the duties over while this one
            # finishes its work in flight.
            elector = self._tasks["leader-election"]
            elector.cancel()
            await asyncio.wait({elector})
            for controller in self.controllers:
                if controller.finish is not None:
                    await controller.finish()
        await self.close()
        return code

    async def _collector(self) -> None:
        """Once the node index is first synced: settle start-up memory and set the collector for
        bursts, then run a full collection every few minutes (``process.collector``)."""
        await self.nodes.wait_synced()
        settle_after_startup(thresholds=BURST_THRESHOLDS)
        log.info("node index synced; start-up memory settled, collector thresholds %s", BURST_THRESHOLDS)
        await collect_periodically(asyncio.sleep)

    async def _close_clients(self) -> None:
        await self.kube.close()
        await self.aws.close()
        if self.http_calls is not None:
            await self.http_calls.aclose()

    async def _flush(self) -> None:
        for controller in self.controllers:
            if controller.close is not None:
                await controller.close()
        if self.notifier is not None:
            await self.notifier.aclose(timeout=2.0)
