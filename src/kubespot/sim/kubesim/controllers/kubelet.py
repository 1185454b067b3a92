"""Simulated kubelets: pod start, graceful termination, node Ready and lease heartbeat.

One controller plays the kubelet of every Node. All of its work is driven by one timer heap served by
one task, so 5 000 nodes and 100 000 pods cost heap entries, not tasks: store events only push
entries (``on_event`` must not write), and due entries are processed in batches.

What each simulated kubelet does, and the upstream behaviour it follows:

- **Pod start.** A pod bound to this node (``spec.nodeName``) and still ``Pending`` runs after its
  start delay (annotation ``conventions.START_SECONDS``, else ``ControllerConfig.pod_start_seconds``):
  phase ``Running``, ``startTime``, a unique ``podIP`` (the host's IP for ``hostNetwork`` pods),
  ``hostIP``, the conditions PodReadyToStartContainers/Initialized/ContainersReady/Ready/PodScheduled
  True and running, ready container statuses sorted by name, as the kubelet's status manager writes.
  A pod bound to a node that does not exist or whose kubelet is stopped stays ``Pending``.
- **Graceful termination.** When a pod gets ``metadata.deletionTimestamp`` the kubelet kills its
  containers as ``termination.plan`` says (upstream ``killContainer``): each runs its preStop hook
  (a declared duration), then gets SIGTERM, and SIGKILL once what is left of the grace period (at
  least 2 s) has passed. A container that handles SIGTERM exits 0 after ``min(shutdown, window)``
  (annotation ``conventions.SHUTDOWN_SECONDS``, default ``DEFAULT_SHUTDOWN_SECONDS``); one without
  a handler (annotation ``conventions.SIGTERM``) exits 143 at once or, as a PID 1, 137 at SIGKILL;
  a SIGKILLed one exits 137 (reason Error). Since Kubernetes 1.27 the kubelet moves a deleted pod
  to a terminal phase (Succeeded when every container exited 0, else Failed, whatever the
  restartPolicy: ``getPhase`` with ``podIsTerminal``) with Ready False before it confirms the
  deletion with a grace-0 delete; kubesim writes that status once the last container exited, then
  deletes. A later delete that shortens the grace period moves the deadline earlier, never later
  (upstream's kubelet restarts ``killPod`` with the shorter grace). A pod whose containers never
  started is removed at once. Pods on a stopped kubelet are not terminated: they stay Terminating,
  as on a real vanished instance, until the node is deleted or the pod force-deleted.
- **Heartbeat.** Every node gets a ``coordination.k8s.io/v1`` Lease in ``kube-node-lease``
  (holderIdentity = node name, leaseDurationSeconds 40, owned by the Node) renewed every
  ``lease_renew_seconds``, and its Ready/MemoryPressure/DiskPressure/PIDPressure conditions posted with
  a fresh ``lastHeartbeatTime`` every ``node_status_seconds``. Each node keeps a fixed phase inside
  the period (derived from its name) so thousands of nodes do not renew in the same tick.
- **Registration.** A Node created through the API after start-up is a kubelet that has just
  registered: its first status (at once) fills in addresses, capacity, allocatable and nodeInfo where
  missing and reports Ready False (``KubeletNotReady``: the CNI plugin is not initialized yet), whatever
  Ready condition the Node was created with, as a real kubelet overwrites the conditions it owns; after
  ``ControllerConfig.node_ready_seconds`` (or the Node's annotation ``conventions.READY_SECONDS``) it
  posts Ready True. (The API server's TaintNodesByCondition
  admission gave the Node ``node.kubernetes.io/not-ready:NoSchedule``; the node lifecycle controller
  removes it once Ready.) Nodes loaded at start-up are an already-running cluster and stay Ready. A
  Node annotated ``conventions.CLOUD_PROVIDER_ANNOTATION: external`` registers as with
  ``--cloud-provider=external``: its registration write adds the
  ``node.cloudprovider.kubernetes.io/uninitialized`` taint (``initialNode``) for ``cloudnode.py``.
- **Cordon** (``spec.unschedulable``) does not affect the kubelet: its pods keep running.

To simulate an instance that vanished, call :meth:`KubeletController.stop_node`: its heartbeats stop
and it neither starts nor terminates pods; ``NodeLifecycleController`` then turns the node's Ready
condition ``Unknown`` after the node monitor grace period. :meth:`KubeletController.start_node`
brings it back: it posts status at once and, as the kubelet's status manager re-syncs, makes the
running pods the node lifecycle controller had marked not Ready, Ready again. In tests, find the
controller with :func:`kubelet_of`.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import itertools
import logging
import math
import uuid
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .. import conventions, errors
from ..store import NODE_KEY, POD_KEY, Obj, ObjKey, Store, WatchEvent, rfc3339
from . import Controller, ControllerConfig, ControllerManager, termination
from .cloudnode import UNINITIALIZED_TAINT, external_cloud, uninitialized

log = logging.getLogger("kubespot.sim.kubesim.kubelet")

LEASE_NAMESPACE = "kube-node-lease"
#: Upstream kubelet's lease duration (``nodeLeaseDurationSeconds``, default 40).
LEASE_DURATION_SECONDS = 40

_START, _KILL, _LEASE, _STATUS, _READY = 0, 1, 2, 3, 4
# Pod IPs come from 100.64.0.0/10 (the range EKS custom networking uses for pods); the generator
# takes node and pod IPs from 10.0.0.0/8, and IPs seen at start-up are skipped anyway.
_POD_IP_FIRST = (100 << 24) | (64 << 16) | 2
_POD_IP_LAST = (100 << 24) | (127 << 16) | (255 << 8) | 254
_NODE_IP_FIRST = (172 << 24) | (16 << 16) | 10

#: What a kubelet reports while its container runtime's network (the CNI plugin) is not up yet.
NOT_READY_REASON = "KubeletNotReady"
NOT_READY_MESSAGE = (
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
    "message:Network plugin returns error: cni plugin not initialized"
)
_NODE_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)
# What a node registered through the API without status reports (a small general-purpose instance).
_DEFAULT_CAPACITY = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "20Gi"}


def micro_time(ts: float) -> str:
    """A ``MicroTime`` (Lease renewTime): RFC 3339 with microseconds."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def set_condition(
    conds: list[Obj],
    type_: str,
    status: str,
    now: str,
    reason: str | None = None,
    message: str | None = None,
    *,
    heartbeat: bool = False,
) -> bool:
    """Set one condition in place; ``lastTransitionTime`` changes only when the status does.

    Returns whether anything other than the heartbeat changed.
    """
    for c in conds:
        if c.get("type") == type_:
            break
    else:
        c = {"type": type_}
        conds.append(c)
    changed = c.get("status") != status or c.get("reason") != reason or c.get("message") != message
    if c.get("status") != status or "lastTransitionTime" not in c:
        c["lastTransitionTime"] = now
    c["status"] = status
    for k, v in (("reason", reason), ("message", message)):
        if v is None:
            c.pop(k, None)
        else:
            c[k] = v
    if heartbeat:
        c["lastHeartbeatTime"] = now
    else:
        c.setdefault("lastProbeTime", None)
    return changed


