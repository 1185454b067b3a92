"""What the scheduler keeps per distinct pod shape, and the node iteration it drives from it.

Pods of one Deployment share their requests, node constraints, labels and volumes: a ``Shape`` holds
what scheduling them depends on, built once; its ``Static`` part (the usage-independent filters:
cordon, taints, node selector and affinity) is shared by every shape with the same constraints and
recomputed only when nodes change.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from ...store import Obj
from .interpod import InterPodState
from .nodes import NodeInfo
from .podindex import Term
from .ports import HostPort, conflicts
from .resources import PodRequest, scalars_fit
from .spread import Constraint, PodFacts
from .volumes import VolumeState


@dataclass(slots=True)
class Static:
    """Resource-independent filtering (cordon, taints, selector, affinity), shared by every shape with
    the same constraints: pods of different Deployments usually differ only in their requests."""

    node_selector: dict[str, str]
    terms: list[Obj] | None  # None: no required node affinity
    tolerations: list[Obj]
    version: int = -1  # node-set version the cached filtering is for
    feasible: list[NodeInfo] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    #: Topology key -> value -> the positions in ``feasible`` of the nodes with that value, so a
    #: hard spread constraint visits only the nodes of the domains it allows.
    positions: dict[str, dict[str, list[int]]] = field(default_factory=dict)

    def positions_of(self, key: str) -> dict[str, list[int]]:
        by_value = self.positions.get(key)
        if by_value is None:
            by_value = self.positions[key] = {}
            for i, n in enumerate(self.feasible):
                value = n.labels.get(key)
                if value is not None:
                    by_value.setdefault(value, []).append(i)
        return by_value


@dataclass(slots=True)
class Shape:
    """What scheduling depends on, shared by every pending pod with the same spec essentials."""

    req: PodRequest
    ports: tuple[HostPort, ...]
    static: Static
    namespace: str
    labels: dict[str, str]
    affinity: tuple[Term, ...]  # required pod affinity terms
    anti: tuple[Term, ...]  # required pod anti-affinity terms
    facts: PodFacts
    spread: tuple[Constraint, ...]  # its own topology spread constraints, else the system defaults
    spread_system: bool  # ``spread`` are the system defaults
    claims: tuple[str, ...]  # PersistentVolumeClaims it mounts
    #: (PodIndex.anti_version, the existing anti-affinity terms matching these pods), kept because
    #: matching every term's selector for every pod is the costly part.
    existing_anti: tuple[int, list[tuple[str, Counter[str]]]] = (-1, [])


def num_feasible_nodes_to_find(num_all: int) -> int:
    """Upstream's ``numFeasibleNodesToFind`` with the default percentageOfNodesToScore (adaptive)."""
    if num_all < 100:
        return num_all
    pct = max(5, 50 - num_all // 125)
    return max(100, num_all * pct // 100)


def rare_misfit(
    shape: Shape, n: NodeInfo, volumes: VolumeState | None, interpod: InterPodState | None
) -> bool:
    """The filters few pods need (ephemeral storage, scalar resources, host ports, volumes,
    inter-pod affinity): whether one rejects the node."""
    req, u, a = shape.req, n.usage, n.alloc
    return (
        (req.eph > 0 and u.eph + req.eph > a.eph)
        or (bool(req.scalars) and not scalars_fit(req, a, u))
        or (bool(shape.ports) and conflicts(shape.ports, u.ports))
        or (volumes is not None and volumes.reason(n) is not None)
        or (interpod is not None and interpod.reason(n) is not None)
    )


def allowed_domains(static: Static, start: int, key: str, skewed: set[str]) -> Iterator[tuple[int, NodeInfo]]:
    """The feasible nodes a hard spread constraint passes (they have the key, their domain is not
    over maxSkew) in round-robin order from ``start``, lazily: a constraint typically rejects all
    but the emptiest zones, and the loop stops once it has found enough nodes."""
    feasible, total = static.feasible, len(static.feasible)
    after, before = [], []
    for value, positions in static.positions_of(key).items():
        if value not in skewed:
            cut = bisect.bisect_left(positions, start)
            after.append(positions[cut:])
            before.append(positions[:cut])
    for i in itertools.chain(heapq.merge(*after), heapq.merge(*before)):
        yield (i - start) % total, feasible[i]
