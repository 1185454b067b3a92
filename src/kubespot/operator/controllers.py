"""The operator's controllers in one list, as Karpenter's ``pkg/controllers/controllers.go`` keeps
its own: what each is called, what runs it, on which replicas, and what the operator asks of it at
start-up, in /healthz and at shutdown.

The operator (``runtime``) builds the parts the controllers share once (``Shared``: the Kubernetes
client, the AWS clients, the node index, the notifier...), then ``new_controllers`` builds each
controller from them. A controller's runnables either run on every replica (the queue path: every
replica consumes messages) or only on the replica that holds the leader-election Lease (cluster-wide
duties: clean-up, the AWS response actions). Adding a controller is a package under
``kubespot.controllers`` and one entry here; the controllers never import each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubespot.actions.http_call import HttpCalls
from kubespot.actions.notify import Notifier
from kubespot.aws import AwsClients, InstanceDirectory, LifecycleActions, Queue
from kubespot.cloud.signals import CapacitySignals
from kubespot.config.controller import ControllerSettings
from kubespot.controllers.housekeeping.singleton import ManagedInstancesGauge, NodeCleanup
from kubespot.controllers.interruption.queue_handler import QueueHandler
from kubespot.controllers.interruption.sqs.consumer import QueueConsumer
from kubespot.controllers.nodeclaim import controller as nodeclaim_parts
from kubespot.controllers.provisioning import controller as provisioning_parts
from kubespot.controllers.response.response_actions import ResponseActions
from kubespot.handling.node_index import NodeIndex
from kubespot.kube import EventRecorder, KubeClient
from kubespot.kube.informer import Informers
from kubespot.model import Clock
from kubespot.observability.health import Check
from kubespot.observability.metrics import Metrics
from kubespot.operator.leader import own_namespace

#: Seconds in-flight messages get to finish at shutdown before they are left to reappear.
DRAIN_ON_STOP = 10.0


@dataclass(frozen=True)
class Shared:
    """What the operator builds once and its controllers share."""

    settings: ControllerSettings
    clock: Clock
    metrics: Metrics
    kube: KubeClient
    aws: AwsClients
    instances: InstanceDirectory
    nodes: NodeIndex
    recorder: EventRecorder | None
    notifier: Notifier | None
    http_calls: HttpCalls | None
    #: This replica's identity: its Lease holder name and the runner named in the actions record.
    identity: str
    #: What interruptions teach the provisioner (unavailable pools, reclaim risk), one per process.
    capacity: CapacitySignals
    #: Parts several controllers use, built by the first that needs them (the provisioning
    #: controller's catalog and cloud provider, which the NodeClaim controller launches through).
    built: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Runnable:
    """A loop the operator runs as a task until shutdown (restarted if it ends, when leader-only)."""

    name: str
    run: Callable[[], Coroutine[Any, Any, None]]
    #: Only on the replica holding the Lease: work done once per cluster.
    leader_only: bool = False


def _no_checks(now: datetime) -> tuple[Check, ...]:
    return ()


@dataclass
class Controller:
    """One controller as the operator runs it."""

    name: str
    runnables: Sequence[Runnable]
    #: Problems that must stop the process at start-up (a missing permission, a bad target).
    problems: Callable[[], Awaitable[list[str]]] | None = None
    #: Its /healthz checks.
    checks: Callable[[datetime], tuple[Check, ...]] = _no_checks
    #: On a clean stop, before its tasks are cancelled: let work in flight finish.
    finish: Callable[[], Awaitable[None]] | None = None
    #: Once its tasks are cancelled: release what it holds (holds on Nodes, claims).
    close: Callable[[], Awaitable[None]] | None = None
    #: One line for the operator's start-up log (what it will do), if it has one.
    describe: str = ""
    #: Its parts, for tests and debugging.
    parts: dict[str, object] = field(default_factory=dict)


def interruption(shared: Shared) -> Controller | None:
    """The queue path: messages from SQS to the node handlers (on every replica). None without a
    queue (IMDS-only clusters with AWS response actions: the agents fence and drain)."""
    s = shared.settings
    if not s.queue.url:
        return None
    # An Auto Scaling lifecycle message only reaches the queue when its EventBridge rule exists,
    # and the group waits on the hook: in queue mode it is always handled.
    monitors = dataclasses.replace(s.monitors, asg_lifecycle_draining=True)
    lifecycle = LifecycleActions(shared.aws)
    handler = QueueHandler(
        kube=shared.kube,
        nodes=shared.nodes,
        instances=shared.instances,
        lifecycle=lifecycle,
        queue=s.queue,
        monitors=monitors,
        actions=s.node_actions,
        drain=s.drain,
        clock=shared.clock,
        metrics=shared.metrics,
        recorder=shared.recorder,
        notifier=shared.notifier,
        http_calls=shared.http_calls,
        loadbalancer_wait=s.drain_wait,
        hooks=lifecycle,
        # Off, the handler keeps what it learns to itself: Karpenter + NTH, which share nothing.
        capacity=shared.capacity if s.launch.learn_from_interruptions else None,
        cluster=provisioned_cluster(s),
    )
    consumer = QueueConsumer(
        Queue(shared.aws, s.queue.url), settings=s.queue, handle=handler.handle, clock=shared.clock
    )

    def checks(now: datetime) -> tuple[Check, ...]:
        """Fails while a message is held past its bound (a handling step is stuck)."""
        late = handler.overdue()
        detail = f"{len(late)} held past their bound: {', '.join(late[:5])}" if late else "none overdue"
        return (Check("queue", not late, detail, None if late else now),)

    async def finish() -> None:
        # Let messages being handled finish; the rest reappear for another replica.
        await consumer.drain(DRAIN_ON_STOP)

    return Controller(
        "interruption",
        [
            Runnable("queue-consumer", consumer.run),
            # Every replica resumes the states on the Nodes (interrupted drains, auto-undos) and
            # drops the handlers of Nodes that went away.
            Runnable("node-handlers", handler.run),
            # Every replica re-arms the scheduled changes recorded on the Nodes.
            Runnable("scheduled-changes", handler.scheduled.run),
        ],
        checks=checks,
        finish=finish,
        close=handler.aclose,
        parts={"handler": handler, "consumer": consumer},
    )


def response(shared: Shared) -> Controller | None:
    """The AWS actions on interrupted nodes, once per cluster (the leader); None when none is on."""
    actions = ResponseActions.from_settings(
        shared.settings,
        aws=shared.aws,
        kube=shared.kube,
        nodes=shared.nodes,
        clock=shared.clock,
        metrics=shared.metrics,
        identity=shared.identity,
        recorder=shared.recorder,
    )
    if actions is None:
        return None
    # Once per cluster: the Lease keeps two replicas from deregistering or publishing twice (with
    # election off, the compare-and-set on the record does).
    return Controller(
        "response",
        [Runnable("response-actions", actions.run, leader_only=True)],
        problems=actions.check,
        close=actions.aclose,
        describe=actions.describe(),
        parts={"actions": actions},
    )


def provisioned_cluster(s: ControllerSettings) -> str:
    """The cluster this controller launches instances for ("" when it does not launch): those
    instances are managed here whatever ``queue.managed_tag`` says."""
    return s.launch.cluster_name if s.provisioning.enabled else ""


def housekeeping(shared: Shared) -> Controller:
    """The leader's cluster-wide duties: the managed-instances gauge, and Node clean-up if on."""
    s = shared.settings
    gauge = ManagedInstancesGauge(
        nodes=shared.nodes,
        instances=shared.instances,
        queue=s.queue,
        metrics=shared.metrics,
        clock=shared.clock,
        cluster=provisioned_cluster(s),
    )
    runnables = [Runnable("managed-instances", gauge.run, leader_only=True)]
    if s.node_cleanup.enabled:
        cleanup = NodeCleanup(
            kube=shared.kube,
            nodes=shared.nodes,
            instances=shared.instances,
            settings=s.node_cleanup,
            queue=s.queue,
            dry_run=s.node_actions.dry_run,
            metrics=shared.metrics,
            clock=shared.clock,
            recorder=shared.recorder,
            cluster=provisioned_cluster(s),
        )
        runnables.append(Runnable("node-cleanup", cleanup.run, leader_only=True))
    return Controller("housekeeping", runnables)


