"""One planning flow from a cluster's objects to a Plan, shared by the provisioner and ``kubespot plan``.

Pure: the objects (by kind, as the API serves them), each NodePool's instance types as the cloud
offers them (``CloudProvider.instance_types``: the only I/O, done by the caller between the two
steps) and the unavailable offerings in; the Plan and what the simulation was given out.

1. ``pools_to_plan``: the NodePools that validate and whose EC2NodeClass does, each with that
   class (the cloud's question), and every pool's condition (why one is left out).
2. ``plan_cluster``: each pool's types filtered through the unavailable offerings, its DaemonSet
   overhead and ports and its usage against its limits (``PoolCapacity``); the existing nodes and
   in-flight NodeClaims with their pods; the pending pods with their volumes' zones; then
   ``simulate`` (Karpenter's ``provisioner.go`` ``Schedule`` → ``NewScheduler`` → ``Solve``).

What only the provisioner does stays around it, as inputs: which NodePools are Ready, which nodes
are going away and whose pods move, which pods count on an in-flight claim (``pending`` and the
bound pods it passes), what the claims it created but the cache does not show yet use (``in_use``),
and the events it writes from the outputs (``PlanInputs.incompatible``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .api.conditions import Condition
from .api.load import load
from .api.nodeclass import EC2NodeClassSpec
from .cluster import (
    daemon_overhead,
    daemon_ports,
    existing_nodes,
    namespace_labels,
    pools_in_use,
    provisionable_pods,
)
from .instance_types import InstanceType
from .labels import WELL_KNOWN
from .nodepool import NodePool, usable_pools
from .plan import ExistingNode, Plan, PoolCapacity
from .pods import PodView
from .simulate import simulate
from .volumes import Volumes

__all__ = [
    "OfferingFilter",
    "PlanInputs",
    "PoolsToPlan",
    "plan_cluster",
    "pools_to_plan",
    "usable_nodeclasses",
]

Obj = Mapping[str, Any]


class OfferingFilter(Protocol):
    """The offerings not to plan for now (``cloud.UnavailableOfferings``: its own clock decides
    which marks still hold)."""

    def apply(self, types: Iterable[InstanceType]) -> list[InstanceType]: ...


@dataclass
class PoolsToPlan:
    """The NodePools to plan for, each with its EC2NodeClass, and every pool's condition."""

    pools: list[tuple[NodePool, EC2NodeClassSpec]]
    conditions: dict[str, Condition]


@dataclass
class PlanInputs:
    """What the simulation was given (the callers build NodeClaims and events from it)."""

    capacities: list[PoolCapacity]
    #: Pool name -> type name -> the type as planned (unavailable offerings marked).
    catalog: dict[str, dict[str, InstanceType]]
    pending: list[PodView]
    existing: list[ExistingNode]
    #: NodePools none of whose types is compatible with their requirements (Karpenter's
    #: ``NewScheduler`` skips them with a Warning on the pool).
    incompatible: list[str] = field(default_factory=list)


def usable_nodeclasses(objs: Iterable[Obj]) -> tuple[dict[str, EC2NodeClassSpec], dict[str, Condition]]:
    """The EC2NodeClasses that validate by name, and every class's condition."""
    specs: dict[str, EC2NodeClassSpec] = {}
    conditions: dict[str, Condition] = {}
    for obj in objs:
        loaded = load(obj)
        conditions[loaded.name] = loaded.condition
        if loaded.valid and isinstance(loaded.spec, EC2NodeClassSpec):
            specs[loaded.name] = loaded.spec
    return specs, conditions


