"""A NodePool's ``NodeRegistrationHealthy`` condition (pure): whether the nodes it launches lately
register, as Karpenter v1.8+ keeps it (the condition came in v1.4.0; v1.4-v1.7 had no buffer and
went False at the first failure while it was Unknown; the 4-outcome buffer is v1.8.0's).

kubernetes-sigs/karpenter:

- ``pkg/state/nodepoolhealth/tracker.go``: per NodePool UID the last ``BUFFER_SIZE`` (4)
  registration outcomes; none is ``Unknown``; at least half of the buffer's size failed
  (``ThresholdFalse``, counted against the size, not the entries) is unhealthy, else healthy.
- ``pkg/controllers/nodeclaim/lifecycle/registration.go`` ``updateNodePoolRegistrationHealth``: a
  NodeClaim registered → ``True`` (reason ``NodeRegistrationHealthy``) when the buffer with this
  success added is healthy; the success recorded.
- ``pkg/controllers/nodeclaim/lifecycle/liveness.go`` ``updateNodePoolRegistrationHealth``: a
  NodeClaim deleted for its launch or registration timeout → ``False`` when the buffer with this
  failure added is unhealthy and the condition is not False already: reason
  ``RegistrationFailed`` "Failed to register node" when it had launched, else its ``Launched``
  condition's reason and message; the failure recorded. Only the NodePool that owns the claim
  (owner reference with its UID) counts it.
- ``pkg/controllers/nodepool/registrationhealth/controller.go`` ``Reconcile``: with an empty buffer
  (a restart) the condition fills it again (True: one success; False: two failures); the condition
  missing, ``status.nodeClassObservedGeneration`` not the class's generation, or the condition's
  ``observedGeneration`` not the NodePool's → ``Unknown`` (``AwaitingReconciliation``) and the
  buffer emptied; then ``nodeClassObservedGeneration`` is the class's generation. A NodePool
  whose class is not found is left alone.

The condition is not one of the NodePool's ``Ready`` dependents (``pkg/apis/v1/nodepool_status.go``
``StatusConditions``: ``ValidationSucceeded`` and ``NodeClassReady`` only, v1.4 to HEAD), so an
unhealthy pool is still used; the RFC (``designs/noderegistrationhealthy-status-condition.md``)
leaves deprioritising it to a later change.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from kubespot.scheduling.api.condition_set import AWAITING
from kubespot.scheduling.api.conditions import Condition

__all__ = [
    "BUFFER_SIZE",
    "NODE_REGISTRATION_HEALTHY",
    "RegistrationHealth",
    "health_condition",
]

NODE_REGISTRATION_HEALTHY = "NodeRegistrationHealthy"
BUFFER_SIZE = 4
THRESHOLD_FALSE = 0.5
UNKNOWN, HEALTHY, UNHEALTHY = "Unknown", "Healthy", "Unhealthy"


def health_condition(status: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The ``NodeRegistrationHealthy`` condition of a NodePool's status, if any."""
    found = (status or {}).get("conditions")
    for c in found if isinstance(found, list) else ():
        if isinstance(c, Mapping) and c.get("type") == NODE_REGISTRATION_HEALTHY:
            return c
    return None


def _status_of(outcomes: deque[bool]) -> str:
    if not outcomes:
        return UNKNOWN
    failed = sum(1 for ok in outcomes if not ok)
    return UNHEALTHY if failed / BUFFER_SIZE >= THRESHOLD_FALSE else HEALTHY


class RegistrationHealth:
    """The registration outcomes of every NodePool, by UID (memory only, as Karpenter's)."""

    def __init__(self) -> None:
        self._buffers: dict[str, deque[bool]] = {}

    def _buffer(self, pool_uid: str) -> deque[bool]:
        return self._buffers.setdefault(pool_uid, deque(maxlen=BUFFER_SIZE))

    def status(self, pool_uid: str) -> str:
        return _status_of(self._buffer(pool_uid))

    def hydrate(self, pool_uid: str, current: Mapping[str, Any] | None) -> None:
        """An empty buffer filled from the condition the NodePool carries (after a restart)."""
        buffer = self._buffer(pool_uid)
        if buffer or current is None:
            return
        if current.get("status") == "True":
            buffer.append(True)
        elif current.get("status") == "False":
            buffer.extend([False] * int(BUFFER_SIZE * THRESHOLD_FALSE))

    def reset(self, pool_uid: str) -> None:
        self._buffer(pool_uid).clear()

    def forget(self, pool_uid: str) -> None:
        self._buffers.pop(pool_uid, None)

    def reconcile(
        self,
        pool_uid: str,
        generation: int,
        status: Mapping[str, Any] | None,
        class_generation: int | None,
    ) -> Condition | None:
        """The registrationhealth controller's reconcile of a NodePool (module docstring): the
        ``Unknown`` condition to set when the NodePool or its class changed (None: nothing to set).
        ``class_generation`` None: the class is not found, nothing is done."""
        if class_generation is None:
            return None
        current = health_condition(status)
        self.hydrate(pool_uid, current)
        observed = (status or {}).get("nodeClassObservedGeneration")
        if current is None or observed != class_generation or current.get("observedGeneration") != generation:
            self.reset(pool_uid)
            return Condition(NODE_REGISTRATION_HEALTHY, "Unknown", *AWAITING)
        return None

    def outcome(
        self,
        pool_uid: str,
        registered: bool,
        current: Mapping[str, Any] | None,
        launched: Condition | None = None,
    ) -> Condition | None:
        """A NodeClaim of the pool registered (``registered``) or timed out; ``current`` is the
        pool's condition now, ``launched`` the claim's ``Launched`` condition. Recorded; the
        condition to set, if it changes (None otherwise)."""
        buffer = self._buffer(pool_uid)
        self.hydrate(pool_uid, current)
        trial = deque(buffer, maxlen=BUFFER_SIZE)
        trial.append(registered)
        buffer.append(registered)
        if registered:
            if _status_of(trial) == HEALTHY and (current is None or current.get("status") != "True"):
                return Condition(NODE_REGISTRATION_HEALTHY, "True", NODE_REGISTRATION_HEALTHY)
            return None
        if _status_of(trial) != UNHEALTHY or (current is not None and current.get("status") == "False"):
            return None
        if launched is None or launched.status == "True" or not launched.reason:
            return Condition(
                NODE_REGISTRATION_HEALTHY, "False", "RegistrationFailed", "Failed to register node"
            )
        return Condition(NODE_REGISTRATION_HEALTHY, "False", launched.reason, launched.message)
