"""The object store: every object kubesim serves, its resourceVersion, and the watch event stream.

Ownership rules that keep it fast without copying on every read:
- an object handed to a write method (``create``, ``update``, ``replace``) is adopted by the store;
- an object returned by the store is shared and must never be mutated (copy it with ``deep_copy``).

One global resourceVersion counter orders every write, as etcd's revision does upstream. A bounded
history of events lets a watch resume from an older resourceVersion; asking for one older than the
history answers 410 Gone, which is how clients learn to re-list.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

import orjson

from . import errors
from .admission import (
    SYSTEM_PRIORITY_CLASSES,
    admit_node_create,
    admit_pod_update,
    admit_priority,
    admit_pvc_create,
    default_toleration_seconds,
    pod_spec_defaults,
)
from .decoding import check_body, check_patched
from .fielderrors import invalid as field_invalid
from .fielderrors import invalid_status
from .names import dns1123_label_errors, dns1123_subdomain_errors
from .patch import PatchError, json_patch, merge_patch, strategic_merge_patch, supports_strategic_merge
from .resources import BUILTIN, Registry, ResourceType, types_from_crd
from .selectors import FieldSelector, LabelSelector
from .strategies import prepare_for_create
from .validation import validate_create, validate_update

Obj = dict[str, Any]
ObjList = list[Obj]  # for methods of Store, where ``list`` names Store.list
_J = TypeVar("_J")
ObjKey = tuple[str, str]  # (namespace or "", name)
RKey = tuple[str, str]  # (group, plural)

PATCH_MERGE = "application/merge-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"
PATCH_JSON = "application/json-patch+json"
PATCH_APPLY = "application/apply-patch+yaml"

POD_KEY: RKey = ("", "pods")
NODE_KEY: RKey = ("", "nodes")
NAMESPACE_KEY: RKey = ("", "namespaces")
CRD_KEY: RKey = ("apiextensions.k8s.io", "customresourcedefinitions")

DEFAULT_HISTORY = 200_000
WATCH_QUEUE_LIMIT = 200_000
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
PRIORITY_CLASS_KEY: RKey = ("scheduling.k8s.io", "priorityclasses")
PVC_KEY: RKey = ("", "persistentvolumeclaims")
STORAGE_CLASS_KEY: RKey = ("storage.k8s.io", "storageclasses")


def deep_copy(obj: _J) -> _J:
    """A deep copy of JSON data; orjson round-trips are several times faster than ``copy.deepcopy``."""
    return cast(_J, orjson.loads(orjson.dumps(obj)))


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass(slots=True)
class WatchEvent:
    """One change. ``old`` is the object before the change (None for ADDED)."""

    rv: int
    type: str
    rkey: RKey
    obj: Obj
    old: Obj | None
    _line: bytes | None = None

    def line(self) -> bytes:
        """The JSON line a watch client receives, encoded once however many watchers get it."""
        if self._line is None:
            self._line = orjson.dumps({"type": self.type, "object": self.obj}) + b"\n"
        return self._line


@dataclass(eq=False)
class Watcher:
    """A client watch: filtered events queued for one HTTP response stream."""

    rt: ResourceType
    namespace: str | None
    labels: LabelSelector | None
    fields: FieldSelector | None
    queue: asyncio.Queue[tuple[str, Obj, bytes | None] | None] = field(default_factory=asyncio.Queue)
    closed: bool = False

    def _selected(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        meta = obj["metadata"]
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if self.labels is not None and not self.labels.matches(meta.get("labels")):
            return False
        return self.fields is None or self.fields.matches(obj)

    def offer(self, ev: WatchEvent) -> None:
        """Queue ``ev`` if selected; an object leaving the selection is a DELETED, entering it an ADDED."""
        if self.closed:
            return
        now_in = ev.type != "DELETED" and self._selected(ev.obj)
        was_in = self._selected(ev.old) if ev.type != "ADDED" else False
        if ev.type == "DELETED":
            now_in, was_in = False, self._selected(ev.obj)
            if was_in:
                self._put("DELETED", ev.obj, ev.line())
            return
        if now_in and was_in:
            self._put(ev.type, ev.obj, ev.line())
        elif now_in:
            self._put("ADDED", ev.obj, ev.line() if ev.type == "ADDED" else None)
        elif was_in and ev.old is not None:
            # The object as this watcher last saw it, at the event's version: what the watch cache
            # sends (cacher/cache_watcher.go convertToWatchEvent), not the new one it cannot select.
            prev = {**ev.old, "metadata": {**ev.old["metadata"], "resourceVersion": str(ev.rv)}}
            self._put("DELETED", prev, None)

    def _put(self, type_: str, obj: Obj, line: bytes | None) -> None:
        if self.queue.qsize() >= WATCH_QUEUE_LIMIT:
            # A watcher this far behind is dropped, as the upstream cacher does; the client re-lists.
            self.close()
            return
        self.queue.put_nowait((type_, obj, line))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)


Listener = Callable[[WatchEvent], None]


class Store:
    """All objects, keyed by resource, namespace and name."""

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        clock: Callable[[], float] = time.time,
        history: int = DEFAULT_HISTORY,
    ) -> None:
        self.registry = registry or Registry()
        self.clock = clock
        self._rv = 1
        self._tables: dict[RKey, dict[ObjKey, Obj]] = {}
        self._pods_by_node: dict[str, dict[ObjKey, Obj]] = {}
        self._history: deque[WatchEvent] = deque(maxlen=history)
        self._compacted_rv = 0
        self._watchers: dict[RKey, set[Watcher]] = {}
        self._listeners: list[Listener] = []
        self._listeners_by_key: dict[RKey, list[Listener]] = {}
        for ns in SYSTEM_NAMESPACES:
            self._insert(self._rt(NAMESPACE_KEY), _namespace(ns, self.clock()))
        with contextlib.suppress(KeyError):  # a registry without scheduling.k8s.io has no classes
            for pc_name, value in SYSTEM_PRIORITY_CLASSES.items():
                self._insert(self._rt(PRIORITY_CLASS_KEY), _priority_class(pc_name, value, self.clock()))

    # -- lookups ---------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def _rt(self, rkey: RKey) -> ResourceType:
        return self.registry.by_key(rkey)

    def table(self, rt: ResourceType) -> dict[ObjKey, Obj]:
        return self._tables.setdefault(rt.key, {})

    def find(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        return self.table(rt).get((namespace or "", name))

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.find(rt, namespace, name)
        if obj is None:
            raise errors.not_found(rt, name)
        return obj

    def pods_on_node(self, node: str) -> list[Obj]:
        return list(self._pods_by_node.get(node, {}).values())

    def iter_objects(self, rt: ResourceType, namespace: str | None = None) -> Iterator[Obj]:
        for (ns, _name), obj in self.table(rt).items():
            if namespace is None or ns == namespace:
                yield obj

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
    ) -> list[Obj]:
        """Matching objects sorted by namespace and name (the order continue tokens rely on)."""
        node = fields.exact("spec.nodeName") if fields is not None and rt.key == POD_KEY else None
        if node is not None:
            candidates: Iterable[tuple[ObjKey, Obj]] = self._pods_by_node.get(node, {}).items()
        else:
            candidates = self.table(rt).items()
        out: list[tuple[ObjKey, Obj]] = []
        for key, obj in candidates:
            if namespace is not None and key[0] != namespace:
                continue
            if labels is not None and not labels.matches(obj["metadata"].get("labels")):
                continue
            if fields is not None and not fields.matches(obj):
                continue
            out.append((key, obj))
        out.sort(key=lambda kv: kv[0])
        return [obj for _k, obj in out]

    # -- writes ----------------------------------------------------------------------------------

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _index(self, rt: ResourceType, key: ObjKey, obj: Obj | None, old: Obj | None) -> None:
        if rt.key != POD_KEY:
            return
        old_node = (old or {}).get("spec", {}).get("nodeName") if old else None
        new_node = obj.get("spec", {}).get("nodeName") if obj else None
        if old_node and old_node != new_node:
            bucket = self._pods_by_node.get(old_node)
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self._pods_by_node[old_node]
        if new_node and obj is not None:
            self._pods_by_node.setdefault(new_node, {})[key] = obj

    def _insert(self, rt: ResourceType, obj: Obj) -> Obj:
        meta = obj["metadata"]
        rv = self._next_rv()
        meta["resourceVersion"] = str(rv)
        key = (meta.get("namespace", ""), meta["name"])
        self.table(rt)[key] = obj
        self._index(rt, key, obj, None)
        return obj

    def _emit(self, rt: ResourceType, type_: str, obj: Obj, old: Obj | None) -> None:
        ev = WatchEvent(int(obj["metadata"]["resourceVersion"]), type_, rt.key, obj, old)
        self._record(ev)
        for w in self._watchers.get(rt.key, ()):
            w.offer(ev)
        for listener in self._listeners:
            listener(ev)
        for listener in self._listeners_by_key.get(rt.key, ()):
            listener(ev)

    def _stamp_new(self, rt: ResourceType, obj: Obj, namespace: str | None) -> Obj:
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if rt.namespaced:
            ns = namespace or meta.get("namespace") or "default"
            if meta.get("namespace") not in (None, "", ns):
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise errors.invalid(
                    rt, "", "metadata.name", "Required value: name or generateName is required"
                )
            meta["name"] = prefix + uuid.uuid4().hex[:5]
        _validate_name(rt, meta["name"])
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        meta["uid"] = meta.get("uid") or str(uuid.uuid4())
        meta["creationTimestamp"] = meta.get("creationTimestamp") or rfc3339(self.clock())
        for server_owned in (
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ):
            meta.pop(server_owned, None)
        meta.pop("managedFields", None)
        if _tracks_generation(rt):
            meta.setdefault("generation", 1)
        _apply_defaults(rt, obj)
        return obj

    def create(
        self, rt: ResourceType, obj: Obj, *, namespace: str | None = None, dry_run: bool = False
    ) -> Obj:
        """Create ``obj`` (adopted). 409 AlreadyExists, 404 when the namespace does not exist."""
        if not isinstance(obj, dict):
            raise errors.bad_request("the body of the request was in an unknown format")
        check_body(rt, obj)
        self._stamp_new(rt, obj, namespace)
        if rt.key == NODE_KEY:
            admit_node_create(obj)
        meta = obj["metadata"]
        if rt.namespaced:
            ns_obj = self.find(self._rt(NAMESPACE_KEY), None, meta["namespace"])
            if ns_obj is None:
                raise errors.not_found(self._rt(NAMESPACE_KEY), meta["namespace"])
            if ns_obj["metadata"].get("deletionTimestamp"):
                raise errors.ApiError(
                    403,
                    f'{rt.plural} "{meta["name"]}" is forbidden: unable to create new content in namespace '
                    f"{meta['namespace']} because it is being terminated",
                    reason="Forbidden",
                )
        if rt.key == POD_KEY:
            # Mutating admission runs before the strategy, validation after both (as upstream).
            default_toleration_seconds(obj["spec"])
            admit_priority(meta["name"], obj["spec"], self._priority_class)
        elif rt.key == PVC_KEY:
            admit_pvc_create(obj, self.iter_objects(self._rt(STORAGE_CLASS_KEY)), _created_at)
        prepare_for_create(rt, obj, _qos_class(obj["spec"]) if rt.key == POD_KEY else "")
        validate_create(rt, obj)
        if self.find(rt, meta.get("namespace"), meta["name"]) is not None:
            raise errors.already_exists(rt, meta["name"])
        if rt.key == CRD_KEY:
            self._register_crd(obj)
        if dry_run:
            return obj
        self._insert(rt, obj)
        self._emit(rt, "ADDED", obj, None)
        return obj

    def _priority_class(self, name: str | None) -> Obj | None:
        """A PriorityClass by name; with no name, the cluster's globalDefault class if there is one."""
        try:
            rt = self._rt(PRIORITY_CLASS_KEY)
        except KeyError:
            return None
        if name is not None:
            return self.find(rt, None, name)
        return next((pc for pc in self.iter_objects(rt) if pc.get("globalDefault")), None)

    def load(self, objects: Iterable[Obj]) -> int:
        """Bulk insert at start-up. Events go to the history only (nobody listens yet), so a watch
        from any loaded object's resourceVersion resumes as it would against etcd. Returns the count."""
        n = 0
        for obj in objects:
            rt = self.registry.by_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
            if rt is None:
                raise ValueError(f"kubesim does not serve {obj.get('apiVersion')} {obj.get('kind')}")
            meta = obj.setdefault("metadata", {})
            if self.find(rt, meta.get("namespace"), meta.get("name", "")) is not None:
                if rt.key == NAMESPACE_KEY or (
                    rt.key == PRIORITY_CLASS_KEY and meta.get("name") in SYSTEM_PRIORITY_CLASSES
                ):
                    continue  # what every API server creates at start-up, also in a dump
                raise ValueError(f"duplicate {rt.kind} {meta.get('namespace')}/{meta.get('name')}")
            self._stamp_new(rt, obj, meta.get("namespace"))
            if rt.key == POD_KEY and "priority" not in obj["spec"]:
                # A loaded pod without it: what admission would have set (its class loads first).
                pc = self._priority_class(obj["spec"].get("priorityClassName") or None)
                obj["spec"]["priority"] = int(pc.get("value", 0)) if pc is not None else 0
            if rt.key == CRD_KEY:
                self._register_crd(obj)
            self._insert(rt, obj)
            self._record(WatchEvent(self._rv, "ADDED", rt.key, obj, None))
            n += 1
        return n

    def _record(self, ev: WatchEvent) -> None:
        if len(self._history) == self._history.maxlen:
            self._compacted_rv = self._history[0].rv
        self._history.append(ev)

    def replace(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        obj: Obj,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """PUT semantics: optimistic concurrency on ``metadata.resourceVersion`` when it is given."""
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
            raise errors.bad_request("the body of the request was in an unknown format")
        check_body(rt, obj)
        old = self.get(rt, namespace, name)
        meta = obj.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and meta.get("namespace", namespace) != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if subresource is None:
            # A PUT body is decoded with the version's defaults, as upstream, before it is compared.
            _default_update(rt, obj, old)
            validate_update(rt, obj, old)
        want_rv = meta.get("resourceVersion")
        if want_rv and want_rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rt, name)
        return self._commit(rt, old, obj, subresource=subresource, dry_run=dry_run)

    def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        old = self.get(rt, namespace, name)
        try:
            if patch_type == PATCH_MERGE:
                new = merge_patch(old, body)
            elif patch_type == PATCH_STRATEGIC:
                if rt.group not in ("", "apps", "policy", "coordination.k8s.io", "events.k8s.io") or (
                    not supports_strategic_merge(rt.kind)
                ):
                    raise errors.ApiError(
                        415,
                        f"the body of the request was in an unknown format - accepted media types include: "
                        f"{PATCH_JSON}, {PATCH_MERGE}, {PATCH_APPLY}",
                    )
                new = strategic_merge_patch(old, body, kind=rt.kind)
            elif patch_type == PATCH_JSON:
                new = json_patch(old, body)
            else:
                raise errors.ApiError(
                    415,
                    f"the body of the request was in an unknown format - accepted media types include: "
                    f"{PATCH_JSON}, {PATCH_MERGE}, {PATCH_STRATEGIC}",
                )
        except PatchError as exc:
            raise errors.ApiError(exc.code, exc.message) from None
        if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
            raise errors.bad_request("the patch produced an object that is not a Kubernetes object")
        new_meta = new["metadata"]
        if new_meta.get("name") != name or (rt.namespaced and new_meta.get("namespace") != namespace):
            raise errors.bad_request("metadata.name and metadata.namespace cannot be changed by a patch")
        check_patched(rt, new)
        if subresource is None:
            if rt.key == POD_KEY and isinstance(new.get("spec"), dict):
                new["spec"] = dict(new["spec"])  # a patch result may share parts with the stored pod
                admit_pod_update(new["spec"], old.get("spec") or {})
            validate_update(rt, new, old)
        # A resourceVersion in the patch is a precondition, as upstream: it is how clients
        # compare-and-set with a patch. One the patch set to null or "" leaves the patched object
        # without one, which the registry's update takes as unconditional (every strategy kubesim
        # serves allows that: staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go
        # Update, AllowUnconditionalUpdate).
        want_rv = new_meta.get("resourceVersion")
        if want_rv not in (None, "") and want_rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rt, name)
        return self._commit(rt, old, new, subresource=subresource, dry_run=dry_run)

    def mutate(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        fn: Callable[[Obj], None],
        *,
        status_only: bool = False,
    ) -> Obj:
        """In-process read-modify-write for the simulated controllers (no conflict is possible).

        ``fn`` gets a copy to modify. With ``status_only`` only ``status`` is copied deeply, which is
        much cheaper for big objects, and ``fn`` must not modify anything else in place (it may
        replace another top-level part, or a metadata field, with a new object).
        """
        old = self.get(rt, namespace, name)
        if status_only:
            new = {**old, "metadata": dict(old["metadata"]), "status": deep_copy(old.get("status") or {})}
        else:
            new = deep_copy(old)
        fn(new)
        return self._commit(rt, old, new, subresource="*", dry_run=False)

    def update_status(self, rt: ResourceType, namespace: str | None, name: str, status: Obj) -> Obj:
        """In-process status write for the simulated controllers: ``status`` (adopted) replaces the
        object's status. Only the top level and metadata are copied: stored objects are immutable."""
        old = self.get(rt, namespace, name)
        new = {**old, "metadata": dict(old["metadata"]), "status": status}
        return self._commit(rt, old, new, subresource="*", dry_run=False)

    def _commit(self, rt: ResourceType, old: Obj, new: Obj, *, subresource: str | None, dry_run: bool) -> Obj:
        old_meta = old["metadata"]
        if subresource in (None, "status") and rt.has_status:
            if subresource == "status":
                # A status write changes only status (and labels/annotations are kept from old).
                status = new.get("status")
                new = {k: v for k, v in old.items() if k != "status"}
                if status is not None:
                    new["status"] = status
                new["metadata"] = dict(old_meta)
            elif "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        meta = new.setdefault("metadata", {})
        for keep in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "namespace",
        ):
            if keep in old_meta:
                meta[keep] = old_meta[keep]
            else:
                meta.pop(keep, None)
        meta["name"] = old_meta["name"]
        meta.pop("managedFields", None)
        new["apiVersion"] = rt.api_version
        new["kind"] = rt.kind
        if "generation" in old_meta:
            meta["generation"] = old_meta["generation"] + (1 if new.get("spec") != old.get("spec") else 0)
        if (
            old_meta.get("deletionTimestamp")
            and meta.get("finalizers")
            and (set(meta["finalizers"]) - set(old_meta.get("finalizers") or []))
        ):
            raise errors.invalid(
                rt,
                meta["name"],
                "metadata.finalizers",
                "Forbidden: no new finalizers can be added if the object is being deleted",
            )
        if new == old:
            return old
        if dry_run:
            return new
        if rt.key == CRD_KEY:
            self._register_crd(new)
        key = (old_meta.get("namespace", ""), old_meta["name"])
        meta["resourceVersion"] = str(self._next_rv())
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers") and _deletion_complete(rt, new):
            return self._remove(rt, key, new)
        self.table(rt)[key] = new
        self._index(rt, key, new, old)
        self._emit(rt, "MODIFIED", new, old)
        return new

    def _remove(self, rt: ResourceType, key: ObjKey, obj: Obj) -> Obj:
        table = self.table(rt)
        old = table.pop(key, None)
        self._index(rt, key, None, old)
        if rt.key == CRD_KEY:
            spec = obj.get("spec") or {}
            names = spec.get("names") or {}
            self.registry.remove_group_resource(str(spec.get("group", "")), str(names.get("plural", "")))
        self._emit(rt, "DELETED", obj, old)
        return obj

    def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        preconditions: dict[str, Any] | None = None,
        dry_run: bool = False,
        propagation: str | None = None,
    ) -> Obj:
        """Delete, gracefully for scheduled pods and for objects holding finalizers.

        Upstream's rules (staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go
        Delete, registry/rest/delete.go BeforeDelete): a pod that is not bound to a node or has
        finished is removed at once; a running pod gets ``deletionTimestamp`` = now + grace and stays
        until its kubelet confirms with a grace-0 delete; a later delete may shorten the grace period
        (the timestamp moves earlier by the difference) but never extend it. ``propagation``
        Orphan or Foreground adds the garbage collector's ``orphan`` / ``foregroundDeletion``
        finalizer (Background removes them), which holds the object until the collector is done.
        Returns the object as deleted or as it now is (``dry_run``: as it would be).
        """
        old = self.get(rt, namespace, name)
        old_meta = old["metadata"]
        if preconditions:
            self._check_preconditions(rt, old, preconditions)
        if rt.key == NAMESPACE_KEY and name in SYSTEM_NAMESPACES[:3]:
            raise errors.ApiError(
                403,
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                reason="Forbidden",
            )
        grace = 0
        if rt.key == POD_KEY:
            spec = old.get("spec") or {}
            grace = int(spec.get("terminationGracePeriodSeconds", 30))
            if grace_period_seconds is not None:
                # Upstream's pod strategy turns a negative grace period into 1 s, not 0.
                grace = int(grace_period_seconds) if grace_period_seconds >= 0 else 1
            phase = (old.get("status") or {}).get("phase")
            if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
                grace = 0
        current = old_meta.get("deletionGracePeriodSeconds")
        if old_meta.get("deletionTimestamp") and current is not None:
            grace = min(grace, int(current))
        key = (old_meta.get("namespace", ""), old_meta["name"])
        finalizers = _gc_finalizers(list(old_meta.get("finalizers") or []), propagation)
        held = [*finalizers, "kubesim/namespace-content"] if rt.key == NAMESPACE_KEY else finalizers
        if grace == 0 and not held:
            # Stored objects are never mutated, so only the metadata needs a copy of its own.
            removed = {**old, "metadata": {**old_meta}}
            removed["metadata"].setdefault("deletionTimestamp", rfc3339(self.clock()))
            removed["metadata"]["deletionGracePeriodSeconds"] = 0
            if dry_run:
                return removed
            removed["metadata"]["resourceVersion"] = str(self._next_rv())
            return self._remove(rt, key, removed)
        unchanged_finalizers = finalizers == list(old_meta.get("finalizers") or [])
        if old_meta.get("deletionTimestamp") and current == grace and unchanged_finalizers:
            return old  # nothing changes: repeated deletes are idempotent
        meta = {**old_meta, "deletionGracePeriodSeconds": grace}
        if old_meta.get("deletionTimestamp") and current is not None:
            # BeforeDelete: a shorter grace moves the deadline earlier by the difference.
            start = parse_rfc3339(old_meta["deletionTimestamp"]) - int(current)
            meta["deletionTimestamp"] = rfc3339(start + grace)
        else:
            meta["deletionTimestamp"] = rfc3339(self.clock() + grace)
        if finalizers:
            meta["finalizers"] = finalizers
        else:
            meta.pop("finalizers", None)
        new = {**old, "metadata": meta}
        if rt.key == NAMESPACE_KEY:
            new["status"] = {**(old.get("status") or {}), "phase": "Terminating"}
        if dry_run:
            return new
        meta["resourceVersion"] = str(self._next_rv())
        self.table(rt)[key] = new
        self._index(rt, key, new, old)
        self._emit(rt, "MODIFIED", new, old)
        return new

    def _check_preconditions(self, rt: ResourceType, obj: Obj, pre: dict[str, Any]) -> None:
        """storage.Preconditions.Check: a failed one is etcd's invalid-object error, reported as 409
        Conflict with the storage error's text (apiserver pkg/storage/errors.go, interpretStorageError)."""
        meta = obj["metadata"]
        why = None
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            why = (
                f"Precondition failed: UID in precondition: {pre['uid']}, "
                f"UID in object meta: {meta.get('uid')}"
            )
        elif pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            why = (
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta['resourceVersion']}"
            )
        if why is not None:
            prefix = f"/registry/{rt.group}/{rt.plural}" if rt.group else f"/registry/{rt.plural}"
            storage_key = (
                f"{prefix}/{meta['namespace']}/{meta['name']}"
                if rt.namespaced
                else f"{prefix}/{meta['name']}"
            )
            raise errors.conflict(
                rt,
                meta["name"],
                f"StorageError: invalid object, Code: 4, Key: {storage_key}, ResourceVersion: 0, "
                f"AdditionalErrorMsg: {why}",
            )

    def finish_namespace(self, name: str) -> None:
        """Remove a terminating namespace once its content is gone (called by the namespace controller)."""
        rt = self._rt(NAMESPACE_KEY)
        obj = self.find(rt, None, name)
        if obj is not None and obj["metadata"].get("deletionTimestamp"):
            removed = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self._next_rv())}}
            self._remove(rt, ("", name), removed)

    # -- CRDs ------------------------------------------------------------------------------------

    def _register_crd(self, crd: Obj) -> None:
        try:
            types = types_from_crd(crd)
        except (KeyError, TypeError) as exc:
            raise errors.invalid(
                self._rt(CRD_KEY), crd["metadata"].get("name", ""), "spec", f"Required value: {exc}"
            ) from None
        for t in types:
            self.registry.add(t)
        status = crd.setdefault("status", {})
        names = (crd.get("spec") or {}).get("names") or {}
        status["acceptedNames"] = names
        status["storedVersions"] = [
            v["name"] for v in (crd.get("spec") or {}).get("versions") or [] if v.get("storage")
        ]
        now = rfc3339(self.clock())
        status["conditions"] = [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "lastTransitionTime": now,
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "lastTransitionTime": now,
                "message": "the initial names have been accepted",
            },
        ]

    # -- watch -----------------------------------------------------------------------------------

    def add_listener(self, listener: Listener, rkeys: Iterable[RKey] | None = None) -> None:
        """In-process subscribers (the simulated controllers) see events synchronously: every event,
        or only those of the ``(group, plural)`` keys given, which spares them the rest."""
        if rkeys is None:
            self._listeners.append(listener)
        else:
            for rkey in rkeys:
                self._listeners_by_key.setdefault(rkey, []).append(listener)

    def remove_listener(self, listener: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)
        for listeners in self._listeners_by_key.values():
            with contextlib.suppress(ValueError):
                listeners.remove(listener)

    def compact(self) -> None:
        """Forget the event history, as etcd compaction does: older watches must re-list (410)."""
        if self._history:
            self._compacted_rv = self._history[-1].rv
        self._history.clear()

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        labels: LabelSelector | None,
        fields: FieldSelector | None,
        since: str | None,
        initial: bool | None = None,
    ) -> Watcher:
        """Register a watcher. ``initial`` True starts with an ADDED event per current object
        (``sendInitialEvents``), False with none; None is the legacy rule: initial events when
        ``since`` is None, "" or "0". Without initial events a watch resumes after ``since`` from the
        history (410 Expired once compacted), or starts now when ``since`` is unset or "0"."""
        w = Watcher(rt, namespace, labels, fields)
        if initial is None:
            initial = since in (None, "", "0")
        if initial:
            for obj in self.list(rt, namespace, labels=labels, fields=fields):
                w.queue.put_nowait(("ADDED", obj, None))
        elif since not in (None, "", "0"):
            try:
                from_rv = int(since)
            except ValueError:
                raise errors.bad_request(f'invalid resource version "{since}"') from None
            if from_rv < self._compacted_rv:
                raise errors.gone(f"too old resource version: {from_rv} ({self._compacted_rv})")
            for ev in self._iter_history_after(from_rv):
                if ev.rkey == rt.key:
                    w.offer(ev)
        self._watchers.setdefault(rt.key, set()).add(w)
        return w

    def list_at(
        self,
        rt: ResourceType,
        namespace: str | None,
        rv: int,
        *,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
    ) -> ObjList:
        """The list as it was at ``rv`` (``resourceVersionMatch=Exact``): today's objects with the
        history after ``rv`` undone. 410 Expired once ``rv`` is compacted, as etcd answers."""
        if rv < self._compacted_rv:
            raise errors.gone("The resourceVersion for the provided list is too old.")
        objs = dict(self.table(rt))
        for i in range(len(self._history) - 1, -1, -1):
            ev = self._history[i]
            if ev.rv <= rv:
                break
            if ev.rkey != rt.key:
                continue
            meta = ev.obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if ev.type == "ADDED":
                objs.pop(key, None)
            elif ev.old is not None:
                objs[key] = ev.old
        out: ObjList = []
        for key in sorted(objs):
            obj = objs[key]
            if namespace is not None and key[0] != namespace:
                continue
            if labels is not None and not labels.matches(obj["metadata"].get("labels")):
                continue
            if fields is not None and not fields.matches(obj):
                continue
            out.append(obj)
        return out

    def _iter_history_after(self, rv: int) -> Iterator[WatchEvent]:
        if not self._history or self._history[-1].rv <= rv:
            return
        # History is ordered by rv: skip from the right end, since resumes are usually recent.
        idx = len(self._history)
        while idx > 0 and self._history[idx - 1].rv > rv:
            idx -= 1
        for i in range(idx, len(self._history)):
            yield self._history[i]

    def unwatch(self, w: Watcher) -> None:
        w.close()
        self._watchers.get(w.rt.key, set()).discard(w)

    def drop_watches(self, rt: ResourceType | None = None) -> int:
        """Close watch streams (fault injection: a dropped connection); returns how many."""
        n = 0
        for rkey, ws in self._watchers.items():
            if rt is not None and rkey != rt.key:
                continue
            for w in list(ws):
                w.close()
                n += 1
            ws.clear()
        return n


