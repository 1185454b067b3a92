"""The controller's AWS action runner: load balancers, isolation and the published summary.

Whichever process fenced a node (the agent in IMDS mode, a controller replica in queue mode), the
node's state annotation (``kubespot.io/interruption``) names the event, its kind and phase. The
runner, a singleton duty of the elected replica, watches every node through the node index and, for
an event of a kind with AWS actions configured (docs/designs/response-actions.md):

- **pre-drain**, while the state is fenced or draining: finds the node's targets (instance id,
  InternalIP, pod IPs) in the warm target index, records them with the pods behind them
  (``pending``) in the node's ``kubespot.io/actions`` annotation, deregisters them and records
  ``draining`` with the time AWS accepted it. The drain reads that record (``deregistration_for``)
  and holds exactly those pods until then plus ``settle``.
- **post-drain**, once the state says drained, the deadline passed, the node was deleted, or the
  state was removed (a withdrawn event: nothing is isolated then): isolates the instance, publishes
  the summary to SNS and EventBridge, and marks the record finished.

Every write is compare-and-set on the node and names the runner: a restarted or newly elected
runner continues from the record (a step recorded is never done again; isolation is idempotent at
AWS anyway). With leader election on, the Lease makes this replica the only runner, and it takes
over a record left by its predecessor at once; with election off every replica runs, and a replica
follows a record another one wrote recently (the compare-and-set decides who claims each step).
Under ``node_actions.dry_run`` nothing is written to AWS or to the node: the plan is logged and
recorded as ``DryRun`` events.

The instance acted on is always the one in the Node's ``spec.providerID`` (``aws:///<zone>/<id>``),
set by the cloud provider: never an instance id read from an annotation (the state's ``extra``, the
record's ``instance``), which any process allowed to patch Nodes (every agent) can write. A node
without an AWS providerID gets no instance-level action; isolation further requires the managed tag
on the instance (``kubespot.controllers.response.isolate``).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from kubespot.aws import (
    AwsClients,
    ClassicLoadBalancers,
    EventBridgePublisher,
    InstanceDirectory,
    NetworkIsolation,
    SnsPublisher,
    TargetDirectory,
)
from kubespot.config.controller import ControllerSettings
from kubespot.controllers.response.isolate import InstanceIsolation
from kubespot.controllers.response.loadbalancer import LoadBalancerDeregistration, NodeTargets, TargetPlan
from kubespot.controllers.response.publish import Published, SummaryPublisher
from kubespot.kube import KubeError, NodeView, PodList, fencing
from kubespot.model import Clock, Kind, Source
from kubespot.model.summary import (
    ActionResult,
    ActionSummary,
    InterruptionSummary,
    Outcome,
    PodCounts,
    Stage,
)
from kubespot.observability.logs import log_context
from kubespot.observability.metrics import Metrics
from kubespot.records.actions import (
    ACTIONS_ANNOTATION,
    ActionsRecord,
    IsolationStep,
    LoadBalancerStep,
    RecordError,
    StepState,
    TargetRef,
    decode_record,
    isolation_step,
    loadbalancer_step,
    record_patch,
    short,
)
from kubespot.records.interruption import STATE_ANNOTATION, NodeState, Phase, StateError, decode

log = logging.getLogger("kubespot.controller.actions")

#: Nodes with work left (a deadline to watch, a record another runner may have abandoned) are looked
#: at this often even when they do not change.
SWEEP_SECONDS = 5.0
#: With election off, a record another replica wrote is followed for max_delay plus this long
#: since its last write; past that its runner is taken to be gone and the work is taken over.
STALE_MARGIN = 30.0
#: A state unchanged for longer than this, with no record of its event, is left alone: a controller
#: started long after an event must not isolate a node or publish a stale summary.
IGNORE_OLDER_THAN = timedelta(hours=1)
#: The target index is rebuilt when this fraction of its TTL has passed, so lookups on the drain's
#: critical path never wait for a rebuild.
REFRESH_AT = 0.8
#: Where the drain counts may sit in the state's ``extra`` (written by the drain when it ends).
DRAIN_COUNTS_KEYS = ("pods", "drain")
_POD_FIELDS = frozenset(f.name for f in dataclasses.fields(PodCounts))


class NodeApi(Protocol):
    """What the runner needs of ``kubespot.kube.KubeClient``."""

    async def update_node(
        self,
        name: str,
        change: Callable[[NodeView], Mapping[str, Any] | None],
        *,
        current: NodeView | None = None,
    ) -> NodeView: ...

    async def list_pods_on_node(self, node: str) -> PodList: ...


class NodeSource(Protocol):
    """What the runner needs of ``kubespot.handling.node_index.NodeIndex``."""

    def by_name(self, name: str) -> NodeView | None: ...

    def nodes(self) -> list[NodeView]: ...

    def subscribe(self, listener: Callable[[str], None]) -> Callable[[], None]: ...

    async def wait_synced(self) -> None: ...


class Recorder(Protocol):
    """``kubespot.kube.EventRecorder``'s node events."""

    async def node(
        self, node: str | NodeView, reason: str, message: str, *, warning: bool = False
    ) -> None: ...


