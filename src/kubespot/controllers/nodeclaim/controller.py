"""The NodeClaim controller's parts, built from the operator's shared clients, and its health.

``build`` wires the lifecycle loop (``loop.NodeClaimLoop``, with ``termination.Terminator`` for
deleted claims) and the garbage collector over one cloud provider (the provisioning controller's:
the operator hands it over, so both use one catalog and one ``UnavailableOfferings`` cache) and
the process's shared informers (the operator's ``Informers``, which the provisioning controller
reads too: one LIST and one WATCH of NodeClaims and of Nodes for all of them). Both run on the
leader only. ``checks`` is the /healthz part: ``nodeclaim`` fails when the loop has not
dispatched for ``stuck_after``, or a reconcile (not a termination, whose drain may rightly take an
hour) has run that long; ``nodeclaim-gc`` when no collection pass has finished for ``stuck_after``
plus its interval. Both hold on a replica that does not lead, and during the first ``stuck_after``
after a loop started. With ``metrics``, the lifecycle and GC count what they do, and the NodeClaims
by phase, the unavailable offerings and the pool risk are exported at scrape time. Under
``dry_run`` (``node_actions.dry_run``) the operator runs no lifecycle loop (it would launch and
terminate instances) and the garbage collector only logs what it would collect.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from kubespot.cloud.provider import CloudProvider
from kubespot.cloud.signals import CapacitySignals
from kubespot.config.drain import DrainSettings
from kubespot.config.launch import LaunchSettings
from kubespot.kube import EventRecorder, KubeClient
from kubespot.kube.custom import CustomObjects
from kubespot.kube.informer import Informers
from kubespot.model import Clock
from kubespot.observability.health import Check
from kubespot.observability.metrics import Metrics

from .garbage_collection import GarbageCollector
from .loop import NodeClaimLoop
from .objects import NODECLAIMS, NODES
from .registration import RegistrationOutcome
from .termination import Terminator

__all__ = ["NODECLAIMS", "NodeClaims", "build"]


@dataclass
class NodeClaims:
    """The controller's parts."""

    loop: NodeClaimLoop
    gc: GarbageCollector
    stuck_after: float

    def checks(self, now: datetime) -> tuple[Check, ...]:
        stuck = timedelta(seconds=self.stuck_after)
        loop = self.loop
        if loop.started is None:
            loop_check = Check("nodeclaim", True, "not running here (not the leader)", None)
        elif loop.last_pass is None:
            loop_check = Check("nodeclaim", now - loop.started <= stuck, "not started yet", None)
        else:
            late = loop.overdue(now, self.stuck_after)
            ok = now - loop.last_pass <= stuck and not late
            detail = f"last pass {loop.last_pass.isoformat()}"
            if now - loop.last_pass > stuck:
                detail += ": stuck"
            if late:
                detail += f"; reconciles running too long: {', '.join(sorted(late)[:5])}"
            loop_check = Check("nodeclaim", ok, detail, loop.last_pass)
        gc = self.gc
        bound = stuck + timedelta(seconds=max(gc.intervals[0], gc.intervals[2]))
        if gc.started is None:
            gc_check = Check("nodeclaim-gc", True, "not running here (not the leader)", None)
        else:
            since = gc.last_pass or gc.started
            ok = now - since <= bound
            detail = f"last pass {gc.last_pass.isoformat()}" if gc.last_pass else "no pass finished yet"
            gc_check = Check("nodeclaim-gc", ok, detail + ("" if ok else ": stuck"), gc.last_pass)
        return loop_check, gc_check


def build(
    *,
    kube: KubeClient,
    cloud: CloudProvider,
    launch: LaunchSettings,
    drain: DrainSettings,
    clock: Clock,
    recorder: EventRecorder | None,
    stuck_after: float,
    metrics: Metrics | None = None,
    capacity: CapacitySignals | None = None,
    on_insufficient_capacity: Callable[[str], None] | None = None,
    on_registration: Callable[[RegistrationOutcome], None] | None = None,
    dry_run: bool = False,
    informers: Informers | None = None,
) -> NodeClaims:
    # The operator hands the process's informers (one cache per kind for all its controllers);
    # built alone (tests), the loop gets its own.
    informers = informers if informers is not None else Informers(kube)
    claims = CustomObjects(kube, NODECLAIMS)
    nodes = CustomObjects(kube, NODES)
    terminator = Terminator(
        kube=kube,
        claims=claims,
        nodes=nodes,
        cloud=cloud,
        drain=drain,
        clock=clock,
        recorder=recorder,
        events=recorder,
    )
    loop = NodeClaimLoop(
        claims=claims,
        nodes=nodes,
        informers=informers,
        cloud=cloud,
        terminator=terminator,
        settings=launch,
        clock=clock,
        recorder=recorder,
        metrics=metrics,
        on_insufficient_capacity=on_insufficient_capacity,
        on_registration=on_registration,
    )
    every = launch.garbage_collection_interval
    gc = GarbageCollector(
        cloud=cloud,
        claims=claims,
        nodes=nodes,
        clock=clock,
        intervals=(every, 20, every * 12),
        min_age=launch.garbage_collection_min_age,
        metrics=metrics,
        dry_run=dry_run,
        informers=informers,
    )
    if metrics is not None:
        metrics.watch("kubespot_nodeclaims", loop.phases)
        if capacity is not None:
            metrics.watch("kubespot_unavailable_offerings", functools.partial(unavailable_gauge, capacity))
            metrics.watch("kubespot_pool_risk", functools.partial(risk_gauge, capacity))
    return NodeClaims(loop, gc, stuck_after)


def unavailable_gauge(capacity: CapacitySignals) -> dict[tuple[str, ...], float]:
    """Pools the unavailable-offerings cache avoids now, by capacity type (read at scrape)."""
    counts: dict[tuple[str, ...], float] = {}
    for mark in capacity.unavailable:
        key = (mark.key[0],)
        counts[key] = counts.get(key, 0.0) + 1
    return counts


def risk_gauge(capacity: CapacitySignals) -> dict[tuple[str, ...], float]:
    """Every spot pool with a reclaim score (the metric keeps the highest few)."""
    return {(s.instance_type, s.zone): s.score for s in capacity.risk}
