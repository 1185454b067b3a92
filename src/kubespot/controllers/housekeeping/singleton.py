"""The controller's singleton duties: work done once per cluster, by the elected replica only.

- ``ManagedInstancesGauge``: ``kubespot_managed_instances``, the nodes backed by an EC2 instance this
  controller manages, by capacity type, from the node index (plus one batched DescribeInstances
  when managed means "carries managed_tag"). Only the leader exports it, so summing the series over
  replicas gives the count and no stale value lingers on a replica that lost the lease.
- ``NodeCleanup``: deletes Nodes that stay NotReady after their instance was terminated or vanished
  (a self-managed control plane without a cloud node lifecycle controller leaves them for ever).
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime, timedelta

from kubespot.aws import AwsError, InstanceDirectory, InstanceInfo
from kubespot.config.cleanup import NodeCleanupSettings
from kubespot.config.queue import QueueSettings
from kubespot.handling.node_index import NodeIndex
from kubespot.kube import EventRecorder, KubeClient, KubeError, NodeView
from kubespot.model import Clock
from kubespot.observability.metrics import Metrics

log = logging.getLogger("kubespot.controller.singleton")

#: Seconds between updates of the managed-instance gauge: a dashboard number, not a control loop.
MANAGED_INSTANCES_INTERVAL = 30.0
#: Node labels naming a node's capacity type: Karpenter's (spot, on-demand, reserved) and EKS
#: managed node groups' (SPOT, ON_DEMAND, CAPACITY_BLOCK).
CAPACITY_TYPE_LABELS = ("karpenter.sh/capacity-type", "eks.amazonaws.com/capacityType")
#: EC2 instance states after which the instance never runs again.
GONE_STATES = frozenset({"shutting-down", "terminated"})


def capacity_type(node: NodeView, info: InstanceInfo | None) -> str:
    """spot, on-demand, ... from the node's labels, else the instance's lifecycle, else unknown."""
    for label in CAPACITY_TYPE_LABELS:
        value = node.labels.get(label)
        if value:
            return value.strip().lower().replace("_", "-")
    if info is not None:
        # EC2 leaves InstanceLifecycle out for on-demand instances.
        return info.lifecycle or "on-demand"
    return "unknown"


class ManagedInstancesGauge:
    """Keeps ``kubespot_managed_instances`` current while it runs; clears it when cancelled."""

    def __init__(
        self,
        *,
        nodes: NodeIndex,
        instances: InstanceDirectory,
        queue: QueueSettings,
        metrics: Metrics,
        clock: Clock,
        interval: float = MANAGED_INSTANCES_INTERVAL,
        cluster: str = "",
    ) -> None:
        self._nodes = nodes
        self._instances = instances
        self._queue = queue
        #: The cluster kubespot's provisioner launches for (its instances count as managed).
        self._cluster = cluster
        self._metrics = metrics
        self._clock = clock
        self._interval = interval

    async def run(self) -> None:
        try:
            await self._nodes.wait_synced()
            while True:
                try:
                    self._metrics.set_managed_instances(await self.count())
                except AwsError as err:
                    # The last value stays: better a minute-old count than a gap in the graph.
                    log.warning("cannot count managed instances: %s", err)
                await self._clock.sleep(self._interval)
        finally:
            self._metrics.clear_managed_instances()

    async def count(self) -> dict[str, int]:
        """Managed instances by capacity type."""
        nodes = [n for n in self._nodes.nodes() if n.instance_id]
        if not self._queue.check_tag_before_draining:
            # Every node of an AWS instance is handled here: no AWS call needed.
            return dict(Counter(capacity_type(n, None) for n in nodes))
        found = await self._instances.lookup(n.instance_id for n in nodes if n.instance_id)
        counts: Counter[str] = Counter()
        for node in nodes:
            info = found.get(node.instance_id or "")
            if info is not None and info.is_managed(self._queue.managed_tag, self._cluster):
                counts[capacity_type(node, info)] += 1
        return dict(counts)


class NodeCleanup:
    """Every ``interval``, deletes the Nodes ``candidates`` finds (see ``NodeCleanupSettings``)."""

    def __init__(
        self,
        *,
        kube: KubeClient,
        nodes: NodeIndex,
        instances: InstanceDirectory,
        settings: NodeCleanupSettings,
        queue: QueueSettings,
        dry_run: bool,
        metrics: Metrics,
        clock: Clock,
        recorder: EventRecorder | None = None,
        cluster: str = "",
    ) -> None:
        self._kube = kube
        self._nodes = nodes
        self._instances = instances
        self._settings = settings
        self._queue = queue
        #: The cluster kubespot's provisioner launches for (its instances count as managed).
        self._cluster = cluster
        self._dry_run = dry_run
        self._metrics = metrics
        self._clock = clock
        self._recorder = recorder
        # Node uids already reported under dry run: said once, not every interval.
        self._reported: set[str] = set()

    async def run(self) -> None:
        await self._nodes.wait_synced()
        while True:
            try:
                await self.sweep()
            except (AwsError, KubeError) as err:
                log.warning("node clean-up: %s", err)
            await self._clock.sleep(self._settings.interval)

    def not_ready(self, now: datetime) -> list[NodeView]:
        """Nodes of AWS instances NotReady or Unknown for at least ``not_ready_for``."""
        threshold = timedelta(seconds=self._settings.not_ready_for)
        return [
            n
            for n in self._nodes.nodes()
            if n.instance_id
            and n.ready is not True
            and n.ready_since is not None
            and now - n.ready_since >= threshold
        ]

    async def candidates(self) -> list[tuple[NodeView, str]]:
        """(node, why) for each node to delete: NotReady long enough and its instance gone."""
        waiting = self.not_ready(self._clock.now())
        if not waiting:
            return []
        found = await self._instances.lookup(n.instance_id for n in waiting if n.instance_id)
        out: list[tuple[NodeView, str]] = []
        for node in waiting:
            instance_id = node.instance_id or ""
            info = found.get(instance_id)
            if info is not None and info.state not in GONE_STATES:
                continue  # the instance runs (or is stopped): a Node problem, not a gone instance
            if self._queue.check_tag_before_draining and (
                info is None or not info.is_managed(self._queue.managed_tag, self._cluster)
            ):
                # Unknown instances have no tags to check; either way not provably ours.
                log.debug("node clean-up: %s (%s) is not managed here; left alone", node.name, instance_id)
                continue
            why = (
                f"instance {instance_id} is {info.state}"
                if info is not None
                else f"EC2 no longer knows instance {instance_id}"
            )
            out.append((node, why))
        return out

    async def sweep(self) -> list[str]:
        """One pass; returns the names of the nodes deleted (or, under dry run, that would be)."""
        done: list[str] = []
        for node, why in await self.candidates():
            if await self._clean(node, why):
                done.append(node.name)
        return done

    async def _clean(self, node: NodeView, why: str) -> bool:
        # Read again right before deleting: the index may lag, and a namesake (new uid) registered
        # since, or a node that came back Ready, must survive.
        current = await self._kube.get_node(node.name)
        if current is None or current.uid != node.uid or current.ready is True:
            return False
        since = node.ready_since.isoformat() if node.ready_since is not None else "unknown"
        reason = f"NotReady since {since} and {why}"
        if self._dry_run:
            if node.uid not in self._reported:
                self._reported.add(node.uid)
                log.info("dry run: would delete node %s: %s", node.name, reason)
                self._metrics.node_cleanup("dry_run")
                await self._event(node, "DryRun", f"Dry run: would delete the node: {reason}")
            return True
        try:
            deleted = await self._kube.delete_node(node.name)
        except KubeError as err:
            log.warning("node clean-up: cannot delete node %s: %s", node.name, err)
            self._metrics.node_cleanup("failure")
            return False
        if not deleted:
            return False  # somebody else deleted it meanwhile
        log.info("deleted node %s: %s", node.name, reason)
        self._metrics.node_cleanup("deleted")
        await self._event(node, "NodeDeleted", f"Deleted by kubespot: {reason}")
        return True

    async def _event(self, node: NodeView, reason: str, message: str) -> None:
        if self._recorder is not None:
            await self._recorder.node(node, reason, message)
