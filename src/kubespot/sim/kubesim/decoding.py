"""Whether a JSON object decodes into upstream's typed object: the JSON types of the fields kubesim
and its clients read, checked as Go's encoding/json (sigs.k8s.io/json) checks them.

An API server decodes a body into the Go struct before anything else, so a field of the wrong JSON
type (``spec.unschedulable: "yes"``, a number as an annotation value) never reaches validation: on
create and update it is 400 BadRequest ``<Kind> in version "<v>" cannot be handled as a <Kind>:
json: cannot unmarshal ...`` (k8s.io/apiserver pkg/endpoints/handlers/rest.go transformDecodeError);
on patch the patched object fails to decode, a 422 on the field ``patch`` (handlers/patch.go
applyPatchToCurrentObject). Only the fields in the table below are checked: those are the ones
kubesim's controllers and kubespot read with a type.

A JSON ``null`` inside a map or a list of those fields decodes to the Go zero value (``""`` for a
``map[string]string`` value, an empty struct for a ``[]v1.Container`` item): the check writes that
zero value in place, so validation sees what upstream's validation sees and never a None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import ApiError, bad_request
from .fielderrors import invalid, invalid_status
from .resources import ResourceType


@dataclass(frozen=True, slots=True)
class Scalar:
    go: str
    json: str  # "string", "bool" or "int"


@dataclass(frozen=True, slots=True)
class ListOf:
    item: Spec
    go: str


@dataclass(frozen=True, slots=True)
class MapOf:
    value: Scalar
    go: str


@dataclass(frozen=True, slots=True)
class Struct:
    name: str
    go: str
    fields: Mapping[str, Spec]


Spec = Scalar | ListOf | MapOf | Struct

STRING = Scalar("string", "string")
BOOL = Scalar("bool", "bool")
INT64 = Scalar("int64", "int")
INT32 = Scalar("int32", "int")
STRINGS = ListOf(STRING, "[]string")
STRING_MAP = MapOf(STRING, "map[string]string")

META = Struct(
    "ObjectMeta",
    "v1.ObjectMeta",
    {
        "name": STRING,
        "generateName": STRING,
        "namespace": STRING,
        "resourceVersion": STRING,
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
        "finalizers": STRINGS,
    },
)
TAINT = Struct(
    "Taint",
    "v1.Taint",
    {"key": STRING, "value": STRING, "effect": Scalar("v1.TaintEffect", "string")},
)
TOLERATION = Struct(
    "Toleration",
    "v1.Toleration",
    {
        "key": STRING,
        "operator": Scalar("v1.TolerationOperator", "string"),
        "value": STRING,
        "effect": Scalar("v1.TaintEffect", "string"),
        "tolerationSeconds": INT64,
    },
)
CONTAINER = Struct("Container", "v1.Container", {"name": STRING, "image": STRING})
POD_SPEC = Struct(
    "PodSpec",
    "v1.PodSpec",
    {
        "nodeName": STRING,
        "containers": ListOf(CONTAINER, "[]v1.Container"),
        "initContainers": ListOf(CONTAINER, "[]v1.Container"),
        "tolerations": ListOf(TOLERATION, "[]v1.Toleration"),
        "terminationGracePeriodSeconds": INT64,
        "activeDeadlineSeconds": INT64,
        "priorityClassName": STRING,
        "priority": INT32,
        "schedulerName": STRING,
        "restartPolicy": Scalar("v1.RestartPolicy", "string"),
        "nodeSelector": STRING_MAP,
    },
)
NODE_SPEC = Struct(
    "NodeSpec",
    "v1.NodeSpec",
    {
        "unschedulable": BOOL,
        "taints": ListOf(TAINT, "[]v1.Taint"),
        "providerID": STRING,
        "podCIDR": STRING,
    },
)
TEMPLATE = Struct("PodTemplateSpec", "v1.PodTemplateSpec", {"metadata": META, "spec": POD_SPEC})


def _workload(spec_name: str) -> Struct:
    return Struct(spec_name, f"v1.{spec_name}", {"replicas": INT32, "template": TEMPLATE})


_SPECS: dict[tuple[str, str], Spec] = {
    ("", "pods"): POD_SPEC,
    ("", "nodes"): NODE_SPEC,
    ("apps", "deployments"): _workload("DeploymentSpec"),
    ("apps", "replicasets"): _workload("ReplicaSetSpec"),
    ("apps", "statefulsets"): _workload("StatefulSetSpec"),
    ("apps", "daemonsets"): Struct("DaemonSetSpec", "v1.DaemonSetSpec", {"template": TEMPLATE}),
}


class _Mismatch(Exception):
    def __init__(self, value: str, struct: str, field: str, go: str) -> None:
        super().__init__()
        self.text = f"json: cannot unmarshal {value} into Go struct field {struct}.{field} of type {go}"


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int | float):
        return "number"
    return "array" if isinstance(value, list) else "object"


def _zero(spec: Spec) -> Any:
    """The Go zero value of ``spec`` as JSON (what a null map value or list item decodes to)."""
    if isinstance(spec, Scalar):
        return {"string": "", "bool": False}.get(spec.json, 0)
    return {} if isinstance(spec, Struct) else None


def _check(spec: Spec, value: Any, struct: str, path: str) -> None:
    if value is None:
        return  # JSON null leaves a Go field at its zero value
    if isinstance(spec, Scalar):
        if spec.json == "string":
            ok = isinstance(value, str)
        elif spec.json == "bool":
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, int) and not isinstance(value, bool)
            if isinstance(value, float):
                raise _Mismatch(f"number {value!r}", struct, path, spec.go)
        if not ok:
            raise _Mismatch(_json_kind(value), struct, path, spec.go)
    elif isinstance(spec, MapOf):
        if not isinstance(value, dict):
            raise _Mismatch(_json_kind(value), struct, path, spec.go)
        for key, v in value.items():
            if v is None:
                value[key] = _zero(spec.value)
            _check(spec.value, v, struct, path)  # Go's decoder names the map, not the key
    elif isinstance(spec, ListOf):
        if not isinstance(value, list):
            raise _Mismatch(_json_kind(value), struct, path, spec.go)
        for i, item in enumerate(value):
            if item is None:
                value[i] = _zero(spec.item)
            _check(spec.item, item, struct, path)
    else:
        if not isinstance(value, dict):
            raise _Mismatch(_json_kind(value), struct, path, spec.go)
        for name, field_spec in spec.fields.items():
            if name in value:
                _check(field_spec, value[name], spec.name, f"{path}.{name}")


def _decode_error(rt: ResourceType, obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return None
    try:
        # A top-level field's struct is the object's own kind: "Go struct field Node.spec".
        _check(META, obj.get("metadata"), rt.kind, "metadata")
        spec = _SPECS.get(rt.key)
        if spec is not None:
            _check(spec, obj.get("spec"), rt.kind, "spec")
    except _Mismatch as exc:
        return exc.text
    return None


def check_body(rt: ResourceType, obj: Any) -> None:
    """A create or update body: 400 BadRequest when a field has the wrong JSON type."""
    err = _decode_error(rt, obj)
    if err is not None:
        raise bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {err}')


def check_patched(rt: ResourceType, obj: Any) -> None:
    """A patched object: 422 on the field ``patch`` with the patched object as its value."""
    err = _decode_error(rt, obj)
    if err is not None:
        raise _patch_invalid(obj, err)


def _patch_invalid(obj: Any, err: str) -> ApiError:
    return invalid_status("", "", "", [invalid("patch", orjson.dumps(obj).decode(), err)])
