"""Simulated kube-scheduler: binds pending pods to nodes that fit.

Pods without ``spec.nodeName`` whose ``schedulerName`` is ``default-scheduler`` are queued (highest
priority first, then oldest) and scheduled in batched passes a few milliseconds after the events that
queued them. The filters are upstream's default plugins, in upstream's order, and a node fails on the
first one that rejects it (``RunFilterPlugins`` stops at the first failure):

1. NodeUnschedulable: a cordoned node (``spec.unschedulable``) admits only pods tolerating
   ``node.kubernetes.io/unschedulable:NoSchedule`` -- "node(s) were unschedulable".
2. TaintToleration: every ``NoSchedule`` and ``NoExecute`` taint must be tolerated
   (``PreferNoSchedule`` only affects scoring upstream and is ignored here) -- "node(s) had
   untolerated taint {key: value}". A node whose Ready condition is not True counts as carrying
   ``node.kubernetes.io/not-ready`` (``unreachable`` when Unknown) ``:NoSchedule``, the taint
   upstream's node lifecycle controller puts on it.
3. NodeAffinity: ``nodeSelector`` and ``requiredDuringSchedulingIgnoredDuringExecution``
   ``nodeSelectorTerms`` (terms ORed; expressions and fields ANDed; In, NotIn, Exists, DoesNotExist,
   Gt, Lt; ``matchFields`` on ``metadata.name``) -- "node(s) didn't match Pod's node
   affinity/selector". DaemonSet pods pin themselves to a node this way and need nothing else.
4. NodeResourcesFit: pod count, cpu and memory requests (the larger of the containers' sum and the
   largest init container, plus overhead; limits stand in for missing requests as API defaulting
   does) against allocatable minus the requests of the node's non-terminal pods -- "Too many pods",
   "Insufficient cpu", "Insufficient memory".

Like upstream (``numFeasibleNodesToFind``) a pass stops searching once it has found enough feasible
nodes (all nodes below 100, else an adaptive 50 - nodes/125 percent, at least 5 % and 100 nodes),
starting where the previous pod's search stopped. Feasible nodes are scored by LeastAllocated over
cpu and memory, counting 100m / 200Mi for containers without requests as upstream's scorer does;
ties go to the first node found, so results are deterministic (upstream breaks ties at random).
Inter-pod affinity, topology spread, ports and volumes are not simulated; a pod that fits
nowhere may preempt lower-priority pods (``preemption.py``).

A pod that fits nowhere gets ``PodScheduled=False``, reason ``Unschedulable`` and upstream's
``FitError`` message, e.g. ``0/5 nodes are available: 2 node(s) had untolerated taint {a: b}, 3
Insufficient cpu. preemption: 0/5 nodes are available: 2 Preemption is not helpful for scheduling, 3
No preemption victims found for incoming pod.`` It is retried when a node changes in a way that
matters or a pod frees resources.

Cost: node usage is kept per node and updated from pod events; which nodes pass the resource-free
filters (1-3) is cached per distinct pod shape and recomputed only after a relevant node change; and
within a pass, a shape that failed is not re-evaluated for the next pod of the same shape.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import orjson

from .. import errors
from ..quantity import QuantityError, to_int, to_milli
from ..store import NODE_KEY, POD_KEY, Obj, ObjKey, Store, WatchEvent, rfc3339
from . import Controller, ControllerConfig
from .kubelet import set_condition
from .preemption import FitCheck, Preemption, resources_fit

log = logging.getLogger("kubespot.sim.kubesim.scheduler")

DEFAULT_SCHEDULER = "default-scheduler"
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT_KEY = "node.kubernetes.io/unreachable"
TERMINAL_PHASES = ("Succeeded", "Failed")

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
PREEMPTION_NO_VICTIMS = "No preemption victims found for incoming pod"

# Upstream's defaults for scoring containers that request nothing (schedutil.DefaultMilliCPURequest...).
_NONZERO_MILLI_CPU = 100
_NONZERO_MEMORY = 200 * 1024 * 1024
_DEBOUNCE_SECONDS = 0.01
#: Bound on cached pod shapes and static filter results (each is small).
_SHAPE_CACHE = 4096
# Unschedulable pods are retried on relevant changes, but at most this often: an eviction storm frees
# resources thousands of times a second (upstream backs unschedulable pods off 1-10 s).
_RETRY_INTERVAL_SECONDS = 0.1
# Like upstream's podMaxInUnschedulablePodsDuration, but shorter: a safety net for missed changes.
_FLUSH_UNSCHEDULABLE_SECONDS = 30.0


# -- taints and tolerations (shared with the taint manager in nodelifecycle.py) ------------------------


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """Upstream's ``Toleration.ToleratesTaint``: empty effect/key match any; Exists ignores the value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    return op == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def first_untolerated(taints: Iterable[Obj], tolerations: list[Obj]) -> Obj | None:
    for taint in taints:
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_reason(taint: Obj) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


