"""Liveness: a NodeClaim that does not launch, or whose Node does not register, in time is deleted
(pure), as Karpenter's liveness step (kubernetes-sigs/karpenter
``pkg/controllers/nodeclaim/lifecycle/liveness.go`` ``Liveness.Reconcile``).

Both clocks run from a condition's ``lastTransitionTime``: not Launched ``launch_timeout`` (5 min)
after ``Launched`` last changed status → reason ``launch_timeout``; not Registered
``registration_timeout`` (15 min) after ``Registered`` did → ``registration_timeout`` (``Registered``
is Unknown from the NodeClaim's first reconcile, so that clock starts before the launch, as
upstream's). Deleting the claim terminates its instance through the finalizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .objects import LAUNCHED, REGISTERED, Obj, is_true, transition_time

__all__ = ["Liveness", "liveness"]

LAUNCH_TIMEOUT = "launch_timeout"
REGISTRATION_TIMEOUT = "registration_timeout"


@dataclass(frozen=True, slots=True)
class Liveness:
    #: ``launch_timeout`` / ``registration_timeout`` when the claim is to be deleted.
    delete_reason: str = ""
    #: Seconds until the next timeout could pass (None: none pending).
    requeue_after: float | None = None


def liveness(claim: Obj, now: datetime, *, launch_timeout: float, registration_timeout: float) -> Liveness:
    if is_true(claim, REGISTERED):
        return Liveness()
    launched_at = transition_time(claim, LAUNCHED)
    if launched_at is None:
        return Liveness(requeue_after=1.0)
    wait: list[float] = []
    if not is_true(claim, LAUNCHED):
        left = launch_timeout - (now - launched_at).total_seconds()
        if left <= 0:
            return Liveness(LAUNCH_TIMEOUT)
        wait.append(left)
    registered_at = transition_time(claim, REGISTERED)
    if registered_at is None:
        return Liveness(requeue_after=1.0)
    left = registration_timeout - (now - registered_at).total_seconds()
    if left <= 0:
        return Liveness(REGISTRATION_TIMEOUT)
    wait.append(left)
    return Liveness(requeue_after=min(wait))
