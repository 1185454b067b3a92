"""A NodePool as the simulation uses it: what its nodes may be, carry and cost at most.

Built from the parsed spec of a ``karpenter.sh/v1`` NodePool (``scheduling.api``, which owns the
defaults, the validation with status conditions and the old names): the template's requirements and
labels (labels become ``In`` requirements, and every node gets ``karpenter.sh/nodepool``), taints
and startup taints, weight and limits (Karpenter's ``pkg/apis/v1/nodepool.go``). Only a pool whose
``ValidationSucceeded`` is True should reach scheduling, as in Karpenter (its provisioner builds
the scheduler from Ready NodePools only): ``usable_pools`` does that sorting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubespot.model.quantity import milli, units

from .api.conditions import Condition
from .api.nodepool import NodePoolSpec, parse_nodepool
from .api.validate import validate_nodepool
from .labels import NODEPOOL
from .requirements import Requirement, Requirements
from .taints import Taint


@dataclass(frozen=True, slots=True)
class NodePool:
    name: str
    requirements: Requirements
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    #: 1-100; higher is tried first; unset is 0.
    weight: int = 0
    #: Resource name -> most the pool's nodes may have in total (cpu in millicores; ``nodes``).
    limits: Mapping[str, int] = field(default_factory=dict)
    node_class: str = ""

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> NodePool:
        """From a NodePool object as the API returns it (validate it first: see the module docstring)."""
        return cls.from_spec(parse_nodepool(obj).spec)

    @classmethod
    def from_spec(cls, spec: NodePoolSpec) -> NodePool:
        """``RequirementError`` for a requirement the validator would have refused."""
        tspec = spec.template
        reqs = Requirements(
            Requirement.of(r.key, r.operator, r.values, r.min_values) for r in tspec.requirements
        )
        reqs.add(*(Requirement.of(k, "In", [v]) for k, v in spec.labels.items()))
        reqs.add(Requirement.of(NODEPOOL, "In", [spec.name]))
        return cls(
            name=spec.name,
            requirements=reqs,
            labels=dict(spec.labels),
            taints=tspec.taints,
            startup_taints=tspec.startup_taints,
            weight=spec.weight or 0,
            limits={k: milli(v) if k == "cpu" else units(v) for k, v in spec.limits.items()},
            node_class=tspec.node_class_ref.name,
        )


def by_weight(pools: list[NodePool]) -> list[NodePool]:
    """Karpenter's order: higher weight first; equal weights by name, descending."""
    return sorted(pools, key=lambda p: (p.weight, p.name), reverse=True)


def usable_pools(objs: Iterable[Mapping[str, Any]]) -> tuple[list[NodePool], dict[str, Condition]]:
    """The NodePools that pass validation, and every pool's ``ValidationSucceeded`` condition by
    name: a pool that fails is left out with its reason, never dropped silently."""
    pools: list[NodePool] = []
    conditions: dict[str, Condition] = {}
    for obj in objs:
        spec, condition = validate_nodepool(obj)
        conditions[spec.name] = condition
        if condition.is_true:
            pools.append(NodePool.from_spec(spec))
    return pools, conditions