_ORPHAN, _FOREGROUND = "orphan", "foregroundDeletion"


def _gc_finalizers(finalizers: list[str], propagation: str | None) -> list[str]:
    """deletionFinalizersForGarbageCollection: the finalizers a propagation policy asks for."""
    if propagation == "Orphan":
        return [f for f in finalizers if f != _FOREGROUND] + ([] if _ORPHAN in finalizers else [_ORPHAN])
    if propagation == "Foreground":
        return [f for f in finalizers if f != _ORPHAN] + ([] if _FOREGROUND in finalizers else [_FOREGROUND])
    if propagation == "Background":
        return [f for f in finalizers if f not in (_ORPHAN, _FOREGROUND)]
    return finalizers


def _deletion_complete(rt: ResourceType, obj: Obj) -> bool:
    """A terminating pod goes only on its kubelet's grace-0 delete; other kinds when finalizers clear."""
    if rt.key == POD_KEY:
        return bool(obj["metadata"].get("deletionGracePeriodSeconds") == 0)
    return True


_BUILTIN_KEYS = frozenset(rt.key for rt in BUILTIN)


def _tracks_generation(rt: ResourceType) -> bool:
    """Upstream bumps metadata.generation on spec changes for workloads, PDBs, CRDs and custom
    resources; core kinds and leases have none."""
    return rt.group != "" and (rt.has_status or rt.key not in _BUILTIN_KEYS)


