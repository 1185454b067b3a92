"""Simulated kube-scheduler: binds pending pods to nodes that fit (docs/simulators/kubesim.md, Scheduler).

Pods without ``spec.nodeName`` whose ``schedulerName`` is ``default-scheduler`` are queued (highest
priority first, then oldest) and scheduled in batched passes a few milliseconds after the events that
queued them; a pod with ``schedulingGates`` waits outside the queue (SchedulingGates' PreEnqueue).
The filters are upstream's default plugins, in upstream's order, and a node fails on the first one
that rejects it (``RunFilterPlugins`` stops at the first failure):

1. NodeAffinity's PreFilterResult, NodeUnschedulable, TaintToleration, NodeAffinity (``nodes.py``):
   usage-independent, so cached per pod shape (``Static``) until a node changes.
2. NodePorts (``ports.py``), NodeResourcesFit (``resources.py``).
3. VolumeBinding and VolumeZone (``volumes.py``), PodTopologySpread (``spread.py``),
   InterPodAffinity (``interpod.py``), from per-node counts of bound pods (``podindex.py``).

Like upstream (``numFeasibleNodesToFind``) a pass stops searching once it has found enough feasible
nodes (all nodes below 100, else an adaptive 50 - nodes/125 percent, at least 5 % and 100 nodes),
starting where the previous pod's search stopped. Feasible nodes are scored by LeastAllocated over
cpu and memory (100m / 200Mi for containers without requests, as upstream's scorer counts them)
plus PodTopologySpread at weight 2 when the pod has ScheduleAnyway or system default constraints;
ties go to the first node found, so results are deterministic (upstream breaks ties at random).

A pod that fits nowhere gets ``PodScheduled=False``, reason ``Unschedulable`` and upstream's
``FitError`` message (``fiterror.py``), e.g. ``0/5 nodes are available: 2 node(s) had untolerated
taint {a: b}, 3 Insufficient cpu. preemption: 0/5 nodes are available: 2 Preemption is not helpful
for scheduling, 3 No preemption victims found for incoming pod.`` It is retried when a node, a pod,
a claim or a volume changes in a way that may matter.

Cost: node usage is kept per node and updated from pod events; the usage-independent filters are
cached per distinct pod shape; within a pass, a shape that failed is not re-evaluated for the next
pod of the same shape; the common pod takes three inlined checks per node.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import orjson

from ... import errors
from ...selectors import LabelSelector
from ...store import NAMESPACE_KEY, NODE_KEY, POD_KEY, Obj, ObjKey, Store, WatchEvent, rfc3339
from .. import Controller, ControllerConfig, ControllerManager
from ..kubelet import set_condition
from ..preemption import Preemption
from . import fiterror
from .fit import node_reasons, unresolvable
from .interpod import InterPodState, parse_terms, pre_filter, required_terms
from .nodes import (
    REASON_NOT_IN_PRE_FILTER,
    NodeInfo,
    Usage,
    node_info,
    pre_filter_node_names,
    required_node_terms,
    static_reason,
)
from .podindex import PodIndex
from .ports import REASON_PORTS, HostPort, conflicts, host_ports
from .resources import PodRequest, insufficient, pod_request
from .shapes import Shape, Static, allowed_domains, num_feasible_nodes_to_find, rare_misfit
from .spread import (
    SCORE_WEIGHT,
    EligibleCache,
    PodFacts,
    SpreadFilter,
    default_constraints,
    default_selector,
    parse_constraints,
)
from .spread import pre_filter as spread_pre_filter
from .spread import scores as spread_scores
from .volumes import SELECTED_NODE, VolumeState, claim_names, provisioned_pv
from .volumes import pre_filter as volume_pre_filter

log = logging.getLogger("kubespot.sim.kubesim.scheduler")

DEFAULT_SCHEDULER = "default-scheduler"
TERMINAL_PHASES = ("Succeeded", "Failed")
#: The condition upstream's API server puts on a pod created with scheduling gates
#: (pkg/registry/core/pod/strategy.go applySchedulingGatedCondition).
REASON_GATED = "SchedulingGated"
MESSAGE_GATED = "Scheduling is blocked due to non-empty scheduling gates"

_DEBOUNCE_SECONDS = 0.01
#: Bound on cached pod shapes and static filter results (each is small).
_SHAPE_CACHE = 4096
# Unschedulable pods are retried on relevant changes, but at most this often: an eviction storm frees
# resources thousands of times a second (upstream backs unschedulable pods off 1-10 s).
_RETRY_INTERVAL_SECONDS = 0.1
# Like upstream's podMaxInUnschedulablePodsDuration, but shorter: a safety net for missed changes.
_FLUSH_UNSCHEDULABLE_SECONDS = 30.0


@dataclass(slots=True)
class _Pending:
    priority: int
    seq: int
    shape_key: bytes


@dataclass(slots=True)
class _Placed:
    node: str
    req: PodRequest
    ports: tuple[HostPort, ...]


def is_gated(spec: Obj) -> bool:
    return bool(spec.get("schedulingGates"))


#: Claims, volumes and classes: a change may make an unschedulable pod's volumes fit.
VOLUME_KEYS = (
    ("", "persistentvolumeclaims"),
    ("", "persistentvolumes"),
    ("storage.k8s.io", "storageclasses"),
)


class SchedulerController(Controller):
    """See the module docstring."""

    name = "scheduler"
    watches = (POD_KEY, NODE_KEY, NAMESPACE_KEY, *VOLUME_KEYS)

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.pod_rt = self.rt("", "v1", "pods")
        self.node_rt = self.rt("", "v1", "nodes")
        self.ns_rt = self.rt("", "v1", "namespaces")
        self._pods = PodIndex(self._namespace_labels)
        self._waits_on_binds = False
        self._eligible = EligibleCache()
        self.services_rt = self.rt("", "v1", "services")
        self.rs_rt = self.rt("apps", "v1", "replicasets")
        self.sts_rt = self.rt("apps", "v1", "statefulsets")
        self.pvc_rt = self.rt("", "v1", "persistentvolumeclaims")
        self.pv_rt = self.rt("", "v1", "persistentvolumes")
        self.sc_rt = self.rt("storage.k8s.io", "v1", "storageclasses")
        self._nodes: dict[str, NodeInfo] = {}
        self._usage: dict[str, Usage] = {}
        self._placed: dict[ObjKey, _Placed] = {}
        self._pending: dict[ObjKey, _Pending] = {}
        self._unschedulable: dict[ObjKey, _Pending] = {}
        self._gated: set[ObjKey] = set()
        self._gated_new: set[ObjKey] = set()  # gated pods whose condition the next pass checks
        self._shapes: dict[bytes, Shape] = {}
        self._statics: dict[bytes, Static] = {}
        self._version = 0
        self._sorted_names: list[str] = []
        self._sorted_version = -1
        self._retry = False
        self._last_retry = 0.0
        self._kick = asyncio.Event()
        #: DefaultPreemption, the PostFilter (``controllers/preemption.py``).
        self.preemption = Preemption(store)
        #: Per pass and failed shape: (nodes where preemption might help: count, their names).
        self._potential: dict[bytes, tuple[int, list[str]]] = {}
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
                self._forget(key)
            else:
                self._on_pod(ev.obj, ev.old)
        elif ev.rkey in VOLUME_KEYS:
            self._wake_retry()
        elif ev.rkey == NAMESPACE_KEY:
            old_labels = ((ev.old or {}).get("metadata") or {}).get("labels")
            if ev.type == "MODIFIED" and ev.obj["metadata"].get("labels") != old_labels:
                self._pods.namespace_labels_changed()  # namespaceSelector matches are stale
                self._wake_retry()
        elif ev.rkey == NODE_KEY:
            if ev.type == "DELETED":
                if self._nodes.pop(ev.obj["metadata"]["name"], None) is not None:
                    self._version += 1
            else:
                self._on_node(ev.obj)

    def _forget(self, key: ObjKey) -> None:
        self._pending.pop(key, None)
        self._unschedulable.pop(key, None)
        self._gated.discard(key)

    def _on_node(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        usage = self._usage.setdefault(name, Usage())
        info = node_info(node, usage)
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
            self._forget(key)
            if terminal:
                self._unplace(key)
            elif key not in self._placed:
                self._place(key, node, pod)
            elif meta.get("deletionTimestamp"):
                self._pods.terminating(key)  # topology spread stops counting it
            return
        if (
            meta.get("deletionTimestamp")
            or terminal
            or spec.get("schedulerName", DEFAULT_SCHEDULER) != DEFAULT_SCHEDULER
        ):
            self._forget(key)
            return
        if is_gated(spec):
            # SchedulingGates' PreEnqueue: the pod waits outside the queue until its gates are gone.
            self._pending.pop(key, None)
            self._unschedulable.pop(key, None)
            if key not in self._gated:
                self._gated.add(key)
                self._gated_new.add(key)
                self._kick.set()  # the pass writes the SchedulingGated condition if it is missing
            return
        self._gated.discard(key)
        if key in self._pending or key in self._unschedulable:
            if old is None or old.get("spec") == spec:
                return
            self._unschedulable.pop(key, None)  # the spec changed (e.g. a toleration added): try again
        self._pending[key] = _Pending(int(spec.get("priority") or 0), next(self._seq), self._shape_key(pod))
        self._kick.set()

    def _namespace_labels(self, ns: str) -> dict[str, str]:
        obj = self.store.find(self.ns_rt, None, ns)
        return {} if obj is None else dict(obj["metadata"].get("labels") or {})

    def _place(self, key: ObjKey, node: str, pod: Obj) -> None:
        spec, meta = pod.get("spec") or {}, pod["metadata"]
        req = pod_request(spec)
        ports = host_ports(spec)
        u = self._usage.setdefault(node, Usage())
        u.cpu += req.cpu
        u.mem += req.mem
        u.eph += req.eph
        u.nz_cpu += req.nz_cpu
        u.nz_mem += req.nz_mem
        u.pods += 1
        for name, amount in req.scalars:
            u.scalars[name] += amount
        for port in ports:
            u.ports[port] += 1
        self._placed[key] = _Placed(node, req, ports)
        ns, labels = meta.get("namespace", ""), dict(meta.get("labels") or {})
        self._pods.add(
            key, node, ns, labels, parse_terms(required_terms(spec, "podAntiAffinity"), ns, labels)
        )
        if self._waits_on_binds:
            self._wake_retry()  # a pod bound may be what an unschedulable pod's affinity or spread waits for

    def _unplace(self, key: ObjKey) -> None:
        placed = self._placed.pop(key, None)
        if placed is None:
            return
        self._pods.remove(key)
        u, req = self._usage[placed.node], placed.req
        u.cpu -= req.cpu
        u.mem -= req.mem
        u.eph -= req.eph
        u.nz_cpu -= req.nz_cpu
        u.nz_mem -= req.nz_mem
        u.pods -= 1
        for name, amount in req.scalars:
            u.scalars[name] -= amount
            if not u.scalars[name]:
                del u.scalars[name]
        for port in placed.ports:
            u.ports[port] -= 1
            if not u.ports[port]:
                del u.ports[port]
        self._wake_retry()

    def _wake_retry(self) -> None:
        if self._unschedulable:
            self._retry = True
            self._kick.set()

    def _shape_key(self, pod: Obj) -> bytes:
        spec, meta = pod.get("spec") or {}, pod["metadata"]
        ns, labels = meta.get("namespace", ""), dict(meta.get("labels") or {})
        affinity, anti = required_terms(spec, "podAffinity"), required_terms(spec, "podAntiAffinity")
        req = pod_request(spec)
        ports = host_ports(spec)
        terms = required_node_terms(spec)
        selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
        tolerations = list(spec.get("tolerations") or [])
        static_key = orjson.dumps([selector, terms, tolerations], option=orjson.OPT_SORT_KEYS)
        spread = list(spec.get("topologySpreadConstraints") or [])
        owner = _controller_of(meta)
        # Namespace, labels and controller too: other pods' anti-affinity and spread select by them.
        pod_key = [req.cpu, req.mem, req.eph, req.scalars, req.nz_cpu, req.nz_mem, ports, ns, labels]
        claims = claim_names(spec)
        pod_key += [affinity, anti, spread, owner, claims]
        key = orjson.dumps(pod_key, option=orjson.OPT_SORT_KEYS) + static_key
        if key not in self._shapes:
            if len(self._shapes) >= _SHAPE_CACHE:
                self._shapes.clear()  # bounded, and rebuilt on demand (see _pass)
            static = self._statics.get(static_key)
            if static is None:
                if len(self._statics) >= _SHAPE_CACHE:
                    self._statics.clear()
                static = self._statics[static_key] = Static(selector, terms, tolerations)
            self._shapes[key] = Shape(
                req,
                ports,
                static,
                ns,
                labels,
                parse_terms(affinity, ns, labels),
                parse_terms(anti, ns, labels),
                PodFacts(selector, terms, tolerations, static_key),
                parse_constraints(spread, ns, labels)
                if spread
                else default_constraints(ns, self._default_selector(ns, labels, owner)),
                not spread,
                claims,
            )
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
                self._mark_gated()
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
            self._waits_on_binds = False
        if not self._pending:
            return
        batch = sorted(self._pending.items(), key=lambda kv: (-kv[1].priority, kv[1].seq))
        self._pending.clear()
        failed: dict[bytes, str] = {}
        self._potential = {}
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
        if key in self._pending or key in self._unschedulable or key in self._gated:
            return  # re-queued (or gated) by an event while this pass yielded
        shape = self._shapes.get(pending.shape_key)
        if shape is None:  # forgotten while yielding; recompute
            pending.shape_key = self._shape_key(pod)
            shape = self._shapes[pending.shape_key]
        # The pass's failed shapes are no answer for a nominee: the room held for it is its own.
        message = None if _nominated_node(pod) else failed.get(pending.shape_key)
        if message is None:
            # Nodes where pods nominated with no lower priority hold room
            # (``RunFilterPluginsWithNominatedPods``); empty at once when nothing is nominated.
            held = self.preemption.held_nodes(pod)
            # A preemptor is tried on the node it preempted on first (``evaluateNominatedNode``).
            nominated = self.preemption.fits_nominated(pod, self._fits)
            node: str | None
            if nominated is not None and nominated in self._nodes:
                node, message = nominated, ""
            else:
                node, message = self._pick(shape, pod, held)
            if node is not None:
                try:
                    if shape.claims:
                        self._provision(key[0], shape.claims, self._nodes[node])
                    self._bind(key, node)
                except errors.ApiError as exc:
                    log.debug("scheduler: binding %s/%s failed: %s", key[0], key[1], exc.message)
                return
            failed[pending.shape_key] = message
        self._unschedulable[key] = pending
        # A bind elsewhere can satisfy pod affinity, or raise a spread constraint's minimum.
        self._waits_on_binds = (
            self._waits_on_binds or bool(shape.affinity) or any(c.hard for c in shape.spread)
        )
        self._mark_unschedulable(key, pod, self._post_filter(pod, pending.shape_key, shape, message))

    def _fits(self, pod: Obj, node: str, pods: Sequence[Obj]) -> str | None:
        """Preemption's fit check: the first reason ``pod`` would not fit ``node`` with only
        ``pods`` there (every filter, with the others gone: ``fit_reasons``). Pods of ``pods`` not
        bound to the node are nominated to it and count as there."""
        keep = {_key(p) for p in pods}
        bound = {_key(p) for p in self.store.pods_on_node(node)}
        victims = [k for k in bound if k not in keep]
        extra = [p for p in pods if _key(p) not in bound]
        reasons = self.fit_reasons(pod, node, victims, extra)
        return reasons[0] if reasons else None

    def _post_filter(self, pod: Obj, shape_key: bytes, shape: Shape, message: str) -> str:
        """DefaultPreemption for a pod that fits nowhere: ``message`` (the FitError's filter part)
        followed by what preemption answered."""
        if not self._nodes:
            return message
        potential = self._potential.get(shape_key)
        if potential is None:
            checks = self._cluster_checks(shape)
            names = []
            # A PreFilter rejection (volumes) is UnschedulableAndUnresolvable on every node.
            pre_filtered = any(isinstance(c, VolumeState) and c.pre_filter for c in checks)
            for n in [] if pre_filtered else self._static(shape.static).feasible:
                why = self._node_reasons(shape, n, checks)
                # No reason here: the pod failed there only for the room nominees hold (resources).
                if (why and not unresolvable(why[0])) or (not why and self.preemption.has_nominees(n.name)):
                    names.append(n.name)
            potential = self._potential[shape_key] = (len(names), names)
        count, names = potential
        result = self.preemption.run(
            pod,
            num_nodes=len(self._nodes),
            num_potential=count,
            potential=lambda: names,
            fits=self._fits,
            nominated_unresolvable=self._unresolvable_on_nominated(pod, shape),
        )
        return f"{message} {result.message}" if result.message else message

    def _unresolvable_on_nominated(self, pod: Obj, shape: Shape) -> bool:
        """Whether the pod's nominated node fails on an UnschedulableAndUnresolvable filter now (the
        node status ``PodEligibleToPreemptOthers`` reads; a node gone has no status)."""
        name = _nominated_node(pod)
        n = None if name is None else self._nodes.get(name)
        if n is None:
            return False
        static = self._static(shape.static)
        if all(f.name != n.name for f in static.feasible):
            return True  # filters 1-3 failed there: all UnschedulableAndUnresolvable
        why = self._node_reasons(shape, n, self._cluster_checks(shape))
        return bool(why) and unresolvable(why[0])

    def _static(self, static: Static) -> Static:
        """Refresh resource-independent filtering (filters 1-3) if nodes changed."""
        if static.version == self._version:
            return static
        if self._sorted_version != self._version:
            self._sorted_names = sorted(self._nodes)
            self._sorted_version = self._version
        feasible: list[NodeInfo] = []
        reasons: Counter[str] = Counter()
        only = pre_filter_node_names(static.terms)
        for name in self._sorted_names:
            n = self._nodes[name]
            if only is not None and name not in only:
                reasons[REASON_NOT_IN_PRE_FILTER] += 1  # UnschedulableAndUnresolvable, as the others
                continue
            reason = static_reason(n, static.tolerations, static.node_selector, static.terms)
            if reason is None:
                feasible.append(n)  # a node that changes gets a new NodeInfo, and the version moves
            else:
                reasons[reason] += 1
        static.feasible, static.reasons, static.version = feasible, reasons, self._version
        static.positions = {}
        return static

    def _pick(self, shape: Shape, pod: Obj, held: dict[str, list[Obj]]) -> tuple[str | None, str]:
        """Filter the feasible nodes round-robin until enough fit, score those, take the best.

        The hot path of every new pod (hundreds of nodes examined each time): one loop that filters
        and scores as it goes, everything inlined. The reasons why nodes do not fit are only counted
        (``_unfit_message``) when none does. ``held``: nodes where pods nominated with no lower
        priority than ``pod`` hold room, which a node that fits otherwise is checked against in full
        (upstream ``RunFilterPluginsWithNominatedPods``; scores do not count nominees, as upstream's).
        """
        num_all = len(self._nodes)
        if num_all == 0:
            return None, fiterror.NO_NODES
        feasible = self._static(shape.static).feasible
        want = num_feasible_nodes_to_find(num_all)
        total = len(feasible)
        start = self._next_start % total if total else 0
        req = shape.req
        cpu, mem, nz_cpu, nz_mem = req.cpu, req.mem, req.nz_cpu, req.nz_mem
        volumes = self._volumes(shape)
        if volumes is not None and volumes.pre_filter:
            return None, fiterror.message(
                num_all, {}, unresolvable=num_all, pre_filter=volumes.pre_filter, post_filter=""
            )
        interpod = self._interpod(shape)
        spread = self._spread_filter(shape)
        skip: set[int] = set()  # round-robin positions of nodes in domains inter-pod affinity excludes
        excluded = None if interpod is None else interpod.excluded()
        if excluded is not None and total:
            for key, values in excluded:
                positions = shape.static.positions_of(key)
                skip.update((p - start) % total for v in values for p in positions.get(v, ()))
            interpod = None  # fully answered by ``skip``
        # Most pods need only the three checks inlined below; the others take a call per node.
        rare = bool(req.eph or req.scalars or shape.ports or volumes is not None or interpod is not None)
        # With ScheduleAnyway constraints the candidates are scored together once found.
        soft = any(not c.hard for c in shape.spread)
        candidates: list[tuple[NodeInfo, int]] = []
        best: NodeInfo | None = None
        best_score = -1
        found = 0
        processed = total
        nodes: Iterable[tuple[int, NodeInfo]]  # (position in the round-robin order, node)
        if spread is not None and len(spread.skewed) == 1:
            nodes = allowed_domains(shape.static, start, *spread.skewed[0])
        else:
            rotated = feasible[start:] + feasible[:start]
            nodes = enumerate(rotated)
            if spread is not None:
                nodes = [(i, n) for i, n in nodes if spread.reason(n) is None]
        if skip:
            nodes = ((i, n) for i, n in nodes if i not in skip)
        for i, n in nodes:
            u, a = n.usage, n.alloc
            if (
                u.pods + 1 > a.pods
                or (cpu > 0 and u.cpu + cpu > a.cpu)
                or (mem > 0 and u.mem + mem > a.mem)
                or (rare and rare_misfit(shape, n, volumes, interpod))
                or (held and n.name in held and self.fit_reasons(pod, n.name, (), held[n.name]))
            ):
                continue
            # Least allocated: the mean of the free cpu and memory shares, inlined.
            alloc, requested = a.cpu, u.nz_cpu + nz_cpu
            cpu_score = (alloc - requested) * 100 // alloc if alloc > 0 and requested <= alloc else 0
            alloc, requested = a.mem, u.nz_mem + nz_mem
            mem_score = (alloc - requested) * 100 // alloc if alloc > 0 and requested <= alloc else 0
            score = (cpu_score + mem_score) // 2
            if soft:
                candidates.append((n, score))
            elif score > best_score:
                best, best_score = n, score
            found += 1
            if found >= want:
                processed = i + 1
                break
        if total:
            self._next_start = (start + processed) % total
        if candidates:
            best = self._best_spread(shape, candidates)
        if best is not None:
            return best.name, ""
        return None, self._unfit_message(shape, feasible, pod, held)

    def _find(self, plural: str, ns: str | None, name: str) -> Obj | None:
        rt = {
            "persistentvolumeclaims": self.pvc_rt,
            "persistentvolumes": self.pv_rt,
            "storageclasses": self.sc_rt,
        }
        return self.store.find(rt[plural], ns, name)

    def _volumes(self, shape: Shape) -> VolumeState | None:
        return volume_pre_filter(self._find, shape.namespace, shape.claims) if shape.claims else None

    def _spread_filter(self, shape: Shape) -> SpreadFilter | None:
        if not shape.spread:
            return None
        return spread_pre_filter(
            self._pods, self._nodes, self._version, self._eligible, shape.facts, shape.labels, shape.spread
        )

    def _best_spread(self, shape: Shape, candidates: list[tuple[NodeInfo, int]]) -> NodeInfo:
        """LeastAllocated plus PodTopologySpread's normalized score at its weight; ties to the first."""
        nodes = [n for n, _ in candidates]
        spread = spread_scores(
            self._pods,
            self._nodes,
            self._version,
            self._eligible,
            shape.facts,
            shape.spread,
            nodes,
            system=shape.spread_system,
        )
        best, best_score = nodes[0], -1
        for i, (n, score) in enumerate(candidates):
            total = score + (SCORE_WEIGHT * spread[i] if spread is not None else 0)
            if total > best_score:
                best, best_score = n, total
        return best

    def _default_selector(
        self, ns: str, labels: dict[str, str], owner: tuple[str, str] | None
    ) -> LabelSelector:
        """``helper.DefaultSelector`` over the pod's namespace's Services and its controller."""
        controller = None
        if owner is not None and owner[0] in ("ReplicaSet", "StatefulSet"):
            controller = self.store.find(
                self.rs_rt if owner[0] == "ReplicaSet" else self.sts_rt, ns, owner[1]
            )
        return default_selector(self.store.iter_objects(self.services_rt, ns), controller, labels)

    def _interpod(self, shape: Shape) -> InterPodState | None:
        if not (shape.affinity or shape.anti or self._pods.has_existing_anti):
            return None
        version = self._pods.anti_version
        if shape.existing_anti[0] != version:
            shape.existing_anti = (version, self._pods.existing_anti(shape.namespace, shape.labels))
        existing = shape.existing_anti[1]
        if not (shape.affinity or shape.anti or existing):
            return None
        return pre_filter(
            self._pods, self._nodes, shape.namespace, shape.labels, shape.affinity, shape.anti, existing
        )

    def _unfit_message(
        self, shape: Shape, feasible: list[NodeInfo], pod: Obj, held: dict[str, list[Obj]]
    ) -> str:
        """Upstream's FitError message when none of ``feasible`` (or of the other nodes) fits."""
        reasons = Counter(shape.static.reasons)
        not_helpful = sum(reasons.values())  # filters 1-3 are UnschedulableAndUnresolvable
        checks = self._cluster_checks(shape)
        for n in feasible:
            node_reasons = self._node_reasons(shape, n, checks)
            if not node_reasons and n.name in held:
                node_reasons = self.fit_reasons(pod, n.name, (), held[n.name])
            for reason in node_reasons:
                reasons[reason] += 1
            not_helpful += bool(node_reasons) and unresolvable(node_reasons[0])
        # Without the PostFilter's part: ``_post_filter`` adds what preemption itself answered.
        return fiterror.message(len(self._nodes), reasons, unresolvable=not_helpful, post_filter="")

    def _cluster_checks(self, shape: Shape) -> list[VolumeState | SpreadFilter | InterPodState]:
        """The PreFilter states of the plugins that look beyond the node, in the filters' order."""
        states = (self._volumes(shape), self._spread_filter(shape), self._interpod(shape))
        return [st for st in states if st is not None]

    def _node_reasons(
        self, shape: Shape, n: NodeInfo, checks: list[VolumeState | SpreadFilter | InterPodState]
    ) -> list[str]:
        """The failing plugin's reasons for a node that passed filters 1-3: NodePorts, NodeResourcesFit,
        VolumeBinding/VolumeZone, PodTopologySpread, InterPodAffinity, as the default profile orders
        them (``RunFilterPlugins`` stops at the first failure)."""
        if shape.ports and conflicts(shape.ports, n.usage.ports):
            return [REASON_PORTS]
        node_reasons = insufficient(shape.req, n.alloc, n.usage)
        if node_reasons:
            return node_reasons
        for check in checks:
            reason = check.reason(n)
            if reason is not None:
                return [reason]
        return []

    def fit_reasons(
        self, pod: Obj, node_name: str, victims: Collection[ObjKey] = (), extra: Sequence[Obj] = ()
    ) -> list[str]:
        """Why ``pod`` would not fit ``node_name`` if ``victims`` were gone and ``extra`` pods were
        there too ([]: it would fit).

        For preemption and nominations: no store writes and nothing of the scheduler's state changes
        (the victims leave the pod counts only while the question is answered). Node-local filters
        come from ``fit.node_reasons`` over the node's pods minus the victims plus ``extra`` (pods
        nominated there: upstream ``RunFilterPluginsWithNominatedPods``); volumes, topology spread
        and inter-pod affinity from the scheduler's counts without the victims (``extra`` pods do
        not enter those counts: resources, pod count and host ports are what they hold).
        """
        node = self.store.find(self.node_rt, None, node_name)
        n = self._nodes.get(node_name)
        if node is None or n is None:
            return [f'node "{node_name}" not found']
        gone = set(victims)
        pods = [p for p in self.store.pods_on_node(node_name) if _key(p) not in gone]
        reasons = node_reasons(pod, node, [*pods, *extra])
        if reasons:
            return reasons
        shape = self._shapes[self._shape_key(pod)]
        with self._pods.without(gone):
            checks = self._cluster_checks(shape)
            volumes = checks[0] if checks and isinstance(checks[0], VolumeState) else None
            if volumes is not None and volumes.pre_filter:
                return [volumes.pre_filter]
            for check in checks:
                reason = check.reason(n)
                if reason is not None:
                    return [reason]
        return []

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

    def _provision(self, ns: str, claims: tuple[str, ...], node: NodeInfo) -> None:
        """Bind the pod's unbound WaitForFirstConsumer claims to new PVs where it goes (see volumes.py)."""
        now = rfc3339(self.store.clock())
        for name in claims:
            pvc = self.store.find(self.pvc_rt, ns, name)
            if pvc is None or (pvc.get("spec") or {}).get("volumeName"):
                continue
            pv = self.store.create(self.pv_rt, provisioned_pv(pvc, node, now))
            pv_name = pv["metadata"]["name"]

            def bind(o: Obj, pv_name: str = pv_name) -> None:
                o["metadata"].setdefault("annotations", {})[SELECTED_NODE] = node.name
                o["spec"] = {**o.get("spec", {}), "volumeName": pv_name}
                o.setdefault("status", {})["phase"] = "Bound"

            self.store.mutate(self.pvc_rt, ns, name, bind)

    def _mark_gated(self) -> None:
        """Give gated pods without a PodScheduled condition the one upstream's API server adds at
        creation (kubesim's API server does not), so clients see why they wait."""
        keys, self._gated_new = self._gated_new, set()
        for key in keys:
            pod = self.store.find(self.pod_rt, key[0], key[1])
            if pod is None:
                continue
            if any(
                c.get("type") == "PodScheduled" for c in (pod.get("status") or {}).get("conditions") or []
            ):
                continue
            self._write_condition(key, REASON_GATED, MESSAGE_GATED)

    def _mark_unschedulable(self, key: ObjKey, pod: Obj, message: str) -> None:
        for c in (pod.get("status") or {}).get("conditions") or []:
            if (
                c.get("type") == "PodScheduled"
                and c.get("status") == "False"
                and c.get("reason") == "Unschedulable"
                and c.get("message") == message
            ):
                return  # upstream skips the write when the condition is unchanged
        self._write_condition(key, "Unschedulable", message)

    def _write_condition(self, key: ObjKey, reason: str, message: str) -> None:
        now = rfc3339(self.store.clock())

        def mark(o: Obj) -> None:
            conds = o.setdefault("status", {}).setdefault("conditions", [])
            set_condition(conds, "PodScheduled", "False", now, reason, message)

        try:
            self.store.mutate(self.pod_rt, key[0], key[1], mark)
        except errors.ApiError as exc:
            log.debug("scheduler: status of %s/%s not written: %s", key[0], key[1], exc.message)


def _key(pod: Obj) -> ObjKey:
    meta = pod["metadata"]
    return meta.get("namespace", ""), meta["name"]


def _nominated_node(pod: Obj) -> str | None:
    node = (pod.get("status") or {}).get("nominatedNodeName")
    return str(node) if node else None


def _controller_of(meta: Obj) -> tuple[str, str] | None:
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("kind", "")), str(ref.get("name", ""))
    return None


def pending_reason(pod: Obj) -> str | None:
    """The PodScheduled=False message of a pod, if any (for tests and tools)."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message", ""))
    return None


def scheduler_of(controllers: ControllerManager) -> SchedulerController:
    """The running ``SchedulerController`` of a ``KubeSim`` (``scheduler_of(sim.controllers)``)."""
    for c in controllers.controllers:
        if isinstance(c, SchedulerController):
            return c
    raise LookupError("the scheduler is not running (ControllerConfig.scheduler is False)")
