"""Custom resources checked against a CRD's structural schema as an API server would check and prune
them (kubesim does not validate custom resources): types, enums, patterns, bounds, required and
undeclared fields. CEL rules are not evaluated; the pure validators' tests hold the same rules.

Source: k8s.io/apiextensions-apiserver ``pkg/apiserver/schema`` (structural schemas) and
``pkg/apiserver/schema/pruning`` (unknown fields are dropped unless ``x-kubernetes-preserve-unknown-fields``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]
CHART_CRDS = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "kubespot" / "crds"


@functools.cache
def chart_crds() -> tuple[Obj, ...]:
    """The CRDs the chart ships (Karpenter's NodePool, NodeClaim and EC2NodeClass), read once."""
    return tuple(d for p in sorted(CHART_CRDS.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d)


def crd_schema(kind: str, crds: Iterable[Obj] | None = None) -> Obj:
    """The openAPIV3Schema of ``kind``'s CRD (its first version) among ``crds`` (the chart's)."""
    crd = next(c for c in (chart_crds() if crds is None else crds) if c["spec"]["names"]["kind"] == kind)
    schema: Obj = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def schema_problems(value: Any, schema: Obj, path: str = "") -> list[str]:
    """What a structural schema refuses or prunes in ``value`` (types, enums, patterns, bounds,
    required and undeclared fields). CEL rules are not evaluated here; the pure validator's table
    tests hold the same rules."""
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, int | str) and not isinstance(value, bool)
        if ok and isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            return [f"{path}: {value!r} does not match {schema['pattern']}"]
        return [] if ok else [f"{path}: expected an integer or a string"]
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{path}: expected an object"]
        out = [f"{path}.{r}: required" for r in schema.get("required", []) if r not in value]
        props, extra = schema.get("properties", {}), schema.get("additionalProperties")
        if len(value) > schema.get("maxProperties", len(value)):
            out.append(f"{path}: more than {schema['maxProperties']} entries")
        for key, item in value.items():
            if key in props:
                out += schema_problems(item, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out += schema_problems(item, extra, f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields") and path != ".metadata":
                out.append(f"{path}.{key}: not declared, a real API server would prune it")
        return out
    if kind == "array":
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        out = [] if len(value) <= schema.get("maxItems", len(value)) else [f"{path}: too many items"]
        if len(value) < schema.get("minItems", 0):
            out.append(f"{path}: too few items")
        for i, item in enumerate(value):
            out += schema_problems(item, schema.get("items", {}), f"{path}[{i}]")
        return out
    if kind == "string":
        if not isinstance(value, str):
            return [f"{path}: expected a string"]
        if "enum" in schema and value not in schema["enum"]:
            return [f"{path}: {value!r} not in {schema['enum']}"]
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return [f"{path}: {value!r} does not match {schema['pattern']}"]
        if len(value) > schema.get("maxLength", len(value)):
            return [f"{path}: longer than {schema['maxLength']}"]
        return []
    if kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return [f"{path}: expected an integer"]
        if not schema.get("minimum", value) <= value <= schema.get("maximum", value):
            return [f"{path}: {value} out of bounds"]
        return []
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{path}: expected a boolean"]
    return []
