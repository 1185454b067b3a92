"""ReplicaSet controller: keeps ``spec.replicas`` pods running, plus helpers the workload controllers share.

Pods count when they are owned by the ReplicaSet (a controller ownerReference with its uid) and are
active: not terminating and not finished. Terminating pods do not count, so an eviction gets its
replacement at once, as upstream's ``FilterActivePods``. Orphan pods are not adopted (kubesim's
generator and clients always create pods through a controller or as bare pods).

Work is keyed by ``(namespace, name)`` and coalesced in a ``WorkQueue``: a burst of pod events for
one ReplicaSet syncs it once per loop tick. Pods are found through an owner-uid index maintained from
store events, so a sync costs O(pods of that ReplicaSet), never O(cluster).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Generic, NamedTuple, TypeVar

import orjson

from .. import errors
from ..resources import ResourceType
from ..selectors import LabelSelector, SelectorError, label_selector_from_dict
from ..store import POD_KEY, Obj, ObjKey, Store, WatchEvent, deep_copy, parse_rfc3339
from . import Controller, ControllerConfig
from .pacing import Pacer

log = logging.getLogger("kubespot.sim.kubesim.controllers")

K = TypeVar("K", bound=Hashable)

RS_KEY = ("apps", "replicasets")
#: Most pods one sync creates; the rest follow on the next tick (upstream uses slow-start batches).
CREATE_BURST = 500


# -- shared helpers ---------------------------------------------------------------------------------


class WorkQueue(Generic[K]):
    """A set of dirty keys drained by one task; adding a key twice before it runs syncs it once.

    The task yields to the HTTP server as its ``Pacer`` says (see ``pacing.py``); keys added while it
    stays away coalesce, so a controller that falls behind a burst does less work per event.
    """

    def __init__(self, name: str, handler: Callable[[K], None], *, batch_delay: float = 0.0) -> None:
        self.name = name
        self._handler = handler
        self._batch_delay = batch_delay
        self._dirty: dict[K, None] = {}
        self._wake = asyncio.Event()
        self._timers: dict[K, asyncio.TimerHandle] = {}

    def add(self, key: K) -> None:
        self._dirty[key] = None
        self._wake.set()

    def add_after(self, key: K, delay: float) -> None:
        """Sync ``key`` after ``delay`` seconds; an earlier pending recheck wins."""
        loop = asyncio.get_running_loop()
        current = self._timers.get(key)
        if current is not None and current.when() <= loop.time() + delay:
            return
        if current is not None:
            current.cancel()

        def fire() -> None:
            self._timers.pop(key, None)
            self.add(key)

        self._timers[key] = loop.call_later(max(0.0, delay), fire)

    def __len__(self) -> int:
        return len(self._dirty)

    async def run(self, pacer: Pacer | None = None) -> None:
        pacer = pacer or Pacer(enabled=False)
        try:
            while True:
                await self._wake.wait()
                if self._batch_delay:
                    await asyncio.sleep(self._batch_delay)
                self._wake.clear()
                batch, self._dirty = self._dirty, {}
                slice_start = pacer.clock()
                for key in batch:
                    try:
                        self._handler(key)
                    except errors.ApiError as exc:
                        # Another writer got there first (e.g. a client deleted the object): retry later.
                        log.debug("%s: sync %s: %s", self.name, key, exc.message)
                        self.add_after(key, 0.5)
                    except Exception:
                        log.exception("%s: sync %s failed", self.name, key)
                        self.add_after(key, 1.0)
                    if pacer.due(slice_start):
                        slice_start = await pacer.pause(slice_start)
                pacer.charge(slice_start)
        finally:
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()


def controller_ref(obj: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The ownerReference with ``controller: true``, if any."""
    if not obj:
        return None
    for ref in obj.get("metadata", {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None


def controller_uid(obj: Mapping[str, Any] | None) -> str | None:
    ref = controller_ref(obj)
    return str(ref["uid"]) if ref is not None and ref.get("uid") else None


def owner_reference(owner: Obj, *, block: bool = True) -> Obj:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": block,
    }


def is_terminating(obj: Mapping[str, Any]) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def is_finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_active(pod: Mapping[str, Any]) -> bool:
    """Upstream ``IsPodActive``: neither terminating nor finished."""
    return not is_terminating(pod) and not is_finished(pod)


def _ready_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond  # type: ignore[no-any-return]
    return None


def is_ready(pod: Mapping[str, Any]) -> bool:
    cond = _ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def available_in(pod: Mapping[str, Any], min_ready_seconds: int, now: float) -> float | None:
    """Seconds until a Ready pod becomes available (0: available now); None when not Ready."""
    cond = _ready_condition(pod)
    if cond is None or cond.get("status") != "True":
        return None
    return _available_in(cond.get("lastTransitionTime"), min_ready_seconds, now)


def _available_in(ready_since: Any, min_ready_seconds: int, now: float) -> float:
    if min_ready_seconds <= 0 or not ready_since:
        return 0.0
    try:
        left = parse_rfc3339(str(ready_since)) + min_ready_seconds - now
    except ValueError:
        return 0.0
    return max(0.0, left)


class PodFacts(NamedTuple):
    """What the workload and disruption controllers read of a pod, extracted once per pod version."""

    terminating: bool
    phase: str | None
    #: The Ready condition is True.
    ready: bool
    #: That condition's lastTransitionTime (when it is True).
    ready_since: Any
    labels: Mapping[str, str]
    #: The ownerReference with ``controller: true``.
    owner: Mapping[str, Any] | None


def pod_facts(pod: Mapping[str, Any]) -> PodFacts:
    meta = pod["metadata"]
    status = pod.get("status") or {}
    ready, since = False, None
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
            since = cond.get("lastTransitionTime") if ready else None
            break
    return PodFacts(
        bool(meta.get("deletionTimestamp")),
        status.get("phase"),
        ready,
        since,
        meta.get("labels") or {},
        controller_ref(pod),
    )


class FactsCache:
    """``pod_facts`` of the pods a controller keeps reading, computed once per pod version.

    Stored objects are never mutated, so facts stay valid for as long as the store holds the very
    object they were computed from. Entries are found by object identity (the cache holds the object,
    so its id cannot be reused meanwhile); one per pod, the newest version seen, until it is deleted.
    """

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Obj, PodFacts]] = {}
        self._id_of: dict[ObjKey, int] = {}

    def __call__(self, pod: Obj) -> PodFacts:
        hit = self._by_id.get(id(pod))
        if hit is not None and hit[0] is pod:
            return hit[1]
        facts = pod_facts(pod)
        meta = pod["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        previous = self._id_of.get(key)
        if previous is not None:
            self._by_id.pop(previous, None)
        self._id_of[key] = id(pod)
        self._by_id[id(pod)] = (pod, facts)
        return facts

    def peek(self, pod: Obj) -> PodFacts:
        """The facts of ``pod`` without caching them (e.g. an older version)."""
        hit = self._by_id.get(id(pod))
        return hit[1] if hit is not None and hit[0] is pod else pod_facts(pod)

    def forget(self, key: ObjKey) -> None:
        previous = self._id_of.pop(key, None)
        if previous is not None:
            self._by_id.pop(previous, None)


def template_hash(template: Any, collision_count: int = 0) -> str:
    """A deterministic, label-safe hash of a pod template (upstream: fnv32a + SafeEncodeString).

    The ``pod-template-hash`` label itself is left out, so a template hashes the same before and
    after the Deployment controller labels it.
    """
    tmpl = deep_copy(template) if template is not None else {}
    labels = (tmpl.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop("pod-template-hash", None)
    data = orjson.dumps(tmpl, option=orjson.OPT_SORT_KEYS) + str(collision_count).encode()
    digest = hashlib.sha256(data).digest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # no vowels, as upstream: no accidental words
    return "".join(alphabet[b % len(alphabet)] for b in digest[:10])


def selector_of(obj: Mapping[str, Any]) -> LabelSelector:
    try:
        return label_selector_from_dict((obj.get("spec") or {}).get("selector"))
    except SelectorError:
        return label_selector_from_dict(None)


def pod_from_template(owner: Obj, template: Mapping[str, Any] | None) -> Obj:
    """A new pod for ``owner``: template labels/annotations/spec, a controller ownerReference."""
    tmpl = deep_copy(template or {})
    tmeta = tmpl.get("metadata") or {}
    meta: Obj = {
        "namespace": owner["metadata"]["namespace"],
        "labels": dict(tmeta.get("labels") or {}),
        "ownerReferences": [owner_reference(owner)],
    }
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    spec = tmpl.get("spec") or {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def create_generated(store: Store, rt: ResourceType, obj: Obj, attempts: int = 5) -> Obj:
    """Create with ``generateName``, retrying the (rare) random-suffix collision."""
    for i in range(attempts):
        candidate = obj if i == attempts - 1 else deep_copy(obj)
        try:
            return store.create(rt, candidate)
        except errors.ApiError as exc:
            if exc.code != 409 or i == attempts - 1:
                raise
    raise AssertionError("unreachable")


def delete_quietly(store: Store, rt: ResourceType, namespace: str, name: str) -> None:
    """Delete if still there; a 404 means someone else got there first, which is fine."""
    try:
        store.delete(rt, namespace, name)
    except errors.ApiError as exc:
        if exc.code != 404:
            raise


class OwnerIndex:
    """Controller-owner uid -> the objects it controls (as last seen), for one resource kind."""

    def __init__(self, owner_kind: str) -> None:
        self.owner_kind = owner_kind
        self._by_owner: dict[str, dict[ObjKey, Obj]] = {}

    def _owner_uid(self, obj: Mapping[str, Any] | None) -> str | None:
        ref = controller_ref(obj)
        if ref is None or ref.get("kind") != self.owner_kind or not ref.get("uid"):
            return None
        return str(ref["uid"])

    def build(self, objs: Iterable[Obj]) -> None:
        self._by_owner.clear()
        for obj in objs:
            self.apply("ADDED", obj, None)

    def apply(self, type_: str, obj: Obj, old: Obj | None) -> tuple[str | None, str | None]:
        """Update from one event; returns (old owner uid, new owner uid)."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        before = self._owner_uid(old) if type_ != "ADDED" else None
        after = self._owner_uid(obj) if type_ != "DELETED" else None
        if type_ == "DELETED":
            before = self._owner_uid(obj)
        if before is not None and before != after:
            bucket = self._by_owner.get(before)
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self._by_owner[before]
        if after is not None:
            self._by_owner.setdefault(after, {})[key] = obj
        return before, after

    def keys(self, owner_uid: str) -> list[ObjKey]:
        return list(self._by_owner.get(owner_uid, ()))

    def objects(self, store: Store, rt: ResourceType, owner_uid: str) -> list[Obj]:
        """Current objects controlled by ``owner_uid`` (stale keys are skipped). The store is the truth:
        an object is re-checked only when it is not the one this index last saw."""
        bucket = self._by_owner.get(owner_uid)
        if not bucket:
            return []
        table = store.table(rt)
        out: list[Obj] = []
        for key, seen in bucket.items():
            obj = table.get(key)
            if obj is not None and (obj is seen or controller_uid(obj) == owner_uid):
                out.append(obj)
        return out


def owner_name(obj: Mapping[str, Any] | None, kind: str) -> str | None:
    ref = controller_ref(obj)
    if ref is None or ref.get("kind") != kind:
        return None
    return str(ref.get("name", "")) or None


def int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    """Upstream ``GetScaledValueFromIntOrPercent``."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise ValueError(f"invalid value {value!r}")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%"):
        pct = int(text[:-1])
        scaled = pct * total
        return -(-scaled // 100) if round_up else scaled // 100
    return int(text)


# -- the controller ---------------------------------------------------------------------------------


def _deletion_rank(pod: Obj) -> tuple[int, int, int, float]:
    """Sort key: pods to delete first sort first (upstream ``ActivePods`` ordering, simplified)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(str(status.get("phase")), 0)
    restarts = sum(int(c.get("restartCount", 0)) for c in status.get("containerStatuses") or ())
    try:
        created = parse_rfc3339(str(pod["metadata"].get("creationTimestamp")))
    except ValueError:
        created = 0.0
    return (
        1 if spec.get("nodeName") else 0,
        phase_rank,
        1 if is_ready(pod) else 0,
        -created - restarts * 1e-3,
    )


class ReplicaSetController(Controller):
    name = "replicaset"
    watches = (POD_KEY, RS_KEY)

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.rs_rt = self.rt("apps", "v1", "replicasets")
        self.pod_rt = self.rt("", "v1", "pods")
        self.pods = OwnerIndex("ReplicaSet")
        self.facts = FactsCache()
        #: The ReplicaSet being synced: the events of its own writes (pods created or deleted, its
        #: status) need no second sync, which would find exactly what this one wrote.
        self._syncing: ObjKey | None = None
        self.queue: WorkQueue[ObjKey] = WorkQueue(
            "replicaset", self.sync, batch_delay=config.sync_batch_seconds
        )

    def start(self) -> None:
        super().start()
        self.pods.build(self.store.iter_objects(self.pod_rt))
        for rs in self.store.iter_objects(self.rs_rt):
            self.queue.add((rs["metadata"]["namespace"], rs["metadata"]["name"]))
        self.spawn(self.queue.run(self.pacer))

    def on_event(self, ev: WatchEvent) -> None:
        if ev.rkey == POD_KEY:
            before, after = self.pods.apply(ev.type, ev.obj, ev.old)
            meta = ev.obj["metadata"]
            ns = meta.get("namespace", "")
            if ev.type == "DELETED":
                was_terminating = ev.old is not None and self.facts.peek(ev.old).terminating
                self.facts.forget((ns, meta["name"]))
                if was_terminating:
                    return  # it stopped counting when it started terminating
            if before is None and after is None:
                return
            if ev.type == "MODIFIED" and before == after and ev.old is not None and not self._matters(ev):
                return
            for obj in (ev.old, ev.obj):
                name = owner_name(obj, "ReplicaSet")
                if name and (ns, name) != self._syncing:
                    self.queue.add((ns, name))
        elif ev.rkey == RS_KEY:
            meta = ev.obj["metadata"]
            key = (meta["namespace"], meta["name"])
            if ev.type != "DELETED" and key != self._syncing:
                self.queue.add(key)

    def _matters(self, ev: WatchEvent) -> bool:
        """Whether a change to a pod of a ReplicaSet can change what a sync of it does or writes.

        Most pod updates cannot: a binding, the eviction's DisruptionTarget condition, and every
        status write of a pod already terminating (it no longer counts). Skipping them saves a sync
        of the whole ReplicaSet each."""
        assert ev.old is not None
        old, new = self.facts.peek(ev.old), self.facts(ev.obj)
        if old.terminating and new.terminating:
            return False
        return (old.terminating, old.phase, old.ready, old.ready_since) != (
            new.terminating,
            new.phase,
            new.ready,
            new.ready_since,
        ) or (old.labels is not new.labels and old.labels != new.labels)

    def sync(self, key: ObjKey) -> None:
        self._syncing = key
        try:
            self._sync(key)
        finally:
            self._syncing = None

    def _sync(self, key: ObjKey) -> None:
        ns, name = key
        rs = self.store.find(self.rs_rt, ns, name)
        if rs is None:
            return
        uid = rs["metadata"]["uid"]
        spec = rs.get("spec") or {}
        pods = self.pods.objects(self.store, self.pod_rt, uid)
        facts = self.facts
        active = []
        for p in pods:
            f = facts(p)
            if f.terminating:
                continue
            if f.phase == "Failed":
                # Failed pods are removed so they stop holding names and resources, as upstream's
                # PodGC would.
                delete_quietly(self.store, self.pod_rt, ns, p["metadata"]["name"])
            elif f.phase != "Succeeded":
                active.append(p)
        if not is_terminating(rs):
            want = int(spec.get("replicas", 1))
            diff = want - len(active)
            if diff > 0:
                for _ in range(min(diff, CREATE_BURST)):
                    pod = pod_from_template(rs, spec.get("template"))
                    pod["metadata"]["generateName"] = f"{name}-"
                    active.append(create_generated(self.store, self.pod_rt, pod))
                if diff > CREATE_BURST:
                    self.queue.add(key)
            elif diff < 0:
                victims = sorted(active, key=_deletion_rank)[:-diff]
                for p in victims:
                    delete_quietly(self.store, self.pod_rt, ns, p["metadata"]["name"])
                gone = {id(p) for p in victims}
                active = [p for p in active if id(p) not in gone]
        self._update_status(rs, active)

    def _update_status(self, rs: Obj, active: list[Obj]) -> None:
        spec = rs.get("spec") or {}
        min_ready = int(spec.get("minReadySeconds", 0))
        now = self.store.clock()
        tmpl_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        ready = available = fully = 0
        recheck: float | None = None
        wanted = tmpl_labels.items()
        for p in active:
            f = self.facts(p)
            if wanted <= f.labels.items():
                fully += 1
            if not f.ready:
                continue
            left = _available_in(f.ready_since, min_ready, now)
            ready += 1
            if left <= 0:
                available += 1
            else:
                recheck = left if recheck is None else min(recheck, left)
        status = {
            "replicas": len(active),
            "fullyLabeledReplicas": fully,
            "readyReplicas": ready,
            "availableReplicas": available,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        meta = rs["metadata"]
        if recheck is not None:
            self.queue.add_after((meta["namespace"], meta["name"]), recheck + 0.01)
        write_status(self.store, self.rs_rt, rs, status)


def write_status(
    store: Store, rt: ResourceType, obj: Obj, fields: Mapping[str, Any], drop: Iterable[str] = ()
) -> Obj:
    """Merge ``fields`` into ``obj``'s status; writes (one MODIFIED event) only when something changed."""
    current = obj.get("status") or {}
    dropped = [k for k in drop if k in current]
    if not dropped and all(current.get(k) == v for k, v in fields.items()):
        return obj

    status = {k: v for k, v in current.items() if k not in dropped} if isinstance(current, dict) else {}
    status.update(deep_copy(dict(fields)))
    meta = obj["metadata"]
    return store.update_status(rt, meta.get("namespace"), meta["name"], status)
