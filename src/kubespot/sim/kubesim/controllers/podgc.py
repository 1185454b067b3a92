"""Pod garbage collection: kube-controller-manager's PodGC, on its periodic sweep.

Upstream (pkg/controller/podgc/gc_controller.go) runs one sweep every ``gcCheckPeriod`` (20 s;
``ControllerConfig.pod_gc_check_seconds``) with four passes, all of which mark a pod that is not yet
terminal ``Failed`` (a status write) and then delete it with grace 0:

- **terminated** (``gcTerminated``): once more than ``--terminated-pod-gc-threshold`` pods (12 500;
  ``terminated_pod_gc_threshold``, 0 turns the pass off) are Succeeded or Failed, the excess is
  deleted, evicted pods first, then the oldest (creation time, then name).
- **terminating out of service** (``gcTerminating``): pods being deleted on a node that is not Ready
  and carries the ``node.kubernetes.io/out-of-service`` taint (the node is known to be shut down, so
  no kubelet will confirm).
- **orphaned** (``gcOrphaned``): pods bound to a node that does not exist. The node is put in
  quarantine for ``quarantineTime`` (40 s; ``pod_gc_quarantine_seconds``) from the first sweep that
  saw it missing, in case it is only late to appear; a sweep after the quarantine checks through the
  API that it is still gone, then marks its pods Failed with the ``DisruptionTarget`` condition
  (reason ``DeletionByPodGC``, message "PodGC: node no longer exists") and force-deletes them. So a
  deleted node's pods go 40-60 s after the node (up to 80 s when the deletion just missed a sweep).
- **unscheduled terminating** (``gcUnscheduledTerminating``): pods being deleted that were never bound
  to a node (only a finalizer can keep such a pod).

Which pods each pass looks at is kept from store events (``on_event`` only notes), so a sweep costs
the candidates, not the cluster.
"""

from __future__ import annotations

import asyncio
import logging

from .. import errors
from ..store import NODE_KEY, POD_KEY, Obj, ObjKey, Store, WatchEvent, rfc3339
from . import Controller, ControllerConfig
from .kubelet import set_condition
from .scheduler import TERMINAL_PHASES, ready_status

log = logging.getLogger("kubespot.sim.kubesim.podgc")

OUT_OF_SERVICE_TAINT_KEY = "node.kubernetes.io/out-of-service"
ORPHAN_REASON = "DeletionByPodGC"
ORPHAN_MESSAGE = "PodGC: node no longer exists"


def _key(pod: Obj) -> ObjKey:
    meta = pod["metadata"]
    return (meta.get("namespace", ""), meta["name"])


def _out_of_service(node: Obj) -> bool:
    """Upstream's test: not Ready (False or Unknown) and tainted out-of-service (any effect)."""
    return ready_status(node) != "True" and any(
        t.get("key") == OUT_OF_SERVICE_TAINT_KEY for t in (node.get("spec") or {}).get("taints") or []
    )


def _gc_order(pod: Obj) -> tuple[bool, str, str]:
    """Upstream's ``byEvictionAndCreationTimestamp``: evicted pods first, then oldest, then by name."""
    evicted = (pod.get("status") or {}).get("reason") == "Evicted"
    meta = pod["metadata"]
    return (not evicted, str(meta.get("creationTimestamp") or ""), str(meta["name"]))


