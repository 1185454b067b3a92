"""Deployment controller: one ReplicaSet per pod template, rolled with RollingUpdate or Recreate.

The ReplicaSet of the current template is named ``<deployment>-<pod-template-hash>``; the hash is
computed deterministically from the template (``replicaset.template_hash``). An existing owned
ReplicaSet whose template equals the Deployment's (ignoring the hash label) is adopted as the new
one whatever its hash, so a generated cluster whose ReplicaSets carry other hashes starts quietly.
Orphan ReplicaSets matching the selector are adopted too (through a per-namespace orphan index).

The rollout follows upstream's ``rolling.go`` in its essentials: scale the new ReplicaSet up within
``replicas + maxSurge`` pods, scale old ones down while at least ``replicas - maxUnavailable`` pods
stay available (unhealthy old replicas first). It advances as ReplicaSet statuses change, since each
ReplicaSet event re-queues its owning Deployment. Not modelled: proportional scaling of several
ReplicaSets mid-rollout, ``paused`` beyond skipping the rollout, progressDeadlineSeconds expiry.
"""

from __future__ import annotations

from typing import Any

from ..store import Obj, ObjKey, Store, WatchEvent, deep_copy, rfc3339
from . import Controller, ControllerConfig
from .replicaset import (
    RS_KEY,
    OwnerIndex,
    WorkQueue,
    controller_ref,
    int_or_percent,
    is_terminating,
    owner_name,
    owner_reference,
    selector_of,
    template_hash,
    write_status,
)

DEPLOY_KEY = ("apps", "deployments")
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"


