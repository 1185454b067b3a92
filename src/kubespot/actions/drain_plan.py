"""What a drain does with each pod, decided from the pod alone: pure functions, no I/O.

Kept apart from the engine so the rules (kubectl's, plus Karpenter's tiers and the deadline
arithmetic) read in one place and are tested without a cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from ..config.drain import DrainSettings
from ..kube.views import PodView


class Action(StrEnum):
    EVICT = "evict"
    #: A pod no controller owns: evicted all the same, but nothing will recreate it.
    EVICT_BARE = "evict-bare"
    #: Already terminating: only wait for it to go.
    WAIT = "wait"
    SKIP = "skip"
    #: The drain must not proceed while this pod is on the node (as kubectl refuses).
    REFUSE = "refuse"


class SkipReason(StrEnum):
    OWN_POD = "own-pod"
    MIRROR = "mirror-pod"
    FINISHED = "finished"
    DAEMONSET = "daemonset"


@dataclass(frozen=True, slots=True)
class PodPlan:
    pod: PodView
    action: Action
    reason: str = ""
    #: 0: ordinary pods; 1: critical pods, which leave after the others (Karpenter's order).
    tier: int = 0


def plan_pod(pod: PodView, *, settings: DrainSettings, own_pod: tuple[str, str] | None = None) -> PodPlan:
    if own_pod is not None and pod.key == own_pod:
        return PodPlan(pod, Action.SKIP, SkipReason.OWN_POD)
    if pod.is_mirror:
        # The API object mirrors a static pod from the kubelet's manifest directory: deleting it
        # does nothing, so kubectl skips these too.
        return PodPlan(pod, Action.SKIP, SkipReason.MIRROR)
    if pod.is_finished:
        return PodPlan(pod, Action.SKIP, SkipReason.FINISHED)
    if pod.controller_kind == "DaemonSet":
        if settings.ignore_daemon_sets:
            return PodPlan(pod, Action.SKIP, SkipReason.DAEMONSET)
        return PodPlan(pod, Action.REFUSE, "DaemonSet-managed pod (set IGNORE_DAEMON_SETS to skip it)")
    tier = 1 if pod.priority_class_name in settings.critical_last else 0
    if pod.is_terminating:
        return PodPlan(pod, Action.WAIT, "already terminating", tier)
    if pod.has_empty_dir and not settings.delete_local_data:
        return PodPlan(
            pod, Action.REFUSE, "uses emptyDir local data (set DELETE_LOCAL_DATA to evict it)", tier
        )
    if pod.controller_kind is None:
        return PodPlan(pod, Action.EVICT_BARE, "not managed by a controller: it will not be recreated", tier)
    return PodPlan(pod, Action.EVICT, "", tier)


def own_grace(pod: PodView, settings: DrainSettings) -> int:
    """The grace period the pod would get without a deadline: the setting's, or its own."""
    if settings.pod_termination_grace_period >= 0:
        return settings.pod_termination_grace_period
    return max(0, pod.grace_period_seconds)


def capped_grace(pod: PodView, *, settings: DrainSettings, seconds_left: float) -> int | None:
    """The ``gracePeriodSeconds`` to send, or None to let the pod use its own.

    Cut so the pod is gone ``safety_margin`` before the deadline; never below 1 s for a pod that has
    a grace period, because 0 asks the API for an immediate, unconfirmed removal.
    """
    grace = own_grace(pod, settings)
    budget = math.floor(seconds_left - settings.safety_margin)
    if grace <= budget:
        return grace if settings.pod_termination_grace_period >= 0 else None
    return 0 if grace == 0 else max(1, budget)


def deadline_reserve(pod: PodView, *, settings: DrainSettings, window: float) -> float:
    """Seconds before the deadline at which a pod still blocked by its budget gets the deadline action.

    Its grace period plus the safety margin, so the app can shut down in full; but the grace counted
    is at most half the drain's window: a pod whose grace period exceeds the whole window is cut
    anyway, and its budget deserves a fair chance before it is overridden.
    """
    return min(float(own_grace(pod, settings)), max(0.0, window) / 2) + settings.safety_margin


def deadline_action_due(pod: PodView, *, settings: DrainSettings, seconds_left: float, window: float) -> bool:
    """True once waiting longer for the budget would cost the pod its shutdown time."""
    return seconds_left <= deadline_reserve(pod, settings=settings, window=window)
