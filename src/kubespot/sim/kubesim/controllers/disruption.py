"""PodDisruptionBudget status, computed as upstream's disruption controller does.

Rules (``kubernetes/kubernetes`` ``pkg/controller/disruption/disruption.go``):

- the PDB's pods are all pods of its namespace its selector matches (a null selector matches none,
  an empty one all), terminating ones included;
- ``expectedPods``: with ``minAvailable`` as an integer, the number of those pods; otherwise
  (``maxUnavailable``, or ``minAvailable`` as a percentage) the sum of the scales of the pods'
  controllers (``getExpectedScale``): a pod of a ReplicaSet owned by a Deployment counts the
  Deployment's ``spec.replicas`` once, other ReplicaSets and StatefulSets their own. Pods without a
  controller are skipped (upstream only records an ``UnmanagedPods`` event); a pod whose controller
  is not one of those kinds fails the sync, and the fail-safe status sets ``disruptionsAllowed`` 0
  with condition reason ``SyncFailed``;
- ``desiredHealthy``: ``minAvailable``, or ``expectedPods - maxUnavailable`` (not below 0);
  percentages are scaled with rounding up;
- ``currentHealthy``: Ready pods that are not terminating and not in ``disruptedPods``;
- ``disruptionsAllowed = currentHealthy - desiredHealthy``, 0 when negative or when
  ``expectedPods`` is 0;
- ``disruptedPods`` (written by the eviction subresource) keeps only entries whose pod still exists
  without ``deletionTimestamp`` and was recorded less than 2 minutes ago (``DeletionTimeout``);
- condition ``DisruptionAllowed``: True/``SufficientPods`` when disruptions are allowed, else
  False/``InsufficientPods``.

For the eviction subresource: ``compute_pdb_status(store, pdb)`` is a pure function returning the
status a fresh sync would write (no store writes). When the controller runs,
``controller_for(store)`` returns it; its ``status_for(pdb)`` computes the same from its indexes
(O(pods of the PDB)), ``refresh(namespace, name)`` also writes it, and ``pdbs_for_pod(pod)`` lists
the PDBs selecting a pod. ``matching_pdbs(store, pod)`` works with or without the controller.

Cost: a pod event tests only the PDBs of its namespace anchored on one of its labels (a
``key=value`` index of the selectors) and marks the affected PDBs dirty; dirty PDBs are recomputed
together on the next loop tick, so a burst of pod changes recomputes each PDB once.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..resources import ResourceType
from ..selectors import LabelSelector, SelectorError, label_selector_from_dict
from ..store import POD_KEY, Obj, ObjKey, Store, WatchEvent, parse_rfc3339, rfc3339
from . import Controller, ControllerConfig
from .replicaset import FactsCache, PodFacts, WorkQueue, controller_ref, int_or_percent, pod_facts

PDB_KEY = ("policy", "poddisruptionbudgets")
SCALE_KEYS = (("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets"))
#: Upstream ``DeletionTimeout``: how long an eviction's entry in ``disruptedPods`` is honoured.
DELETION_TIMEOUT = 120.0
CONDITION = "DisruptionAllowed"

_controllers: weakref.WeakKeyDictionary[Store, DisruptionController] = weakref.WeakKeyDictionary()


class SyncFailedError(Exception):
    """The PDB's status cannot be computed (upstream then writes the fail-safe status)."""


def pdb_selector(pdb: Mapping[str, Any]) -> LabelSelector:
    try:
        return label_selector_from_dict((pdb.get("spec") or {}).get("selector"))
    except SelectorError:
        return label_selector_from_dict(None)


def _rt(store: Store, group: str, plural: str) -> ResourceType:
    rt = store.registry.lookup(group, "v1", plural)
    assert rt is not None, (group, plural)
    return rt


