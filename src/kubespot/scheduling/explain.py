"""What the simulation records to say why (design note, decision 4): per pod group, the existing
nodes it was tried on and the first filter that refused each, counted by reason, and the NodePools
tried with their outcome; per NodeClaim, why each instance type of its pool was not offered, counted
by reason. Counted, never listed per pod or per node, so recording costs next to nothing.

The reason words for nodes are the kube-scheduler's (as kubesim's scheduler words them); those for
instance types are kubespot's, one per filter of the simulation.

Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Why an instance type of a NodePool is not among a NodeClaim's types, in filter order.
INCOMPATIBLE = "incompatible requirements"
TOO_SMALL = "too small"
NO_OFFERING = "no available offering"
OVER_LIMITS = "would exceed the NodePool's limits"
SPOT_DEARER = "spot dearer than on-demand"
OUTSIDE_BAND = "outside the flexibility band"
BEYOND_CUT = "beyond the 60-type cut"
TYPE_REASONS = (INCOMPATIBLE, TOO_SMALL, NO_OFFERING, OVER_LIMITS, SPOT_DEARER, OUTSIDE_BAND, BEYOND_CUT)

# Why an existing node refused a pod (the first filter that did), kube-scheduler's words.
NODE_TAINT = "node(s) had untolerated taint"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"
NODE_FULL = "Insufficient resources"


OPENED = "opened"


def count(into: dict[str, int], reason: str, n: int = 1) -> None:
    into[reason] = into.get(reason, 0) + n


@dataclass
class GroupStory:
    """One pod group's story (every pod of the group shares it)."""

    #: Pods in the group.
    pods: int = 0
    #: Existing nodes the group was tried on, and those that refused it by first failing filter
    #: (per attempt: a group whose preferences are relaxed tries the nodes again).
    nodes_tried: int = 0
    nodes_refused: dict[str, int] = field(default_factory=dict)
    #: Each NodePool tried, in order, with its distinct outcomes (``OPENED`` stands for the count).
    pools: dict[str, list[str]] = field(default_factory=dict)
    #: How many NodeClaims the group opened per NodePool (over all its passes).
    opened: dict[str, int] = field(default_factory=dict)
    #: Whether its preferences were dropped to place the rest (Karpenter's relaxation).
    relaxed: bool = False

    def pool(self, name: str, outcome: str) -> None:
        """Record a pool's outcome; one the pool already had (the group's next pass) is kept once."""
        outcomes = self.pools.setdefault(name, [])
        if outcome not in outcomes:
            outcomes.append(outcome)

    def opened_claims(self, name: str, n: int) -> None:
        count(self.opened, name, n)
        self.pool(name, OPENED)

    def outcomes(self) -> list[tuple[str, str]]:
        """Each pool tried and what came of it, e.g. ("default", "opened 12 NodeClaim(s)")."""
        return [
            (name, "; ".join(f"opened {self.opened[name]} NodeClaim(s)" if o == OPENED else o for o in said))
            for name, said in self.pools.items()
        ]


# Why an offering is avoided when the plan runs with the launch path's memory (the provisioner's).
AVOIDED_UNAVAILABLE = "unavailable"
AVOIDED_RISK = "reclaim risk"


@dataclass(frozen=True, slots=True)
class AvoidedOffering:
    """One pool (capacity type, instance type, zone; ``*`` for every one) the launch path avoids
    now: marked unavailable (``reason`` is what marked it, ``seconds_left`` until the mark goes) or
    ranked down for its reclaim risk (``score``, the higher the later it is tried)."""

    kind: str
    capacity_type: str
    instance_type: str
    zone: str
    reason: str = ""
    seconds_left: float | None = None
    score: float | None = None

    def pool_fields(self) -> dict[str, Any]:
        """What names the pool in JSON (``plan --output json``, the status ConfigMap)."""
        return {
            "kind": self.kind,
            "capacity_type": self.capacity_type,
            "instance_type": self.instance_type,
            "zone": self.zone,
        }