def _without_hash(template: Any) -> Any:
    tmpl = deep_copy(template or {})
    labels = (tmpl.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(HASH_LABEL, None)
        if not labels:
            tmpl["metadata"].pop("labels")
    meta = tmpl.get("metadata")
    if isinstance(meta, dict) and not meta:
        tmpl.pop("metadata")
    return tmpl


def _revision(rs: Obj) -> int:
    try:
        return int((rs["metadata"].get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


def _replicas(obj: Obj) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


def _st(obj: Obj, field: str) -> int:
    return int((obj.get("status") or {}).get(field, 0) or 0)


def surge_and_unavailable(d: Obj) -> tuple[int, int]:
    """Upstream ``ResolveFenceposts``: surge rounds up, unavailable down; never both zero."""
    spec = d.get("spec") or {}
    strategy = spec.get("strategy") or {}
    rolling = strategy.get("rollingUpdate") or {}
    replicas = _replicas(d)
    surge = int_or_percent(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = int_or_percent(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


class DeploymentController(Controller):
    name = "deployment"
    watches = (RS_KEY, DEPLOY_KEY)

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.d_rt = self.rt("apps", "v1", "deployments")
        self.rs_rt = self.rt("apps", "v1", "replicasets")
        self.rses = OwnerIndex("Deployment")
        self.orphans: dict[str, set[str]] = {}
        #: The Deployment being synced: the events of its own writes need no second sync.
        self._syncing: ObjKey | None = None
        self.queue: WorkQueue[ObjKey] = WorkQueue(
            "deployment", self.sync, batch_delay=config.sync_batch_seconds
        )

    def start(self) -> None:
        super().start()
        for rs in self.store.iter_objects(self.rs_rt):
            self._index_rs("ADDED", rs, None)
        for d in self.store.iter_objects(self.d_rt):
            self.queue.add((d["metadata"]["namespace"], d["metadata"]["name"]))
        self.spawn(self.queue.run(self.pacer))

    def _index_rs(self, type_: str, rs: Obj, old: Obj | None) -> None:
        self.rses.apply(type_, rs, old)
        meta = rs["metadata"]
        bucket = self.orphans.setdefault(meta["namespace"], set())
        if type_ != "DELETED" and controller_ref(rs) is None and not is_terminating(rs):
            bucket.add(meta["name"])
        else:
            bucket.discard(meta["name"])

    def on_event(self, ev: WatchEvent) -> None:
        if ev.rkey == RS_KEY:
            self._index_rs(ev.type, ev.obj, ev.old)
            ns = ev.obj["metadata"]["namespace"]
            for obj in (ev.old, ev.obj):
                name = owner_name(obj, "Deployment")
                if name and (ns, name) != self._syncing:
                    self.queue.add((ns, name))
            if controller_ref(ev.obj) is None and ev.type != "DELETED":
                # An orphan may belong to any Deployment of its namespace; rare, so check them all.
                for d in self.store.iter_objects(self.d_rt, ns):
                    self.queue.add((ns, d["metadata"]["name"]))
        elif ev.rkey == DEPLOY_KEY and ev.type != "DELETED":
            meta = ev.obj["metadata"]
            key = (meta["namespace"], meta["name"])
            if key != self._syncing:
                self.queue.add(key)

    # -- sync -------------------------------------------------------------------------------------

    def _owned(self, d: Obj) -> list[Obj]:
        ns, uid = d["metadata"]["namespace"], d["metadata"]["uid"]
        owned = self.rses.objects(self.store, self.rs_rt, uid)
        orphans = self.orphans.get(ns)
        if orphans:
            sel = selector_of(d)
            for name in list(orphans):
                rs = self.store.find(self.rs_rt, ns, name)
                if rs is None or controller_ref(rs) is not None:
                    orphans.discard(name)
                    continue
                if sel.is_empty() or not sel.matches(rs["metadata"].get("labels")):
                    continue
                ref = owner_reference(d)

                def adopt(o: Obj, ref: Obj = ref) -> None:
                    o["metadata"].setdefault("ownerReferences", []).append(ref)

                owned.append(self.store.mutate(self.rs_rt, ns, name, adopt))
        return [rs for rs in owned if not is_terminating(rs)]

    def sync(self, key: ObjKey) -> None:
        self._syncing = key
        try:
            self._sync(key)
        finally:
            self._syncing = None

    def _sync(self, key: ObjKey) -> None:
        ns, name = key
        d = self.store.find(self.d_rt, ns, name)
        if d is None or is_terminating(d):
            return
        spec = d.get("spec") or {}
        rses = self._owned(d)
        want_tmpl = _without_hash(spec.get("template"))
        new_rs = next(
            (
                rs
                for rs in sorted(rses, key=_revision, reverse=True)
                if _without_hash((rs.get("spec") or {}).get("template")) == want_tmpl
            ),
            None,
        )
        old = [rs for rs in rses if rs is not new_rs]
        paused = bool(spec.get("paused"))
        if new_rs is None and not paused:
            new_rs = self._create_rs(d, old)
        strategy = str((spec.get("strategy") or {}).get("type", "RollingUpdate"))
        if new_rs is not None and not paused:
            if strategy == "Recreate":
                new_rs = self._recreate(d, new_rs, old)
            else:
                new_rs = self._rolling(d, new_rs, old)
            old = [self.store.find(self.rs_rt, ns, rs["metadata"]["name"]) or rs for rs in old]
            self._cleanup(d, old)
            self._sync_revision(d, new_rs)
        elif new_rs is not None and _replicas(new_rs) != _replicas(d) and not any(_replicas(r) for r in old):
            new_rs = self._scale(new_rs, _replicas(d), d)
        self._update_status(d, new_rs, old)

    def _create_rs(self, d: Obj, old: list[Obj]) -> Obj | None:
        spec = d.get("spec") or {}
        meta = d["metadata"]
        collisions = int((d.get("status") or {}).get("collisionCount", 0) or 0)
        for _attempt in range(5):
            h = template_hash(spec.get("template"), collisions)
            name = f"{meta['name']}-{h}"
            existing = self.store.find(self.rs_rt, meta["namespace"], name)
            if existing is None:
                break
            collisions += 1
        else:
            return None
        if collisions:
            write_status(self.store, self.d_rt, d, {"collisionCount": collisions})
        template = deep_copy(spec.get("template") or {})
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = h
        selector = deep_copy(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = h
        surge, _unavail = surge_and_unavailable(d)
        replicas = _replicas(d)
        old_total = sum(_replicas(rs) for rs in old)
        strategy = str((spec.get("strategy") or {}).get("type", "RollingUpdate"))
        if not old_total:
            start = replicas
        elif strategy == "Recreate":
            start = 0
        else:
            start = max(0, min(replicas, replicas + surge - old_total))
        revision = max((_revision(rs) for rs in old), default=0) + 1
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        rs: Obj = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": labels,
                "annotations": {
                    REVISION: str(revision),
                    DESIRED: str(replicas),
                    MAX_REPLICAS: str(replicas + surge),
                },
                "ownerReferences": [owner_reference(d)],
            },
            "spec": {
                "replicas": start,
                "minReadySeconds": int(spec.get("minReadySeconds", 0)),
                "selector": selector,
                "template": template,
            },
        }
        return self.store.create(self.rs_rt, rs)

    def _scale(self, rs: Obj, replicas: int, d: Obj) -> Obj:
        if _replicas(rs) == replicas:
            return rs
        surge, _u = surge_and_unavailable(d)

        def apply(o: Obj) -> None:
            o.setdefault("spec", {})["replicas"] = replicas
            ann = o["metadata"].setdefault("annotations", {})
            ann[DESIRED] = str(_replicas(d))
            ann[MAX_REPLICAS] = str(_replicas(d) + surge)

        meta = rs["metadata"]
        return self.store.mutate(self.rs_rt, meta["namespace"], meta["name"], apply)

    def _recreate(self, d: Obj, new_rs: Obj, old: list[Obj]) -> Obj:
        active_old = [rs for rs in old if _replicas(rs) > 0]
        for rs in active_old:
            self._scale(rs, 0, d)
        # Upstream waits until no old pod runs; a terminating pod still counts there, and the
        # ReplicaSet status does not show it, so wait for status.replicas 0 and a spec-observed status.
        if active_old or any(_st(rs, "replicas") > 0 for rs in old):
            return new_rs
        return self._scale(new_rs, _replicas(d), d)

    def _rolling(self, d: Obj, new_rs: Obj, old: list[Obj]) -> Obj:
        replicas = _replicas(d)
        surge, unavailable = surge_and_unavailable(d)
        # Scale up the new ReplicaSet within the surge budget.
        current = _replicas(new_rs)
        if current > replicas:
            new_rs = self._scale(new_rs, replicas, d)
        elif current < replicas:
            total = sum(_replicas(rs) for rs in old) + current
            room = replicas + surge - total
            if room > 0:
                new_rs = self._scale(new_rs, current + min(room, replicas - current), d)
        old_active = [rs for rs in old if _replicas(rs) > 0]
        if not old_active:
            return new_rs
        # Scale down old ReplicaSets within the availability budget.
        all_pods = sum(_replicas(rs) for rs in old) + _replicas(new_rs)
        min_available = replicas - unavailable
        new_unavailable = max(0, _replicas(new_rs) - _st(new_rs, "availableReplicas"))
        budget = all_pods - min_available - new_unavailable
        if budget <= 0:
            return new_rs
        # Unhealthy old replicas go first: removing them costs no availability.
        old_active.sort(key=lambda rs: rs["metadata"].get("creationTimestamp", ""))
        scaled: dict[str, int] = {}
        for rs in old_active:
            if budget <= 0:
                break
            unhealthy = _replicas(rs) - _st(rs, "availableReplicas")
            cut = min(budget, max(0, unhealthy))
            if cut:
                scaled[rs["metadata"]["name"]] = _replicas(rs) - cut
                budget -= cut
        available = sum(_st(rs, "availableReplicas") for rs in old) + _st(new_rs, "availableReplicas")
        down = available - min_available
        for rs in old_active:
            if down <= 0:
                break
            now = scaled.get(rs["metadata"]["name"], _replicas(rs))
            cut = min(now, down)
            if cut:
                scaled[rs["metadata"]["name"]] = now - cut
                down -= cut
        for rs in old_active:
            target = scaled.get(rs["metadata"]["name"])
            if target is not None:
                self._scale(rs, target, d)
        return new_rs

    def _cleanup(self, d: Obj, old: list[Obj]) -> None:
        limit = int((d.get("spec") or {}).get("revisionHistoryLimit", 10))
        idle = [rs for rs in old if _replicas(rs) == 0 and _st(rs, "replicas") == 0]
        idle.sort(key=_revision)
        for rs in idle[: max(0, len(idle) - limit)]:
            meta = rs["metadata"]
            self.store.delete(self.rs_rt, meta["namespace"], meta["name"])

    def _sync_revision(self, d: Obj, new_rs: Obj) -> None:
        rev = (new_rs["metadata"].get("annotations") or {}).get(REVISION)
        if rev and (d["metadata"].get("annotations") or {}).get(REVISION) != rev:

            def apply(o: Obj) -> None:
                o["metadata"].setdefault("annotations", {})[REVISION] = rev

            self.store.mutate(self.d_rt, d["metadata"]["namespace"], d["metadata"]["name"], apply)

    # -- status -----------------------------------------------------------------------------------

    def _update_status(self, d: Obj, new_rs: Obj | None, old: list[Obj]) -> None:
        ns, name = d["metadata"]["namespace"], d["metadata"]["name"]
        d = self.store.find(self.d_rt, ns, name) or d
        if new_rs is not None:
            new_rs = self.store.find(self.rs_rt, ns, new_rs["metadata"]["name"]) or new_rs
        all_rs = [*old, *([new_rs] if new_rs is not None else [])]
        replicas = _replicas(d)
        _surge, max_unavailable = surge_and_unavailable(d)
        total = sum(_st(rs, "replicas") for rs in all_rs)
        updated = _st(new_rs, "replicas") if new_rs is not None else 0
        ready = sum(_st(rs, "readyReplicas") for rs in all_rs)
        available = sum(_st(rs, "availableReplicas") for rs in all_rs)
        status: dict[str, Any] = {
            "observedGeneration": d["metadata"].get("generation", 1),
            "replicas": total,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": available,
        }
        # Upstream omits zero counts (omitempty); keeping that shape avoids rewriting quiet statuses.
        if replicas - available > 0:
            status["unavailableReplicas"] = replicas - available
        strategy = str(((d.get("spec") or {}).get("strategy") or {}).get("type", "RollingUpdate"))
        min_available = replicas - (max_unavailable if strategy == "RollingUpdate" else 0)
        conds = {c.get("type"): c for c in (d.get("status") or {}).get("conditions") or ()}
        now = rfc3339(self.store.clock())
        if available >= min_available:
            avail = ("True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
        else:
            avail = ("False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")
        rs_name = new_rs["metadata"]["name"] if new_rs is not None else ""
        if (d.get("spec") or {}).get("paused"):
            prog = ("Unknown", "DeploymentPaused", "Deployment is paused")
        elif new_rs is not None and updated == replicas and available >= replicas and total == updated:
            prog = ("True", "NewReplicaSetAvailable", f'ReplicaSet "{rs_name}" has successfully progressed.')
        else:
            prog = ("True", "ReplicaSetUpdated", f'ReplicaSet "{rs_name}" is progressing.')
        new_conds = [
            _condition(conds.get("Available"), "Available", avail, now),
            _condition(conds.get("Progressing"), "Progressing", prog, now),
        ]
        # Keep conditions in the order they already have, so an unchanged status writes nothing.
        if list(conds) == ["Progressing", "Available"]:
            new_conds.reverse()
        status["conditions"] = new_conds
        write_status(
            self.store,
            self.d_rt,
            d,
            status,
            drop=() if "unavailableReplicas" in status else ("unavailableReplicas",),
        )


def _condition(
    current: dict[str, Any] | None, type_: str, want: tuple[str, str, str], now: str
) -> dict[str, Any]:
    status, reason, message = want
    if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == want:
        return current
    transition = now
    if current is not None and current.get("status") == status:
        transition = current.get("lastTransitionTime", now)
    return {
        "type": type_,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": transition,
        "reason": reason,
        "message": message,
    }