def internal_ip(node: Obj) -> str | None:
    for a in (node.get("status") or {}).get("addresses") or []:
        if a.get("type") == "InternalIP":
            return str(a.get("address"))
    return None


def _seconds(annotations: dict[str, Any] | None, key: str, default: float) -> float:
    raw = (annotations or {}).get(key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) and value >= 0 else default


def _ip_str(ip: int) -> str:
    return f"{ip >> 24}.{(ip >> 16) & 255}.{(ip >> 8) & 255}.{ip & 255}"


def _ip_int(text: str) -> int | None:
    parts = text.split(".")
    if len(parts) != 4:
        return None
    try:
        a, b, c, d = (int(p) for p in parts)
    except ValueError:
        return None
    return (a << 24) | (b << 16) | (c << 8) | d


@dataclass(slots=True)
class _Kill:
    """A terminating pod: the kill began at ``began`` (loop time) with ``grace`` seconds, and its
    containers exit as ``exits`` plans (none for a pod whose containers never started)."""

    began: float
    grace: int
    exits: list[termination.ContainerExit]
    started: bool

    @property
    def deadline(self) -> float:
        return self.began + max((e.exit_at for e in self.exits), default=0.0)


@dataclass(slots=True)
class _NodeState:
    phase: float  # fraction of each heartbeat period at which this node beats
    gen: int = 0  # bumped to invalidate queued heartbeat entries
    ready_at: float = 0.0  # loop time from which the node reports Ready (its runtime network is up)
    registering: bool = False  # its next status write is the registration (initialNode's taints)


