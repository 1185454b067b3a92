"""The response policy: which fences, labels and drains an event calls for, from the settings.

Pure: an event and settings in, a ``Plan`` out. The names and defaults follow the reference handler
(FACTS.md) so a migrated configuration behaves the same, with kubespot's fixes: the kubespot taint is
always set (so the provisioner can learn why a node went), and rebalance fences are undone after a
while instead of staying for ever.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubespot.config.imds import MonitorSettings
from kubespot.config.node import NodeActionSettings
from kubespot.model import InterruptionEvent, Kind

KUBESPOT_TAINT_PREFIX = "kubespot.io/"
NTH_TAINT_PREFIX = "aws-node-termination-handler/"
OUT_OF_SERVICE = ("node.kubernetes.io/out-of-service", "nodeshutdown", "NoExecute")
EXCLUDE_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"

#: Kinds the reference handler has a taint for (its keys end in the same suffix as ours).
_NTH_TAINTED = frozenset(
    {Kind.SPOT_INTERRUPTION, Kind.SCHEDULED_MAINTENANCE, Kind.ASG_LIFECYCLE, Kind.REBALANCE_RECOMMENDATION}
)


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class Plan:
    """What to do for one event on one node. An empty plan (``acts`` False) means ignore it."""

    acts: bool
    taints: tuple[Taint, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    cordon: bool = False
    drain: bool = False
    #: Taint the node out-of-service once drained (lets volumes detach from a vanished node).
    out_of_service_after_drain: bool = False
    #: Undo the fence after this many seconds unless a stronger event follows (rebalance).
    undo_after: float | None = None
    #: Undo what an earlier event with this id did (a canceled or completed scheduled event).
    undo: bool = False
    dry_run: bool = False
    reason: str = ""


IGNORE = Plan(acts=False)


def _enabled(kind: Kind, monitors: MonitorSettings) -> bool:
    if kind is Kind.SPOT_INTERRUPTION:
        return monitors.spot_interruption_draining
    if kind is Kind.SCHEDULED_MAINTENANCE:
        return monitors.scheduled_event_draining
    if kind is Kind.REBALANCE_RECOMMENDATION:
        return monitors.rebalance_monitoring or monitors.rebalance_draining
    if kind is Kind.ASG_LIFECYCLE:
        return monitors.asg_lifecycle_draining
    return True  # state changes come from the queue, which has its own switches


def plan_for(event: InterruptionEvent, *, actions: NodeActionSettings, monitors: MonitorSettings) -> Plan:
    """The plan for ``event``; ``IGNORE`` when its kind is switched off."""
    if not _enabled(event.kind, monitors):
        return IGNORE
    if event.cancelled:
        return Plan(acts=True, undo=True, dry_run=actions.dry_run, reason=f"{event.kind.value} withdrawn")
    taints = [Taint(KUBESPOT_TAINT_PREFIX + event.kind.value, event.taint_value(), actions.taint_effect)]
    if actions.taint_node and event.kind in _NTH_TAINTED:
        taints.append(Taint(NTH_TAINT_PREFIX + event.kind.value, event.taint_value(), actions.taint_effect))
    labels = ((EXCLUDE_LB_LABEL, "true"),) if actions.exclude_from_load_balancers else ()
    rebalance = event.kind is Kind.REBALANCE_RECOMMENDATION
    drain = not actions.cordon_only and (not rebalance or monitors.rebalance_draining)
    return Plan(
        acts=True,
        taints=tuple(taints),
        labels=labels,
        cordon=True,
        drain=drain,
        out_of_service_after_drain=drain and actions.enable_out_of_service_taint and not rebalance,
        undo_after=actions.rebalance_undo_after if rebalance and actions.rebalance_undo_after > 0 else None,
        dry_run=actions.dry_run,
        reason=event.kind.value,
    )


def supersedes(new: InterruptionEvent, current: InterruptionEvent | None) -> bool:
    """Whether ``new`` should replace the event a node is being handled for.

    A real interruption overrides a rebalance recommendation (and so cancels its auto-undo), and
    an event with an earlier deadline overrides one with a later or no deadline (a spot notice
    during a maintenance window days away); a repeat of the same notice restarts nothing.
    """
    if current is None:
        return True
    if new.id == current.id:
        return new.cancelled and not current.cancelled
    if new.cancelled:
        return False
    if current.kind is Kind.REBALANCE_RECOMMENDATION and new.kind is not Kind.REBALANCE_RECOMMENDATION:
        return True
    return new.deadline is not None and (current.deadline is None or new.deadline < current.deadline)
