"""A ``karpenter.sh/v1`` NodeClaim's spec (kubernetes-sigs/karpenter ``pkg/apis/v1/nodeclaim.go``):
the template spec plus the resources the launch must provide. The whole spec is immutable once
created (the CRD's ``self == oldSelf``), so it is read once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .fields import Fields, Obj, Parsed
from .template import TemplateSpec, parse_template_spec

NODECLAIM_REASON = "NodeClaimValidationFailed"


@dataclass(frozen=True, slots=True)
class NodeClaimSpec:
    name: str
    #: ``metadata.uid`` (the launch's idempotence token); "" for a claim not yet created.
    uid: str = ""
    template: TemplateSpec = field(default_factory=TemplateSpec)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: ``spec.resources.requests``: resource name → quantity as written.
    requests: Mapping[str, str] = field(default_factory=dict)


def parse_nodeclaim(obj: Obj) -> Parsed[NodeClaimSpec]:
    f = Fields(NODECLAIM_REASON)
    if not isinstance(obj, Mapping):
        f.problem(f"a NodeClaim is an object, got {type(obj).__name__}")
        return Parsed(NodeClaimSpec(name=""), tuple(f.problems))
    meta = f.obj(obj, "metadata", "metadata")
    spec = f.obj(obj, "spec", "spec")
    resources = f.obj(spec, "resources", "spec.resources")
    parsed = NodeClaimSpec(
        name=f.text(meta, "name", "metadata.name") or "",
        uid=f.text(meta, "uid", "metadata.uid") or "",
        annotations=f.str_map(meta, "annotations", "metadata.annotations"),
        template=parse_template_spec(f, spec, "spec"),
        labels=f.str_map(meta, "labels", "metadata.labels"),
        requests=f.quantities(resources, "requests", "spec.resources.requests"),
    )
    return Parsed(parsed, tuple(f.problems))
