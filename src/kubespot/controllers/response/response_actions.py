"""The controller's AWS action runner, composed: the reconcile loop and one step per AWS action.

Whichever process fenced a node (the agent in IMDS mode, a controller replica in queue mode), the
node's state annotation (``kubespot.io/interruption``) names the event, its kind and phase. The
runner, a singleton duty of the elected replica, watches every node through the node index
(``loop``) and brings each forward (``reconciler``) for an event of a kind with AWS actions
configured (docs/designs/response-actions.md): deregistration before the drain
(``loadbalancer_step``), isolation (``isolate_step``) and the published summary (``publish_step``)
after it, each recorded in the node's ``kubespot.io/actions`` annotation (``claims``). Under
``node_actions.dry_run`` nothing is written to AWS or to the node (``dry_run``).

The instance acted on is always the one in the Node's ``spec.providerID`` (``aws:///<zone>/<id>``),
set by the cloud provider: never an instance id read from an annotation (the state's ``extra``, the
record's ``instance``), which any process allowed to patch Nodes (every agent) can write.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from kubespot.aws import AwsClients
from kubespot.config.controller import ControllerSettings
from kubespot.controllers.response.claims import NodeWriter
from kubespot.controllers.response.dry_run import DryRun
from kubespot.controllers.response.events import NodeEvents, Recorder
from kubespot.controllers.response.isolate import InstanceIsolation
from kubespot.controllers.response.isolate_step import Isolate, isolation
from kubespot.controllers.response.loadbalancer import LoadBalancerDeregistration
from kubespot.controllers.response.loadbalancer_step import Deregister, PodLister, deregistration
from kubespot.controllers.response.loop import NodeLoop, NodeSource
from kubespot.controllers.response.publish import SummaryPublisher
from kubespot.controllers.response.publish_step import Publish, publisher
from kubespot.controllers.response.reconciler import Reconciler
from kubespot.controllers.response.step import LOGGER, Step
from kubespot.model import Clock, Kind
from kubespot.observability.metrics import Metrics

log = logging.getLogger(LOGGER)


class NodeApi(NodeWriter, PodLister, Protocol):
    """What the runner needs of ``kubespot.kube.KubeClient``."""


class _KindsOf:
    """A step's ``kinds`` as an attribute of the runner, read and set through it."""

    def __init__(self, step: Callable[[ResponseActions], Step]) -> None:
        self._step = step

    def __get__(self, runner: ResponseActions, owner: type[ResponseActions]) -> frozenset[Kind]:
        return self._step(runner).kinds

    def __set__(self, runner: ResponseActions, kinds: frozenset[Kind]) -> None:
        self._step(runner).kinds = kinds


def enabled_actions(settings: ControllerSettings) -> list[str]:
    """The response actions ``settings`` turn on, by the names ``kubespot aws policy --actions`` takes."""
    names: list[str] = []
    if settings.loadbalancer.enabled:
        names.append("loadbalancer")
        if settings.loadbalancer.classic:
            names.append("classic-loadbalancer")
    if settings.isolation.enabled:
        names.append("isolate")
    if settings.publish.sns_topic_arn:
        names.append("sns")
    if settings.publish.event_bus:
        names.append("eventbridge")
    return names


