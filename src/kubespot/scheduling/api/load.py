"""One entry point for any object of Karpenter's v1 API: its kind picks the parser and validator.

``load`` never raises: an object of another kind or API version comes back with a False
``ValidationSucceeded`` saying so (``kubespot convert`` turns the old names into v1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .conditions import Condition, Problem, validation_condition
from .fields import Obj
from .nodeclaim import NodeClaimSpec
from .nodeclass import EC2NodeClassSpec
from .nodepool import NodePoolSpec
from .validate import validate_nodeclaim, validate_nodepool
from .validate_nodeclass import validate_nodeclass

NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"
#: kind → the apiVersion kubespot reads it in.
KINDS = {"NodePool": NODEPOOL_API, "NodeClaim": NODEPOOL_API, "EC2NodeClass": NODECLASS_API}

Spec = NodePoolSpec | NodeClaimSpec | EC2NodeClassSpec


@dataclass(frozen=True, slots=True)
class Loaded:
    kind: str
    name: str
    #: None when the object is not one of the three kinds in v1.
    spec: Spec | None
    condition: Condition

    @property
    def valid(self) -> bool:
        return self.condition.is_true


def load(obj: Obj, *, legacy_domains: bool = False) -> Loaded:
    """Parse and validate one NodePool, NodeClaim or EC2NodeClass."""
    if not isinstance(obj, Mapping):
        why = Problem("UnsupportedObject", f"expected an object, got {type(obj).__name__}")
        return Loaded("", "", None, validation_condition([why]))
    kind, api = str(obj.get("kind") or ""), str(obj.get("apiVersion") or "")
    meta = obj.get("metadata")
    name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
    if KINDS.get(kind) != api:
        hint = " (kubespot convert turns older Karpenter manifests into v1)" if "karpenter" in api else ""
        why = Problem("UnsupportedObject", f"{api} {kind} is not a Karpenter v1 object kubespot reads{hint}")
        return Loaded(kind, name, None, validation_condition([why]))
    spec: Spec
    if kind == "NodePool":
        spec, condition = validate_nodepool(obj, legacy_domains=legacy_domains)
    elif kind == "NodeClaim":
        spec, condition = validate_nodeclaim(obj)
    else:
        spec, condition = validate_nodeclass(obj)
    return Loaded(kind, name, spec, condition)
