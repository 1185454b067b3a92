"""The deregistration step (pre-drain): the node's load-balancer targets leave before its pods do.

While the state is fenced or draining, the node's targets (instance id, InternalIP, pod IPs) are
looked up in the warm target index (``loadbalancer``) and recorded with the pods behind them
(``pending``) in the node's ``kubespot.io/actions`` annotation before anything is deregistered;
then they are deregistered and the record says ``draining``, with the time AWS accepted it. The
drain reads that record (``deregistration_for``) and holds exactly those pods until then plus
``settle``. The instance is the Node's providerID's: a node without one has only its addresses and
pods looked up.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable
from dataclasses import replace
from typing import Protocol

from kubespot.aws import AwsClients, ClassicLoadBalancers, TargetDirectory
from kubespot.config.loadbalancer import LoadBalancerSettings
from kubespot.controllers.response.events import NodeEvents
from kubespot.controllers.response.loadbalancer import (
    ACTION,
    DeregistrationResult,
    LoadBalancerDeregistration,
    NodeTargets,
    TargetPlan,
)
from kubespot.controllers.response.step import LOGGER, Background, Claimed, PreDrain, StepBase
from kubespot.kube import KubeError, NodeView, PodList, fencing
from kubespot.model import Clock, Kind
from kubespot.model.summary import ActionResult, ActionSummary
from kubespot.observability.metrics import Metrics
from kubespot.records.actions import (
    ActionsRecord,
    LoadBalancerStep,
    StepState,
    TargetRef,
    loadbalancer_step,
    short,
)
from kubespot.records.interruption import NodeState

log = logging.getLogger(LOGGER)

#: The target index is rebuilt when this fraction of its TTL has passed, so lookups on the drain's
#: critical path never wait for a rebuild.
REFRESH_AT = 0.8


class PodLister(Protocol):
    """What the step needs of ``kubespot.kube.KubeClient``: the pods whose IPs may be targets."""

    async def list_pods_on_node(self, node: str) -> PodList: ...


def deregistration(
    settings: LoadBalancerSettings, *, aws: AwsClients, clock: Clock
) -> LoadBalancerDeregistration | None:
    """The action ``settings`` ask for, on the AWS adapters; None when it is off."""
    if not settings.enabled:
        return None
    directory = TargetDirectory(
        aws,
        tag_key=settings.target_group_tag_key,
        tag_value=settings.target_group_tag_value,
        ttl=settings.index_ttl,
        clock=clock,
    )
    classic = ClassicLoadBalancers(aws, ttl=settings.index_ttl, clock=clock) if settings.classic else None
    return LoadBalancerDeregistration(directory, classic, clock=clock)


class Deregister(StepBase[LoadBalancerDeregistration]):
    """Deregisters the node's targets for events of ``kinds`` (none while ``loadbalancer`` is None).
    The record's ``settle`` is the drain's; ``max_delay`` bounds the wait for ``draining``."""

    name = "deregistration"

    def __init__(
        self,
        loadbalancer: LoadBalancerDeregistration | None,
        kinds: frozenset[Kind],
        *,
        pods: PodLister,
        clock: Clock,
        metrics: Metrics,
        events: NodeEvents,
        settle: float,
        max_delay: float,
        index_ttl: float,
    ) -> None:
        super().__init__(loadbalancer, kinds, clock=clock, metrics=metrics, events=events)
        self._pods = pods
        self._settle = settle
        self._max_delay = max_delay
        self._index_ttl = index_ttl

    def _title(self, adapter: LoadBalancerDeregistration) -> str:
        return "load balancers"

    def background(self) -> Background:
        return {"index": self._keep_index_warm} if self._adapter is not None else {}

    def summary(self, record: ActionsRecord) -> ActionSummary | None:
        return None if record.loadbalancer is None else _summary(record.loadbalancer)

    def pending(self, record: ActionsRecord) -> bool:
        step = record.loadbalancer
        return step is not None and step.state is StepState.PENDING

    def forget(self, record: ActionsRecord) -> ActionsRecord:
        return replace(record, loadbalancer=None)

    async def rehearse(self, node: NodeView, instance: str) -> list[tuple[str, str]]:
        plan = await self._plan(node, instance, urgent=False)
        what = (
            f"would deregister {len(plan.elbv2) + len(plan.classic)} load balancer targets"
            + (f" (pods {', '.join(plan.pods)})" if plan.pods else "")
            if not plan.error
            else f"could not look up the load balancer targets: {plan.error}"
        )
        return [(ACTION, what)]

    async def run(self, ctx: PreDrain) -> Claimed | None:
        """Record the node's targets, deregister them, record the outcome."""
        lb = self._required()
        node, state, now = ctx.node, ctx.state, ctx.now

        def claim(step: LoadBalancerStep) -> Awaitable[Claimed | None]:
            return ctx.claims.claim(
                node, state.event_id, lambda old: replace(ctx.start(old), loadbalancer=step)
            )

        # The drain waits for this record: its API calls go ahead of the drains' (as fencing does).
        plan = await self._plan(node, ctx.instance, urgent=True)
        if plan.error:
            step = loadbalancer_step(StepState.FAILED, now, error=f"target lookup failed: {plan.error}")
            claimed = await claim(step)
            self._metrics.action(ACTION, ActionResult.FAILURE.value)
            self._events.emit(
                node,
                "LoadBalancerDeregistrationError",
                f"Load balancer targets unknown: {step.error}",
                warning=True,
            )
            return claimed
        if plan.empty:
            claimed = await claim(loadbalancer_step(StepState.DONE, now))
            if claimed is not None:
                log.info("node %s is no load balancer target: nothing to deregister", node.name)
                self._metrics.action(ACTION, ActionResult.SKIPPED.value)
            return claimed
        refs = [TargetRef(r.target_group_arn, r.target_id, r.port) for r in plan.elbv2] + [
            TargetRef(c.load_balancer_name, c.instance_id) for c in plan.classic
        ]
        pending = loadbalancer_step(
            StepState.PENDING, now, settle=self._settle, node=plan.node, targets=refs, pods=plan.pods
        )
        with fencing():
            claimed = await claim(pending)
        if claimed is None:
            return None
        node, record = claimed
        max_wait = self._max_delay
        if state.deadline is not None:
            # The drain must still finish before the instance dies: never wait past the deadline.
            max_wait = max(0.0, min(max_wait, (state.deadline - self._clock.now()).total_seconds()))
        result = await lb.deregister(plan, max_wait=max_wait)
        step = self._outcome(pending, result, max_wait)
        self._report(node, state, record, result, step)
        with fencing():
            return await ctx.claims.update(node, record.event, lambda old: replace(old, loadbalancer=step))

    def _outcome(
        self, pending: LoadBalancerStep, result: DeregistrationResult, max_wait: float
    ) -> LoadBalancerStep:
        """The record's step once AWS answered: draining from when it accepted, else failed."""
        if result.started is None:
            return replace(pending, state=StepState.FAILED, at=self._clock.now(), error=short(result.error))
        error = result.error
        if not result.confirmed:
            error = "; ".join(e for e in (error, f"not reported draining within {max_wait:.0f}s") if e)
        return replace(pending, state=StepState.DRAINING, at=result.started, error=short(error))

    def _report(
        self,
        node: NodeView,
        state: NodeState,
        record: ActionsRecord,
        result: DeregistrationResult,
        step: LoadBalancerStep,
    ) -> None:
        self._metrics.action(ACTION, result.summary.result.value)
        if result.started is not None and record.fenced is not None:
            self._metrics.deregistration_latency((result.started - record.fenced).total_seconds(), state.kind)
        if step.state is StepState.DRAINING:
            log.info("node %s deregistered: %s", node.name, result.summary.detail)
            self._events.emit(
                node, "LoadBalancerDeregistered", f"Deregistered from load balancers: {result.summary.detail}"
            )
        else:
            log.warning("node %s: deregistration failed: %s", node.name, result.summary.detail)
            self._events.emit(
                node,
                "LoadBalancerDeregistrationError",
                f"Deregistration failed: {result.summary.detail}",
                warning=True,
            )

    async def _plan(self, node: NodeView, instance: str, *, urgent: bool) -> TargetPlan:
        """The registrations of the node's targets, or why they cannot be known. ``urgent``: the
        pod listing goes ahead of the drains' calls."""
        lb = self._required()
        with fencing() if urgent else contextlib.nullcontext():
            targets, why = await self._targets(node, instance)
        return TargetPlan(error=why) if why else await lb.find(targets)

    async def _targets(self, node: NodeView, instance: str) -> tuple[NodeTargets, str]:
        """The node's possible targets, or why they cannot be known."""
        try:
            listing = await self._pods.list_pods_on_node(node.name)
        except KubeError as err:
            return NodeTargets(instance or None), f"cannot list the pods of node {node.name}: {err}"
        own = tuple(ip for ip in (node.internal_ip,) if ip)
        pods = {
            p.ip: f"{p.namespace}/{p.name}"
            for p in listing.pods
            if p.ip and p.ip not in own and not p.is_finished
        }
        return NodeTargets(instance or None, own, pods), ""

    async def _keep_index_warm(self) -> None:
        lb = self._required()
        while True:
            if await lb.warm():
                log.debug("load balancer target index refreshed")
            await self._clock.sleep(self._index_ttl * REFRESH_AT)


def _summary(step: LoadBalancerStep) -> ActionSummary:
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
    return ActionSummary(name=ACTION, result=result, started=step.at, detail=detail)