class ResponseActions:
    """Runs the AWS actions for every node whose state names an event of a configured kind.

    ``run()`` is the singleton duty (until cancelled); ``check()`` the start-up check every replica
    makes; ``reconcile(name)`` one node (for tests). ``loadbalancer``, ``isolation`` and
    ``publisher`` are None when their action is off.
    """

    def __init__(
        self,
        *,
        kube: NodeApi,
        nodes: NodeSource,
        clock: Clock,
        metrics: Metrics,
        identity: str,
        exclusive: bool,
        dry_run: bool,
        loadbalancer: LoadBalancerDeregistration | None = None,
        loadbalancer_kinds: frozenset[Kind] = frozenset(),
        settle: float = 5.0,
        max_delay: float = 30.0,
        index_ttl: float = 45.0,
        isolation: InstanceIsolation | None = None,
        isolation_kinds: frozenset[Kind] = frozenset(),
        publisher: SummaryPublisher | None = None,
        publish_kinds: frozenset[Kind] = frozenset(),
        recorder: Recorder | None = None,
    ) -> None:
        self.identity = identity
        self.dry_run = dry_run
        self._events = events = NodeEvents(recorder)
        self._deregister = Deregister(
            loadbalancer,
            loadbalancer_kinds,
            pods=kube,
            clock=clock,
            metrics=metrics,
            events=events,
            settle=settle,
            max_delay=max_delay,
            index_ttl=index_ttl,
        )
        self._isolate = Isolate(isolation, isolation_kinds, clock=clock, metrics=metrics, events=events)
        self._publish = Publish(publisher, publish_kinds, clock=clock, metrics=metrics, events=events)
        # The order the steps run in, which is also their order in the summary.
        pre, post = (self._deregister,), (self._isolate, self._publish)
        self._steps: tuple[Step, ...] = (*pre, *post)
        self._reconciler = Reconciler(
            nodes,
            kube,
            pre=pre,
            post=post,
            clock=clock,
            identity=identity,
            exclusive=exclusive,
            max_delay=max_delay,
            dry_run=DryRun(pre, post, clock=clock, metrics=metrics, events=events) if dry_run else None,
        )
        self._loop = NodeLoop(
            nodes,
            clock=clock,
            reconcile=self._reconciler.reconcile,
            interesting=self._reconciler.interesting,
            watched=self._reconciler.watched,
        )

    @classmethod
    def from_settings(
        cls,
        settings: ControllerSettings,
        *,
        aws: AwsClients,
        kube: NodeApi,
        nodes: NodeSource,
        clock: Clock,
        metrics: Metrics,
        identity: str,
        recorder: Recorder | None = None,
    ) -> ResponseActions | None:
        """The runner ``settings`` ask for; None when no AWS action is on."""
        if not enabled_actions(settings):
            return None
        lb, iso, pub = settings.loadbalancer, settings.isolation, settings.publish
        return cls(
            kube=kube,
            nodes=nodes,
            clock=clock,
            metrics=metrics,
            identity=identity,
            exclusive=settings.leader_election.enabled,
            dry_run=settings.node_actions.dry_run,
            loadbalancer=deregistration(lb, aws=aws, clock=clock),
            loadbalancer_kinds=lb.kinds,
            settle=lb.settle,
            max_delay=lb.max_delay,
            index_ttl=lb.index_ttl,
            isolation=isolation(iso, settings.queue, aws=aws, clock=clock),
            isolation_kinds=iso.kinds,
            publisher=publisher(pub, aws=aws, clock=clock),
            publish_kinds=pub.kinds,
            recorder=recorder,
        )

    # The kinds each step acts on, under the names they had before the steps were split out (a test
    # narrows them on a built runner).
    _lb_kinds = _KindsOf(lambda runner: runner._deregister)
    _isolation_kinds = _KindsOf(lambda runner: runner._isolate)
    _publish_kinds = _KindsOf(lambda runner: runner._publish)

    async def check(self) -> list[str]:
        """What stops the controller from starting (a quarantine group that exists nowhere)."""
        return [problem for step in self._steps if (problem := await step.check()) is not None]

    def describe(self) -> str:
        return "; ".join(part for step in self._steps if (part := step.describe()))

    async def run(self) -> None:
        """Act on the nodes once the index has synced, then on each node change; until cancelled."""
        log.info("response actions%s: %s", " (dry run)" if self.dry_run else "", self.describe())
        background = {name: work for step in self._steps for name, work in step.background().items()}
        await self._loop.run(background)

    async def reconcile(self, name: str) -> None:
        """Bring node ``name`` forward (the loop's work for one node)."""
        await self._reconciler.reconcile(name)

    async def aclose(self) -> None:
        await self._events.aclose()