def pools_to_plan(nodepools: Iterable[Obj], nodeclasses: Iterable[Obj]) -> PoolsToPlan:
    """The pools that validate and whose class does; the others' conditions say why not."""
    pools, conditions = usable_pools(nodepools)
    classes, class_conditions = usable_nodeclasses(nodeclasses)
    out: list[tuple[NodePool, EC2NodeClassSpec]] = []
    for pool in pools:
        nodeclass = classes.get(pool.node_class)
        if nodeclass is None:
            why = class_conditions.get(pool.node_class)
            message = (
                f"EC2NodeClass {pool.node_class!r} is not valid: {why.message}"
                if why is not None
                else f"EC2NodeClass {pool.node_class!r} not found"
            )
            conditions[pool.name] = Condition("NodeClassReady", "False", "NodeClassNotReady", message)
            continue
        out.append((pool, nodeclass))
    return PoolsToPlan(out, conditions)


def _compatible(pool: NodePool, t: InstanceType) -> bool:
    """``filterInstanceTypesByRequirements`` for an empty pod: the type's labels meet the pool's
    requirements and one of its offerings is available in them."""
    return pool.requirements.is_compatible(t.requirements, WELL_KNOWN) and bool(
        t.available_offerings(pool.requirements)
    )


def _readable(daemonset: Obj) -> bool:
    """The simulation can read the DaemonSet's pod template (one it cannot is left out)."""
    template = (daemonset.get("spec") or {}).get("template") or {}
    try:
        PodView.of({"metadata": template.get("metadata") or {}, "spec": template.get("spec") or {}})
    except (ValueError, TypeError, KeyError, AttributeError):
        return False
    return True


def plan_cluster(
    objects: Mapping[str, Sequence[Obj]],
    pools: Sequence[NodePool],
    types: Mapping[str, Sequence[InstanceType]],
    *,
    pending: Iterable[Obj] | None = None,
    in_use: Mapping[str, Mapping[str, int]] | None = None,
    unavailable: OfferingFilter | None = None,
) -> tuple[Plan, PlanInputs]:
    """The plan for ``objects`` (by kind: Node, NodeClaim, Pod, DaemonSet, PersistentVolumeClaim,
    PersistentVolume, StorageClass, Namespace) over ``pools`` with ``types`` (by pool name; a pool
    without is left out). ``pending``: the pods to plan for (default: the pending ones among
    ``objects["Pod"]``, whose bound pods fill the existing nodes either way); ``in_use``: a pool's
    usage against its limits (default: its nodes' and NodeClaims' capacity, ``pools_in_use``;
    a pool missing from it uses nothing)."""
    nodes = objects.get("Node", ())
    claims = objects.get("NodeClaim", ())
    pods = objects.get("Pod", ())
    daemonsets = [d for d in objects.get("DaemonSet", ()) if _readable(d)]
    if in_use is None:
        in_use = pools_in_use(nodes, claims)  # once: each pool's is an index into it
    capacities: list[PoolCapacity] = []
    catalog: dict[str, dict[str, InstanceType]] = {}
    incompatible: list[str] = []
    for pool in pools:
        offered = types.get(pool.name)
        if offered is None:
            continue
        planned = unavailable.apply(offered) if unavailable is not None else list(offered)
        if not any(_compatible(pool, t) for t in planned):
            incompatible.append(pool.name)
        catalog[pool.name] = {t.name: t for t in planned}
        capacities.append(
            PoolCapacity(
                pool,
                planned,
                daemon_overhead(daemonsets, pool),
                dict(in_use.get(pool.name) or {"nodes": 0}),
                daemon_ports(daemonsets, pool),
            )
        )
    volumes = Volumes.of(
        objects.get("PersistentVolumeClaim", ()),
        objects.get("PersistentVolume", ()),
        objects.get("StorageClass", ()),
    )
    views, left_out = provisionable_pods(pods if pending is None else pending, volumes)
    existing = existing_nodes(
        nodes,
        pods,
        nodeclaims=claims,
        daemonsets=daemonsets,
        # A NodeClaim launched without status.allocatable yet: its type's, as Karpenter reads it.
        type_allocatable={n: t.allocatable for types_ in catalog.values() for n, t in types_.items()},
    )
    plan = simulate(
        views, existing, capacities, namespace_labels=namespace_labels(objects.get("Namespace", ()))
    )
    plan.unschedulable.update(left_out)
    return plan, PlanInputs(capacities, catalog, views, existing, incompatible)
