"""Garbage collector: when an owner goes, its dependents go too (background propagation).

An index owner uid -> dependents (by resource, namespace, name) is kept from store events, so an
owner's removal costs O(its dependents). A dependent is deleted when none of its owners exists any
more (upstream's rule); when only some are gone, the dangling ownerReferences are removed instead.
Existence of an owner is checked by looking up the ownerReference's kind and name and comparing uids,
so no global uid map is needed. At start, dependents whose owners are all absent are collected.

Deletion propagation: kubesim's API ignores ``propagationPolicy`` (deletes are background), so the
``foregroundDeletion`` and ``orphan`` finalizers only appear when a client sets them explicitly.
They are honoured minimally: an owner being deleted with ``orphan`` has its dependents' references
to it removed, then the finalizer; with ``foregroundDeletion`` its dependents are deleted and the
finalizer is removed once the index shows none left. ``blockOwnerDeletion`` is not enforced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..resources import ResourceType
from ..store import Obj, RKey, Store, WatchEvent
from . import Controller, ControllerConfig
from .replicaset import WorkQueue, delete_quietly, is_terminating

DepKey = tuple[RKey, str, str]  # (resource key, namespace, name)
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


def _owner_uids(obj: Mapping[str, Any] | None) -> set[str]:
    if not obj:
        return set()
    return {str(r["uid"]) for r in obj["metadata"].get("ownerReferences") or () if r.get("uid")}


class GarbageCollector(Controller):
    name = "garbagecollector"

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.dependents: dict[str, set[DepKey]] = {}
        #: Owners that are being deleted with a propagation finalizer, by uid -> (rkey, ns, name).
        self.finalizing: dict[str, DepKey] = {}
        self.queue: WorkQueue[str] = WorkQueue("garbagecollector", self.sync)
        self._rts: dict[tuple[str, str], ResourceType | None] = {}

    def start(self) -> None:
        super().start()
        for rt in self.store.registry.all_types():
            for obj in self.store.iter_objects(rt):
                self._index(rt.key, obj, None, "ADDED")
        # Dependents whose owners vanished while nobody watched (or never existed) are collected.
        for uid in list(self.dependents):
            self.queue.add(uid)
        self.spawn(self.queue.run(self.pacer))

    def _index(self, rkey: RKey, obj: Obj, old: Obj | None, type_: str) -> None:
        meta = obj["metadata"]
        dep = (rkey, meta.get("namespace", ""), meta["name"])
        before = _owner_uids(old) if type_ == "MODIFIED" else set()
        after = _owner_uids(obj) if type_ != "DELETED" else set()
        if type_ == "DELETED":
            before = _owner_uids(obj)
        for uid in before - after:
            bucket = self.dependents.get(uid)
            if bucket is not None:
                bucket.discard(dep)
                if not bucket:
                    del self.dependents[uid]
                    if uid in self.finalizing:
                        self.queue.add(uid)
        for uid in after - before:
            self.dependents.setdefault(uid, set()).add(dep)

    def on_event(self, ev: WatchEvent) -> None:
        self._index(ev.rkey, ev.obj, ev.old, ev.type)
        uid = ev.obj["metadata"].get("uid")
        if not uid:
            return
        if ev.type == "DELETED":
            self.finalizing.pop(uid, None)
            if uid in self.dependents:
                self.queue.add(uid)
        elif is_terminating(ev.obj):
            finalizers = ev.obj["metadata"].get("finalizers") or ()
            if ORPHAN in finalizers or FOREGROUND in finalizers:
                meta = ev.obj["metadata"]
                self.finalizing[uid] = (ev.rkey, meta.get("namespace", ""), meta["name"])
                self.queue.add(uid)

    # -- sync -------------------------------------------------------------------------------------

    def _rt_for(self, api_version: str, kind: str) -> ResourceType | None:
        key = (api_version, kind)
        if key not in self._rts:
            self._rts[key] = self.store.registry.by_kind(api_version, kind)
        return self._rts[key]

    def _rt_by_key(self, rkey: RKey) -> ResourceType | None:
        for rt in self.store.registry.all_types():
            if rt.key == rkey:
                return rt
        return None

    def _owner_exists(self, ref: Mapping[str, Any], namespace: str) -> bool:
        rt = self._rt_for(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
        if rt is None:
            return False
        owner = self.store.find(rt, namespace if rt.namespaced else None, str(ref.get("name", "")))
        return owner is not None and owner["metadata"].get("uid") == ref.get("uid")

    def sync(self, uid: str) -> None:
        if uid in self.finalizing:
            self._finalize(uid)
            return
        rts: dict[RKey, ResourceType | None] = {}
        for dep in list(self.dependents.get(uid, ())):
            rkey, ns, name = dep
            if rkey not in rts:
                rts[rkey] = self._rt_by_key(rkey)
            rt = rts[rkey]
            if rt is None:
                continue
            obj = self.store.find(rt, ns or None, name)
            if obj is None or is_terminating(obj):
                continue
            refs = obj["metadata"].get("ownerReferences") or []
            dangling = [r for r in refs if not self._owner_exists(r, ns)]
            if not dangling:
                continue
            if len(dangling) == len(refs):
                delete_quietly(self.store, rt, ns, name)
            else:
                gone = {r.get("uid") for r in dangling}

                def drop(o: Obj, gone: set[Any] = gone) -> None:
                    o["metadata"]["ownerReferences"] = [
                        r for r in o["metadata"].get("ownerReferences") or [] if r.get("uid") not in gone
                    ]

                self.store.mutate(rt, ns or None, name, drop)

    def _finalize(self, uid: str) -> None:
        rkey, ns, name = self.finalizing[uid]
        rt = self._rt_by_key(rkey)
        owner = self.store.find(rt, ns or None, name) if rt is not None else None
        if rt is None or owner is None or owner["metadata"].get("uid") != uid:
            self.finalizing.pop(uid, None)
            return
        finalizers = owner["metadata"].get("finalizers") or []
        deps = list(self.dependents.get(uid, ()))
        if ORPHAN in finalizers:
            for drkey, dns, dname in deps:
                drt = self._rt_by_key(drkey)
                if drt is None or self.store.find(drt, dns or None, dname) is None:
                    continue

                def unown(o: Obj) -> None:
                    o["metadata"]["ownerReferences"] = [
                        r for r in o["metadata"].get("ownerReferences") or [] if r.get("uid") != uid
                    ]

                self.store.mutate(drt, dns or None, dname, unown)
            deps = []
            drop = ORPHAN
        else:
            for drkey, dns, dname in deps:
                drt = self._rt_by_key(drkey)
                dep = self.store.find(drt, dns or None, dname) if drt is not None else None
                if drt is not None and dep is not None and not is_terminating(dep):
                    delete_quietly(self.store, drt, dns, dname)
            drop = FOREGROUND
        if deps and any(
            (drt := self._rt_by_key(k)) is not None and self.store.find(drt, dns or None, dn) is not None
            for k, dns, dn in deps
        ):
            return  # re-queued when the index empties
        self.finalizing.pop(uid, None)

        def remove(o: Obj) -> None:
            o["metadata"]["finalizers"] = [f for f in o["metadata"].get("finalizers") or [] if f != drop]

        self.store.mutate(rt, ns or None, name, remove)