def _scale_of_controller(store: Store, ref: Mapping[str, Any], namespace: str) -> tuple[str, int] | None:
    """Upstream's finders: (uid of the scaling controller, its spec.replicas), or None if unknown."""
    kind, name, uid = ref.get("kind"), str(ref.get("name", "")), ref.get("uid")
    if kind == "ReplicaSet":
        rs = store.find(_rt(store, "apps", "replicasets"), namespace, name)
        if rs is None or rs["metadata"].get("uid") != uid:
            return None
        owner = controller_ref(rs)
        if owner is not None and owner.get("kind") == "Deployment":
            d = store.find(_rt(store, "apps", "deployments"), namespace, str(owner.get("name", "")))
            if d is not None and d["metadata"].get("uid") == owner.get("uid"):
                return str(owner["uid"]), int((d.get("spec") or {}).get("replicas", 1))
        return str(uid), int((rs.get("spec") or {}).get("replicas", 1))
    if kind == "StatefulSet":
        sts = store.find(_rt(store, "apps", "statefulsets"), namespace, name)
        if sts is None or sts["metadata"].get("uid") != uid:
            return None
        return str(uid), int((sts.get("spec") or {}).get("replicas", 1))
    if kind == "Deployment":
        d = store.find(_rt(store, "apps", "deployments"), namespace, name)
        if d is None or d["metadata"].get("uid") != uid:
            return None
        return str(uid), int((d.get("spec") or {}).get("replicas", 1))
    return None


#: Controller uid -> (its ownerReference, the name of the first pod that has it), in pod order.
Owners = dict[str, tuple[Mapping[str, Any], str]]


def _expected_scale(store: Store, owners: Owners, namespace: str) -> int:
    scales: dict[str, int] = {}
    for ref, pod_name in owners.values():
        found = _scale_of_controller(store, ref, namespace)
        if found is None:
            raise SyncFailedError(f'found no controllers for pod "{pod_name}"')
        scales[found[0]] = found[1]
    return sum(scales.values())


def _condition(
    current: Iterable[Mapping[str, Any]], status: str, reason: str, message: str, generation: int, now: float
) -> list[dict[str, Any]]:
    """Upstream ``SetStatusCondition`` for the DisruptionAllowed condition; other conditions kept."""
    out: list[dict[str, Any]] = []
    found = False
    for cond in current:
        c = dict(cond)
        if c.get("type") == CONDITION:
            found = True
            if c.get("status") != status:
                c["lastTransitionTime"] = rfc3339(now)
            c.update(
                {"status": status, "reason": reason, "message": message, "observedGeneration": generation}
            )
        out.append(c)
    if not found:
        out.append(
            {
                "type": CONDITION,
                "status": status,
                "reason": reason,
                "message": message,
                "observedGeneration": generation,
                "lastTransitionTime": rfc3339(now),
            }
        )
    return out


def compute_pdb_status(
    store: Store,
    pdb: Mapping[str, Any],
    *,
    pods: Iterable[Obj] | None = None,
    now: float | None = None,
    facts: Callable[[Obj], PodFacts] = pod_facts,
) -> dict[str, Any]:
    """The status upstream's disruption controller would write for ``pdb`` now. Pure: no writes.

    ``pods`` are the pods the PDB selects, if the caller already has them (the controller passes its
    index); otherwise the namespace is scanned. ``now`` defaults to ``store.clock()``. The result is
    a complete ``status`` dict (``disruptedPods`` only when some entry is still honoured). ``facts``
    reads what counts of a pod (the controller passes its cache).
    """
    now = store.clock() if now is None else now
    meta = pdb["metadata"]
    ns = str(meta.get("namespace", ""))
    spec = pdb.get("spec") or {}
    old_status = pdb.get("status") or {}
    generation = int(meta.get("generation", 1) or 1)
    if pods is None:
        sel = pdb_selector(pdb)
        pod_list = [] if sel.matches_nothing() else store.list(_rt(store, "", "pods"), ns, labels=sel)
    else:
        pod_list = list(pods)
    # One pass over the pods: their controllers (unmanaged pods are skipped: upstream logs an
    # UnmanagedPods event), the disruptions still honoured, the healthy ones.
    owners: Owners = {}
    recorded = old_status.get("disruptedPods") or {}
    disrupted: dict[str, str] = {}
    healthy = 0
    for pod in pod_list:
        f = facts(pod)
        if f.owner is not None:
            ref_uid = str(f.owner.get("uid", ""))
            if ref_uid not in owners:
                owners[ref_uid] = (f.owner, pod["metadata"]["name"])
        if f.terminating:
            continue
        pname = pod["metadata"]["name"]
        if pname in recorded:
            try:
                at = parse_rfc3339(str(recorded[pname]))
            except ValueError:
                at = None
            if at is not None and at + DELETION_TIMEOUT > now:
                disrupted[pname] = recorded[pname]
                continue
        if f.ready:
            healthy += 1
    try:
        expected, desired = _expected_and_desired(store, spec, len(pod_list), ns, owners)
    except (SyncFailedError, ValueError) as exc:
        failed = dict(old_status)
        failed["disruptionsAllowed"] = 0
        failed["conditions"] = _condition(
            old_status.get("conditions") or (),
            "False",
            "SyncFailed",
            str(exc),
            int(old_status.get("observedGeneration", 0) or 0),
            now,
        )
        return failed
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    if allowed > 0:
        cond = _condition(old_status.get("conditions") or (), "True", "SufficientPods", "", generation, now)
    else:
        cond = _condition(
            old_status.get("conditions") or (), "False", "InsufficientPods", "", generation, now
        )
    status: dict[str, Any] = {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": allowed,
        "observedGeneration": generation,
        "conditions": cond,
    }
    if disrupted:  # omitted when empty, as upstream's omitempty map
        status["disruptedPods"] = disrupted
    return status