def provisioning(shared: Shared) -> Controller | None:
    """Karpenter's API objects' status and the catalog's refresh, on the leader; None when off."""
    s = shared.settings
    if not s.provisioning.enabled:
        return None
    region = shared.aws.region
    parts = _provisioning_parts(shared)
    assert parts.provisioner is not None and parts.pending is not None and parts.counter is not None
    assert parts.doom is not None and parts.publisher is not None

    async def problems() -> list[str]:
        # The catalog and the selector terms are per region: without one nothing can be resolved.
        if not region:
            return ["provisioning: no AWS region: set aws.region (KUBESPOT_AWS_REGION) or AWS_REGION"]
        return []

    return Controller(
        "provisioning",
        [
            # Once per cluster: two replicas writing the same status would flap its timestamps.
            Runnable("nodeclass-nodepool-status", parts.status.run, leader_only=True),
            Runnable("catalog-refresh", parts.refresh.run, leader_only=True),
            # One provisioner per cluster (Karpenter's singleton): two would launch twice.
            Runnable("provisioner", parts.provisioner.run, leader_only=True),
            Runnable("pending-pods", parts.pending.run, leader_only=True),
            Runnable("nodeclaim-deletions", parts.provisioner.watch_claims, leader_only=True),
            Runnable("nodepool-counter", parts.counter.run, leader_only=True),
            # Pre-spin: a node fenced or deleted starts a pass at once (launching.md §7).
            Runnable("doomed-nodes", parts.doom.run, leader_only=True),
            # What the launch path avoids, for `kubespot plan --why` (the status ConfigMap).
            *(
                [Runnable("status-configmap", parts.publisher.run, leader_only=True)]
                if parts.publisher
                else []
            ),
            # The cache the passes read (issue 14: reads from watches); stopped with the lease.
            *([Runnable("informers", parts.informers.run, leader_only=True)] if parts.informers else []),
        ],
        problems=problems,
        checks=parts.checks,
        describe=(
            "provisioning: EC2NodeClass and NodePool status, instance type catalog refresh, "
            "pending pods to NodeClaims"
        ),
        parts={"provisioning": parts},
    )


