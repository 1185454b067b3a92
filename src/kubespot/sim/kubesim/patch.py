"""The three PATCH flavours of the Kubernetes API: JSON merge patch, strategic merge patch, JSON patch.

* ``merge_patch`` is RFC 7386 (``application/merge-patch+json``).
* ``strategic_merge_patch`` follows ``k8s.io/apimachinery/pkg/util/strategicpatch`` with the options the
  API server uses (``MergeParallelList`` and ``IgnoreUnmatchedNulls``): lists are merged by the
  ``patchMergeKey`` of the Go struct tags (or as sets of primitives for ``patchStrategy:"merge"``
  without a key) and replaced otherwise; maps merge recursively; ``null`` deletes; the directives
  ``$patch`` (replace/delete), ``$retainKeys``, ``$deleteFromPrimitiveList/<f>`` and
  ``$setElementOrder/<f>`` are honoured. The merge keys live in one table, ``STRATEGIC_MERGE_KEYS``.
* ``json_patch`` is RFC 6902 (``application/json-patch+json``) with RFC 6901 pointers.

Status codes follow the API server's patch handler (``k8s.io/apiserver/pkg/endpoints/handlers/patch.go``):
a document that is not a patch at all is a 400 BadRequest; a well-formed patch that cannot be applied
(failed ``test``, missing path, missing merge key) is a 422 Unprocessable Entity.

All functions are pure: they return new objects and never mutate their arguments, and the result
shares no mutable containers with either argument.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

__all__ = [
    "CUSTOM_RESOURCE_PATCH_TYPES",
    "MERGE",
    "STRATEGIC_MERGE_KEYS",
    "PatchError",
    "json_patch",
    "merge_patch",
    "strategic_merge_patch",
    "supports_strategic_merge",
]


class PatchError(Exception):
    """A patch the API server would refuse; ``code`` is the HTTP status (400 or 422)."""

    def __init__(self, message: str, code: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _copy(value: Any) -> Any:
    # JSON documents only hold dict/list/scalars, so this is a complete and much faster deepcopy.
    t = type(value)
    if t is dict:
        return {k: _copy(v) for k, v in value.items()}
    if t is list:
        return [_copy(v) for v in value]
    return value


def _to_dict(target: Mapping[str, Any]) -> dict[str, Any]:
    """Private deep copy of the object being patched.

    An orjson round trip is about three times faster than a Python-level copy for a typical Node or
    Pod, which dominates the cost of the small patches controllers send all the time.
    """
    if type(target) is dict:
        try:
            copied = orjson.loads(orjson.dumps(target))
        except (TypeError, orjson.JSONEncodeError):
            copied = _copy(target)
        if type(copied) is dict:
            return copied
    return {k: _copy(v) for k, v in target.items()}


def _describe(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


# --------------------------------------------------------------------------------------------------
# RFC 7386 JSON merge patch


def _merge7386(target: Any, patch: Any) -> Any:
    if type(patch) is not dict:
        return _copy(patch)
    result: dict[str, Any] = dict(target) if type(target) is dict else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = _merge7386(result.get(k), v)
    return result


def merge_patch(target: Mapping[str, Any], patch: Any) -> dict[str, Any]:
    """Apply an RFC 7386 JSON merge patch; the patch must be a JSON object (else 400)."""
    if not isinstance(patch, Mapping):
        # A non-object merge patch would replace the whole object with a non-object.
        raise PatchError("Invalid JSON Patch: a merge patch must be a JSON object", 400)
    result = _merge7386(_to_dict(target), dict(patch))
    return result  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------------
# Strategic merge patch: schema table

#: Table value for a ``patchStrategy:"merge"`` list of primitives (e.g. ``metadata.finalizers``).
MERGE: Final = "$merge"


def _object_meta(prefix: str = "metadata") -> dict[str, str]:
    return {f"{prefix}.ownerReferences": "uid", f"{prefix}.finalizers": MERGE}


_CONTAINER_LISTS: Final = {
    "ports": "containerPort",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}


def _pod_spec(prefix: str) -> dict[str, str]:
    out = {
        f"{prefix}.containers": "name",
        f"{prefix}.initContainers": "name",
        f"{prefix}.ephemeralContainers": "name",
        f"{prefix}.volumes": "name",
        f"{prefix}.imagePullSecrets": "name",
        f"{prefix}.hostAliases": "ip",
        f"{prefix}.topologySpreadConstraints": "topologyKey",
        f"{prefix}.schedulingGates": "name",
        f"{prefix}.resourceClaims": "name",
        # tolerations, readinessGates, containers[].envFrom carry no patchStrategy: replaced whole.
    }
    for containers in ("containers", "initContainers", "ephemeralContainers"):
        for field, key in _CONTAINER_LISTS.items():
            out[f"{prefix}.{containers}.{field}"] = key
    return out


_WORKLOAD: Final = {
    **_object_meta(),
    **_object_meta("spec.template.metadata"),
    **_pod_spec("spec.template.spec"),
    "status.conditions": "type",
}

#: kind -> dotted path -> merge key (list of objects) or ``MERGE`` (set of primitives). Paths through a
#: list continue into its elements (``spec.containers.env``). Unlisted lists are replaced wholesale
#: (``patchStrategy`` absent, e.g. Node ``spec.taints`` and Pod ``spec.tolerations``); unlisted maps
#: merge key by key. Taken from the struct tags in k8s.io/api (core/v1, apps/v1, policy/v1) and
#: k8s.io/apimachinery (meta/v1 ObjectMeta).
STRATEGIC_MERGE_KEYS: Final[dict[str, dict[str, str]]] = {
    "Pod": {
        **_object_meta(),
        **_pod_spec("spec"),
        "status.conditions": "type",
        "status.podIPs": "ip",
        "status.hostIPs": "ip",
    },
    "Node": {
        **_object_meta(),
        "spec.podCIDRs": MERGE,
        "status.conditions": "type",
        "status.addresses": "type",
    },
    "Deployment": _WORKLOAD,
    "ReplicaSet": _WORKLOAD,
    "DaemonSet": _WORKLOAD,
    "StatefulSet": _WORKLOAD,
    "PodDisruptionBudget": {**_object_meta(), "status.conditions": "type"},
    "Namespace": {**_object_meta(), "status.conditions": "type"},
    "Service": {**_object_meta(), "spec.ports": "port", "status.conditions": "type"},
    "ConfigMap": _object_meta(),
    "Secret": _object_meta(),
    "ServiceAccount": {**_object_meta(), "secrets": "name"},
    "Event": _object_meta(),
    "Lease": _object_meta(),
    "CustomResourceDefinition": _object_meta(),
}

#: Patch content types the API server accepts for custom resources (strategic merge is absent, so a
#: strategic merge patch to a custom resource is answered with 415 Unsupported Media Type).
CUSTOM_RESOURCE_PATCH_TYPES: Final = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
)


class _Field:
    __slots__ = ("children", "merge", "merge_key")

    def __init__(self) -> None:
        self.merge = False
        self.merge_key: str | None = None
        self.children: dict[str, _Field] = {}


_NO_SCHEMA: Final[dict[str, _Field]] = {}


def _build_schema(table: Mapping[str, str]) -> dict[str, _Field]:
    root: dict[str, _Field] = {}
    for path, spec in table.items():
        level = root
        parts = path.split(".")
        for i, part in enumerate(parts):
            node = level.get(part)
            if node is None:
                node = level[part] = _Field()
            if i == len(parts) - 1:
                node.merge = True
                node.merge_key = None if spec == MERGE else spec
            level = node.children
    return root


_SCHEMAS: Final[dict[str, dict[str, _Field]]] = {
    kind: _build_schema(table) for kind, table in STRATEGIC_MERGE_KEYS.items()
}


def supports_strategic_merge(kind: str) -> bool:
    """Whether the API server serves ``application/strategic-merge-patch+json`` for ``kind``.

    Built-in kinds do; custom resources (and anything unknown here) do not and get a 415.
    """
    return kind in _SCHEMAS


# --------------------------------------------------------------------------------------------------
# Strategic merge patch: algorithm

_PATCH: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_DELETE_PRIMITIVE: Final = "$deleteFromPrimitiveList/"
_SET_ORDER: Final = "$setElementOrder/"
_OMIT: Final[Any] = object()
_NO_KEY: Final = object()

# mergepatch error texts (k8s.io/apimachinery/pkg/util/mergepatch/errors.go)
_ERR_BAD_JSON_DOC: Final = "invalid JSON document"
_ERR_NO_LIST_OF_LISTS: Final = "lists of lists are not supported"
_ERR_PRIMITIVE_LIST: Final = "invalid patch format of primitive list"
_ERR_RETAIN_KEYS: Final = "invalid patch format of retainKeys"
_ERR_SET_ORDER: Final = "invalid patch format of setElementOrder list"


def _is_directive(key: str) -> bool:
    return key.startswith("$")


def _clean(value: Any) -> Any:
    """Copy a patch value that lands where the original has nothing to merge with.

    With IgnoreUnmatchedNulls the server drops nulls there; directives are stripped so they are never
    stored (``$patch: delete`` removes the value, a list element that is only a directive is dropped).
    """
    t = type(value)
    if t is dict:
        directive = value.get(_PATCH)
        if directive == "delete":
            return _OMIT
        out: dict[str, Any] = {}
        for k, v in value.items():
            if v is None or _is_directive(k):
                continue
            c = _clean(v)
            if c is not _OMIT:
                out[k] = c
        return out
    if t is list:
        items: list[Any] = []
        for v in value:
            if type(v) is dict and _PATCH in v:
                continue
            c = _clean(v)
            if c is not _OMIT:
                items.append(c)
        return items
    return value


def _hkey(value: Any) -> Any:
    """A hashable identity for a JSON scalar that keeps ``true`` and ``1`` apart."""
    t = type(value)
    if t is str:
        return value
    if t is bool or t is int or t is float or value is None:
        return (t is bool, value)
    return ("json", _describe(value))


def _key_fn(merge_key: str | None) -> Callable[[Any], Any]:
    if merge_key is None:
        return _hkey

    def key(item: Any) -> Any:
        if type(item) is dict and merge_key in item:
            return _hkey(item[merge_key])
        return _NO_KEY

    return key


def _normalize_order(
    merged: list[Any], patch_order: list[Any], server_order: list[Any], key: Callable[[Any], Any]
) -> list[Any]:
    """Order as strategicpatch.normalizeElementOrder: patch items in patch (or $setElementOrder)
    order, server-only items in live order, interleaved where the live order relates them."""
    pidx: dict[Any, int] = {}
    for i, item in enumerate(patch_order):
        k = key(item)
        if k is not _NO_KEY and k not in pidx:
            pidx[k] = i
    if not pidx:
        return merged
    sidx: dict[Any, int] = {}
    for i, item in enumerate(server_order):
        k = key(item)
        if k is not _NO_KEY and k not in sidx:
            sidx[k] = i
    keyed = [(key(m), m) for m in merged]
    patch_items = sorted((km for km in keyed if km[0] in pidx), key=lambda km: pidx[km[0]])
    server_only = [km for km in keyed if km[0] not in pidx]
    end = len(sidx)
    server_only.sort(key=lambda km: sidx.get(km[0], end))
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patch_items):
        if i >= len(server_only):
            out.append(patch_items[j][1])
            j += 1
        elif j >= len(patch_items):
            out.append(server_only[i][1])
            i += 1
        else:
            li = sidx.get(server_only[i][0])
            ri = sidx.get(patch_items[j][0])
            if li is not None and ri is not None and li < ri:
                out.append(server_only[i][1])
                i += 1
            else:
                out.append(patch_items[j][1])
                j += 1
    return out


def _check_no_nested_lists(items: list[Any]) -> None:
    for item in items:
        if type(item) is list:
            raise PatchError(_ERR_NO_LIST_OF_LISTS, 422)


def _merge_list(original: list[Any], patch: list[Any], field: _Field) -> list[Any]:
    """strategicpatch.mergeSlice for a field with ``patchStrategy:"merge"``."""
    if not original and not patch:
        return []
    _check_no_nested_lists(original)
    _check_no_nested_lists(patch)
    merge_key = field.merge_key
    key = _key_fn(merge_key)
    if merge_key is None:
        seen: set[Any] = set()
        merged: list[Any] = []
        for item in original + patch:
            if type(item) is dict:
                raise PatchError("mismatched element types in a list of primitives", 422)
            k = _hkey(item)
            if k not in seen:
                seen.add(k)
                merged.append(item)
        return _normalize_order(merged, patch, original, key)

    replace = False
    current = original
    rest: list[dict[str, Any]] = []
    for element in patch:
        if type(element) is not dict:
            raise PatchError(
                f"list element {_describe(element)} is not an object in a list with merge key", 422
            )
        if _PATCH in element:
            directive = element[_PATCH]
            if directive == "delete":
                if merge_key not in element:
                    raise PatchError(
                        f"map: {_describe(element)} does not contain declared merge key: {merge_key}", 422
                    )
                gone = _hkey(element[merge_key])
                current = [o for o in current if key(o) != gone]
            elif directive == "replace":
                replace = True
            elif directive == "merge":
                raise PatchError("merging lists cannot yet be specified in the patch", 422)
            else:
                raise PatchError(f"unknown patch type: {directive} in map: {_describe(element)}", 400)
        else:
            rest.append(element)

    if replace:
        merged = []
        for element in rest:
            c = _clean(element)
            if c is not _OMIT:
                merged.append(c)
    else:
        merged = list(current)
        positions: dict[Any, int] = {}
        for i, o in enumerate(merged):
            k = key(o)
            if k is not _NO_KEY and k not in positions:
                positions[k] = i
        for element in rest:
            if merge_key not in element:
                raise PatchError(
                    f"map: {_describe(element)} does not contain declared merge key: {merge_key}", 422
                )
            k = _hkey(element[merge_key])
            pos = positions.get(k)
            if pos is not None:
                base = merged[pos]
                merged[pos] = _merge_map(base if type(base) is dict else {}, element, field.children)
            else:
                c = _clean(element)
                if c is not _OMIT:
                    positions[k] = len(merged)
                    merged.append(c)
    return _normalize_order(merged, patch, original, key)


def _delete_from_list(original: list[Any], remove: list[Any]) -> list[Any]:
    gone = {_hkey(v) for v in remove if type(v) is not dict and type(v) is not list}
    return [v for v in original if type(v) is dict or type(v) is list or _hkey(v) not in gone]


def _retain_keys(result: dict[str, Any], patch: Mapping[str, Any]) -> None:
    keep_list = patch[_RETAIN_KEYS]
    if keep_list is None:
        keep: set[Any] = set()
    elif type(keep_list) is list:
        keep = {k for k in keep_list if type(k) is str}
    else:
        raise PatchError(_ERR_RETAIN_KEYS, 400)
    for k, v in patch.items():
        if v is None or _is_directive(k):
            continue
        if k not in keep:
            raise PatchError(_ERR_RETAIN_KEYS, 400)
    for k in [k for k in result if k not in keep]:
        del result[k]


def _set_element_order(
    result: dict[str, Any], patch: Mapping[str, Any], directive_key: str, schema: Mapping[str, _Field]
) -> str:
    """strategicpatch.mergePatchIntoOriginal for one ``$setElementOrder/<field>``; returns <field>."""
    name = directive_key[len(_SET_ORDER) :]
    order = patch[directive_key]
    if type(order) is not list:
        raise PatchError(_ERR_SET_ORDER, 400)
    field = schema.get(name)
    merge_key = field.merge_key if field is not None else None
    key = _key_fn(merge_key)
    patch_list: Any = patch.get(name, _OMIT)
    original_list: Any = result.get(name, _OMIT)
    if patch_list is not _OMIT and type(patch_list) is not list:
        raise PatchError(_ERR_SET_ORDER, 400)
    if patch_list is not _OMIT and order:
        # Every (non-directive) patch element must appear in the order list, in the same order.
        wanted = [key(e) for e in patch_list if not (type(e) is dict and _PATCH in e)]
        positions = {k: i for i, k in reversed(list(enumerate(key(o) for o in order)))}
        last = -1
        for k in wanted:
            pos = positions.get(k)
            if pos is None or pos < last:
                raise PatchError(
                    f"The order in patch list: {_describe(patch_list)} doesn't match {_SET_ORDER}{name} "
                    f"list: {_describe(order)}",
                    400,
                )
            last = pos
    if original_list is _OMIT and patch_list is _OMIT:
        return name
    live: list[Any] = original_list if type(original_list) is list else []
    if patch_list is _OMIT:
        merged = live
    elif original_list is _OMIT or type(original_list) is not list:
        merged = _clean(patch_list)
    elif field is not None and field.merge:
        merged = _merge_list(original_list, patch_list, field)
    else:
        merged = _clean(patch_list)
    result[name] = _normalize_order(merged, order, live, key)
    return name


def _merge_map(
    original: dict[str, Any], patch: Mapping[str, Any], schema: Mapping[str, _Field]
) -> dict[str, Any]:
    """strategicpatch.mergeMap; ``original`` is private to the caller and may be shared into the result."""
    if _PATCH in patch:
        directive = patch[_PATCH]
        if directive == "replace":
            return _clean({k: v for k, v in patch.items() if k != _PATCH})  # type: ignore[no-any-return]
        if directive == "delete":
            return {}
        raise PatchError(f"unknown patch type: {directive} in map: {_describe(dict(patch))}", 400)

    result = dict(original)
    handled: set[str] = set()
    has_directives = False
    for k in patch:
        if k[:1] == "$":
            has_directives = True
            break
    if has_directives:
        if _RETAIN_KEYS in patch:
            _retain_keys(result, patch)
        for k in patch:
            if k.startswith(_SET_ORDER):
                handled.add(_set_element_order(result, patch, k, schema))
        # Deletions first so that additions of the same value in the same patch survive.
        for k, pv in patch.items():
            if not k.startswith(_DELETE_PRIMITIVE):
                continue
            name = k[len(_DELETE_PRIMITIVE) :]
            if type(pv) is not list:
                raise PatchError(_ERR_PRIMITIVE_LIST, 400)
            live = result.get(name)
            if type(live) is list:
                result[name] = _delete_from_list(live, pv)

    for k, pv in patch.items():
        # Unknown "$..." keys are data as far as upstream is concerned.
        if k[:1] == "$" and (k.startswith((_DELETE_PRIMITIVE, _SET_ORDER)) or k == _RETAIN_KEYS):
            continue
        if k in handled:
            continue
        if pv is None:
            result.pop(k, None)
            continue
        ov = result.get(k, _OMIT)
        if ov is _OMIT:
            c = _clean(pv)
            if c is not _OMIT:
                result[k] = c
            continue
        to, tp = type(ov), type(pv)
        if to is dict and tp is dict:
            field = schema.get(k)
            result[k] = _merge_map(ov, pv, field.children if field is not None else _NO_SCHEMA)
        elif to is list and tp is list:
            field = schema.get(k)
            if field is not None and field.merge:
                result[k] = _merge_list(ov, pv, field)
            else:
                result[k] = _clean(pv)
        else:
            c = _clean(pv)
            if c is _OMIT:
                result.pop(k, None)
            else:
                result[k] = c
    return result


def strategic_merge_patch(target: Mapping[str, Any], patch: Any, *, kind: str) -> dict[str, Any]:
    """Apply a strategic merge patch to an object of ``kind``.

    Kinds without strategic-merge metadata (custom resources, unknown kinds) get JSON merge patch
    semantics; the server should refuse such requests with 415 first (``supports_strategic_merge``).
    """
    if not isinstance(patch, Mapping):
        raise PatchError(_ERR_BAD_JSON_DOC, 400)
    schema = _SCHEMAS.get(kind)
    if schema is None:
        return merge_patch(target, patch)
    return _merge_map(_to_dict(target), patch, schema)


# --------------------------------------------------------------------------------------------------
# RFC 6902 JSON patch

_OPS: Final = frozenset({"add", "remove", "replace", "move", "copy", "test"})


def _json_equal(a: Any, b: Any) -> bool:
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if ta in (int, float) and tb in (int, float):
        return bool(a == b)
    if ta is dict and tb is dict:
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if ta is list and tb is list:
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return ta is tb and bool(a == b)


def _pointer(path: Any, op: str, name: str = "path") -> list[str]:
    if type(path) is not str:
        raise PatchError(f"{op} operation missing or invalid {name}", 422)
    if path == "":
        return []
    if path[0] != "/":
        raise PatchError(f'{op} operation: JSON pointer must be empty or start with "/": {path}', 422)
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(token: str, length: int, *, allow_end: bool, op: str, path: str) -> int:
    if token == "-" and allow_end:
        return length
    if not token.isdigit() or not token.isascii() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"{op} operation does not apply: invalid array index {token!r} in {path}", 422)
    i = int(token)
    if i > length or (i == length and not allow_end):
        raise PatchError(f"{op} operation does not apply: array index out of bounds: {path}", 422)
    return i


def _parent(doc: Any, tokens: list[str], op: str, path: str) -> Any:
    cur = doc
    for token in tokens[:-1]:
        if type(cur) is dict:
            if token not in cur:
                raise PatchError(f"{op} operation does not apply: doc is missing path: {path}", 422)
            cur = cur[token]
        elif type(cur) is list:
            cur = cur[_index(token, len(cur), allow_end=False, op=op, path=path)]
        else:
            raise PatchError(f"{op} operation does not apply: doc is missing path: {path}", 422)
    if type(cur) is not dict and type(cur) is not list:
        raise PatchError(f"{op} operation does not apply: doc is missing path: {path}", 422)
    return cur


def _get(doc: Any, tokens: list[str], op: str, path: str) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens, op, path)
    last = tokens[-1]
    if type(parent) is dict:
        if last not in parent:
            raise PatchError(f"{op} operation does not apply: doc is missing key: {path}", 422)
        return parent[last]
    return parent[_index(last, len(parent), allow_end=False, op=op, path=path)]


def _add(doc: Any, tokens: list[str], value: Any, op: str, path: str) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens, op, path)
    last = tokens[-1]
    if type(parent) is dict:
        parent[last] = value
    else:
        parent.insert(_index(last, len(parent), allow_end=True, op=op, path=path), value)
    return doc


def _remove(doc: Any, tokens: list[str], op: str, path: str) -> Any:
    if not tokens:
        raise PatchError(f"{op} operation does not apply: cannot remove the whole document", 422)
    parent = _parent(doc, tokens, op, path)
    last = tokens[-1]
    if type(parent) is dict:
        if last not in parent:
            raise PatchError(f"{op} operation does not apply: doc is missing key: {path}", 422)
        return parent.pop(last)
    return parent.pop(_index(last, len(parent), allow_end=False, op=op, path=path))


def json_patch(target: Mapping[str, Any], ops: Any) -> dict[str, Any]:
    """Apply an RFC 6902 JSON patch atomically (all operations or none)."""
    if type(ops) is not list:
        raise PatchError("json: cannot unmarshal a JSON patch that is not an array of operations", 400)
    for operation in ops:
        if type(operation) is not dict:
            raise PatchError("json: cannot unmarshal a JSON patch operation that is not an object", 400)
    doc: Any = _to_dict(target)
    for operation in ops:
        op = operation.get("op")
        if op not in _OPS:
            raise PatchError(f"Unexpected kind: {op}", 422)
        path = operation.get("path")
        tokens = _pointer(path, op)
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchError(f"{op} operation missing value", 422)
        if op == "add":
            doc = _add(doc, tokens, _copy(operation["value"]), op, path)
        elif op == "remove":
            _remove(doc, tokens, op, path)
        elif op == "replace":
            if tokens:
                _get(doc, tokens, op, path)  # must exist
                doc = _add_replace(doc, tokens, _copy(operation["value"]), op, path)
            else:
                doc = _copy(operation["value"])
        elif op == "test":
            if not _json_equal(_get(doc, tokens, op, path), operation["value"]):
                raise PatchError(f"testing value {path} failed: test failed", 422)
        else:  # move, copy
            source = operation.get("from")
            from_tokens = _pointer(source, op, "from")
            if op == "move":
                if from_tokens == tokens:
                    continue
                if len(from_tokens) < len(tokens) and tokens[: len(from_tokens)] == from_tokens:
                    raise PatchError(f"move operation: cannot move {source} into its own child {path}", 422)
                value = _remove(doc, from_tokens, op, source) if from_tokens else doc
            else:
                value = _copy(_get(doc, from_tokens, op, source))
            doc = _add(doc, tokens, value, op, path)
    if type(doc) is not dict:
        raise PatchError("the result of the JSON patch is not a JSON object", 422)
    return doc


def _add_replace(doc: Any, tokens: list[str], value: Any, op: str, path: str) -> Any:
    parent = _parent(doc, tokens, op, path)
    last = tokens[-1]
    if type(parent) is dict:
        parent[last] = value
    else:
        parent[_index(last, len(parent), allow_end=False, op=op, path=path)] = value
    return doc