class Why(StrEnum):
    """Why the post-drain steps run."""

    DRAINED = "drained"
    DEADLINE = "deadline passed"
    DELETED = "node deleted"
    WITHDRAWN = "withdrawn"


@dataclass
class _Seen:
    """The last copy of a node the runner had work for (for when it is deleted)."""

    node: NodeView
    state: NodeState | None
    record: ActionsRecord | None


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
        self._kube = kube
        self._nodes = nodes
        self._clock = clock
        self._metrics = metrics
        self.identity = identity
        #: Leader election makes this the only runner: a record left by another is taken over at once.
        self._stale_after = 0.0 if exclusive else max_delay + STALE_MARGIN
        self.dry_run = dry_run
        self._lb = loadbalancer
        self._lb_kinds = loadbalancer_kinds if loadbalancer is not None else frozenset()
        self._settle = settle
        self._max_delay = max_delay
        self._index_ttl = index_ttl
        self._isolation = isolation
        self._isolation_kinds = isolation_kinds if isolation is not None else frozenset()
        self._publisher = publisher
        self._publish_kinds = publish_kinds if publisher is not None else frozenset()
        self._recorder = recorder
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._busy: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._seen: dict[str, _Seen] = {}
        #: Records whose final write failed: written again rather than redone (no second publish).
        self._unwritten: dict[tuple[str, str], ActionsRecord] = {}
        #: Dry run: per (node, event), the steps already reported.
        self._dry: dict[tuple[str, str], set[str]] = {}
        self._garbled: dict[str, str] = {}
        #: The last record this runner wrote per node: the node index may not have seen it yet.
        self._written: dict[str, ActionsRecord] = {}
        self._side: set[asyncio.Task[None]] = set()

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
        deregistration = None
        if lb.enabled:
            directory = TargetDirectory(
                aws,
                tag_key=lb.target_group_tag_key,
                tag_value=lb.target_group_tag_value,
                ttl=lb.index_ttl,
                clock=clock,
            )
            classic = ClassicLoadBalancers(aws, ttl=lb.index_ttl, clock=clock) if lb.classic else None
            deregistration = LoadBalancerDeregistration(directory, classic, clock=clock)
        isolation = (
            InstanceIsolation(
                NetworkIsolation(aws, clock=clock),
                iso.quarantine_group,
                clock=clock,
                instances=InstanceDirectory(aws, cache_ttl=settings.queue.describe_cache_ttl, clock=clock),
                managed_tag=settings.queue.managed_tag,
            )
            if iso.enabled
            else None
        )
        publisher = None
        if pub.enabled:
            sns = SnsPublisher(aws, pub.sns_topic_arn) if pub.sns_topic_arn else None
            events = (
                EventBridgePublisher(aws, pub.event_bus, source=pub.source, detail_type=pub.detail_type)
                if pub.event_bus
                else None
            )
            publisher = SummaryPublisher(sns, events, clock=clock)
        return cls(
            kube=kube,
            nodes=nodes,
            clock=clock,
            metrics=metrics,
            identity=identity,
            exclusive=settings.leader_election.enabled,
            dry_run=settings.node_actions.dry_run,
            loadbalancer=deregistration,
            loadbalancer_kinds=lb.kinds,
            settle=lb.settle,
            max_delay=lb.max_delay,
            index_ttl=lb.index_ttl,
            isolation=isolation,
            isolation_kinds=iso.kinds,
            publisher=publisher,
            publish_kinds=pub.kinds,
            recorder=recorder,
        )

    # --- start-up ------------------------------------------------------------------------------

    async def check(self) -> list[str]:
        """What stops the controller from starting: a quarantine group that exists nowhere."""
        problems: list[str] = []
        if self._isolation is not None:
            why = await self._isolation.check()
            if why is not None:
                problems.append(f"isolation.quarantine_group: {why}")
        return problems

    def describe(self) -> str:
        parts = []
        if self._lb is not None:
            parts.append(f"load balancers ({_kinds(self._lb_kinds)})")
        if self._isolation is not None:
            parts.append(
                f"isolation onto {self._isolation.quarantine_group} ({_kinds(self._isolation_kinds)})"
            )
        if self._publisher is not None:
            parts.append(f"summary to {', '.join(self._publisher.targets)} ({_kinds(self._publish_kinds)})")
        return "; ".join(parts)

    # --- the duty ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Act on the nodes once the index has synced, then on each node change; until cancelled."""
        log.info("response actions%s: %s", " (dry run)" if self.dry_run else "", self.describe())
        unsubscribe = self._nodes.subscribe(self._changed)
        helpers = [asyncio.create_task(self._sweep(), name="response-actions-sweep")]
        if self._lb is not None:
            helpers.append(asyncio.create_task(self._keep_index_warm(), name="response-actions-index"))
        try:
            await self._nodes.wait_synced()
            self._dirty.update(node.name for node in self._nodes.nodes())
            self._wake.set()
            while True:
                await self._wake.wait()
                self._wake.clear()
                names, self._dirty = self._dirty, set()
                for name in sorted(names):
                    if self._interesting(name):
                        self._start(name)
        finally:
            unsubscribe()
            pending = [*helpers, *self._busy.values()]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
            self._busy.clear()

    def _changed(self, name: str) -> None:
        self._dirty.add(name)
        self._wake.set()

    def _interesting(self, name: str) -> bool:
        """Cheap filter for the node index's stream of changes (heartbeats included)."""
        if name in self._seen:
            return True
        node = self._nodes.by_name(name)
        return node is not None and (
            STATE_ANNOTATION in node.annotations or ACTIONS_ANNOTATION in node.annotations
        )

    def _start(self, name: str) -> None:
        if name in self._busy:
            self._again.add(name)
            return
        # A fresh context: the work outlives the change that started it.
        task = asyncio.create_task(
            self._guarded(name), name=f"response-actions-{name}", context=contextvars.Context()
        )
        self._busy[name] = task

    async def _guarded(self, name: str) -> None:
        try:
            await self.reconcile(name)
        except asyncio.CancelledError:
            raise
        except Exception:  # one node's trouble must not stop the others
            log.exception("response actions for node %s failed", name)
        finally:
            self._busy.pop(name, None)
            if name in self._again:
                self._again.discard(name)
                self._changed(name)

    async def _sweep(self) -> None:
        while True:
            await self._clock.sleep(SWEEP_SECONDS)
            if self._seen:
                self._dirty.update(self._seen)
                self._wake.set()

    async def _keep_index_warm(self) -> None:
        assert self._lb is not None
        while True:
            if await self._lb.warm():
                log.debug("load balancer target index refreshed")
            await self._clock.sleep(self._index_ttl * REFRESH_AT)

    async def aclose(self) -> None:
        tasks = list(self._side)
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)

    # --- one node ------------------------------------------------------------------------------

    def _kinds_wanted(self, kind: str) -> bool:
        try:
            k = Kind(kind)
        except ValueError:
            return False
        return k in self._lb_kinds or k in self._isolation_kinds or k in self._publish_kinds

    async def reconcile(self, name: str) -> None:
        """Bring node ``name`` forward: pre-drain, post-drain, or nothing, as its state says."""
        node = self._nodes.by_name(name)
        if node is None:
            seen = self._seen.pop(name, None)
            self._garbled.pop(name, None)
            self._written.pop(name, None)
            for key in [k for k in self._dry if k[0] == name]:
                del self._dry[key]
            if seen is not None and not self.dry_run:
                await self._node_gone(seen)
            return
        state = self._state(node)
        record = self._record(node)
        mine = self._written.get(name)
        if record is not None and mine is not None and record.event == mine.event and _behind(record, mine):
            # The index still shows an older copy of our own write (a pending record we have since
            # moved on from): acting on it would deregister twice. Its echo brings us back here.
            return
        now = self._clock.now()
        wanted = state is not None and self._kinds_wanted(state.kind)
        if wanted and state is not None and (record is None or record.event != state.event_id):
            # Too old to act on (see IGNORE_OLDER_THAN), unless it is still draining.
            wanted = state.phase is not Phase.DRAINED or now - state.since <= IGNORE_OLDER_THAN
        # Watched (swept, remembered for its deletion) while work is left for it.
        active = (
            wanted
            and state is not None
            and (record is None or record.event != state.event_id or record.finished is None)
        )
        if active or (record is not None and record.finished is None):
            self._seen[name] = _Seen(node, state if wanted else None, record)
        else:
            self._seen.pop(name, None)
        if self.dry_run:
            if wanted and state is not None:
                await self._dry_run(node, state)
            return
        if state is None or not wanted:
            # Removed, not garbled: a hand-edited state is no withdrawal.
            removed = state is None and STATE_ANNOTATION not in node.annotations
            if removed and record is not None and record.finished is None:
                with log_context(event_id=record.event, kind=record.kind, node=name):
                    await self._post_drain(name, node, None, record, Why.WITHDRAWN)
            return
        with log_context(event_id=state.event_id, kind=state.kind, node=name):
            if record is None or record.event != state.event_id:
                node_and_record = await self._pre_drain(node, state, None)
                if node_and_record is None:
                    return
                node, record = node_and_record
            elif (
                record.loadbalancer is not None
                and record.loadbalancer.state is StepState.PENDING
                and record.finished is None
            ):
                if record.live_other(self.identity, now, self._stale_after):
                    return  # another runner is deregistering right now
                log.info("resuming the deregistration of node %s left pending by %s", name, record.runner)
                node_and_record = await self._pre_drain(node, state, record)
                if node_and_record is None:
                    return
                node, record = node_and_record
            if record.finished is not None:
                return
            if state.phase is Phase.DRAINED:
                await self._post_drain(name, node, state, record, Why.DRAINED)
            elif state.deadline is not None and self._clock.now() >= state.deadline:
                await self._post_drain(name, node, state, record, Why.DEADLINE)

    def _state(self, node: NodeView) -> NodeState | None:
        text = node.annotations.get(STATE_ANNOTATION)
        try:
            return decode(text)
        except StateError as err:
            self._garble(node.name, text, err)
            return None

    def _record(self, node: NodeView) -> ActionsRecord | None:
        text = node.annotations.get(ACTIONS_ANNOTATION)
        try:
            return decode_record(text)
        except RecordError as err:
            self._garble(node.name, text, err)
            return None

    def _garble(self, name: str, text: str | None, err: Exception) -> None:
        key = f"{name}\x00{text}"
        if self._garbled.get(name) != key:
            self._garbled[name] = key
            log.warning("node %s: ignoring an annotation kubespot cannot read: %s", name, err)

    # --- pre-drain: deregistration -------------------------------------------------------------

    async def _pre_drain(
        self, node: NodeView, state: NodeState, resume: ActionsRecord | None
    ) -> tuple[NodeView, ActionsRecord] | None:
        """Record the event and deregister the node's targets; the node and record as written, or
        None when another runner has it (or the record could not be written)."""
        now = self._clock.now()
        kind = Kind(state.kind)
        instance = node.instance_id or ""
        base = resume or ActionsRecord(
            event=state.event_id,
            runner=self.identity,
            at=now,
            kind=state.kind,
            instance=instance,
            source=str(state.extra.get("source") or ""),
            fenced=state.since if state.phase is not Phase.DRAINED else None,
        )

        def on(old: ActionsRecord | None) -> ActionsRecord:
            # This event's record as it stands (a resumed one), else a new one replacing the old.
            return old if old is not None and old.event == base.event else base

        if self._lb is None or kind not in self._lb_kinds:
            return await self._claim(node, state.event_id, lambda old: replace(on(old), loadbalancer=None))
        lb = self._lb
        # The drain waits for this record: its API calls go ahead of the drains' (as fencing does).
        with fencing():
            targets, why = await self._targets(node, instance)
        plan = TargetPlan(error=why) if why else await lb.find(targets)
        if plan.error:
            step = loadbalancer_step(StepState.FAILED, now, error=f"target lookup failed: {plan.error}")
            claimed = await self._claim(node, state.event_id, lambda old: replace(on(old), loadbalancer=step))
            self._metrics.action("deregister", ActionResult.FAILURE.value)
            self._event(
                node,
                "LoadBalancerDeregistrationError",
                f"Load balancer targets unknown: {step.error}",
                warning=True,
            )
            return claimed
        if plan.empty:
            step = loadbalancer_step(StepState.DONE, now)
            claimed = await self._claim(node, state.event_id, lambda old: replace(on(old), loadbalancer=step))
            if claimed is not None:
                log.info("node %s is no load balancer target: nothing to deregister", node.name)
                self._metrics.action("deregister", ActionResult.SKIPPED.value)
            return claimed
        refs = [TargetRef(r.target_group_arn, r.target_id, r.port) for r in plan.elbv2] + [
            TargetRef(c.load_balancer_name, c.instance_id) for c in plan.classic
        ]
        pending = loadbalancer_step(
            StepState.PENDING, now, settle=self._settle, node=plan.node, targets=refs, pods=plan.pods
        )
        with fencing():
            claimed = await self._claim(
                node, state.event_id, lambda old: replace(on(old), loadbalancer=pending)
            )
        if claimed is None:
            return None
        node, record = claimed
        max_wait = self._max_delay
        if state.deadline is not None:
            # The drain must still finish before the instance dies: never wait past the deadline.
            max_wait = max(0.0, min(max_wait, (state.deadline - self._clock.now()).total_seconds()))
        result = await lb.deregister(plan, max_wait=max_wait)
        if result.started is None:
            step = replace(pending, state=StepState.FAILED, at=self._clock.now(), error=short(result.error))
        else:
            error = result.error
            if not result.confirmed:
                error = "; ".join(e for e in (error, f"not reported draining within {max_wait:.0f}s") if e)
            step = replace(pending, state=StepState.DRAINING, at=result.started, error=short(error))
        self._metrics.action("deregister", result.summary.result.value)
        if result.started is not None and record.fenced is not None:
            self._metrics.deregistration_latency((result.started - record.fenced).total_seconds(), state.kind)
        if step.state is StepState.DRAINING:
            log.info("node %s deregistered: %s", node.name, result.summary.detail)
            self._event(
                node, "LoadBalancerDeregistered", f"Deregistered from load balancers: {result.summary.detail}"
            )
        else:
            log.warning("node %s: deregistration failed: %s", node.name, result.summary.detail)
            self._event(
                node,
                "LoadBalancerDeregistrationError",
                f"Deregistration failed: {result.summary.detail}",
                warning=True,
            )
        with fencing():
            return await self._update(node, record.event, lambda old: replace(old, loadbalancer=step))

    async def _targets(self, node: NodeView, instance: str) -> tuple[NodeTargets, str]:
        """The node's possible targets, or why they cannot be known."""
        try:
            listing = await self._kube.list_pods_on_node(node.name)
        except KubeError as err:
            return NodeTargets(instance or None), f"cannot list the pods of node {node.name}: {err}"
        own = tuple(ip for ip in (node.internal_ip,) if ip)
        pods = {
            p.ip: f"{p.namespace}/{p.name}"
            for p in listing.pods
            if p.ip and p.ip not in own and not p.is_finished
        }
        return NodeTargets(instance or None, own, pods), ""

    # --- post-drain: isolation, summary --------------------------------------------------------

    async def _post_drain(
        self,
        name: str,
        node: NodeView | None,
        state: NodeState | None,
        record: ActionsRecord,
        why: Why,
        *,
        last: NodeView | None = None,
    ) -> None:
        """Isolate and publish (each once), then mark the record finished. ``node`` None: it was
        deleted (``last`` is its last copy), nothing can be written."""
        now = self._clock.now()
        if record.post is not None and record.live_other(self.identity, now, self._stale_after):
            return  # another runner is at it
        kept = self._unwritten.get((name, record.event))
        if kept is not None and node is not None:
            await self._finish(node, kept)
            return
        if node is not None:
            claimed = await self._update(node, record.event, lambda old: replace(old, post=old.post or now))
            if claimed is None:
                return
            node, record = claimed
        kind = Kind(record.kind) if record.kind in {k.value for k in Kind} else None
        if kind is None:
            return
        copy = node or last
        # The Node's providerID, never the record's ``instance``: an annotation anyone may write.
        instance = (copy.instance_id if copy is not None else None) or ""
        actions: list[ActionSummary] = []
        if record.loadbalancer is not None:
            actions.append(_lb_summary(record.loadbalancer))
        isolation = record.isolation
        if isolation is None and self._isolation is not None and kind in self._isolation_kinds:
            isolation = await self._isolate(node, instance, why)
        if isolation is not None:
            actions.append(_isolation_summary(isolation))
        published = dict(record.published)
        if self._publisher is not None and kind in self._publish_kinds:
            summary = _summary(name, record, state, why, actions, instance, self._clock.now())
            for outcome in await self._publisher.publish(summary, skip=set(published)):
                published[outcome.target] = outcome.recorded
                self._published(node, name, outcome)
        final = replace(
            record,
            isolation=isolation,
            published=tuple(sorted(published.items())),
            finished=self._clock.now(),
        )
        log.info("response actions for %s on node %s finished (%s)", record.event, name, why.value)
        if node is not None:
            await self._finish(node, final)

    async def _isolate(self, node: NodeView | None, instance: str, why: Why) -> IsolationStep:
        assert self._isolation is not None
        now = self._clock.now()
        if why is Why.WITHDRAWN:
            self._metrics.action("isolate", ActionResult.SKIPPED.value)
            return isolation_step(StepState.SKIPPED, now, error="withdrawn: the node stays in service")
        if not instance:
            self._metrics.action("isolate", ActionResult.SKIPPED.value)
            return isolation_step(StepState.SKIPPED, now, error="the node has no AWS providerID")
        result = await self._isolation.isolate(instance)
        self._metrics.action("isolate", result.summary.result.value)
        target = node if node is not None else None
        if result.skipped:
            if target is not None:
                self._event(
                    target, "IsolationSkipped", f"Not isolated: {result.summary.detail}", warning=True
                )
            return isolation_step(StepState.SKIPPED, self._clock.now(), error=result.error)
        if result.ok:
            log.info("instance %s isolated: %s", instance, result.summary.detail)
            if target is not None:
                self._event(target, "Isolated", f"Instance {instance} isolated: {result.summary.detail}")
            return isolation_step(StepState.DONE, self._clock.now(), replaced=result.replaced)
        if target is not None:
            self._event(
                target,
                "IsolationError",
                f"Isolating instance {instance} failed: {result.summary.detail}",
                warning=True,
            )
        return isolation_step(
            StepState.FAILED, self._clock.now(), replaced=result.replaced, error=result.error
        )

    def _published(self, node: NodeView | None, name: str, outcome: Published) -> None:
        self._metrics.action(outcome.summary.name, outcome.summary.result.value)
        if outcome.ok:
            log.info("summary of node %s published to %s: %s", name, outcome.target, outcome.message_id)
            if node is not None:
                self._event(
                    node, "SummaryPublished", f"Summary published to {outcome.target}: {outcome.message_id}"
                )
        elif node is not None:
            self._event(
                node,
                "SummaryPublishError",
                f"Publishing the summary to {outcome.target} failed: {outcome.error}",
                warning=True,
            )

    async def _finish(self, node: NodeView, final: ActionsRecord) -> None:
        key = (node.name, final.event)

        def change(old: ActionsRecord | None) -> ActionsRecord | None:
            # Only over this event's unfinished record: a newer event's record is never overwritten.
            return final if old is not None and old.event == final.event and old.finished is None else None

        try:
            await self._kube.update_node(
                node.name, lambda n: record_patch(n.annotations, change), current=node
            )
        except KubeError as err:
            if err.code == 404:
                self._unwritten.pop(key, None)
                return
            self._unwritten[key] = final
            log.warning("could not mark the record of node %s finished (will try again): %s", node.name, err)
            return
        self._unwritten.pop(key, None)
        self._seen.pop(node.name, None)  # nothing left to do, even if the node is deleted next

    async def _node_gone(self, seen: _Seen) -> None:
        """The node was deleted: run what is left of the post-drain steps (nothing can be recorded)."""
        record = seen.record
        if record is None or record.finished is not None:
            return
        why = Why.WITHDRAWN if seen.state is None else Why.DELETED
        with log_context(event_id=record.event, kind=record.kind, node=seen.node.name):
            log.info("node %s was deleted before its response actions finished", seen.node.name)
            await self._post_drain(
                seen.node.name, None, seen.state, replace(record, runner=self.identity), why, last=seen.node
            )

    # --- dry run -------------------------------------------------------------------------------

    async def _dry_run(self, node: NodeView, state: NodeState) -> None:
        reported = self._dry.setdefault((node.name, state.event_id), set())
        kind = Kind(state.kind)
        instance = node.instance_id or ""
        if "pre" not in reported and self._lb is not None and kind in self._lb_kinds:
            reported.add("pre")
            targets, why = await self._targets(node, instance)
            plan = TargetPlan(error=why) if why else await self._lb.find(targets)
            what = (
                f"would deregister {len(plan.elbv2) + len(plan.classic)} load balancer targets"
                + (f" (pods {', '.join(plan.pods)})" if plan.pods else "")
                if not plan.error
                else f"could not look up the load balancer targets: {plan.error}"
            )
            self._dry_event(node, "deregister", what)
        drained = state.phase is Phase.DRAINED or (
            state.deadline is not None and self._clock.now() >= state.deadline
        )
        if "post" not in reported and drained:
            reported.add("post")
            if self._isolation is not None and kind in self._isolation_kinds:
                self._dry_event(
                    node, "isolate", f"would isolate {instance} onto {self._isolation.quarantine_group}"
                )
            if self._publisher is not None and kind in self._publish_kinds:
                for target in self._publisher.targets:
                    self._dry_event(node, f"publish_{target}", f"would publish the summary to {target}")

    def _dry_event(self, node: NodeView, action: str, what: str) -> None:
        log.info("dry run: node %s: %s", node.name, what)
        self._metrics.action(action, ActionResult.DRY_RUN.value)
        self._event(node, "DryRun", f"Dry run: {what}")

    # --- writes --------------------------------------------------------------------------------

    async def _claim(
        self, node: NodeView, event_id: str, build: Callable[[ActionsRecord | None], ActionsRecord]
    ) -> tuple[NodeView, ActionsRecord] | None:
        """Write ``build(old)`` unless another live runner has a record of this event (then follow)."""
        now = self._clock.now()
        me = self.identity

        def change(old: ActionsRecord | None) -> ActionsRecord | None:
            if old is not None and old.event == event_id and old.live_other(me, now, self._stale_after):
                return None
            if old is not None and old.event == event_id and old.finished is not None:
                return None  # finished meanwhile: nothing left to claim
            return replace(build(old), runner=me, at=now)

        return await self._write(node, event_id, change)

    async def _update(
        self, node: NodeView, event_id: str, mutate: Callable[[ActionsRecord], ActionsRecord]
    ) -> tuple[NodeView, ActionsRecord] | None:
        """Change the record of ``event_id`` (if it is still that event's and not another live
        runner's), renewing the runner's mark."""
        now = self._clock.now()
        me = self.identity

        def change(old: ActionsRecord | None) -> ActionsRecord | None:
            if old is None or old.event != event_id or old.live_other(me, now, self._stale_after):
                return None
            return replace(mutate(old), runner=me, at=now)

        return await self._write(node, event_id, change)

    async def _write(
        self, node: NodeView, event_id: str, change: Callable[[ActionsRecord | None], ActionsRecord | None]
    ) -> tuple[NodeView, ActionsRecord] | None:
        try:
            written = await self._kube.update_node(
                node.name, lambda n: record_patch(n.annotations, change), current=node
            )
        except KubeError as err:
            if err.code != 404:
                log.warning("could not write the actions record of node %s: %s", node.name, err)
            return None
        try:
            record = decode_record(written.annotations.get(ACTIONS_ANNOTATION))
        except RecordError:
            return None
        seen = self._seen.get(node.name)
        if seen is not None:
            # Remembered as written, for the post-drain steps if the node is deleted next.
            seen.node, seen.record = written, record
        if record is not None and record.runner == self.identity:
            self._written[node.name] = record
        if record is None or record.event != event_id or record.runner != self.identity:
            if record is not None and record.event == event_id:
                log.info(
                    "node %s: following %s, which has its response actions in hand", node.name, record.runner
                )
            return None
        return written, record

    def _event(self, node: NodeView, reason: str, message: str, *, warning: bool = False) -> None:
        """Record a node event in the background: events never delay the actions."""
        if self._recorder is None:
            return
        task = asyncio.create_task(self._recorder.node(node, reason, message, warning=warning))
        self._side.add(task)
        task.add_done_callback(self._side.discard)


