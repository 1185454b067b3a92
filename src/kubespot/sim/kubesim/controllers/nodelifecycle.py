"""Node lifecycle: node health from heartbeats and taint-based eviction.

Two kube-controller-manager loops that act on nodes, in one controller:

- **Node monitor** (upstream's node lifecycle controller). A node is healthy while its kubelet renews
  its Lease in ``kube-node-lease`` or posts status. After ``node_monitor_grace_seconds`` (upstream's
  ``--node-monitor-grace-period``, 50 s since 1.32) without either, its Ready, MemoryPressure,
  DiskPressure and PIDPressure conditions become ``Unknown`` with reason ``NodeStatusUnknown`` and
  message "Kubelet stopped posting node status.", ``lastHeartbeatTime`` is left as it was (one the
  kubelet never posted is added ``Unknown`` with reason ``NodeStatusNeverUpdated``), and the
  node's pods are marked Ready False (upstream's ``MarkPodsNotReady``). The controller owns the
  NoSchedule taints of conditions and cordon (``nodetaints.py``: not-ready, unreachable, the
  pressure taints, ``node.kubernetes.io/unschedulable`` while ``spec.unschedulable``), kept in step
  on every node change, and the NoExecute not-ready/unreachable taints of taint-based eviction,
  added through each zone's rate-limited queue (``zonedisruption.py``: ``--node-eviction-rate``,
  slower or stopped in a disrupted zone, stopped and undone when every zone is fully disrupted) and
  removed at once when the node is Ready again. Every taint added carries ``timeAdded``.
- **Taint eviction** (upstream's NoExecuteTaintManager). A pod on a node with NoExecute taints it does
  not tolerate is deleted (gracefully, with a ``DisruptionTarget`` condition, reason
  ``DeletionByTaintManager``, as upstream since 1.26). If every taint is tolerated, the smallest
  ``tolerationSeconds`` among the tolerations used (the first matching one per taint) delays the
  eviction, counted from when the controller first saw the pod tainted; tolerations without
  ``tolerationSeconds`` tolerate for ever. Removing the taints cancels pending evictions. Pods that
  lack a NoExecute toleration for not-ready/unreachable are treated as carrying one for 300 s, the
  toleration upstream's DefaultTolerationSeconds admission plugin adds to every pod.

Pods of deleted nodes and terminating pods on out-of-service nodes are PodGC's (``podgc.py``).

All store writes happen in the worker task or timer callbacks; ``on_event`` only notes work.
"""

from __future__ import annotations

import asyncio
import logging

from .. import errors
from ..store import NODE_KEY, POD_KEY, Obj, ObjKey, Store, WatchEvent, rfc3339
from . import Controller, ControllerConfig
from .kubelet import LEASE_NAMESPACE, set_condition
from .nodetaints import NO_EXECUTE, NO_EXECUTE_KEYS, has_taint, no_schedule_diff, swap_taints
from .scheduler import NOT_READY_TAINT_KEY, TERMINAL_PHASES, UNREACHABLE_TAINT_KEY, ready_status, tolerates
from .zonedisruption import Rates, Zones, excluded_from_disruption_checks, zone_key

log = logging.getLogger("kubespot.sim.kubesim.nodelifecycle")

#: What upstream's DefaultTolerationSeconds admission plugin gives pods for not-ready/unreachable.
DEFAULT_TOLERATION_SECONDS = 300
NODE_STATUS_UNKNOWN_MESSAGE = "Kubelet stopped posting node status."
NODE_STATUS_NEVER_UPDATED_MESSAGE = "Kubelet never posted node status."
_LEASE_KEY = ("coordination.k8s.io", "leases")
_MANAGED_TAINTS = (NOT_READY_TAINT_KEY, UNREACHABLE_TAINT_KEY)
#: Upstream's ``scheduler.NodeEvictionPeriod``: how often the zones' NoExecute queues are drained.
NODE_EVICTION_PERIOD = 0.1
_NODE_CONDITION_TYPES = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")


