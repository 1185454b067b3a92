"""The scheduling simulation's inputs beside the pods (existing nodes, NodePools with their
instance types) and its result, the ``Plan``.

Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .explain import GroupStory
from .instance_types import InstanceType
from .labels import HOSTNAME
from .nodepool import NodePool
from .requirements import Requirements
from .taints import Taint
from .topology import Scope


@dataclass
class ExistingNode:
    """A node already in the cluster (or a NodeClaim launched but not registered yet)."""

    name: str
    requirements: Requirements
    taints: tuple[Taint, ...]
    allocatable: Mapping[str, int]
    #: What its pods request already (``pods`` counts them).
    requested: dict[str, int] = field(default_factory=dict)
    ports: set[tuple[str, str, int]] = field(default_factory=set)
    initialized: bool = True
    #: (namespace, labels) of the pods bound to it: what topology rules count.
    pods: list[tuple[str, Mapping[str, str]]] = field(default_factory=list)
    #: Required anti-affinity terms (key, scope) of its pods: the pods they select stay out of
    #: its domain of that key.
    anti: list[tuple[str, Scope]] = field(default_factory=list)
    #: Being deleted: takes no pod, but its pods still count for topology (a cordoned node is
    #: tainted ``node.kubernetes.io/unschedulable`` instead: tolerating pods still go there).
    closed: bool = False

    @property
    def hostname(self) -> str:
        req = self.requirements.get(HOSTNAME)
        return next(iter(req.values)) if req is not None and not req.complement and req.values else self.name


@dataclass(frozen=True)
class PoolCapacity:
    """A NodePool with the instance types its EC2NodeClass allows and what its DaemonSets take."""

    pool: NodePool
    instance_types: Sequence[InstanceType]
    daemon_overhead: Mapping[str, int] = field(default_factory=dict)
    #: What the pool's existing nodes have already (counted against its limits).
    in_use: Mapping[str, int] = field(default_factory=dict)
    #: Host ports its DaemonSet pods bind on every new node, (hostIP, protocol, port).
    daemon_ports: frozenset[tuple[str, str, int]] = frozenset()


@dataclass
class PlannedClaim:
    pool: str
    capacity_type: str
    #: Cheapest first; the first is the type the packing was chosen for.
    instance_types: list[str]
    #: The first type's cheapest offering of ``capacity_type``, US dollars per hour.
    price_per_hour: float
    zones: list[str]
    pods: list[str]
    requests: dict[str, int]
    requirements: Requirements
    why: str = ""
    #: The pool's instance types, and why each one not offered was left out (counted by reason,
    #: ``explain.TYPE_REASONS``): ``considered == len(instance_types) + sum(dropped.values())``.
    considered: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    #: Per key with ``minValues``: the distinct values the offered types carry.
    min_values: dict[str, int] = field(default_factory=dict)
    #: What this NodeClaim counts against its pool's limits: the largest capacity among its types
    #: (Karpenter's ``subtractMax``), per limited resource (``nodes``: 1).
    limits_charged: dict[str, int] = field(default_factory=dict)


@dataclass
class Plan:
    existing: dict[str, str] = field(default_factory=dict)
    claims: list[PlannedClaim] = field(default_factory=list)
    unschedulable: dict[str, list[str]] = field(default_factory=dict)
    #: Each pending pod's group story (``explain.GroupStory``, shared by the group's pods).
    stories: dict[str, GroupStory] = field(default_factory=dict)

    @property
    def cost_per_hour(self) -> float:
        return sum(c.price_per_hour for c in self.claims)