# --- pure helpers ---------------------------------------------------------------------------------


def _progress(record: ActionsRecord) -> tuple[datetime, bool, bool, bool]:
    lb = record.loadbalancer
    return (
        record.at,
        lb is not None and lb.state is not StepState.PENDING,
        record.post is not None,
        record.finished is not None,
    )


def _behind(record: ActionsRecord, mine: ActionsRecord) -> bool:
    """Whether ``record`` is an older copy of the record ``mine`` (written after it by this runner):
    earlier, or as early (one clock tick) but fewer steps along."""
    return record.runner == mine.runner and _progress(record) < _progress(mine)


def _kinds(kinds: frozenset[Kind]) -> str:
    return ", ".join(sorted(k.value for k in kinds)) or "no kinds"


def _lb_summary(step: LoadBalancerStep) -> ActionSummary:
    result = {
        StepState.DRAINING: ActionResult.SUCCESS,
        StepState.DONE: ActionResult.SUCCESS,
        StepState.FAILED: ActionResult.FAILURE,
        StepState.SKIPPED: ActionResult.SKIPPED,
        StepState.PENDING: ActionResult.TIMEOUT,
    }[step.state]
    count = len(step.targets) + step.more_targets
    detail = f"{count} targets {step.state.value}" if count else "no load balancer target"
    if step.error:
        detail += f": {step.error}"
    return ActionSummary(name="deregister", result=result, started=step.at, detail=detail)


