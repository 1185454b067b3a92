"""Load-balancer deregistration of an interrupted node and its pods (a controller response action).

The targets of a node are its instance id (``instance`` target groups, Classic Load Balancers), its
InternalIP and the IPs of its pods (``ip`` target groups: the AWS Load Balancer Controller registers
pods by IP). ``find`` looks them up in the adapters' reverse indexes (warm: no AWS call on the
critical path); ``deregister`` sends one DeregisterTargets per target group (and one
DeregisterInstancesFromLoadBalancer per Classic Load Balancer), then waits, bounded, until the ELBv2
targets report ``draining``. AWS errors never reach the caller: they come back in the results,
logged with the node and event.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from kubespot.aws import AwsError, ClassicRegistration, DeregisterOutcome, Registration
from kubespot.model import Clock
from kubespot.model.summary import ActionResult, ActionSummary

log = logging.getLogger("kubespot.actions.loadbalancer")

ACTION = "deregister"


class TargetIndex(Protocol):
    """``kubespot.aws.TargetDirectory`` as this action uses it (a fake in unit tests)."""

    async def lookup(self, target_ids: Iterable[str]) -> dict[str, tuple[Registration, ...]]: ...

    async def refresh(self) -> None: ...

    async def deregister(self, registrations: Iterable[Registration]) -> DeregisterOutcome[Registration]: ...

    async def wait_draining(
        self, registrations: Iterable[Registration], *, max_wait: float, interval: float = 2.0
    ) -> bool: ...


class ClassicIndex(Protocol):
    """``kubespot.aws.ClassicLoadBalancers`` as this action uses it."""

    async def lookup(self, instance_ids: Iterable[str]) -> dict[str, tuple[ClassicRegistration, ...]]: ...

    async def refresh(self) -> None: ...

    async def deregister(
        self, registrations: Iterable[ClassicRegistration]
    ) -> DeregisterOutcome[ClassicRegistration]: ...


@dataclass(frozen=True, slots=True)
class NodeTargets:
    """What of a node can be a target: its instance, its own addresses, its pods' IPs."""

    instance_id: str | None
    node_ips: tuple[str, ...] = ()
    #: pod IP -> ``namespace/name`` (host-network pods left out: their IP is the node's).
    pods: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TargetPlan:
    """The registrations found for a node, and what they mean for its drain."""

    elbv2: tuple[Registration, ...] = ()
    classic: tuple[ClassicRegistration, ...] = ()
    #: ``namespace/name`` of the pods whose IP is registered somewhere.
    pods: tuple[str, ...] = ()
    #: The instance or a node IP is registered: every pod on the node is behind a target.
    node: bool = False
    #: Why the lookup failed ("" when it did not).
    error: str = ""

    @property
    def empty(self) -> bool:
        return not self.elbv2 and not self.classic


@dataclass(frozen=True, slots=True)
class DeregistrationResult:
    """How a deregistration went. ``started``: when AWS accepted it (the load balancers began to
    stop routing); ``confirmed``: every ELBv2 target reported draining (or gone) within the wait."""

    summary: ActionSummary
    started: datetime | None
    deregistered: int
    gone: int
    failed: int
    confirmed: bool
    error: str = ""


class LoadBalancerDeregistration:
    """Finds a node's targets and deregisters them. ``classic`` None: Classic Load Balancers are left
    alone. Never raises ``AwsError``."""

    def __init__(self, elbv2: TargetIndex, classic: ClassicIndex | None, *, clock: Clock) -> None:
        self._elbv2 = elbv2
        self._classic = classic
        self._clock = clock

    async def warm(self) -> bool:
        """Rebuild the indexes now (at start-up, then before they expire), so a lookup on the drain's
        critical path finds a fresh one. False (logged) when a rebuild failed."""
        ok = True
        for name, index in (("elbv2", self._elbv2), ("classic", self._classic)):
            if index is None:
                continue
            try:
                await index.refresh()
            except AwsError as err:
                ok = False
                log.warning("cannot index the %s load balancer targets: %s", name, err)
        return ok

    async def find(self, targets: NodeTargets) -> TargetPlan:
        """The registrations of the node's instance, addresses and pods."""
        ids = [i for i in (targets.instance_id, *targets.node_ips, *targets.pods) if i]
        try:
            found = await self._elbv2.lookup(ids)
            classic = (
                await self._classic.lookup([targets.instance_id])
                if self._classic is not None and targets.instance_id
                else {}
            )
        except AwsError as err:
            log.warning("cannot look up the load balancer targets of %s: %s", targets.instance_id, err)
            return TargetPlan(error=str(err))
        regs = tuple(sorted({r for ip_regs in found.values() for r in ip_regs}))
        pods = tuple(sorted({targets.pods[i] for i in found if i in targets.pods}))
        own = {targets.instance_id, *targets.node_ips}
        node = any(i in own for i in found) or bool(classic)
        classic_regs = tuple(sorted({r for regs_ in classic.values() for r in regs_}))
        return TargetPlan(elbv2=regs, classic=classic_regs, pods=pods, node=node)

    async def deregister(self, plan: TargetPlan, *, max_wait: float) -> DeregistrationResult:
        """Deregister every registration of ``plan``, then wait up to ``max_wait`` seconds for the
        ELBv2 targets to report draining. A partly failed deregistration still counts what went."""
        begun = self._clock.now()
        mono = self._clock.monotonic()
        deregistered = gone = 0
        errors: list[str] = []
        accepted: list[Registration] = []
        if plan.elbv2:
            out = await self._elbv2.deregister(plan.elbv2)
            accepted = list(out.deregistered)
            deregistered += len(out.deregistered)
            gone += len(out.gone)
            errors += [f"{r.target_group_name} {r.target_id}: {e}" for r, e in sorted(out.failed.items())]
        if plan.classic and self._classic is not None:
            classic_out = await self._classic.deregister(plan.classic)
            deregistered += len(classic_out.deregistered)
            gone += len(classic_out.gone)
            errors += [
                f"{r.load_balancer_name} {r.instance_id}: {e}" for r, e in sorted(classic_out.failed.items())
            ]
        failed = len(errors)
        started = self._clock.now() if deregistered or gone else None
        confirmed = True
        if accepted and max_wait > 0:
            # The adapter polls through errors; the bound is ours.
            confirmed = await self._elbv2.wait_draining(accepted, max_wait=max_wait)
        elif accepted:
            confirmed = False
        duration = self._clock.monotonic() - mono
        detail = f"{deregistered} deregistered, {gone} already gone"
        if failed:
            detail += f", {failed} failed: {errors[0]}"
        if not confirmed:
            detail += f"; not draining after {max_wait:.0f}s"
        if failed and not (deregistered or gone):
            result = ActionResult.FAILURE
        elif not confirmed:
            result = ActionResult.TIMEOUT
        elif failed:
            result = ActionResult.FAILURE
        else:
            result = ActionResult.SUCCESS
        if failed:
            log.warning("deregistration: %s", detail)
        return DeregistrationResult(
            summary=ActionSummary(
                name=ACTION, result=result, started=begun, duration=duration, detail=detail
            ),
            started=started,
            deregistered=deregistered,
            gone=gone,
            failed=failed,
            confirmed=confirmed,
            error="; ".join(errors[:3]) + (f" (+{failed - 3} more)" if failed > 3 else ""),
        )