def ready_status(node: Obj) -> str | None:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status"))
    return None


# -- requests ----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _milli(value: str | int | float) -> int:
    try:
        return max(0, to_milli(value))
    except QuantityError:
        return 0


@functools.lru_cache(maxsize=4096)
def _units(value: str | int | float) -> int:
    try:
        return max(0, to_int(value))
    except QuantityError:
        return 0


def _container_requests(c: Obj) -> tuple[int, int, int, int]:
    res = c.get("resources") or {}
    req = res.get("requests") or {}
    lim = res.get("limits") or {}
    cpu_q = req.get("cpu", lim.get("cpu"))
    mem_q = req.get("memory", lim.get("memory"))
    cpu = _milli(cpu_q) if cpu_q is not None else 0
    mem = _units(mem_q) if mem_q is not None else 0
    return (
        cpu,
        mem,
        cpu if cpu_q is not None else _NONZERO_MILLI_CPU,
        mem if mem_q is not None else _NONZERO_MEMORY,
    )


def pod_requests(spec: Obj) -> tuple[int, int, int, int]:
    """(cpu millis, memory bytes, and the same with upstream's non-zero defaults for scoring)."""
    total = [0, 0, 0, 0]
    for c in spec.get("containers") or []:
        for i, v in enumerate(_container_requests(c)):
            total[i] += v
    for c in spec.get("initContainers") or []:
        for i, v in enumerate(_container_requests(c)):
            total[i] = max(total[i], v)
    overhead = spec.get("overhead") or {}
    if overhead:
        cpu, mem = _milli(overhead.get("cpu", 0)), _units(overhead.get("memory", 0))
        total = [total[0] + cpu, total[1] + mem, total[2] + cpu, total[3] + mem]
    return total[0], total[1], total[2], total[3]


# -- node affinity -----------------------------------------------------------------------------------