def _isolation_summary(step: IsolationStep) -> ActionSummary:
    result = {
        StepState.DONE: ActionResult.SUCCESS,
        StepState.FAILED: ActionResult.FAILURE,
        StepState.SKIPPED: ActionResult.SKIPPED,
    }.get(step.state, ActionResult.FAILURE)
    changed = len(step.replaced) + step.more_interfaces
    detail = (
        f"{changed} interfaces moved to the quarantine group" if step.state is StepState.DONE else step.error
    )
    return ActionSummary(name="isolate", result=result, started=step.at, detail=detail)


def _pod_counts(state: NodeState | None) -> PodCounts | None:
    """The drain's counts, if the state carries them (the drain adds them to ``extra`` when it ends)."""
    if state is None:
        return None
    for key in DRAIN_COUNTS_KEYS:
        raw = state.extra.get(key)
        if isinstance(raw, Mapping) and raw:
            try:
                fields = {k: int(v) for k, v in raw.items() if k in _POD_FIELDS}
                return (
                    PodCounts(**fields)
                    if fields
                    else PodCounts.from_outcomes({str(k): int(v) for k, v in raw.items()})
                )
            except (TypeError, ValueError):
                return None
    return None


def _summary(
    node: str,
    record: ActionsRecord,
    state: NodeState | None,
    why: Why,
    actions: list[ActionSummary],
    instance: str,
    now: datetime,
) -> InterruptionSummary:
    try:
        source = Source(record.source or (state.extra.get("source") if state else "") or Source.IMDS.value)
    except ValueError:
        source = Source.IMDS
    drained = state is not None and state.phase is Phase.DRAINED
    if why is Why.WITHDRAWN:
        stage, outcome, error = Stage.FINISHED, Outcome.WITHDRAWN, None
    elif drained:
        stage, outcome, error = Stage.FINISHED, Outcome.DONE, None
    else:
        stage, outcome = Stage.FAILED, Outcome.FAILED
        error = (
            "the node was deleted before its drain finished"
            if why is Why.DELETED
            else "the deadline passed before the drain finished"
        )
    failures = tuple(
        f"{a.name}: {a.detail}" for a in actions if a.result in (ActionResult.FAILURE, ActionResult.TIMEOUT)
    )
    return InterruptionSummary(
        event_id=record.event,
        kind=Kind(record.kind),
        node=node,
        instance_id=instance,
        source=source,
        stage=stage,
        outcome=outcome,
        description=f"{record.kind} of {instance or 'an instance'} on node {node}",
        deadline=state.deadline if state is not None else None,
        started=record.fenced or (state.since if state is not None else None),
        finished=now,
        actions=tuple(actions),
        pods=_pod_counts(state),
        failures=failures,
        error=error,
    )