def _expected_and_desired(
    store: Store,
    spec: Mapping[str, Any],
    pod_count: int,
    ns: str,
    owners: Owners,
) -> tuple[int, int]:
    """Upstream ``getExpectedPodCount``: (expectedPods, desiredHealthy)."""
    max_unavailable = spec.get("maxUnavailable")
    min_available = spec.get("minAvailable")
    if max_unavailable is not None:
        expected = _expected_scale(store, owners, ns)
        return expected, max(0, expected - int_or_percent(max_unavailable, expected, round_up=True))
    if min_available is not None:
        if isinstance(min_available, int):
            return pod_count, min_available
        expected = _expected_scale(store, owners, ns)
        return expected, int_or_percent(min_available, expected, round_up=True)
    return 0, 0


def _next_expiry(status: Mapping[str, Any]) -> float | None:
    times: list[float] = []
    for at in (status.get("disruptedPods") or {}).values():
        try:
            times.append(parse_rfc3339(str(at)) + DELETION_TIMEOUT)
        except ValueError:
            continue
    return min(times) if times else None


def controller_for(store: Store) -> DisruptionController | None:
    """The running disruption controller of ``store``, if any."""
    return _controllers.get(store)


def matching_pdbs(store: Store, pod: Mapping[str, Any]) -> list[Obj]:
    """The PDBs whose selector matches ``pod`` (upstream ``GetPodPodDisruptionBudgets``)."""
    ctrl = controller_for(store)
    if ctrl is not None:
        return ctrl.pdbs_for_pod(pod)
    ns = pod["metadata"].get("namespace")
    labels = pod["metadata"].get("labels")
    return [
        pdb
        for pdb in store.list(_rt(store, "policy", "poddisruptionbudgets"), ns)
        if pdb_selector(pdb).matches(labels)
    ]


class _SelectorIndex:
    """The PDB selectors of one namespace, bucketed by one exact ``key=value`` each.

    A pod then tests only the PDBs anchored on one of its own labels (plus the few without an
    exact requirement), not every PDB of the namespace.
    """

    def __init__(self) -> None:
        self.selectors: dict[str, LabelSelector] = {}
        self._anchors: dict[str, tuple[str, str] | None] = {}
        self._by_pair: dict[tuple[str, str], set[str]] = {}
        self._generic: set[str] = set()

    def put(self, name: str, sel: LabelSelector) -> None:
        self.remove(name)
        self.selectors[name] = sel
        anchor: tuple[str, str] | None = None
        for req in sel.requirements:
            value = sel.exact(req.key)
            if value is not None:
                anchor = (req.key, value)
                break
        self._anchors[name] = anchor
        if anchor is None:
            self._generic.add(name)
        else:
            self._by_pair.setdefault(anchor, set()).add(name)

    def remove(self, name: str) -> None:
        if name not in self.selectors:
            return
        del self.selectors[name]
        anchor = self._anchors.pop(name)
        if anchor is None:
            self._generic.discard(name)
        else:
            bucket = self._by_pair[anchor]
            bucket.discard(name)
            if not bucket:
                del self._by_pair[anchor]

    def matching(self, labels: Mapping[str, str] | None) -> list[str]:
        """Names of the PDBs whose selector matches ``labels``."""
        names = set(self._generic)
        for pair in (labels or {}).items():
            names.update(self._by_pair.get(pair, ()))
        return [n for n in names if self.selectors[n].matches(labels)]


