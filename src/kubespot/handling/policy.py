"""The response policy: which fences, labels and drains an event calls for, from the settings.

Pure: an event and settings in, a ``Plan`` out. The names and defaults follow the reference handler
(FACTS.md) so a migrated configuration behaves the same, with kubespot's fixes: the kubespot taint is
always set (so the provisioner can learn why a node went), rebalance fences are undone after a
while instead of staying for ever, and voluntary events (see ``voluntary``) are drained without
forcing anything: no deadline is invented for them, PodDisruptionBudgets hold to the end and pods
keep their own grace periods.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from kubespot.config.drain import DrainSettings
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
    #: A voluntary event: drain with PodDisruptionBudgets respected to the end (``keep``), bounded
    #: by the event's deadline if it has one (an Auto Scaling hook's timeout), else by
    #: ``DrainSettings.voluntary_timeout``, never by an invented spot-like window.
    voluntary: bool = False
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


def voluntary(event: InterruptionEvent) -> bool:
    """Whether the instance goes only when someone lets it: an Auto Scaling scale-in (the lifecycle
    hook waits until it is completed or times out), a rebalance recommendation (nothing stops the
    instance), scheduled maintenance without a stop time (the instance keeps running). Spot
    interruptions, stopping maintenance and state changes have a deadline AWS keeps whatever
    happens."""
    if event.kind in (Kind.ASG_LIFECYCLE, Kind.REBALANCE_RECOMMENDATION):
        return True
    return event.kind is Kind.SCHEDULED_MAINTENANCE and event.deadline is None


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
        out_of_service_after_drain=drain and actions.enable_out_of_service_taint and stops_instance(event),
        voluntary=voluntary(event),
        undo_after=actions.rebalance_undo_after if rebalance and actions.rebalance_undo_after > 0 else None,
        dry_run=actions.dry_run,
        reason=event.kind.value,
    )


#: Scheduled-event codes (IMDS ``Code``) after which the instance stays stopped: the other codes are
#: reboots or maintenance the instance comes back from (EC2 API ``InstanceStatusEvent.code``).
STOPPING_SCHEDULED_CODES = frozenset({"instance-stop", "instance-retirement"})


def scheduled_code(event: InterruptionEvent) -> str | None:
    """The scheduled event's code: IMDS ``Code``, or AWS Health ``detail.eventTypeCode``."""
    code = event.raw.get("Code")
    if isinstance(code, str):
        return code
    detail = event.raw.get("detail")
    health = detail.get("eventTypeCode") if isinstance(detail, dict) else None
    return health if isinstance(health, str) else None


def stops_instance(event: InterruptionEvent) -> bool:
    """Whether the instance really goes away (stopped, hibernated or terminated) after ``event``:
    only then may the node be tainted ``node.kubernetes.io/out-of-service``, which lets Kubernetes
    force-delete its pods and detach its volumes as from a node that is shut down (non-graceful node
    shutdown). A reboot, power or network maintenance, or a rebalance recommendation leaves it running.
    """
    if event.kind is Kind.REBALANCE_RECOMMENDATION:
        return False
    if event.kind is not Kind.SCHEDULED_MAINTENANCE:
        return True  # spot interruption (terminate, stop, hibernate), ASG termination, state change
    code = scheduled_code(event)
    if code is None:
        return False
    # Health codes: AWS_EC2_INSTANCE_STOP_SCHEDULED, AWS_EC2_[PERSISTENT_]INSTANCE_RETIREMENT_SCHEDULED.
    return code in STOPPING_SCHEDULED_CODES or "RETIREMENT" in code or "_STOP_" in code


def voluntary_drain(
    plan: Plan, settings: DrainSettings, deadline: datetime | None, now: datetime
) -> tuple[DrainSettings, datetime | None]:
    """The drain engine's settings and deadline for ``plan``: as configured for an involuntary
    event; for a voluntary one, budgets kept to the end and, without a known end, the deadline
    ``voluntary_timeout`` from now (a bound, not a stop: grace periods fit in it whole)."""
    if not plan.voluntary:
        return settings, deadline
    bound = deadline if deadline is not None else now + timedelta(seconds=settings.voluntary_timeout)
    return replace(settings, pdb_deadline_action="keep"), bound


def effective_deadline(event: InterruptionEvent, *, now: datetime, window: timedelta) -> datetime:
    """When the instance is expected to go: the notice's deadline, else ``window`` after the event
    is (or was) due, counted from no earlier than ``now`` (an ASG termination or a maintenance window
    without a stop time gives the node ``NODE_TERMINATION_GRACE_PERIOD`` from when it is acted on)."""
    if event.deadline is not None:
        return event.deadline
    return max(event.act_at, now) + window


def supersedes(
    new: InterruptionEvent,
    current: InterruptionEvent | None,
    *,
    now: datetime,
    window: timedelta = timedelta(seconds=120),
) -> bool:
    """Whether the due event ``new`` should take the node over from ``current`` (both live).

    A rebalance recommendation is the weakest signal: any real interruption overrides it (and so
    cancels its auto-undo), and it overrides nothing but the absence of an event. Otherwise the
    event whose instance goes first wins (a spot notice during a maintenance window, an ASG scale-in
    before a scheduled reboot), a known stop time beating an estimated one on a tie. A repeat of the
    same notice restarts nothing. Withdrawals (canceled events) are not decided here.
    """
    if current is None:
        return True
    if new.id == current.id:
        return False
    new_rebalance = new.kind is Kind.REBALANCE_RECOMMENDATION
    current_rebalance = current.kind is Kind.REBALANCE_RECOMMENDATION
    if new_rebalance != current_rebalance:
        return current_rebalance
    mine = effective_deadline(new, now=now, window=window)
    theirs = effective_deadline(current, now=now, window=window)
    return mine < theirs or (mine == theirs and new.deadline is not None and current.deadline is None)
