"""StatefulSet controller: pods ``<name>-0 .. <name>-(n-1)`` with stable names.

OrderedReady (the default) creates ordinal i only once 0..i-1 are Running and Ready, and scales down
from the highest ordinal one pod at a time; Parallel creates and deletes all at once. A deleted pod
is recreated under the same name once the old one is gone from the store (a terminating pod still
holds its name). RollingUpdate replaces outdated pods from the highest ordinal, one at a time, once
all others are Ready; ``partition`` is honoured; OnDelete only recreates what clients delete.

Revisions are tracked as in the DaemonSet controller: the ``controller-revision-hash`` pod label,
with the current revision remembered in memory (initially ``status.updateRevision``), no
ControllerRevision objects. PersistentVolumeClaim templates are ignored (kubesim serves no PVCs).
"""

from __future__ import annotations

import re

from ..store import POD_KEY, Obj, ObjKey, Store, WatchEvent
from . import Controller, ControllerConfig
from .replicaset import (
    OwnerIndex,
    WorkQueue,
    available_in,
    controller_uid,
    create_generated,
    delete_quietly,
    is_ready,
    is_terminating,
    owner_name,
    pod_from_template,
    template_hash,
    write_status,
)

STS_KEY = ("apps", "statefulsets")
REVISION_LABEL = "controller-revision-hash"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def _ordinal(sts_name: str, pod_name: str) -> int | None:
    m = re.fullmatch(re.escape(sts_name) + r"-(\d+)", pod_name)
    return int(m.group(1)) if m else None


