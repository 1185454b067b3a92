"""Zone disruption: how fast the node lifecycle controller may add NoExecute taints, per zone (pure).

Upstream (pkg/controller/nodelifecycle/node_lifecycle_controller.go, ``handleDisruption``,
``ComputeZoneState``, ``setLimiterInZone``; pkg/controller/nodelifecycle/scheduler
``RateLimitedTimedQueue``):

- Nodes are grouped by zone (``GetZoneKey``: region and zone labels, the deprecated
  failure-domain.beta ones first; no labels -> one zone ""). A zone is in **FullDisruption** when none
  of its nodes is Ready and at least one is not, in **PartialDisruption** when more than 2 of its
  nodes and at least ``--unhealthy-zone-threshold`` (0.55) of them are not Ready, else **Normal**.
- Each zone has a queue of nodes to taint NoExecute, drained by a token bucket (burst 1) at
  ``--node-eviction-rate`` (0.1/s) in a Normal zone and in a fully disrupted one;
  ``--secondary-node-eviction-rate`` (0.01/s) in a partially disrupted zone of more than
  ``--large-cluster-size-threshold`` (50) nodes, and 0 (no tainting) in a smaller one.
- A node labelled ``node.kubernetes.io/exclude-disruption`` (``isNodeExcludedFromDisruptionChecks``)
  is not counted in its zone's state; it is still tainted through its zone's queue.
- When every zone is fully disrupted the controller assumes the problem is its own (the control
  plane cut off), stops tainting everywhere and removes the NoExecute taints it had added; once a
  node anywhere is Ready again the zones' rates follow their states.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from ..store import Obj

NORMAL, PARTIAL, FULL, INITIAL = "Normal", "PartialDisruption", "FullDisruption", "Initial"


def zone_key(node: Obj) -> str:
    """Upstream's ``GetZoneKey``."""
    labels = node["metadata"].get("labels") or {}
    zone = labels.get("failure-domain.beta.kubernetes.io/zone", labels.get("topology.kubernetes.io/zone", ""))
    region = labels.get(
        "failure-domain.beta.kubernetes.io/region", labels.get("topology.kubernetes.io/region", "")
    )
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


#: The label that keeps a node out of the zone states (any value).
EXCLUDE_DISRUPTION_LABEL = "node.kubernetes.io/exclude-disruption"


def excluded_from_disruption_checks(node: Obj) -> bool:
    """Upstream's ``isNodeExcludedFromDisruptionChecks``: the label is present, whatever its value."""
    return EXCLUDE_DISRUPTION_LABEL in (node["metadata"].get("labels") or {})


def zone_state(ready: int, not_ready: int, unhealthy_threshold: float) -> str:
    """Upstream's ``ComputeZoneState`` from the counts of Ready and not Ready nodes of one zone."""
    if ready == 0 and not_ready > 0:
        return FULL
    if not_ready > 2 and not_ready / (ready + not_ready) >= unhealthy_threshold:
        return PARTIAL
    return NORMAL


@dataclass
class TokenBucket:
    """A token bucket of burst 1 that starts full; a rate of 0 never accepts (flowcontrol's)."""

    qps: float
    tokens: float = 1.0
    at: float | None = None

    def try_accept(self, now: float) -> bool:
        if self.qps <= 0:
            return False
        if self.at is not None:
            self.tokens = min(1.0, self.tokens + (now - self.at) * self.qps)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


@dataclass
class ZoneTainter:
    """One zone's queue of nodes to taint, drained at its limiter's rate (``RateLimitedTimedQueue``)."""

    limiter: TokenBucket
    queue: dict[str, None] = field(default_factory=dict)  # insertion-ordered set

    def add(self, node: str) -> bool:
        if node in self.queue:
            return False
        self.queue[node] = None
        return True

    def remove(self, node: str) -> None:
        self.queue.pop(node, None)

    def swap_limiter(self, qps: float, now: float) -> None:
        """Upstream's ``SwapLimiter``: a new bucket, drained when the old one had no token left."""
        if qps == self.limiter.qps:
            return
        new = TokenBucket(qps)
        if qps > 0 and not self.limiter.try_accept(now):
            new.try_accept(now)
        self.limiter = new

    def try_(self, now: float, fn: Callable[[str], bool]) -> None:
        """Process queued nodes while the limiter accepts; ``fn`` False keeps the node queued."""
        for node in list(self.queue):
            if not self.limiter.try_accept(now):
                return
            if fn(node):
                self.queue.pop(node, None)
            else:  # retried after the others, as upstream re-queues it a little later
                self.queue.pop(node, None)
                self.queue[node] = None


@dataclass
class Rates:
    """The eviction-rate settings (kube-controller-manager flags)."""

    normal: float
    secondary: float
    large_cluster: int
    unhealthy_threshold: float

    def qps(self, state: str, zone_size: int) -> float:
        """Upstream's ``setLimiterInZone``."""
        if state == PARTIAL:
            return self.secondary if zone_size > self.large_cluster else 0.0
        return self.normal  # Normal, and FullDisruption (``HealthyQPSFunc``) of one zone among others


@dataclass
class Zones:
    """Zone states and tainters; ``handle`` is upstream's ``handleDisruption``."""

    rates: Rates
    states: dict[str, str] = field(default_factory=dict)
    tainters: dict[str, ZoneTainter] = field(default_factory=dict)

    def tainter(self, zone: str) -> ZoneTainter:
        t = self.tainters.get(zone)
        if t is None:
            t = self.tainters[zone] = ZoneTainter(TokenBucket(self.rates.normal))
            self.states.setdefault(zone, INITIAL)
        return t

    def handle(
        self, counts: Mapping[str, tuple[int, int]], now: float, uncounted: Collection[str] = ()
    ) -> str | None:
        """Update states from ``counts`` (zone -> (ready, not ready)). Returns "enter" when every zone
        has just become fully disrupted (the caller then removes the NoExecute taints), "exit" when
        that has just ended, else None. A zone in ``uncounted`` still has nodes, all excluded from
        the checks: it keeps its queue and its last state, as upstream's zoneStates keeps it."""
        for zone in list(self.states):
            if zone not in counts and zone not in uncounted:
                del self.states[zone]
                self.tainters.pop(zone, None)
        for zone in counts:
            self.tainter(zone)
        new = {z: zone_state(r, n, self.rates.unhealthy_threshold) for z, (r, n) in counts.items()}
        all_were = all(s == FULL for s in self.states.values())
        all_are = all(s == FULL for s in new.values())
        if all_are and not all_were:
            for zone in self.states:
                self.tainters[zone].swap_limiter(0.0, now)
                self.states[zone] = FULL
            return "enter"
        if all_were and not all_are:
            for zone, state in new.items():
                self._set(zone, state, sum(counts[zone]), now)
            return "exit"
        for zone, state in new.items():
            if self.states.get(zone) != state:
                self._set(zone, state, sum(counts[zone]), now)
        return None

    def _set(self, zone: str, state: str, size: int, now: float) -> None:
        self.tainter(zone).swap_limiter(self.rates.qps(state, size), now)
        self.states[zone] = state