class PodGCController(Controller):
    """See the module docstring."""

    name = "podgc"
    watches = (POD_KEY, NODE_KEY)

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.pod_rt = self.rt("", "v1", "pods")
        self.node_rt = self.rt("", "v1", "nodes")
        self._nodes: set[str] = set()  # the node informer's view
        self._out_of_service: set[str] = set()
        #: Node names some pod was bound to while they did not exist: looked at by the next sweep.
        self._missing: set[str] = set()
        #: Missing node -> loop time its quarantine ends (upstream's delaying queue keeps the earliest).
        self._quarantine: dict[str, float] = {}
        self._terminated: set[ObjKey] = set()
        self._unscheduled_terminating: set[ObjKey] = set()
        #: Counters for tests and benchmarks: pods deleted, per pass.
        self.deleted = {"terminated": 0, "out-of-service": 0, "orphaned": 0, "unscheduled": 0}

    def start(self) -> None:
        super().start()
        for node in self.store.iter_objects(self.node_rt):
            self._note_node(node)
        for pod in self.store.iter_objects(self.pod_rt):
            self._note_pod(pod)
        self.spawn(self._run())

    # -- events (note only) ----------------------------------------------------------------------

    def on_event(self, ev: WatchEvent) -> None:
        if ev.rkey == NODE_KEY:
            name = ev.obj["metadata"]["name"]
            if ev.type == "DELETED":
                self._nodes.discard(name)
                self._out_of_service.discard(name)
                self._missing.add(name)
            else:
                self._note_node(ev.obj)
        elif ev.type == "DELETED":
            key = _key(ev.obj)
            self._terminated.discard(key)
            self._unscheduled_terminating.discard(key)
        else:
            self._note_pod(ev.obj)

    def _note_node(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        self._nodes.add(name)
        if _out_of_service(node):
            self._out_of_service.add(name)
        else:
            self._out_of_service.discard(name)

    def _note_pod(self, pod: Obj) -> None:
        key = _key(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            self._terminated.add(key)
        else:
            self._terminated.discard(key)
        if pod["metadata"].get("deletionTimestamp") and not node:
            self._unscheduled_terminating.add(key)
        else:
            self._unscheduled_terminating.discard(key)
        if node and node not in self._nodes:
            self._missing.add(node)

    # -- the sweep -------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.config.pod_gc_check_seconds)
            try:
                await self.sweep()
            except Exception:
                log.exception("podgc: sweep failed")

    async def sweep(self) -> None:
        """One ``gc`` run: the four passes in upstream's order."""
        pacer = self.pacer
        started = pacer.clock()
        try:
            doomed: list[tuple[Obj, str, bool]] = []  # (pod, pass, with the orphan condition)
            if self.config.terminated_pod_gc_threshold > 0:
                doomed += [(p, "terminated", False) for p in self._excess_terminated()]
            for node in sorted(self._out_of_service):
                doomed += [
                    (p, "out-of-service", False)
                    for p in sorted(self.store.pods_on_node(node), key=_gc_order)
                    if p["metadata"].get("deletionTimestamp")
                ]
            doomed += [(p, "orphaned", True) for p in self._orphans()]
            for key in sorted(self._unscheduled_terminating):
                pod = self.store.find(self.pod_rt, key[0], key[1])
                if pod is not None:
                    doomed.append((pod, "unscheduled", False))
            for pod, kind, orphan in doomed:
                if pacer.due(started):
                    started = await pacer.pause(started)
                if self._mark_failed_and_delete(pod, orphan=orphan):
                    self.deleted[kind] += 1
        finally:
            pacer.charge(started)

    def _excess_terminated(self) -> list[Obj]:
        excess = len(self._terminated) - self.config.terminated_pod_gc_threshold
        if excess <= 0:
            return []
        pods = [p for k in self._terminated if (p := self.store.find(self.pod_rt, k[0], k[1])) is not None]
        return sorted(pods, key=_gc_order)[:excess]

    def _orphans(self) -> list[Obj]:
        now = asyncio.get_running_loop().time()
        missing, self._missing = self._missing, set()
        for node in missing:
            if node not in self._nodes and self.store.pods_on_node(node):
                self._quarantine.setdefault(node, now + self.config.pod_gc_quarantine_seconds)
        out: list[Obj] = []
        for node, until in sorted(self._quarantine.items()):
            if until > now:
                continue
            del self._quarantine[node]
            # Upstream GETs the node from the API server, not its informer, before deleting.
            if node in self._nodes or self.store.find(self.node_rt, None, node) is not None:
                continue
            out += sorted(self.store.pods_on_node(node), key=_gc_order)
        return out

    def _mark_failed_and_delete(self, pod: Obj, *, orphan: bool) -> bool:
        """Upstream's ``markFailedAndDeletePodWithCondition``: Failed first (no kubelet may ever
        write a terminal phase), then a grace-0 delete. Returns whether the pod was deleted."""
        meta = pod["metadata"]
        ns, name = meta.get("namespace"), meta["name"]
        try:
            if (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:
                now = rfc3339(self.store.clock())

                def failed(o: Obj) -> None:
                    st = o.setdefault("status", {})
                    st["phase"] = "Failed"
                    if orphan:
                        set_condition(
                            st.setdefault("conditions", []),
                            "DisruptionTarget",
                            "True",
                            now,
                            ORPHAN_REASON,
                            ORPHAN_MESSAGE,
                        )

                self.store.mutate(self.pod_rt, ns, name, failed, status_only=True)
            self.store.delete(self.pod_rt, ns, name, grace_period_seconds=0)
        except errors.ApiError as exc:
            log.debug("podgc: deleting %s/%s failed: %s", ns, name, exc.message)
            return False
        return True