class DisruptionController(Controller):
    name = "disruption"
    watches = (POD_KEY, PDB_KEY, *SCALE_KEYS)

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.pdb_rt = self.rt("policy", "v1", "poddisruptionbudgets")
        self.pod_rt = self.rt("", "v1", "pods")
        #: namespace -> its PDBs' selectors.
        self.selectors: dict[str, _SelectorIndex] = {}
        #: (namespace, PDB name) -> names of the pods it selects.
        self.members: dict[ObjKey, set[str]] = {}
        #: namespace -> pod names, so a new PDB scans its namespace only.
        self.pods_by_ns: dict[str, set[str]] = {}
        self.facts = FactsCache()
        #: The PDB whose status is being written: its own write needs no second sync.
        self._syncing: ObjKey | None = None
        self.queue: WorkQueue[ObjKey] = WorkQueue(
            "disruption", self.sync, batch_delay=config.sync_batch_seconds
        )

    def start(self) -> None:
        super().start()
        _controllers[self.store] = self
        for pdb in self.store.iter_objects(self.pdb_rt):
            meta = pdb["metadata"]
            self.selectors.setdefault(meta["namespace"], _SelectorIndex()).put(
                meta["name"], pdb_selector(pdb)
            )
            self.members[(meta["namespace"], meta["name"])] = set()
            self.queue.add((meta["namespace"], meta["name"]))
        for pod in self.store.iter_objects(self.pod_rt):
            meta = pod["metadata"]
            self.pods_by_ns.setdefault(meta["namespace"], set()).add(meta["name"])
            index = self.selectors.get(meta["namespace"])
            if index is not None:
                for pdb_name in index.matching(meta.get("labels")):
                    self.members[(meta["namespace"], pdb_name)].add(meta["name"])
        self.spawn(self.queue.run(self.pacer))

    async def stop(self) -> None:
        if _controllers.get(self.store) is self:
            del _controllers[self.store]
        await super().stop()

    # -- events -----------------------------------------------------------------------------------

    def on_event(self, ev: WatchEvent) -> None:
        if ev.rkey == POD_KEY:
            self._on_pod(ev)
        elif ev.rkey == PDB_KEY:
            self._on_pdb(ev)
        elif ev.rkey in SCALE_KEYS:
            old_replicas = ((ev.old or {}).get("spec") or {}).get("replicas")
            if ev.type == "MODIFIED" and old_replicas == (ev.obj.get("spec") or {}).get("replicas"):
                return
            ns = ev.obj["metadata"].get("namespace", "")
            index = self.selectors.get(ns)
            for name in index.selectors if index is not None else ():
                self.queue.add((ns, name))

    def _on_pod(self, ev: WatchEvent) -> None:
        meta = ev.obj["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        if ev.type == "ADDED":
            self.pods_by_ns.setdefault(ns, set()).add(name)
        elif ev.type == "DELETED":
            self.facts.forget((ns, name))
            bucket = self.pods_by_ns.get(ns)
            if bucket is not None:
                bucket.discard(name)
        index = self.selectors.get(ns)
        if index is None or not index.selectors:
            return
        now_in = set(index.matching(meta.get("labels"))) if ev.type != "DELETED" else set()
        if ev.type == "DELETED":
            was_in = set(index.matching(meta.get("labels")))
        elif ev.type == "MODIFIED" and ev.old is not None:
            old_labels = ev.old["metadata"].get("labels")
            was_in = now_in if old_labels == meta.get("labels") else set(index.matching(old_labels))
        else:
            was_in = set()
        if not (now_in or was_in):
            return
        # A change that moves no pod in or out and leaves what counts of it alone (a binding, the
        # eviction's DisruptionTarget condition, the status of a pod already terminating) cannot
        # change any budget: no sync for it.
        sync = ev.type != "MODIFIED" or now_in != was_in or ev.old is None or self._counts_changed(ev)
        for pdb_name in now_in | was_in:
            members = self.members.setdefault((ns, pdb_name), set())
            if pdb_name in now_in:
                members.add(name)
            else:
                members.discard(name)
            if sync:
                self.queue.add((ns, pdb_name))

    def _counts_changed(self, ev: WatchEvent) -> bool:
        assert ev.old is not None
        old, new = self.facts.peek(ev.old), self.facts(ev.obj)
        if old.terminating and new.terminating:
            return False
        old_uid = old.owner.get("uid") if old.owner is not None else None
        new_uid = new.owner.get("uid") if new.owner is not None else None
        return (old.terminating, old.ready, old_uid) != (new.terminating, new.ready, new_uid)

    def _on_pdb(self, ev: WatchEvent) -> None:
        meta = ev.obj["metadata"]
        ns, name = meta["namespace"], meta["name"]
        key = (ns, name)
        if ev.type == "DELETED":
            index = self.selectors.get(ns)
            if index is not None:
                index.remove(name)
            self.members.pop(key, None)
            return
        sel = pdb_selector(ev.obj)
        index = self.selectors.setdefault(ns, _SelectorIndex())
        if index.selectors.get(name) != sel or key not in self.members:
            index.put(name, sel)
            self.members[key] = self._scan(ns, sel)
        if (
            ev.type == "MODIFIED"
            and ev.old is not None
            and (ev.old.get("spec") == ev.obj.get("spec") and ev.old.get("status") == ev.obj.get("status"))
        ) or key == self._syncing:
            return
        self.queue.add(key)

    def _scan(self, ns: str, sel: LabelSelector) -> set[str]:
        out: set[str] = set()
        if sel.matches_nothing():
            return out
        for pname in self.pods_by_ns.get(ns, ()):
            pod = self.store.find(self.pod_rt, ns, pname)
            if pod is not None and sel.matches(pod["metadata"].get("labels")):
                out.add(pname)
        return out

    # -- queries for the eviction subresource -----------------------------------------------------

    def pods_of(self, pdb: Mapping[str, Any]) -> list[Obj]:
        meta = pdb["metadata"]
        ns = meta["namespace"]
        names = self.members.get((ns, meta["name"]))
        if names is None:
            names = self._scan(ns, pdb_selector(pdb))
        table = self.store.table(self.pod_rt)
        return [p for n in names if (p := table.get((ns, n))) is not None]

    def status_for(self, pdb: Mapping[str, Any]) -> dict[str, Any]:
        """A fresh status for ``pdb`` (as ``compute_pdb_status``, from the index). No writes."""
        return compute_pdb_status(self.store, pdb, pods=self.pods_of(pdb), facts=self.facts)

    def refresh(self, namespace: str, name: str) -> dict[str, Any] | None:
        """Recompute and write the status of one PDB now; returns it (None if the PDB is gone)."""
        pdb = self.store.find(self.pdb_rt, namespace, name)
        if pdb is None:
            return None
        status = self.status_for(pdb)
        if (pdb.get("status") or {}) != status:

            def apply(o: Obj) -> None:
                o["status"] = status

            self._syncing = (namespace, name)
            try:
                pdb = self.store.mutate(self.pdb_rt, namespace, name, apply, status_only=True)
            finally:
                self._syncing = None
        expiry = _next_expiry(status)
        if expiry is not None:
            self.queue.add_after((namespace, name), expiry - self.store.clock() + 0.01)
        return dict(pdb.get("status") or {})

    def pdbs_for_pod(self, pod: Mapping[str, Any]) -> list[Obj]:
        meta = pod["metadata"]
        ns = meta.get("namespace", "")
        out: list[Obj] = []
        index = self.selectors.get(ns)
        for name in sorted(index.matching(meta.get("labels"))) if index is not None else ():
            pdb = self.store.find(self.pdb_rt, ns, name)
            if pdb is not None:
                out.append(pdb)
        return out

    # -- sync -------------------------------------------------------------------------------------

    def sync(self, key: ObjKey) -> None:
        self.refresh(*key)