def _noexec_taints(node: Obj) -> list[Obj]:
    return [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"]


def _heartbeat(node: Obj | None) -> str | None:
    for c in ((node or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("lastHeartbeatTime"))
    return None


def effective_tolerations(spec: Obj) -> list[Obj]:
    """The pod's tolerations plus those DefaultTolerationSeconds admission would have added."""
    tolerations = list(spec.get("tolerations") or [])
    for key in _MANAGED_TAINTS:
        has = any(
            (t.get("key") in (key, "", None)) and (t.get("effect") in ("NoExecute", "", None))
            for t in tolerations
        )
        if not has:
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )
    return tolerations


def toleration_time(taints: list[Obj], tolerations: list[Obj]) -> float | None:
    """Seconds until eviction: 0 for an untolerated taint, None for "tolerated for ever".

    Upstream's ``getMinTolerationTime`` over the first toleration matching each taint.
    """
    least: float | None = None
    for taint in taints:
        used = next((t for t in tolerations if tolerates(t, taint)), None)
        if used is None:
            return 0.0
        seconds = used.get("tolerationSeconds")
        if seconds is None:
            continue
        value = max(0.0, float(seconds))
        least = value if least is None else min(least, value)
    return least


class NodeLifecycleController(Controller):
    """See the module docstring."""

    name = "nodelifecycle"
    watches = (POD_KEY, NODE_KEY, _LEASE_KEY)

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.pod_rt = self.rt("", "v1", "pods")
        self.node_rt = self.rt("", "v1", "nodes")
        self._last_seen: dict[str, float] = {}  # node -> loop time of its latest heartbeat
        self._noexec: dict[str, list[Obj]] = {}
        self._dirty_nodes: set[str] = set()
        self._dirty_pods: set[ObjKey] = set()
        self._evictions: dict[ObjKey, asyncio.TimerHandle] = {}
        self._wake = asyncio.Event()
        self.zones = Zones(
            Rates(
                normal=config.node_eviction_rate,
                secondary=config.secondary_node_eviction_rate,
                large_cluster=config.large_cluster_size_threshold,
                unhealthy_threshold=config.unhealthy_zone_threshold,
            )
        )
        #: Counters for tests and benchmarks.
        self.taint_evictions = 0

    def start(self) -> None:
        super().start()
        now = asyncio.get_running_loop().time()
        for node in self.store.iter_objects(self.node_rt):
            name = node["metadata"]["name"]
            # Upstream gives every node a full grace period from the controller's start.
            self._last_seen[name] = now
            self._note_node(name, node, force=True)
        self.spawn(self._worker())
        self.spawn(self._monitor())
        self.spawn(self._no_execute_tainting())

    async def stop(self) -> None:
        for handle in self._evictions.values():
            handle.cancel()
        self._evictions.clear()
        await super().stop()

    # -- events ----------------------------------------------------------------------------------

    def on_event(self, ev: WatchEvent) -> None:
        if ev.rkey == POD_KEY:
            self._on_pod(ev)
        elif ev.rkey == NODE_KEY:
            name = ev.obj["metadata"]["name"]
            if ev.type == "DELETED":
                self._last_seen.pop(name, None)
                self._noexec.pop(name, None)
                return
            if ev.type == "ADDED" or _heartbeat(ev.old) != _heartbeat(ev.obj):
                self._last_seen[name] = asyncio.get_running_loop().time()
            force = ev.type == "ADDED" or ready_status(ev.old or {}) != ready_status(ev.obj)
            self._note_node(name, ev.obj, force=force)
        elif ev.rkey == _LEASE_KEY and ev.type != "DELETED":
            meta = ev.obj["metadata"]
            name = meta["name"]
            if meta.get("namespace") != LEASE_NAMESPACE or name not in self._last_seen:
                return
            renew = (ev.obj.get("spec") or {}).get("renewTime")
            if ev.old is None or renew != (ev.old.get("spec") or {}).get("renewTime"):
                self._last_seen[name] = asyncio.get_running_loop().time()

    def _note_node(self, name: str, node: Obj, *, force: bool) -> None:
        noexec = _noexec_taints(node)
        changed = noexec != self._noexec.get(name, [])
        if noexec:
            self._noexec[name] = noexec
        else:
            self._noexec.pop(name, None)
        add, remove = no_schedule_diff(node)
        if force or changed or add or remove:
            self._dirty_nodes.add(name)
            self._wake.set()

    def _on_pod(self, ev: WatchEvent) -> None:
        meta = ev.obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if ev.type == "DELETED":
            handle = self._evictions.pop(key, None)
            if handle is not None:
                handle.cancel()
            return
        node = (ev.obj.get("spec") or {}).get("nodeName")
        if not node:
            return
        if node in self._noexec:
            old_spec = (ev.old or {}).get("spec") or {}
            if (
                ev.old is None
                or old_spec.get("nodeName") != node
                or old_spec.get("tolerations") != (ev.obj.get("spec") or {}).get("tolerations")
            ):
                self._dirty_pods.add(key)
                self._wake.set()

    # -- work ------------------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._work()
            except Exception:
                log.exception("nodelifecycle: work failed")

    async def _work(self) -> None:
        pacer = self.pacer
        started = pacer.clock()
        try:
            nodes, self._dirty_nodes = self._dirty_nodes, set()
            for name in sorted(nodes):
                if pacer.due(started):
                    started = await pacer.pause(started)
                self._process_node(name)
            pods, self._dirty_pods = self._dirty_pods, set()
            for key in sorted(pods):
                if pacer.due(started):
                    started = await pacer.pause(started)
                pod = self.store.find(self.pod_rt, key[0], key[1])
                if pod is not None:
                    self._process_pod(key, pod)
        finally:
            pacer.charge(started)

    def _process_node(self, name: str) -> None:
        node = self.store.find(self.node_rt, None, name)
        if node is None:
            return
        self._no_schedule_tainting(node)
        self._taint_based_eviction(node)
        if name in self._noexec or self._evictions:
            for pod in self.store.pods_on_node(name):
                meta = pod["metadata"]
                self._process_pod((meta.get("namespace", ""), meta["name"]), pod)

    def _process_pod(self, key: ObjKey, pod: Obj) -> None:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName") or ""
        if pod["metadata"].get("deletionTimestamp"):
            self._cancel(key)
            return
        taints = self._noexec.get(node)
        if not taints or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            self._cancel(key)
            return
        seconds = toleration_time(taints, effective_tolerations(spec))
        if seconds is None:
            self._cancel(key)
        elif seconds <= 0:
            self._cancel(key)
            self._evict(key)
        elif key not in self._evictions:
            loop = asyncio.get_running_loop()
            self._evictions[key] = loop.call_later(seconds, self._evict, key)

    def _cancel(self, key: ObjKey) -> None:
        handle = self._evictions.pop(key, None)
        if handle is not None:
            handle.cancel()

    def _evict(self, key: ObjKey) -> None:
        self._evictions.pop(key, None)
        pod = self.store.find(self.pod_rt, key[0], key[1])
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        if not self._noexec.get((pod.get("spec") or {}).get("nodeName") or ""):
            return
        now = rfc3339(self.store.clock())

        def disruption(o: Obj) -> None:
            conds = o.setdefault("status", {}).setdefault("conditions", [])
            set_condition(
                conds,
                "DisruptionTarget",
                "True",
                now,
                "DeletionByTaintManager",
                "Taint manager: deleting due to NoExecute taint",
            )

        try:
            self.store.mutate(self.pod_rt, key[0], key[1], disruption)
            self.store.delete(self.pod_rt, key[0], key[1])
            self.taint_evictions += 1
        except errors.ApiError as exc:
            log.debug("nodelifecycle: eviction of %s/%s failed: %s", key[0], key[1], exc.message)

    def _no_schedule_tainting(self, node: Obj) -> None:
        """Upstream's ``doNoScheduleTaintingPass``: condition and cordon taints, NoSchedule."""
        add, remove = no_schedule_diff(node)
        if add or remove:
            self._swap(node["metadata"]["name"], add, remove)

    def _swap(self, name: str, add: set[tuple[str, str]], remove: set[tuple[str, str]]) -> None:
        now = rfc3339(self.store.clock())

        def swap(o: Obj) -> None:
            swap_taints(o, add, remove, now)

        try:
            self.store.mutate(self.node_rt, None, name, swap)
        except errors.ApiError as exc:
            log.debug("nodelifecycle: tainting %s failed: %s", name, exc.message)

    def _taint_based_eviction(self, node: Obj) -> None:
        """Upstream's ``processTaintBaseEviction``: queue a not-Ready node for its NoExecute taint (the
        zone's rate applies), swap not-ready/unreachable at once, untaint a Ready node at once."""
        name = node["metadata"]["name"]
        status = ready_status(node)
        tainter = self.zones.tainter(zone_key(node))
        if status == "True":
            self._mark_reachable(node)
            return
        if status not in ("False", "Unknown"):
            return
        key, opposite = (
            (NOT_READY_TAINT_KEY, UNREACHABLE_TAINT_KEY)
            if status == "False"
            else (UNREACHABLE_TAINT_KEY, NOT_READY_TAINT_KEY)
        )
        if has_taint(node, key, NO_EXECUTE):
            return
        if has_taint(node, opposite, NO_EXECUTE):
            self._swap(name, {(key, NO_EXECUTE)}, {(opposite, NO_EXECUTE)})
        else:
            tainter.add(name)

    def _mark_reachable(self, node: Obj) -> None:
        """Upstream's ``markNodeAsReachable``: no NoExecute condition taint, nothing queued."""
        name = node["metadata"]["name"]
        self.zones.tainter(zone_key(node)).remove(name)
        present = {(k, NO_EXECUTE) for k in NO_EXECUTE_KEYS if has_taint(node, k, NO_EXECUTE)}
        if present:
            self._swap(name, set(), present)

    async def _no_execute_tainting(self) -> None:
        """Upstream's ``doNoExecuteTaintingPass``: every zone's queue, at the zone's rate."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(NODE_EVICTION_PERIOD)
            now = loop.time()
            for tainter in list(self.zones.tainters.values()):
                if tainter.queue:
                    tainter.try_(now, self._taint_no_execute)

    def _taint_no_execute(self, name: str) -> bool:
        node = self.store.find(self.node_rt, None, name)
        if node is None:
            return True
        status = ready_status(node)
        if status is None:
            return False  # retried
        if status == "False":
            self._swap(name, {(NOT_READY_TAINT_KEY, NO_EXECUTE)}, {(UNREACHABLE_TAINT_KEY, NO_EXECUTE)})
        elif status == "Unknown":
            self._swap(name, {(UNREACHABLE_TAINT_KEY, NO_EXECUTE)}, {(NOT_READY_TAINT_KEY, NO_EXECUTE)})
        return True  # Ready again: nothing to taint

    # -- node monitor ----------------------------------------------------------------------------

    async def _monitor(self) -> None:
        grace = self.config.node_monitor_grace_seconds
        # Upstream checks every --node-monitor-period (5 s); short test graces need a faster look.
        period = min(5.0, max(0.05, grace / 4))
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(period)
            now = loop.time()
            stale = [name for name, seen in self._last_seen.items() if now - seen > grace]
            for name in stale:
                try:
                    self._mark_unknown(name)
                except Exception:
                    log.exception("nodelifecycle: marking %s unknown failed", name)
            try:
                self._handle_disruption(now)
            except Exception:
                log.exception("nodelifecycle: zone disruption pass failed")

    def _handle_disruption(self, now: float) -> None:
        """Upstream's ``handleDisruption`` after each monitor pass (see ``zonedisruption.py``)."""
        counts: dict[str, tuple[int, int]] = {}
        uncounted: set[str] = set()
        nodes = list(self.store.iter_objects(self.node_rt))
        for node in nodes:
            zone = zone_key(node)
            if excluded_from_disruption_checks(node):
                uncounted.add(zone)
                continue
            ready, not_ready = counts.get(zone, (0, 0))
            if ready_status(node) == "True":
                counts[zone] = (ready + 1, not_ready)
            else:
                counts[zone] = (ready, not_ready + 1)
        change = self.zones.handle(counts, now, uncounted)
        if change == "enter":
            log.info("nodelifecycle: every zone fully disrupted; NoExecute tainting stopped")
            for node in nodes:
                self._mark_reachable(node)
        elif change == "exit":
            # Upstream restarts every node's grace period when it leaves this mode.
            for name in self._last_seen:
                self._last_seen[name] = now

    def _mark_unknown(self, name: str) -> None:
        node = self.store.find(self.node_rt, None, name)
        if node is None:
            self._last_seen.pop(name, None)
            return
        if ready_status(node) == "Unknown":
            return
        now = rfc3339(self.store.clock())

        def unknown(o: Obj) -> None:
            # tryUpdateNodeHealth: each condition the kubelet never posted is added Unknown with
            # NodeStatusNeverUpdated (its heartbeat the node's creation); the others turn Unknown
            # with their heartbeat left as the kubelet's last one.
            conds = o.setdefault("status", {}).setdefault("conditions", [])
            for type_ in _NODE_CONDITION_TYPES:
                current = next((c for c in conds if c.get("type") == type_), None)
                if current is None:
                    conds.append(
                        {
                            "type": type_,
                            "status": "Unknown",
                            "lastHeartbeatTime": o["metadata"].get("creationTimestamp"),
                            "lastTransitionTime": now,
                            "reason": "NodeStatusNeverUpdated",
                            "message": NODE_STATUS_NEVER_UPDATED_MESSAGE,
                        }
                    )
                elif current.get("status") != "Unknown":
                    current.update(
                        status="Unknown",
                        reason="NodeStatusUnknown",
                        message=NODE_STATUS_UNKNOWN_MESSAGE,
                        lastTransitionTime=now,
                    )

        self.store.mutate(self.node_rt, None, name, unknown)
        log.info("nodelifecycle: node %s stopped posting status; Ready Unknown", name)
        for pod in self.store.pods_on_node(name):
            self._mark_pod_not_ready(pod, now)

    def _mark_pod_not_ready(self, pod: Obj, now: str) -> None:
        if not any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (pod.get("status") or {}).get("conditions") or []
        ):
            return
        meta = pod["metadata"]

        def not_ready(o: Obj) -> None:
            set_condition(o.setdefault("status", {}).setdefault("conditions", []), "Ready", "False", now)

        try:
            self.store.mutate(self.pod_rt, meta.get("namespace"), meta["name"], not_ready)
        except errors.ApiError as exc:
            log.debug("nodelifecycle: marking %s not ready failed: %s", meta["name"], exc.message)
