"""Load a real cluster's objects (``kubectl get ... -o json`` output) to seed kubesim, and save them.

``load_dump`` reads what ``kubectl get nodes,pods,pdb,deploy,rs,ds,sts,pvc,pv,sc -A -o json`` prints (a
``List``), a plain JSON array, one JSON object per line (or several concatenated), or YAML when the
file name ends in .yaml/.yml and PyYAML is installed. It strips what the API server owns
(managedFields, resourceVersion, selfLink), adds the Namespaces objects refer to but the dump lacks,
keeps uids (deriving stable ones where missing) and orders objects for insertion like the generator.
``dump_cluster`` writes objects back as a kubectl-style ``List``; loading that file gives the same
objects back.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from kubespot.sim.kubesim.generator import KIND_ORDER

log = logging.getLogger(__name__)

Obj = dict[str, Any]

#: apiVersion kubesim serves each loadable kind under; older versions in a dump are rewritten.
API_VERSIONS: dict[str, str] = {
    "Namespace": "v1",
    "PriorityClass": "scheduling.k8s.io/v1",
    "Node": "v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "PodDisruptionBudget": "policy/v1",
    # Claims, volumes and classes: the scheduler places pods that mount claims by them.
    "StorageClass": "storage.k8s.io/v1",
    "PersistentVolume": "v1",
    "PersistentVolumeClaim": "v1",
    "Pod": "v1",
}
_CLUSTER_SCOPED = frozenset({"Namespace", "PriorityClass", "Node", "StorageClass", "PersistentVolume"})
# The generator's order, with storage before the pods that use it.
_LOAD_ORDER = (
    *(k for k in KIND_ORDER if k != "Pod"),
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Pod",
)
_RANK = {kind: i for i, kind in enumerate(_LOAD_ORDER)}
_SERVER_OWNED_METADATA = ("managedFields", "resourceVersion", "selfLink")
# Fixed namespace for uuid5, so a dump without uids loads with the same uids every time.
_UID_NAMESPACE = uuid.UUID("5f0c8a52-6d2b-4c1e-9a57-0b3f1d2e4c6a")


def load_dump(path: str | Path, *, now: datetime | None = None) -> list[Obj]:
    """The objects in the dump file at ``path``, ready for the store, in insertion order.

    ``now`` (default: the current time) stamps Namespaces the loader adds and objects without a
    creationTimestamp. Raises ValueError naming the file when it is not a readable dump; OSError
    when it cannot be read at all.
    """
    path = Path(path)
    raw = path.read_bytes()
    was_enabled = gc.isenabled()
    # Parsing a large dump allocates millions of acyclic containers; see generator.generate_cluster.
    gc.disable()
    try:
        data = _parse(raw, path)
        return _normalise(data, str(path), now=now, copy=False)
    finally:
        if was_enabled:
            gc.enable()


def load_dump_data(data: Any, *, source: str = "<data>", now: datetime | None = None) -> list[Obj]:
    """Like ``load_dump`` for already parsed data (a List, a list of objects or one object).

    ``data`` is not modified: the result is a deep copy. ``source`` names the data in errors.
    """
    return _normalise(data, source, now=now, copy=True)


def dump_cluster(objects: Iterable[Obj], path: str | Path, *, indent: bool = True) -> None:
    """Write ``objects`` to ``path`` as a kubectl-style ``List`` (atomically: a reader never sees half).

    ``indent=False`` writes compact JSON, about half the size, for big clusters.
    """
    path = Path(path)
    doc = {"apiVersion": "v1", "items": list(objects), "kind": "List", "metadata": {"resourceVersion": ""}}
    option = orjson.OPT_INDENT_2 if indent else 0
    data = orjson.dumps(doc, option=option | orjson.OPT_APPEND_NEWLINE)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------------------------------


def _parse(raw: bytes, path: Path) -> Any:
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    if not raw.strip():
        raise ValueError(f"{path}: file is empty, expected kubectl JSON output (a List of objects)")
    if path.suffix.lower() in (".yaml", ".yml"):
        return _parse_yaml(raw, path)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    # Not one JSON document: maybe one object per line, or several documents back to back.
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc})") from None
    return _parse_json_stream(text, path)


def _parse_json_stream(text: str, path: Path) -> list[Any]:
    decoder = json.JSONDecoder()
    docs: list[Any] = []
    pos = 0
    end = len(text)
    while True:
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos >= end:
            return docs
        try:
            doc, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from None
        docs.append(doc)


def _parse_yaml(raw: bytes, path: Path) -> Any:
    try:
        import yaml
    except ImportError:
        # JSON is YAML too: a .yaml file holding JSON still loads without PyYAML.
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ValueError(
                f"{path}: reading YAML needs PyYAML (pip install pyyaml), or give JSON"
            ) from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        docs = [d for d in yaml.load_all(raw, Loader=loader) if d is not None]
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: invalid YAML: {exc}") from None
    # YAML turns unquoted timestamps into datetimes; the round trip makes them RFC 3339 strings again.
    return _json_copy(docs[0] if len(docs) == 1 else docs, str(path))


def _json_copy(data: Any, source: str) -> Any:
    try:
        return orjson.loads(orjson.dumps(data, option=orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z))
    except orjson.JSONEncodeError as exc:
        raise ValueError(f"{source}: not JSON-compatible data: {exc}") from None


def _is_list(data: Any) -> bool:
    return isinstance(data, dict) and (
        str(data.get("kind", "")).endswith("List") or ("items" in data and "kind" not in data)
    )


def _items(data: Any, source: str) -> list[Any]:
    """Flatten a List, an array, or several of either into one list of objects."""
    if _is_list(data):
        items = data.get("items")
        if items is None:
            return []  # the API prints "items": null for an empty typed list
        if not isinstance(items, list):
            raise ValueError(f"{source}: 'items' of the {data.get('kind', 'List')} is not an array")
        list_kind = str(data.get("kind", ""))
        if list_kind not in ("", "List"):
            # A typed list straight from the API (PodList, ...): its items carry no kind/apiVersion.
            for item in items:
                if isinstance(item, dict) and "kind" not in item:
                    item["kind"] = list_kind[: -len("List")]
                    item.setdefault("apiVersion", data.get("apiVersion"))
        return items
    if isinstance(data, dict):
        return [data]
    if isinstance(data, list):
        out: list[Any] = []
        for i, entry in enumerate(data):
            if _is_list(entry):
                out.extend(_items(entry, f"{source} document {i + 1}"))
            else:
                out.append(entry)
        return out
    raise ValueError(
        f"{source}: expected a kubectl List, an array of objects or an object, got {type(data).__name__}"
    )


def _normalise(data: Any, source: str, *, now: datetime | None, copy: bool) -> list[Obj]:
    if copy:
        data = _json_copy(data, source)
    items = _items(data, source)
    stamp = _rfc3339(now or datetime.now(UTC))
    kept: list[Obj] = []
    seen: set[tuple[str, str, str]] = set()
    skipped: Counter[str] = Counter()
    rewritten: Counter[str] = Counter()
    duplicates = 0
    namespaces: dict[str, None] = {}  # referenced, in first-seen order
    for index, obj in enumerate(items):
        where = f"{source}: item {index}"
        if not isinstance(obj, dict):
            raise ValueError(f"{where} is a {type(obj).__name__}, not an object")
        kind = obj.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"{where} has no 'kind'")
        api_version = API_VERSIONS.get(kind)
        if api_version is None:
            skipped[f"{obj.get('apiVersion', '?')} {kind}"] += 1
            continue
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            raise ValueError(f"{where} ({kind}) has no 'metadata' object")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where} ({kind}) has no metadata.name")
        for key in ("spec", "status"):
            if key in obj and obj[key] is not None and not isinstance(obj[key], dict):
                raise ValueError(f"{where} ({kind} {name}): '{key}' is not an object")
        if obj.get("apiVersion") != api_version:
            if obj.get("apiVersion"):
                rewritten[f"{obj['apiVersion']} {kind}"] += 1
            obj["apiVersion"] = api_version
        for key in _SERVER_OWNED_METADATA:
            meta.pop(key, None)
        if kind in _CLUSTER_SCOPED:
            meta.pop("namespace", None)
            namespace = ""
        else:
            namespace = meta.get("namespace") or "default"
            if not isinstance(namespace, str):
                raise ValueError(f"{where} ({kind} {name}): metadata.namespace is not a string")
            meta["namespace"] = namespace
            namespaces.setdefault(namespace, None)
        key3 = (kind, namespace, name)
        if key3 in seen:
            duplicates += 1
            continue
        seen.add(key3)
        if not meta.get("uid"):
            meta["uid"] = str(uuid.uuid5(_UID_NAMESPACE, "/".join(key3)))
        if not isinstance(meta.get("labels"), dict):
            meta["labels"] = {}
        if not isinstance(meta.get("annotations"), dict):
            meta["annotations"] = {}
        if not meta.get("creationTimestamp"):
            meta["creationTimestamp"] = stamp
        kept.append(obj)
    if skipped:
        log.warning(
            "%s: skipped objects of kinds kubesim does not load: %s",
            source,
            ", ".join(f"{kind} ({n})" for kind, n in sorted(skipped.items())),
        )
    if rewritten:
        log.warning(
            "%s: read older API versions as the served ones: %s",
            source,
            ", ".join(f"{kind} ({n})" for kind, n in sorted(rewritten.items())),
        )
    if duplicates:
        log.warning("%s: ignored %d duplicate objects (same kind, namespace and name)", source, duplicates)
    present = {o["metadata"]["name"] for o in kept if o["kind"] == "Namespace"}
    for ns in namespaces:
        if ns not in present:
            kept.append(_namespace(ns, stamp))
    kept.sort(key=lambda o: _RANK[o["kind"]])  # stable: keeps the dump's order within a kind
    return kept


def _namespace(name: str, stamp: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "annotations": {},
            "creationTimestamp": stamp,
            "labels": {"kubernetes.io/metadata.name": name},
            "name": name,
            "uid": str(uuid.uuid5(_UID_NAMESPACE, f"Namespace//{name}")),
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def _rfc3339(dt: datetime) -> str:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