def _running_ready(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and is_ready(pod) and not is_terminating(pod)


class StatefulSetController(Controller):
    name = "statefulset"
    watches = (POD_KEY, STS_KEY)

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.sts_rt = self.rt("apps", "v1", "statefulsets")
        self.pod_rt = self.rt("", "v1", "pods")
        self.pods = OwnerIndex("StatefulSet")
        #: StatefulSet uid -> (hash of the template last seen, current revision label).
        self.revisions: dict[str, tuple[str, str]] = {}
        self.queue: WorkQueue[ObjKey] = WorkQueue(
            "statefulset", self.sync, batch_delay=config.sync_batch_seconds
        )

    def start(self) -> None:
        super().start()
        self.pods.build(self.store.iter_objects(self.pod_rt))
        for sts in self.store.iter_objects(self.sts_rt):
            self.queue.add((sts["metadata"]["namespace"], sts["metadata"]["name"]))
        self.spawn(self.queue.run(self.pacer))

    def on_event(self, ev: WatchEvent) -> None:
        if ev.rkey == POD_KEY:
            before, after = self.pods.apply(ev.type, ev.obj, ev.old)
            if before is None and after is None:
                return
            ns = ev.obj["metadata"].get("namespace", "")
            for obj in (ev.old, ev.obj):
                name = owner_name(obj, "StatefulSet")
                if name:
                    self.queue.add((ns, name))
        elif ev.rkey == STS_KEY:
            meta = ev.obj["metadata"]
            if ev.type == "DELETED":
                self.revisions.pop(meta["uid"], None)
            else:
                self.queue.add((meta["namespace"], meta["name"]))

    def _revision(self, sts: Obj) -> str:
        meta = sts["metadata"]
        h = template_hash((sts.get("spec") or {}).get("template"))
        known = self.revisions.get(meta["uid"])
        if known is not None and known[0] == h:
            return known[1]
        if known is None and (sts.get("status") or {}).get("updateRevision"):
            rev = str(sts["status"]["updateRevision"])
        else:
            rev = f"{meta['name']}-{h}"
        self.revisions[meta["uid"]] = (h, rev)
        return rev

    def sync(self, key: ObjKey) -> None:
        ns, name = key
        sts = self.store.find(self.sts_rt, ns, name)
        if sts is None:
            return
        uid = sts["metadata"]["uid"]
        spec = sts.get("spec") or {}
        rev = self._revision(sts)
        replicas = int(spec.get("replicas", 1))
        parallel = spec.get("podManagementPolicy") == "Parallel"
        by_ordinal: dict[int, Obj] = {}
        for p in self.pods.objects(self.store, self.pod_rt, uid):
            i = _ordinal(name, p["metadata"]["name"])
            if i is not None:
                by_ordinal[i] = p
        if not is_terminating(sts):
            self._scale_up(sts, rev, replicas, parallel, by_ordinal)
            self._scale_down(sts, replicas, parallel, by_ordinal)
            self._roll(sts, rev, replicas, by_ordinal)
        self._update_status(sts, rev, replicas, by_ordinal)

    def _scale_up(
        self, sts: Obj, rev: str, replicas: int, parallel: bool, by_ordinal: dict[int, Obj]
    ) -> None:
        ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        for i in range(replicas):
            pod = by_ordinal.get(i)
            if (
                pod is not None
                and (pod.get("status") or {}).get("phase") == "Failed"
                and not is_terminating(pod)
            ):
                delete_quietly(self.store, self.pod_rt, ns, pod["metadata"]["name"])
                pod = self.store.find(self.pod_rt, ns, pod["metadata"]["name"])
            if pod is None:
                existing = self.store.find(self.pod_rt, ns, f"{name}-{i}")
                if existing is not None and controller_uid(existing) != sts["metadata"]["uid"]:
                    # Someone else's pod (or a predecessor's, terminating) holds the name: wait for it.
                    if not parallel:
                        return
                    continue
                by_ordinal[i] = pod = self._create(sts, rev, i)
            if not parallel and not _running_ready(pod):
                return

    def _scale_down(self, sts: Obj, replicas: int, parallel: bool, by_ordinal: dict[int, Obj]) -> None:
        ns = sts["metadata"]["namespace"]
        extra = sorted((i for i in by_ordinal if i >= replicas), reverse=True)
        if not extra:
            return
        if parallel:
            for i in extra:
                if not is_terminating(by_ordinal[i]):
                    delete_quietly(self.store, self.pod_rt, ns, by_ordinal[i]["metadata"]["name"])
            return
        if any(is_terminating(by_ordinal[i]) for i in extra):
            return  # one at a time: wait for the previous one to be gone
        if not all(_running_ready(by_ordinal[i]) for i in by_ordinal if i < extra[0]):
            return
        delete_quietly(self.store, self.pod_rt, ns, by_ordinal[extra[0]]["metadata"]["name"])

    def _roll(self, sts: Obj, rev: str, replicas: int, by_ordinal: dict[int, Obj]) -> None:
        strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        partition = int((strategy.get("rollingUpdate") or {}).get("partition", 0) or 0)
        current = [by_ordinal.get(i) for i in range(replicas)]
        if any(p is None or not _running_ready(p) for p in current):
            return
        for i in range(replicas - 1, partition - 1, -1):
            pod = by_ordinal[i]
            if (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) != rev:
                delete_quietly(self.store, self.pod_rt, sts["metadata"]["namespace"], pod["metadata"]["name"])
                return

    def _create(self, sts: Obj, rev: str, ordinal: int) -> Obj:
        spec = sts.get("spec") or {}
        name = f"{sts['metadata']['name']}-{ordinal}"
        pod = pod_from_template(sts, spec.get("template"))
        meta = pod["metadata"]
        meta["name"] = name
        meta["labels"].update({REVISION_LABEL: rev, POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal)})
        pod["spec"]["hostname"] = name
        if spec.get("serviceName"):
            pod["spec"]["subdomain"] = spec["serviceName"]
        return create_generated(self.store, self.pod_rt, pod, attempts=1)

    def _update_status(self, sts: Obj, rev: str, replicas: int, by_ordinal: dict[int, Obj]) -> None:
        spec = sts.get("spec") or {}
        min_ready = int(spec.get("minReadySeconds", 0))
        now = self.store.clock()
        count = ready = available = updated = 0
        recheck: float | None = None
        for p in by_ordinal.values():
            if is_terminating(p):
                continue
            count += 1
            if (p["metadata"].get("labels") or {}).get(REVISION_LABEL) == rev:
                updated += 1
            left = available_in(p, min_ready, now)
            if left is None:
                continue
            ready += 1
            if left <= 0:
                available += 1
            else:
                recheck = left if recheck is None else min(recheck, left)
        status = sts.get("status") or {}
        current_rev = str(status.get("currentRevision") or rev)
        if updated == count == replicas:
            current_rev = rev
        current = sum(
            1
            for p in by_ordinal.values()
            if not is_terminating(p)
            and (p["metadata"].get("labels") or {}).get(REVISION_LABEL) == current_rev
        )
        fields = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": count,
            "readyReplicas": ready,
            "availableReplicas": available,
            "currentReplicas": current,
            "updatedReplicas": updated,
            "currentRevision": current_rev,
            "updateRevision": rev,
            "collisionCount": int(status.get("collisionCount", 0) or 0),
        }
        write_status(self.store, self.sts_rt, sts, fields)
        if recheck is not None:
            self.queue.add_after((sts["metadata"]["namespace"], sts["metadata"]["name"]), recheck + 0.01)
