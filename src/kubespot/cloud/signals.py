"""``CapacitySignals``: what the interruption half tells the provisioner about spot pools (pure).

One object per operator process, handed to the queue handler (which calls ``observe`` for every
event on a node of this cluster) and to the launch path (which reads the ``UnavailableOfferings``
and ``PoolRisk`` it holds). A spot interruption warning marks the node's pool unavailable for the
cache's TTL, as Karpenter's interruption controller does
(aws/karpenter-provider-aws ``pkg/controllers/interruption/controller.go`` ``markUnavailableOfferings``),
and raises the pool's risk; a rebalance recommendation raises the risk only (Karpenter ignores it).
The pool is read from the node's labels (instance type, zone, capacity type), so only spot nodes
count. SQS delivers at least once: an event seen before (its id) is not counted twice.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from kubespot.config.launch import LaunchSettings
from kubespot.model import Clock
from kubespot.model.events import InterruptionEvent, Kind
from kubespot.scheduling.labels import CAPACITY_TYPE, INSTANCE_TYPE, SPOT, ZONE

from .pool_risk import PoolRisk
from .unavailable import UnavailableOfferings

__all__ = ["CapacitySignals", "capacity_signals", "spot_pool"]

#: Labels other tools use for a spot node (EKS managed node groups, eksctl, NTH's docs).
_SPOT_LABELS = (("eks.amazonaws.com/capacityType", "SPOT"), ("node.kubernetes.io/lifecycle", "spot"))
_ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
_TYPE_BETA = "beta.kubernetes.io/instance-type"
#: Event ids remembered against duplicates (a redelivery comes within the queue's retention).
_SEEN = 4096


class CapacitySignals:
    """The provisioner's view of what interruptions say about pools."""

    def __init__(self, unavailable: UnavailableOfferings, risk: PoolRisk) -> None:
        self.unavailable = unavailable
        self.risk = risk
        self._seen: OrderedDict[str, None] = OrderedDict()
        #: Signals counted, by kind (for metrics and tests).
        self.counted: dict[str, int] = {}

    def observe(self, event: InterruptionEvent, labels: Mapping[str, str]) -> bool:
        """Learn from ``event`` on a node with ``labels``; True when it counted."""
        if event.kind not in (Kind.SPOT_INTERRUPTION, Kind.REBALANCE_RECOMMENDATION):
            return False
        pool = spot_pool(labels)
        if pool is None or event.id in self._seen:
            return False
        self._seen[event.id] = None
        if len(self._seen) > _SEEN:
            self._seen.popitem(last=False)
        instance_type, zone = pool
        if event.kind is Kind.SPOT_INTERRUPTION:
            self.unavailable.mark(SPOT, instance_type, zone, "SpotInterruptionWarning")
            self.risk.interruption_warning(instance_type, zone)
        else:
            self.risk.rebalance_recommendation(instance_type, zone)
        self.counted[event.kind.value] = self.counted.get(event.kind.value, 0) + 1
        return True


def spot_pool(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """(instance type, zone) of a spot node, from its labels; None for another node."""
    spot = labels.get(CAPACITY_TYPE) == SPOT or any(labels.get(k) == v for k, v in _SPOT_LABELS)
    instance_type = labels.get(INSTANCE_TYPE) or labels.get(_TYPE_BETA)
    zone = labels.get(ZONE) or labels.get(_ZONE_BETA)
    if not (spot and instance_type and zone):
        return None
    return instance_type, zone


def capacity_signals(settings: LaunchSettings, clock: Clock) -> CapacitySignals:
    """The process's signals, from the launch settings."""
    unavailable = UnavailableOfferings(clock, ttl=settings.unavailable_offerings_ttl)
    risk = PoolRisk(clock, half_life=settings.spot_risk_half_life, weight=settings.spot_risk_weight)
    return CapacitySignals(unavailable, risk)
