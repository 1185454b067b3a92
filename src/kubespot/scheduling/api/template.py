"""What a NodePool's template and a NodeClaim share: requirements, taints, the node class reference,
``expireAfter`` and ``terminationGracePeriod`` (kubernetes-sigs/karpenter ``pkg/apis/v1/nodeclaim.go``
``NodeClaimTemplateSpec`` / ``NodeClaimSpec``), parsed with the CRD's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..taints import Taint
from .fields import Fields, Obj

#: ``expireAfter``'s default (the CRD's ``default: 720h``, 30 days).
DEFAULT_EXPIRE_AFTER = "720h"


@dataclass(frozen=True, slots=True)
class RequirementSpec:
    """One requirement as written (the algebra's ``Requirement`` normalises it; this keeps it)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    min_values: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        if self.min_values is not None:
            out["minValues"] = self.min_values
        return out


@dataclass(frozen=True, slots=True)
class NodeClassRef:
    group: str = ""
    kind: str = ""
    name: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"group": self.group, "kind": self.kind, "name": self.name}


@dataclass(frozen=True, slots=True)
class TemplateSpec:
    """``spec.template.spec`` of a NodePool, the core of a NodeClaim's ``spec``."""

    requirements: tuple[RequirementSpec, ...] = ()
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    node_class_ref: NodeClassRef = field(default_factory=NodeClassRef)
    #: A duration (``720h``, ``1h30m``) or ``Never``.
    expire_after: str = DEFAULT_EXPIRE_AFTER
    #: None: wait for the pods as long as they ask.
    termination_grace_period: str | None = None


def parse_requirements(f: Fields, parent: Obj, path: str) -> tuple[RequirementSpec, ...]:
    out: list[RequirementSpec] = []
    for p, term in f.objs(parent, "requirements", path):
        key = f.text(term, "key", f"{p}.key")
        operator = f.text(term, "operator", f"{p}.operator")
        if key is None or operator is None:
            f.problem(f"{p}: key and operator are required")
            continue
        values = f.texts(term, "values", f"{p}.values") or ()
        out.append(RequirementSpec(key, operator, values, f.integer(term, "minValues", f"{p}.minValues")))
    return tuple(out)


def parse_taints(f: Fields, parent: Obj, key: str, path: str) -> tuple[Taint, ...]:
    out: list[Taint] = []
    for p, obj in f.objs(parent, key, path):
        out.append(
            Taint(
                f.text(obj, "key", f"{p}.key") or "",
                f.text(obj, "effect", f"{p}.effect") or "",
                f.text(obj, "value", f"{p}.value") or "",
            )
        )
    return tuple(out)


def taint_dict(taint: Taint) -> dict[str, str]:
    out = {"key": taint.key}
    if taint.value:
        out["value"] = taint.value
    out["effect"] = taint.effect
    return out


def parse_template_spec(f: Fields, spec: Obj, path: str) -> TemplateSpec:
    ref = f.obj(spec, "nodeClassRef", f"{path}.nodeClassRef")
    return TemplateSpec(
        requirements=parse_requirements(f, spec, f"{path}.requirements"),
        taints=parse_taints(f, spec, "taints", f"{path}.taints"),
        startup_taints=parse_taints(f, spec, "startupTaints", f"{path}.startupTaints"),
        node_class_ref=NodeClassRef(
            f.text(ref, "group", f"{path}.nodeClassRef.group") or "",
            f.text(ref, "kind", f"{path}.nodeClassRef.kind") or "",
            f.text(ref, "name", f"{path}.nodeClassRef.name") or "",
        ),
        expire_after=f.text(spec, "expireAfter", f"{path}.expireAfter") or DEFAULT_EXPIRE_AFTER,
        termination_grace_period=f.text(spec, "terminationGracePeriod", f"{path}.terminationGracePeriod"),
    )


def template_spec_dict(spec: TemplateSpec) -> dict[str, Any]:
    """Back to the API's shape (defaults written out, as the API server stores them)."""
    out: dict[str, Any] = {}
    if spec.taints:
        out["taints"] = [taint_dict(t) for t in spec.taints]
    if spec.startup_taints:
        out["startupTaints"] = [taint_dict(t) for t in spec.startup_taints]
    out["requirements"] = [r.to_dict() for r in spec.requirements]
    out["nodeClassRef"] = spec.node_class_ref.to_dict()
    out["expireAfter"] = spec.expire_after
    if spec.termination_grace_period is not None:
        out["terminationGracePeriod"] = spec.termination_grace_period
    return out
