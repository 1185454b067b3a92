"""A ``karpenter.sh/v1`` NodePool parsed into a frozen spec with Karpenter's defaults.

Fields and defaults follow kubernetes-sigs/karpenter ``pkg/apis/v1/nodepool.go`` and its CRD
(``pkg/apis/crds/karpenter.sh_nodepools.yaml``), as of v1.1 and later: ``disruption`` defaults to
``{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}`` (v1.0 required
``consolidateAfter``; core PR #1662), ``budgets`` to ``[{nodes: 10%}]``, ``expireAfter`` to ``720h``.
Fields added after v1.0 (``replicas`` for static pools, v1.8; ``Balanced`` consolidation, v1.14) are
read too, so every v1 manifest users run loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .fields import Fields, Obj, Parsed
from .template import TemplateSpec, parse_template_spec, template_spec_dict

NODEPOOL_REASON = "NodePoolValidationFailed"
DEFAULT_CONSOLIDATION_POLICY = "WhenEmptyOrUnderutilized"
DEFAULT_CONSOLIDATE_AFTER = "0s"
DEFAULT_BUDGET_NODES = "10%"


@dataclass(frozen=True, slots=True)
class Budget:
    """How many of the pool's nodes may be disrupted at once, optionally only in a cron window."""

    nodes: str = DEFAULT_BUDGET_NODES
    schedule: str | None = None
    duration: str | None = None
    #: None: every reason (Underutilized, Empty, Drifted).
    reasons: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nodes": self.nodes}
        if self.schedule is not None:
            out["schedule"] = self.schedule
        if self.duration is not None:
            out["duration"] = self.duration
        if self.reasons is not None:
            out["reasons"] = list(self.reasons)
        return out


DEFAULT_BUDGETS = (Budget(),)


@dataclass(frozen=True, slots=True)
class Disruption:
    consolidation_policy: str = DEFAULT_CONSOLIDATION_POLICY
    #: A duration or ``Never`` (consolidation, emptiness included, off).
    consolidate_after: str = DEFAULT_CONSOLIDATE_AFTER
    budgets: tuple[Budget, ...] = DEFAULT_BUDGETS

    def to_dict(self) -> dict[str, Any]:
        return {
            "consolidationPolicy": self.consolidation_policy,
            "consolidateAfter": self.consolidate_after,
            "budgets": [b.to_dict() for b in self.budgets],
        }


@dataclass(frozen=True, slots=True)
class NodePoolSpec:
    name: str
    template: TemplateSpec = field(default_factory=TemplateSpec)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    disruption: Disruption = field(default_factory=Disruption)
    #: Resource name → quantity as written (``cpu: "1000"``, ``memory: 1000Gi``, ``nodes: "10"``).
    limits: Mapping[str, str] = field(default_factory=dict)
    #: 1 to 100; None (unset) ranks as 0.
    weight: int | None = None
    #: Static NodePools (v1.8, alpha): this many nodes, whatever the pods.
    replicas: int | None = None

    @property
    def is_static(self) -> bool:
        return self.replicas is not None


def parse_nodepool(obj: Obj) -> Parsed[NodePoolSpec]:
    """The NodePool's spec with defaults applied; problems for fields of the wrong type."""
    f = Fields(NODEPOOL_REASON)
    if not isinstance(obj, Mapping):
        f.problem(f"a NodePool is an object, got {type(obj).__name__}")
        return Parsed(NodePoolSpec(name=""), tuple(f.problems))
    meta = f.obj(obj, "metadata", "metadata")
    spec = f.obj(obj, "spec", "spec")
    template = f.obj(spec, "template", "spec.template")
    tmeta = f.obj(template, "metadata", "spec.template.metadata")
    disruption = f.obj(spec, "disruption", "spec.disruption")
    budgets: list[Budget] = []
    for p, b in f.objs(disruption, "budgets", "spec.disruption.budgets"):
        budgets.append(
            Budget(
                nodes=f.text(b, "nodes", f"{p}.nodes") or DEFAULT_BUDGET_NODES,
                schedule=f.text(b, "schedule", f"{p}.schedule"),
                duration=f.text(b, "duration", f"{p}.duration"),
                reasons=f.texts(b, "reasons", f"{p}.reasons"),
            )
        )
    has_budgets = f.has(disruption, "budgets")
    parsed = NodePoolSpec(
        name=f.text(meta, "name", "metadata.name") or "",
        template=parse_template_spec(f, f.obj(template, "spec", "spec.template.spec"), "spec.template.spec"),
        labels=f.str_map(tmeta, "labels", "spec.template.metadata.labels"),
        annotations=f.str_map(tmeta, "annotations", "spec.template.metadata.annotations"),
        disruption=Disruption(
            consolidation_policy=f.text(
                disruption, "consolidationPolicy", "spec.disruption.consolidationPolicy"
            )
            or DEFAULT_CONSOLIDATION_POLICY,
            consolidate_after=f.text(disruption, "consolidateAfter", "spec.disruption.consolidateAfter")
            or DEFAULT_CONSOLIDATE_AFTER,
            budgets=tuple(budgets) if has_budgets else DEFAULT_BUDGETS,
        ),
        limits=f.quantities(spec, "limits", "spec.limits"),
        weight=f.integer(spec, "weight", "spec.weight"),
        replicas=f.integer(spec, "replicas", "spec.replicas"),
    )
    return Parsed(parsed, tuple(f.problems))


def nodepool_dict(spec: NodePoolSpec) -> dict[str, Any]:
    """The NodePool as the API server stores it after defaulting (for ``convert`` and comparisons)."""
    template: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    if spec.labels:
        meta["labels"] = dict(spec.labels)
    if spec.annotations:
        meta["annotations"] = dict(spec.annotations)
    if meta:
        template["metadata"] = meta
    template["spec"] = template_spec_dict(spec.template)
    body: dict[str, Any] = {"template": template, "disruption": spec.disruption.to_dict()}
    if spec.limits:
        body["limits"] = dict(spec.limits)
    if spec.weight is not None:
        body["weight"] = spec.weight
    if spec.replicas is not None:
        body["replicas"] = spec.replicas
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": spec.name},
        "spec": body,
    }