class KubeletController(Controller):
    """Every node's kubelet, on one timer heap. See the module docstring."""

    name = "kubelet"
    watches = (POD_KEY, NODE_KEY)

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.pod_rt = self.rt("", "v1", "pods")
        self.node_rt = self.rt("", "v1", "nodes")
        self.lease_rt = self.rt("coordination.k8s.io", "v1", "leases")
        self._heap: list[tuple[float, int, int, Any, int]] = []
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._next_wake = math.inf
        self._nodes: dict[str, _NodeState] = {}
        self._stopped: set[str] = set()
        self._starting: dict[ObjKey, tuple[float, float]] = {}  # key -> (deadline, wall time noticed)
        self._killing: dict[ObjKey, _Kill] = {}
        self._parked: dict[str, set[ObjKey]] = {}  # node -> pods waiting for its kubelet
        self._ips_used: set[int] = set()
        self._next_pod_ip = _POD_IP_FIRST
        self._next_node_ip = _NODE_IP_FIRST

    # -- public API ------------------------------------------------------------------------------

    def stop_node(self, name: str) -> None:
        """Simulate the node's instance vanishing (spot reclaim, termination).

        Lease renewals and status heartbeats stop, and pods on the node are neither started nor
        terminated any more. The Node object stays; ``NodeLifecycleController`` marks it Ready
        ``Unknown`` (reason ``NodeStatusUnknown``) once the node monitor grace period passes without a
        heartbeat. Stopping a node that does not exist yet applies when it appears.
        """
        self._stopped.add(name)
        st = self._nodes.get(name)
        if st is not None:
            st.gen += 1

    def start_node(self, name: str) -> None:
        """Restart a stopped kubelet: it posts status and renews its lease at once, resumes pods and
        makes its running pods Ready again where the node lifecycle controller had marked them not."""
        if name not in self._stopped:
            return
        self._stopped.discard(name)
        st = self._nodes.get(name)
        if st is not None:
            st.gen += 1
            now = self._now()
            self._push(now, _STATUS, name, st.gen)
            self._push(now, _LEASE, name, st.gen)
            if st.ready_at > now:
                self._push(st.ready_at, _READY, name, st.gen)
            self._resume_parked(name)
            self._resync_readiness(name)

    def is_running(self, name: str) -> bool:
        """Whether ``name`` has a live kubelet (the node exists and is not stopped)."""
        return name in self._nodes and name not in self._stopped

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        super().start()
        for node in self.store.iter_objects(self.node_rt):
            self._add_node(node)
            ip = _ip_int(internal_ip(node) or "")
            if ip is not None:
                self._ips_used.add(ip)
        for pod in self.store.iter_objects(self.pod_rt):
            pod_ip = (pod.get("status") or {}).get("podIP")
            if isinstance(pod_ip, str) and pod_ip.startswith("100."):
                ip = _ip_int(pod_ip)
                if ip is not None:
                    self._ips_used.add(ip)
            self._consider(pod)
        self.spawn(self._run())

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _push(self, when: float, kind: int, key: Any, token: int = 0) -> None:
        heapq.heappush(self._heap, (when, next(self._seq), kind, key, token))
        if when < self._next_wake:
            self._wake.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        pacer = self.pacer
        while True:
            self._wake.clear()
            self._next_wake = -math.inf  # entries pushed while processing must not be missed
            now = loop.time()
            started = pacer.clock()
            # Due entries are processed until the pacer says to yield, so a burst of expiries does not
            # stall the API.
            while self._heap and self._heap[0][0] <= now:
                when, _seq, kind, key, token = heapq.heappop(self._heap)
                try:
                    self._fire(when, kind, key, token)
                except Exception:
                    log.exception("kubelet: timer %s for %s failed", kind, key)
                if pacer.due(started):
                    break
            if self._heap and self._heap[0][0] <= loop.time():
                await pacer.pause(started)
                continue
            pacer.charge(started)
            handle = None
            if self._heap:
                self._next_wake = self._heap[0][0]
                handle = loop.call_at(self._next_wake, self._wake.set)
            else:
                self._next_wake = math.inf
            try:
                await self._wake.wait()
            finally:
                if handle is not None:
                    handle.cancel()

    def _fire(self, when: float, kind: int, key: Any, token: int) -> None:
        if kind == _START:
            if self._starting.get(key, (None, 0.0))[0] == when:
                self._start_pod(key)
        elif kind == _KILL:
            k = self._killing.get(key)
            if k is not None and k.deadline <= when:
                self._kill_pod(key, k)
        else:
            st = self._nodes.get(key)
            if st is None or st.gen != token or key in self._stopped:
                return
            if kind == _READY:  # a status update out of turn: the status changed (network up)
                self._post_status(key)
                return
            period = self.config.lease_renew_seconds if kind == _LEASE else self.config.node_status_seconds
            now = self._now()
            nxt = when + period
            self._push(nxt if nxt > now else now + period, kind, key, token)
            if kind == _LEASE:
                self._renew_lease(key)
            else:
                self._post_status(key)

    # -- events ----------------------------------------------------------------------------------

    def on_event(self, ev: WatchEvent) -> None:
        if ev.rkey == POD_KEY:
            if ev.type == "DELETED":
                meta = ev.obj["metadata"]
                key = (meta.get("namespace", ""), meta["name"])
                self._starting.pop(key, None)
                self._killing.pop(key, None)
            else:
                self._consider(ev.obj)
        elif ev.rkey == NODE_KEY:
            name = ev.obj["metadata"]["name"]
            if ev.type == "DELETED":
                st = self._nodes.pop(name, None)
                if st is not None:
                    st.gen += 1
            elif name not in self._nodes:
                self._add_node(ev.obj, fresh=True)
                self._resume_parked(name)

    def _add_node(self, node: Obj, *, fresh: bool = False) -> None:
        """Start the kubelet of ``node``. ``fresh``: it has just registered (the Node was created after
        start-up), so it reports Ready False until its network is up (``node_ready_seconds``), whatever
        the Node was created with; nodes loaded at start-up are an already-running cluster."""
        name = node["metadata"]["name"]
        st = _NodeState(phase=zlib.crc32(name.encode()) / 2**32)
        self._nodes[name] = st
        if name in self._stopped:
            return
        now = self._now()
        if fresh:
            ready_after = self.config.node_ready_seconds
            ready_after = _seconds(
                node["metadata"].get("annotations"), conventions.READY_SECONDS, ready_after
            )
            st.ready_at = now + ready_after
            st.registering = True
            self._push(now, _STATUS, name, st.gen)
            self._push(st.ready_at, _READY, name, st.gen)
            self._push(now + st.phase * self.config.lease_renew_seconds, _LEASE, name, st.gen)
            return
        status = node.get("status") or {}
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        registered = ready and internal_ip(node) is not None and bool(status.get("allocatable"))
        self._push(
            now + (st.phase * self.config.node_status_seconds if registered else 0.0), _STATUS, name, st.gen
        )
        self._push(now + st.phase * self.config.lease_renew_seconds, _LEASE, name, st.gen)

    def _resume_parked(self, node: str) -> None:
        for ns, name in self._parked.pop(node, ()):
            pod = self.store.find(self.pod_rt, ns, name)
            if pod is not None:
                self._consider(pod)

    def _consider(self, pod: Obj) -> None:
        """Note what this pod needs from its kubelet (start or termination); never writes."""
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if not node:
            return
        meta = pod["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        phase = (pod.get("status") or {}).get("phase")
        if meta.get("deletionTimestamp"):
            self._starting.pop(key, None)
            self._note_kill(key, pod, phase)
        elif phase == "Pending" and key not in self._starting and key not in self._parked.get(node, ()):
            delay = _seconds(
                meta.get("annotations"), conventions.START_SECONDS, self.config.pod_start_seconds
            )
            when = self._now() + delay
            self._starting[key] = (when, self.store.clock())
            self._push(when, _START, key)

    def _note_kill(self, key: ObjKey, pod: Obj, phase: str | None) -> None:
        meta = pod["metadata"]
        now = self._now()
        grace = int(meta.get("deletionGracePeriodSeconds") or 0)
        k = self._killing.get(key)
        if k is None:
            started = phase == "Running"
            spec = pod.get("spec") or {}
            sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
            annotations = meta.get("annotations") or {}
            exits = (
                termination.plan(spec.get("containers") or [], annotations, grace, sidecars)
                if started
                else []
            )
            k = _Kill(began=now, grace=grace, exits=exits, started=started)
            self._killing[key] = k
            self._push(k.deadline, _KILL, key)
        elif grace < k.grace:
            before = k.deadline
            k.grace = grace
            k.exits = termination.shortened(k.exits, now - k.began, grace)
            if k.deadline < before:
                self._push(k.deadline, _KILL, key)

    def _resync_readiness(self, node: str) -> None:
        """The status manager's reconcile (pkg/kubelet/status/status_manager.go ``syncBatch`` /
        ``needsReconcile``): the API's pod status differs from the kubelet's, whose containers are
        still running and ready, so it writes its own back (Ready True)."""
        now = rfc3339(self.store.clock())
        for pod in self.store.pods_on_node(node):
            status = pod.get("status") or {}
            if pod["metadata"].get("deletionTimestamp") or status.get("phase") != "Running":
                continue
            statuses = status.get("containerStatuses") or []
            if not statuses or not all(cs.get("ready") for cs in statuses):
                continue
            if all(
                c.get("status") == "True"
                for c in status.get("conditions") or []
                if c.get("type") in ("Ready", "ContainersReady")
            ):
                continue

            def ready(o: Obj) -> None:
                conds = o.setdefault("status", {}).setdefault("conditions", [])
                for type_ in ("Ready", "ContainersReady"):
                    set_condition(conds, type_, "True", now)

            meta = pod["metadata"]
            try:
                self.store.mutate(self.pod_rt, meta.get("namespace"), meta["name"], ready, status_only=True)
            except errors.ApiError as exc:
                log.debug("kubelet %s: readiness resync of %s failed: %s", node, meta["name"], exc.message)

    def _park(self, node: str, key: ObjKey) -> None:
        self._parked.setdefault(node, set()).add(key)

    # -- pods ------------------------------------------------------------------------------------

    def _alloc_pod_ip(self) -> str:
        while True:
            ip = self._next_pod_ip
            self._next_pod_ip = ip + 1 if ip < _POD_IP_LAST else _POD_IP_FIRST
            if ip not in self._ips_used and ip & 255 not in (0, 255):
                return _ip_str(ip)

    def _start_pod(self, key: ObjKey) -> None:
        _deadline, noticed = self._starting.pop(key)
        pod = self.store.find(self.pod_rt, key[0], key[1])
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        spec = pod.get("spec") or {}
        node_name = spec.get("nodeName")
        if not node_name or (pod.get("status") or {}).get("phase") != "Pending":
            return
        node = self.store.find(self.node_rt, None, node_name)
        if node is None or not self.is_running(node_name):
            self._park(node_name, key)
            return
        host_ip = internal_ip(node) or ""
        pod_ip = host_ip if spec.get("hostNetwork") else self._alloc_pod_ip()
        now = rfc3339(self.store.clock())
        start_time = rfc3339(noticed)

        def run(o: Obj) -> None:
            st = o.setdefault("status", {})
            st["phase"] = "Running"
            st.setdefault("startTime", start_time)
            st["hostIP"] = host_ip
            st["hostIPs"] = [{"ip": host_ip}]
            st["podIP"] = pod_ip
            st["podIPs"] = [{"ip": pod_ip}]
            conds = st.setdefault("conditions", [])
            for type_ in (
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            ):
                set_condition(conds, type_, "True", now)
            o_spec = o.get("spec") or {}
            st["containerStatuses"] = [
                _container_status(c, {"running": {"startedAt": now}}, ready=True)
                for c in sorted(o_spec.get("containers") or [], key=lambda c: str(c.get("name", "")))
            ]
            inits = o_spec.get("initContainers") or []
            if inits:
                st["initContainerStatuses"] = [
                    _container_status(c, {"running": {"startedAt": now}}, ready=True)
                    if c.get("restartPolicy") == "Always"
                    else _container_status(
                        c,
                        {
                            "terminated": {
                                "exitCode": 0,
                                "reason": "Completed",
                                "startedAt": start_time,
                                "finishedAt": now,
                            }
                        },
                        ready=True,
                    )
                    for c in inits
                ]

        self.store.mutate(self.pod_rt, key[0], key[1], run, status_only=True)

    def _kill_pod(self, key: ObjKey, k: _Kill) -> None:
        pod = self.store.find(self.pod_rt, key[0], key[1])
        if pod is None:
            self._killing.pop(key, None)
            return
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        if not self.is_running(node_name):
            # No kubelet to confirm: the pod stays Terminating, as on a vanished instance.
            self._killing.pop(key, None)
            self._park(node_name, key)
            return
        try:
            self._confirm_kill(key, pod, k)
        finally:
            # Popped only now, so the events of the writes below do not look like a new deletion.
            self._killing.pop(key, None)

    def _confirm_kill(self, key: ObjKey, pod: Obj, k: _Kill) -> None:
        phase = (pod.get("status") or {}).get("phase")
        if k.started and phase not in ("Succeeded", "Failed"):
            wall = self.store.clock()
            now = rfc3339(wall)
            # Containers may have exited before the last one did: their finishedAt is in the past.
            ago = self._now() - k.began
            exits = {e.name: e for e in k.exits}

            def terminated(o: Obj) -> None:
                st = o.setdefault("status", {})
                names = []
                succeeded = True
                for field in ("containerStatuses", "initContainerStatuses"):
                    for cs in st.get(field) or []:
                        name = str(cs.get("name", ""))
                        e = exits.get(name)
                        if e is None and field == "initContainerStatuses":
                            continue  # an init container that ran to completion at start-up
                        code = e.exit_code if e is not None else 0
                        finished = rfc3339(wall - max(0.0, ago - e.exit_at)) if e is not None else now
                        running = (cs.get("state") or {}).get("running") or {}
                        cs["state"] = {
                            "terminated": {
                                "exitCode": code,
                                "reason": "Completed" if code == 0 else "Error",
                                "startedAt": running.get("startedAt", now),
                                "finishedAt": finished,
                                "containerID": cs.get("containerID", ""),
                            }
                        }
                        cs["ready"] = False
                        cs["started"] = False
                        if field == "containerStatuses":
                            # Sidecars' exits do not count for the phase (getPhase).
                            names.append(name)
                            succeeded = succeeded and code == 0
                # A deleted pod is terminal: kubelet_pods.go getPhase makes it Succeeded when every
                # container exited 0 and Failed otherwise, whatever its restartPolicy.
                st["phase"] = "Succeeded" if succeeded else "Failed"
                conds = st.setdefault("conditions", [])
                unready = f"containers with unready status: [{' '.join(names)}]"
                set_condition(conds, "PodReadyToStartContainers", "False", now)
                for type_ in ("Ready", "ContainersReady"):
                    if succeeded:
                        set_condition(conds, type_, "False", now, "PodCompleted")
                    else:
                        set_condition(conds, type_, "False", now, "ContainersNotReady", unready)

            self.store.mutate(self.pod_rt, key[0], key[1], terminated, status_only=True)
        self.store.delete(self.pod_rt, key[0], key[1], grace_period_seconds=0)

    # -- node heartbeat --------------------------------------------------------------------------

    def _renew_lease(self, name: str) -> None:
        now = micro_time(self.store.clock())
        try:
            if self.store.find(self.lease_rt, LEASE_NAMESPACE, name) is None:
                node = self.store.find(self.node_rt, None, name)
                if node is None:
                    return
                self.store.create(
                    self.lease_rt,
                    {
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {
                            "name": name,
                            "namespace": LEASE_NAMESPACE,
                            "ownerReferences": [
                                {
                                    "apiVersion": "v1",
                                    "kind": "Node",
                                    "name": name,
                                    "uid": node["metadata"].get("uid", ""),
                                }
                            ],
                        },
                        "spec": {
                            "holderIdentity": name,
                            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                            "renewTime": now,
                        },
                    },
                )
                return

            def renew(o: Obj) -> None:
                spec = o.setdefault("spec", {})
                spec["holderIdentity"] = name
                spec["leaseDurationSeconds"] = LEASE_DURATION_SECONDS
                spec["renewTime"] = now

            self.store.mutate(self.lease_rt, LEASE_NAMESPACE, name, renew)
        except errors.ApiError as exc:
            # e.g. kube-node-lease was deleted: a real kubelet keeps retrying, and so does this one.
            log.debug("kubelet %s: lease renewal failed: %s", name, exc.message)

    def _post_status(self, name: str) -> None:
        node = self.store.find(self.node_rt, None, name)
        if node is None:
            return
        now = rfc3339(self.store.clock())
        state = self._nodes.get(name)
        network_up = state is None or self._now() >= state.ready_at
        # initialNode with --cloud-provider=external: registered uninitialized, for the cloud's node
        # controller to initialize.
        cloud_taint = state is not None and state.registering and external_cloud(node)
        if state is not None:
            state.registering = False
        node_ip = internal_ip(node)
        if node_ip is None:
            node_ip = _ip_str(self._next_node_ip)
            self._next_node_ip += 1

        def beat(o: Obj) -> None:
            if cloud_taint and not uninitialized(o):
                spec = o.setdefault("spec", {})
                spec["taints"] = [*(spec.get("taints") or []), dict(UNINITIALIZED_TAINT)]
            st = o.setdefault("status", {})
            if internal_ip(o) is None:
                st.setdefault("addresses", []).extend(
                    [{"type": "InternalIP", "address": node_ip}, {"type": "Hostname", "address": name}]
                )
            st.setdefault("capacity", dict(_DEFAULT_CAPACITY))
            st.setdefault("allocatable", dict(st["capacity"]))
            st.setdefault(
                "nodeInfo",
                {
                    "architecture": "amd64",
                    "bootID": str(uuid.uuid4()),
                    "containerRuntimeVersion": "containerd://1.7.0",
                    "kernelVersion": "6.1.0",
                    "kubeProxyVersion": "v1.32.0-kubesim",
                    "kubeletVersion": "v1.32.0-kubesim",
                    "machineID": uuid.uuid4().hex,
                    "operatingSystem": "linux",
                    "osImage": "kubesim",
                    "systemUUID": str(uuid.uuid4()),
                },
            )
            st.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": 10250}})
            conds = st.setdefault("conditions", [])
            for type_, status, reason, message in _NODE_CONDITIONS:
                if type_ == "Ready" and not network_up:
                    status, reason, message = "False", NOT_READY_REASON, NOT_READY_MESSAGE
                set_condition(conds, type_, status, now, reason, message, heartbeat=True)

        self.store.mutate(self.node_rt, None, name, beat)


def _container_status(c: Obj, state: Obj, *, ready: bool) -> Obj:
    image = str(c.get("image", ""))
    return {
        "containerID": f"containerd://{uuid.uuid4().hex}{uuid.uuid4().hex}",
        "image": image,
        "imageID": f"{image.rsplit(':', 1)[0]}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
        "lastState": {},
        "name": c.get("name", ""),
        "ready": ready,
        "restartCount": 0,
        "started": "running" in state,
        "state": state,
    }


def kubelet_of(controllers: ControllerManager) -> KubeletController:
    """The running ``KubeletController`` of a ``KubeSim`` (``kubelet_of(sim.controllers)``)."""
    for c in controllers.controllers:
        if isinstance(c, KubeletController):
            return c
    raise LookupError("the kubelet controller is not running (ControllerConfig.kubelet is False)")