def _match_expr(expr: Obj, values_of: dict[str, str]) -> bool:
    key = expr.get("key", "")
    op = expr.get("operator")
    values = expr.get("values") or []
    present = key in values_of
    value = values_of.get(key)
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            have, want = int(str(value)), int(str(values[0]))
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: Obj, name: str, labels: dict[str, str]) -> bool:
    """One nodeSelectorTerm; an empty term matches no node, as upstream."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    if not all(_match_expr(e, labels) for e in exprs):
        return False
    return all(f.get("key") == "metadata.name" and _match_expr(f, {"metadata.name": name}) for f in fields)


# -- state -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Usage:
    """Requests of the non-terminal pods bound to one node name."""

    cpu: int = 0
    mem: int = 0
    pods: int = 0
    nz_cpu: int = 0
    nz_mem: int = 0


@dataclass(slots=True)
class _NodeInfo:
    name: str
    labels: dict[str, str]
    taints: list[Obj]  # NoSchedule and NoExecute only, plus the synthetic not-ready taint
    unschedulable: bool
    alloc_cpu: int
    alloc_mem: int
    alloc_pods: int
    usage: _Usage

    def same_shape(self, other: _NodeInfo) -> bool:
        return (
            self.labels == other.labels
            and self.taints == other.taints
            and self.unschedulable == other.unschedulable
            and self.alloc_cpu == other.alloc_cpu
            and self.alloc_mem == other.alloc_mem
            and self.alloc_pods == other.alloc_pods
        )


@dataclass(slots=True)
class _Static:
    """Resource-independent filtering (cordon, taints, selector, affinity), shared by every shape with
    the same constraints: pods of different Deployments usually differ only in their requests."""

    node_selector: dict[str, str]
    terms: list[Obj] | None  # None: no required node affinity
    tolerations: list[Obj]
    version: int = -1  # node-set version the cached filtering is for
    feasible: list[_NodeInfo] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)


@dataclass(slots=True)
class _Shape:
    """What scheduling depends on, shared by every pending pod with the same spec essentials."""

    cpu: int
    mem: int
    nz_cpu: int
    nz_mem: int
    static: _Static


@dataclass(slots=True)
class _Pending:
    priority: int
    seq: int
    shape_key: bytes


def _node_info(node: Obj, usage: _Usage) -> _NodeInfo:
    meta, spec = node["metadata"], node.get("spec") or {}
    taints = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
    ready = ready_status(node)
    if ready != "True":
        key = UNREACHABLE_TAINT_KEY if ready == "Unknown" else NOT_READY_TAINT_KEY
        if not any(t.get("key") == key and t.get("effect") == "NoSchedule" for t in taints):
            taints.append({"key": key, "effect": "NoSchedule"})
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return _NodeInfo(
        name=meta["name"],
        labels=dict(meta.get("labels") or {}),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
        alloc_cpu=_milli(alloc.get("cpu", 0)),
        alloc_mem=_units(alloc.get("memory", 0)),
        alloc_pods=_units(alloc.get("pods", 0)),
        usage=usage,
    )


def num_feasible_nodes_to_find(num_all: int) -> int:
    """Upstream's ``numFeasibleNodesToFind`` with the default percentageOfNodesToScore (adaptive)."""
    if num_all < 100:
        return num_all
    pct = max(5, 50 - num_all // 125)
    return max(100, num_all * pct // 100)


class SchedulerController(Controller):
    """See the module docstring."""

    name = "scheduler"
    watches = (POD_KEY, NODE_KEY)

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.pod_rt = self.rt("", "v1", "pods")
        self.node_rt = self.rt("", "v1", "nodes")
        self._nodes: dict[str, _NodeInfo] = {}
        self._usage: dict[str, _Usage] = {}
        self._placed: dict[ObjKey, tuple[str, int, int, int, int]] = {}
        self._pending: dict[ObjKey, _Pending] = {}
        self._unschedulable: dict[ObjKey, _Pending] = {}
        self._shapes: dict[bytes, _Shape] = {}
        self._statics: dict[bytes, _Static] = {}
        self._version = 0
        self._sorted_names: list[str] = []
        self._sorted_version = -1
        self._retry = False
        self._last_retry = 0.0
        self._kick = asyncio.Event()
        self.preemption = Preemption(store)
        self._seq = itertools.count()
        self._next_start = 0
        #: Counters for tests and benchmarks.
        self.bound = 0
        self.passes = 0

    # -- events ----------------------------------------------------------------------------------

    def start(self) -> None:
        super().start()
        for node in self.store.iter_objects(self.node_rt):
            self._on_node(node)
        for pod in self.store.iter_objects(self.pod_rt):
            self._on_pod(pod, None)
        self.spawn(self._loop())
        self.spawn(self._flush_loop())

    def on_event(self, ev: WatchEvent) -> None:
        if ev.rkey == POD_KEY:
            self.preemption.on_pod(ev)
            if ev.type == "DELETED":
                meta = ev.obj["metadata"]
                key = (meta.get("namespace", ""), meta["name"])
                self._unplace(key)
                self._pending.pop(key, None)
                self._unschedulable.pop(key, None)
            else:
                self._on_pod(ev.obj, ev.old)
        elif ev.rkey == NODE_KEY:
            if ev.type == "DELETED":
                if self._nodes.pop(ev.obj["metadata"]["name"], None) is not None:
                    self._version += 1
            else:
                self._on_node(ev.obj)

    def _on_node(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        usage = self._usage.setdefault(name, _Usage())
        info = _node_info(node, usage)
        old = self._nodes.get(name)
        if old is not None and old.same_shape(info):
            return  # a heartbeat: nothing scheduling depends on changed
        self._nodes[name] = info
        self._version += 1
        self._wake_retry()

    def _on_pod(self, pod: Obj, old: Obj | None) -> None:
        meta = pod["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        terminal = (pod.get("status") or {}).get("phase") in TERMINAL_PHASES
        if node:
            self._pending.pop(key, None)
            self._unschedulable.pop(key, None)
            if terminal:
                self._unplace(key)
            elif key not in self._placed:
                self._place(key, node, spec)
            return
        if (
            meta.get("deletionTimestamp")
            or terminal
            or spec.get("schedulerName", DEFAULT_SCHEDULER) != DEFAULT_SCHEDULER
        ):
            self._pending.pop(key, None)
            self._unschedulable.pop(key, None)
            return
        if key in self._pending or key in self._unschedulable:
            if old is None or old.get("spec") == spec:
                return
            self._unschedulable.pop(key, None)  # the spec changed (e.g. a toleration added): try again
        self._pending[key] = _Pending(int(spec.get("priority") or 0), next(self._seq), self._shape_key(spec))
        self._kick.set()

    def _place(self, key: ObjKey, node: str, spec: Obj) -> None:
        cpu, mem, nz_cpu, nz_mem = pod_requests(spec)
        u = self._usage.setdefault(node, _Usage())
        u.cpu += cpu
        u.mem += mem
        u.nz_cpu += nz_cpu
        u.nz_mem += nz_mem
        u.pods += 1
        self._placed[key] = (node, cpu, mem, nz_cpu, nz_mem)

    def _unplace(self, key: ObjKey) -> None:
        placed = self._placed.pop(key, None)
        if placed is None:
            return
        node, cpu, mem, nz_cpu, nz_mem = placed
        u = self._usage[node]
        u.cpu -= cpu
        u.mem -= mem
        u.nz_cpu -= nz_cpu
        u.nz_mem -= nz_mem
        u.pods -= 1
        self._wake_retry()

    def _wake_retry(self) -> None:
        if self._unschedulable:
            self._retry = True
            self._kick.set()

    def _shape_key(self, spec: Obj) -> bytes:
        cpu, mem, nz_cpu, nz_mem = pod_requests(spec)
        affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        terms = None if affinity is None else list(affinity.get("nodeSelectorTerms") or [])
        selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
        tolerations = list(spec.get("tolerations") or [])
        static_key = orjson.dumps([selector, terms, tolerations], option=orjson.OPT_SORT_KEYS)
        key = orjson.dumps([cpu, mem, nz_cpu, nz_mem]) + static_key
        if key not in self._shapes:
            if len(self._shapes) >= _SHAPE_CACHE:
                self._shapes.clear()  # bounded, and rebuilt on demand (see _pass)
            static = self._statics.get(static_key)
            if static is None:
                if len(self._statics) >= _SHAPE_CACHE:
                    self._statics.clear()
                static = self._statics[static_key] = _Static(selector, terms, tolerations)
            self._shapes[key] = _Shape(cpu, mem, nz_cpu, nz_mem, static)
        return key

    # -- passes ----------------------------------------------------------------------------------

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._kick.wait()
            await asyncio.sleep(_DEBOUNCE_SECONDS)
            if self._retry and not self._pending:
                wait = self._last_retry + _RETRY_INTERVAL_SECONDS - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
            self._kick.clear()
            try:
                await self._pass()
            except Exception:
                log.exception("scheduler: pass failed")

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(_FLUSH_UNSCHEDULABLE_SECONDS)
            self._wake_retry()

    async def _pass(self) -> None:
        self.passes += 1
        if self._retry:
            self._retry = False
            self._last_retry = asyncio.get_running_loop().time()
            self._pending.update(self._unschedulable)
            self._unschedulable.clear()
        if not self._pending:
            return
        batch = sorted(self._pending.items(), key=lambda kv: (-kv[1].priority, kv[1].seq))
        self._pending.clear()
        failed: dict[bytes, str] = {}
        pacer = self.pacer
        started = pacer.clock()
        try:
            for key, pending in batch:
                if pacer.due(started):
                    started = await pacer.pause(started)
                self._schedule_one(key, pending, failed)
        finally:
            pacer.charge(started)

    def _schedule_one(self, key: ObjKey, pending: _Pending, failed: dict[bytes, str]) -> None:
        """Bind one pod of a pass, or mark it unschedulable; ``failed`` holds the pass's failed shapes."""
        pod = self.store.find(self.pod_rt, key[0], key[1])
        if pod is None or (pod.get("spec") or {}).get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            return
        if key in self._pending or key in self._unschedulable:
            return  # re-queued by an event while this pass yielded
        shape = self._shapes.get(pending.shape_key)
        if shape is None:  # forgotten while yielding; recompute
            pending.shape_key = self._shape_key(pod.get("spec") or {})
            shape = self._shapes[pending.shape_key]
        message = failed.get(pending.shape_key)
        if message is None:
            node, message = self._pick_nominated(pod, shape) or self._pick(shape)
            if node is not None:
                try:
                    self._bind(key, node)
                except errors.ApiError as exc:
                    log.debug("scheduler: binding %s/%s failed: %s", key[0], key[1], exc.message)
                return
            failed[pending.shape_key] = message
        self._unschedulable[key] = pending
        self._mark_unschedulable(key, pod, self._post_filter(pod, shape, message))

    def _fits(self) -> FitCheck:
        return resources_fit(
            lambda p: pod_requests(p.get("spec") or {})[:2], lambda n: self.store.find(self.node_rt, None, n)
        )

    def _pick_nominated(self, pod: Obj, shape: _Shape) -> tuple[str, str] | None:
        """A preemptor goes to the node it preempted on if it fits there (``preemption.py``)."""
        n = self._nodes.get((pod.get("status") or {}).get("nominatedNodeName") or "")
        if n is None or n not in self._static(shape.static).feasible:
            return None
        node = self.preemption.fits_nominated(pod, self._fits())
        return None if node is None else (node, "")

    def _post_filter(self, pod: Obj, shape: _Shape, message: str) -> str:
        """Preemption (``preemption.py``) for a pod that fits nowhere: the message with its part."""
        if not self._nodes:
            return message
        feasible = self._static(shape.static).feasible  # these failed on resources only
        fits = self._fits()
        result = self.preemption.run(
            pod,
            num_nodes=len(self._nodes),
            num_potential=len(feasible),
            potential=lambda: [n.name for n in feasible],
            fits=fits,
        )
        head = message.split(" preemption: ", 1)[0]
        return f"{head} {result.message}" if result.message else head

    def _static(self, static: _Static) -> _Static:
        """Refresh resource-independent filtering (filters 1-3) if nodes changed."""
        if static.version == self._version:
            return static
        if self._sorted_version != self._version:
            self._sorted_names = sorted(self._nodes)
            self._sorted_version = self._version
        feasible: list[_NodeInfo] = []
        reasons: Counter[str] = Counter()
        tolerate_cordon = any(tolerates(t, UNSCHEDULABLE_TAINT) for t in static.tolerations)
        for name in self._sorted_names:
            n = self._nodes[name]
            if n.unschedulable and not tolerate_cordon:
                reasons[REASON_UNSCHEDULABLE] += 1
                continue
            taint = first_untolerated(n.taints, static.tolerations) if n.taints else None
            if taint is not None:
                reasons[taint_reason(taint)] += 1
                continue
            if any(n.labels.get(k) != v for k, v in static.node_selector.items()) or (
                static.terms is not None and not any(term_matches(t, name, n.labels) for t in static.terms)
            ):
                reasons[REASON_AFFINITY] += 1
                continue
            feasible.append(n)  # a node that changes gets a new _NodeInfo, and the version moves
        static.feasible, static.reasons, static.version = feasible, reasons, self._version
        return static

    def _pick(self, shape: _Shape) -> tuple[str | None, str]:
        """Filter the feasible nodes round-robin until enough fit, score those, take the best.

        The hot path of every new pod (hundreds of nodes examined each time): one loop that filters
        and scores as it goes, everything inlined. The reasons why nodes do not fit are only counted
        (``_unfit_message``) when none does.
        """
        num_all = len(self._nodes)
        if num_all == 0:
            return None, "no nodes available to schedule pods"
        feasible = self._static(shape.static).feasible
        want = num_feasible_nodes_to_find(num_all)
        total = len(feasible)
        start = self._next_start % total if total else 0
        cpu, mem, nz_cpu, nz_mem = shape.cpu, shape.mem, shape.nz_cpu, shape.nz_mem
        best: _NodeInfo | None = None
        best_score = -1
        found = processed = 0
        for n in feasible[start:] + feasible[:start]:
            processed += 1
            u = n.usage
            if (
                u.pods + 1 > n.alloc_pods
                or (cpu > 0 and u.cpu + cpu > n.alloc_cpu)
                or (mem > 0 and u.mem + mem > n.alloc_mem)
            ):
                continue
            # Least allocated: the mean of the free cpu and memory shares (_free_score), inlined.
            alloc, requested = n.alloc_cpu, u.nz_cpu + nz_cpu
            cpu_score = (alloc - requested) * 100 // alloc if alloc > 0 and requested <= alloc else 0
            alloc, requested = n.alloc_mem, u.nz_mem + nz_mem
            mem_score = (alloc - requested) * 100 // alloc if alloc > 0 and requested <= alloc else 0
            score = (cpu_score + mem_score) // 2
            if score > best_score:
                best, best_score = n, score
            found += 1
            if found >= want:
                break
        if total:
            self._next_start = (start + processed) % total
        if best is not None:
            return best.name, ""
        return None, self._unfit_message(shape, feasible)

    def _unfit_message(self, shape: _Shape, feasible: list[_NodeInfo]) -> str:
        """Upstream's FitError message when none of ``feasible`` (or of the other nodes) fits."""
        num_all = len(self._nodes)
        fit_reasons: Counter[str] = Counter()
        resource_failed = 0
        for n in feasible:
            u = n.usage
            failed = False
            if u.pods + 1 > n.alloc_pods:
                fit_reasons["Too many pods"] += 1
                failed = True
            if shape.cpu > 0 and u.cpu + shape.cpu > n.alloc_cpu:
                fit_reasons["Insufficient cpu"] += 1
                failed = True
            if shape.mem > 0 and u.mem + shape.mem > n.alloc_mem:
                fit_reasons["Insufficient memory"] += 1
                failed = True
            if failed:
                resource_failed += 1
        reasons = shape.static.reasons + fit_reasons
        histogram = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
        message = f"0/{num_all} nodes are available: {histogram}."
        preemption: Counter[str] = Counter()
        if num_all - resource_failed:
            preemption[PREEMPTION_NOT_HELPFUL] = num_all - resource_failed
        if resource_failed:
            preemption[PREEMPTION_NO_VICTIMS] = resource_failed
        hist = ", ".join(sorted(f"{count} {reason}" for reason, count in preemption.items()))
        return f"{message} preemption: 0/{num_all} nodes are available: {hist}."

    def _bind(self, key: ObjKey, node: str) -> None:
        """What a ``pods/binding`` create does: set nodeName and PodScheduled True in one write."""
        now = rfc3339(self.store.clock())

        def bind(o: Obj) -> None:
            # Only the status is a private copy (status_only): the spec gets a new dict, shallowly
            # copied, instead of a deep copy of the whole pod.
            o["spec"] = {**o["spec"], "nodeName": node}
            set_condition(
                o.setdefault("status", {}).setdefault("conditions", []), "PodScheduled", "True", now
            )

        self.store.mutate(self.pod_rt, key[0], key[1], bind, status_only=True)
        self.bound += 1

    def _mark_unschedulable(self, key: ObjKey, pod: Obj, message: str) -> None:
        for c in (pod.get("status") or {}).get("conditions") or []:
            if (
                c.get("type") == "PodScheduled"
                and c.get("status") == "False"
                and c.get("reason") == "Unschedulable"
                and c.get("message") == message
            ):
                return  # upstream skips the write when the condition is unchanged
        now = rfc3339(self.store.clock())

        def mark(o: Obj) -> None:
            conds = o.setdefault("status", {}).setdefault("conditions", [])
            set_condition(conds, "PodScheduled", "False", now, "Unschedulable", message)

        try:
            self.store.mutate(self.pod_rt, key[0], key[1], mark)
        except errors.ApiError as exc:
            log.debug("scheduler: status of %s/%s not written: %s", key[0], key[1], exc.message)


def _free_score(alloc: int, requested: int) -> int:
    if alloc <= 0 or requested > alloc:
        return 0
    return (alloc - requested) * 100 // alloc


def pending_reason(pod: Obj) -> str | None:
    """The PodScheduled=False message of a pod, if any (for tests and tools)."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message", ""))
    return None