def _priority_class(name: str, value: int, now: float) -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": rfc3339(now)},
        "value": value,
        "globalDefault": False,
        "preemptionPolicy": "PreemptLowerPriority",
        "description": "Used for system critical pods that must not be moved from their current node."
        if name == "system-node-critical"
        else "Used for system critical pods that must run in the cluster, but can be moved to another node "
        "if necessary.",
    }


def _namespace(name: str, now: float) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid4()),
            "creationTimestamp": rfc3339(now),
            "labels": {"kubernetes.io/metadata.name": name},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def _created_at(obj: Obj) -> float:
    return parse_rfc3339(obj["metadata"]["creationTimestamp"])


def _validate_name(rt: ResourceType, name: Any) -> None:
    """ValidateObjectMeta's name rule: a DNS-1123 label for namespaces (ValidateNamespaceName), a
    DNS-1123 subdomain for the other kinds kubesim serves."""
    if not isinstance(name, str) or not name:
        raise errors.invalid(rt, str(name), "metadata.name", "Invalid value: must be a non-empty string")
    msgs = dns1123_label_errors(name) if rt.key == NAMESPACE_KEY else dns1123_subdomain_errors(name)
    if msgs:
        raise invalid_status(rt.kind, rt.group, name, [field_invalid("metadata.name", name, m) for m in msgs])


def _default_update(rt: ResourceType, obj: Obj, old: Obj) -> None:
    """Defaults of a PUT body (the version's defaults), then the mutating admission of an update."""
    if rt.key == POD_KEY and isinstance(obj.get("spec"), dict):
        pod_spec_defaults(obj["spec"])
        admit_pod_update(obj["spec"], old.get("spec") or {})


def _apply_defaults(rt: ResourceType, obj: Obj) -> None:
    """The API defaults the simulated controllers and clients rely on."""
    if rt.key == POD_KEY:
        spec = obj.setdefault("spec", {})
        pod_spec_defaults(spec)
        status = obj.setdefault("status", {})
        status.setdefault("phase", "Pending")
        status.setdefault("qosClass", _qos_class(spec))
    elif rt.key == NAMESPACE_KEY:
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {}).setdefault("phase", "Active")
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    elif rt.key == ("", "secrets"):
        obj["type"] = obj.get("type") or "Opaque"
    elif rt.key in (("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")):
        obj.setdefault("spec", {}).setdefault("replicas", 1)


def _qos_class(spec: Obj) -> str:
    containers = spec.get("containers") or []
    if not containers:
        return "BestEffort"
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        any_set = any_set or bool(req) or bool(lim)
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and req[r] != lim[r]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
