"""A NodePool as the simulation uses it: what its nodes may be, carry and cost at most.

Read from a ``karpenter.sh/v1`` NodePool: the template's requirements and labels (labels become
``In`` requirements, and every node gets ``karpenter.sh/nodepool``), taints and startup taints,
weight and limits (Karpenter's ``pkg/apis/v1/nodepool.go``). The full API (defaults, validation
with status conditions, the old names) is ``scheduling.api``'s; this is the part scheduling needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubespot.model.quantity import milli, units

from .labels import NODEPOOL
from .requirements import Requirement, Requirements
from .taints import Taint, parse_taints


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
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        template = spec.get("template") or {}
        tmeta = template.get("metadata") or {}
        tspec = template.get("spec") or {}
        name = str(meta.get("name") or "")
        labels = {str(k): str(v) for k, v in (tmeta.get("labels") or {}).items()}
        reqs = Requirements.from_selector(tspec.get("requirements") or [])
        reqs.add(*(Requirement.of(k, "In", [v]) for k, v in labels.items()))
        reqs.add(Requirement.of(NODEPOOL, "In", [name]))
        limits = {str(k): milli(v) if k == "cpu" else units(v) for k, v in (spec.get("limits") or {}).items()}
        ref = tspec.get("nodeClassRef") or {}
        return cls(
            name=name,
            requirements=reqs,
            labels=labels,
            taints=parse_taints(tspec.get("taints")),
            startup_taints=parse_taints(tspec.get("startupTaints")),
            weight=int(spec.get("weight") or 0),
            limits=limits,
            node_class=str(ref.get("name") or ""),
        )


def by_weight(pools: list[NodePool]) -> list[NodePool]:
    """Karpenter's order: higher weight first; equal weights by name, descending."""
    return sorted(pools, key=lambda p: (p.weight, p.name), reverse=True)