def _provisioning_parts(shared: Shared) -> provisioning_parts.Provisioning:
    """The provisioning controller's parts, built once per operator (its cloud is shared)."""
    parts = shared.built.get("provisioning")
    if parts is None:
        s = shared.settings
        parts = shared.built["provisioning"] = provisioning_parts.build(
            kube=shared.kube,
            aws=shared.aws,
            settings=s.provisioning,
            pricing=s.pricing,
            clock=shared.clock,
            region=shared.aws.region or "",
            launch=s.launch,
            recorder=shared.recorder,
            # The process's one cache: what the interruption handler and the launches mark, the
            # simulations avoid.
            capacity=shared.capacity,
            metrics=shared.metrics,
            status_namespace=own_namespace(s.pod_namespace),
            informers=_informers(shared),
            dry_run=s.node_actions.dry_run,
        )
    assert isinstance(parts, provisioning_parts.Provisioning)
    return parts


def _informers(shared: Shared) -> Informers:
    """The process's informers, one per resource path, made by the first controller that reads
    from them and shared by every other (Karpenter's controllers share controller-runtime's)."""
    informers = shared.built.get("informers")
    if informers is None:
        informers = shared.built["informers"] = Informers(shared.kube)
    assert isinstance(informers, Informers)
    return informers


def nodeclaim(shared: Shared) -> Controller | None:
    """Karpenter's NodeClaim lifecycle (launch, registration, initialization, timeouts, deletion)
    and garbage collection, on the leader, through the provisioning controller's cloud; None when
    provisioning is off."""
    s = shared.settings
    if not s.provisioning.enabled:
        return None
    provisioning_ = _provisioning_parts(shared)
    provisioner = provisioning_.provisioner
    parts = nodeclaim_parts.build(
        kube=shared.kube,
        cloud=provisioning_.cloud,
        launch=s.launch,
        drain=s.drain,
        clock=shared.clock,
        recorder=shared.recorder,
        stuck_after=s.provisioning.stuck_after,
        metrics=shared.metrics,
        capacity=shared.capacity,
        # A claim refused for insufficient capacity: its pods' replacement carries every type
        # that fits (docs/designs/launching.md §2b, "Widened relaunch").
        on_insufficient_capacity=provisioner.capacity_refused if provisioner is not None else None,
        # A claim registered or timed out: its NodePool's NodeRegistrationHealthy (launching.md §4).
        on_registration=lambda o: provisioning_.status.registration_outcome(
            o.pool, o.pool_uid, o.registered, o.launched
        ),
        dry_run=s.node_actions.dry_run,
        # The caches the provisioner reads: one Node and one NodeClaim watch for the whole process.
        informers=_informers(shared),
    )
    # Under dry run no lifecycle: it launches, drains and terminates (the GC only logs).
    lifecycle = (
        [] if s.node_actions.dry_run else [Runnable("nodeclaim-lifecycle", parts.loop.run, leader_only=True)]
    )
    return Controller(
        "nodeclaim",
        [
            # Once per cluster: two replicas launching for one NodeClaim would race (the launch is
            # idempotent, the status writes would conflict) and both would drain its Node.
            *lifecycle,
            Runnable("nodeclaim-garbage-collection", parts.gc.run, leader_only=True),
        ],
        checks=parts.checks,
        describe=(
            "nodeclaim (dry run: no lifecycle, garbage collection only logged)"
            if s.node_actions.dry_run
            else "nodeclaim: NodeClaim launch, registration, initialization, timeouts, termination, GC"
        ),
        parts={"nodeclaim": parts},
    )


#: Every controller of the operator, in start order.
CONTROLLERS: tuple[Callable[[Shared], Controller | None], ...] = (
    interruption,
    housekeeping,
    response,
    provisioning,
    nodeclaim,
)


def new_controllers(shared: Shared) -> list[Controller]:
    """The controllers these settings switch on."""
    return [c for c in (new(shared) for new in CONTROLLERS) if c is not None]
