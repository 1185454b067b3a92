"""The provisioner: each batch of pending pods simulated, and one NodeClaim created per planned claim.

As Karpenter's (kubernetes-sigs/karpenter ``pkg/controllers/provisioning/provisioner.go``
``Reconcile``, ``Schedule``, ``CreateNodeClaims``, ``Create``), on the elected replica:

- ``run`` waits for the batcher's window to close, then runs a pass. A pass reads a snapshot of
  the cluster (pods, nodes, NodeClaims, NodePools, EC2NodeClasses, DaemonSets, the volumes that pin
  pods to zones, namespaces); only NodePools that are Ready and not being deleted are planned for,
  each with its EC2NodeClass's instance types from the cloud filtered through the shared
  ``UnavailableOfferings`` (pools that just answered insufficient capacity are not planned again).
- Provisionable pods (``pending.is_provisionable``) are simulated (``scheduling.simulate``); a pod
  nominated to a NodeClaim still in flight (not deleted, its node not initialized) is counted on
  that claim instead, so the next batch does not plan it again (``nominations``). In-flight
  claims are existing capacity to the simulation (``scheduling.cluster.existing_nodes``).
- Before creating, the pools' limits are checked again against live usage (Karpenter's ``Create``
  re-reads the NodePool and refuses a pool whose limits its cluster state's usage exceeds): the
  NodePools, nodes and NodeClaims listed afresh, plus what the claims admitted earlier in the pass
  are charged. Deliberately stricter than Karpenter's ``ExceededBy`` (usage already over the
  limit): a claim whose own charge would take the usage over is refused too, the simulation's own
  rule applied to what is there now, so concurrent creations cannot overshoot a limit. Admitted
  claims are created concurrently (``nodeclaim_template.to_nodeclaim``) and their pods nominated
  (events). Pods no NodePool can take are told why (Warning ``FailedScheduling``, as Karpenter's
  ``PodFailedToScheduleEvent``).
- Pre-spin (docs/designs/launching.md §7, ``doomed``): nodes going away (fenced by kubespot's
  interruption handling when ``prespin``, or their NodeClaim being deleted, as Karpenter's
  ``Schedule`` takes the pods of nodes marked for deletion) are gone to the simulation and their
  reschedulable pods are planned for with the pending ones, while the drain has not evicted them.
- The capacity split (launching.md §6, ``capacity_split``): the claims of a pass are built in
  order and each claim of a pool annotated ``kubespot.io/capacity-split`` is narrowed to the
  capacity type the pool's live NodeClaims (and the pass's earlier ones) call for.
- API errors (409, 429, 5xx, a broken connection) never stop the loop: logged with the pass's
  context, and the pass is tried again ``retry_after`` later, as is one that left pods unplanned.

- Dry run (``node_actions.dry_run``, ``dry_run``): the pass batches, snapshots, simulates and
  checks limits as ever, then creates nothing and nominates nobody: each claim it would create is
  logged ("dry-run: would create NodeClaim for N pods: ..."), counted in
  ``kubespot_nodeclaims_created_total`` with reason ``dry_run`` and told as a Normal ``DryRun``
  event on its NodePool, as the interruption half tells its node (``nominations.dry_run``), once
  per NodePool and pod set within the events' timeout.

``watch_claims`` is the fast fallback (docs/designs/launching.md §2): a NodeClaim deleted (or being
deleted) while pods were nominated to it, typically by the lifecycle controller after an
insufficient-capacity error, releases them and closes the batcher's window at once, so the pods are
planned again without the pools that failed within the next second.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from kubespot.cloud import CloudProvider, UnavailableOfferings
from kubespot.cloud.avoided import avoided_offerings
from kubespot.cloud.pool_risk import PoolRisk
from kubespot.kube import KubeClient, KubeError
from kubespot.kube.custom import CustomObjects
from kubespot.kube.informer import Informer, Informers
from kubespot.model import Clock
from kubespot.observability.metrics import Metrics
from kubespot.scheduling.api.nodepool import NodePoolSpec, parse_nodepool
from kubespot.scheduling.cluster import pools_in_use
from kubespot.scheduling.cluster_plan import plan_cluster, pools_to_plan
from kubespot.scheduling.explain import AvoidedOffering
from kubespot.scheduling.instance_types import InstanceType
from kubespot.scheduling.labels import CAPACITY_TYPE, INSTANCE_TYPE, SPOT
from kubespot.scheduling.nodepool import NodePool, usable_pools
from kubespot.scheduling.pods import PodView
from kubespot.scheduling.requirements import Requirement
from kubespot.scheduling.simulate import Plan, PlannedClaim
from kubespot.scheduling.volumes import MalformedVolume

from .batcher import Batcher
from .capacity_split import Narrowing, capacity_counts, narrowing, split_of
from .doomed import doomed_nodes, without_doomed
from .nodeclaim_template import to_nodeclaim
from .nominations import Nominations
from .pending import is_provisionable, uid_of
from .pod_validation import invalid_reason
from .relaunch import RelaunchMemory, widen

__all__ = ["NODECLAIMS", "PassResult", "Provisioner", "dry_run_summary"]

log = logging.getLogger("kubespot.controller.provisioning")

Obj = dict[str, Any]

NODECLAIMS = "apis/karpenter.sh/v1/nodeclaims"
#: Seconds a created NodeClaim's charge is kept at most when the cache never shows it launched nor
#: gone (the launch timeout, 5 min, deletes a claim that does not launch; the cache then says so).
CHARGE_TTL = 900.0
#: kind -> where the API serves it: what a pass reads.
SNAPSHOT = {
    "Pod": "api/v1/pods",
    "Node": "api/v1/nodes",
    "NodeClaim": NODECLAIMS,
    "NodePool": "apis/karpenter.sh/v1/nodepools",
    "EC2NodeClass": "apis/karpenter.k8s.aws/v1/ec2nodeclasses",
    "DaemonSet": "apis/apps/v1/daemonsets",
    "PersistentVolumeClaim": "api/v1/persistentvolumeclaims",
    "PersistentVolume": "api/v1/persistentvolumes",
    "StorageClass": "apis/storage.k8s.io/v1/storageclasses",
    "Namespace": "api/v1/namespaces",
}


@dataclass
class PassResult:
    """What one pass did."""

    #: Names of the NodeClaims created.
    created: list[str] = field(default_factory=list)
    #: Planned claims not created: (nodepool, why).
    refused: list[tuple[str, str]] = field(default_factory=list)
    #: Pods planned for, and pods counted on their in-flight claim instead.
    pending: int = 0
    nominated: int = 0
    #: Pods of nodes going away (pre-spin), planned for or counted on their claim.
    moving: int = 0
    plan: Plan | None = None
    #: The pass must be tried again (an API error, pods left unplanned).
    retry: bool = False
    #: Under dry run, what each claim not created would have been (``dry_run_summary``).
    would_create: list[str] = field(default_factory=list)
    #: Seconds per phase (``window``: from the batch's first trigger to the pass; ``lists``,
    #: ``simulation``, ``creation``): where a fallback's time goes (docs/PERFORMANCE.md).
    timings: dict[str, float] = field(default_factory=dict)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _condition(obj: Mapping[str, Any], type_: str) -> str:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == type_:
            return str(c.get("status") or "")
    return ""


def _is_static(obj: Mapping[str, Any]) -> bool:
    """A static NodePool (``spec.replicas`` set: core ``pkg/utils/nodepool`` ``IsStatic``), sized
    by its replica count alone, never by pending pods."""
    spec = obj.get("spec")
    return isinstance(spec, Mapping) and spec.get("replicas") is not None


def _ready_pools(objs: Sequence[Obj]) -> list[Obj]:
    """NodePools Karpenter provisions for: Ready, not being deleted and not static (``provisioner.go``
    ``NewScheduler``)."""
    return [
        o
        for o in objs
        if _condition(o, "Ready") == "True" and not _meta(o).get("deletionTimestamp") and not _is_static(o)
    ]


def _in_flight(claims: Sequence[Obj], node_names: set[str]) -> dict[str, str]:
    """NodeClaim name -> the host its nominated pods count on (its node once registered, else
    the claim itself, as ``existing_nodes`` names it), for claims not deleted and not initialized."""
    out: dict[str, str] = {}
    for claim in claims:
        meta = _meta(claim)
        if meta.get("deletionTimestamp") or _condition(claim, "Initialized") == "True":
            continue
        name = str(meta.get("name") or "")
        node = str((claim.get("status") or {}).get("nodeName") or "")
        out[name] = node if node in node_names else name
    return out


def _unplannable_why(pod: Mapping[str, Any]) -> str | None:
    """Why ``pod`` is left out of the plan (its spec unreadable, or a requirement no NodeClaim may
    carry: ``pod_validation``), else None."""
    try:
        PodView.of(pod)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return f"its spec cannot be read: {exc}"
    return invalid_reason(pod)


def dry_run_summary(planned: PlannedClaim) -> str:
    """What a dry run says of a claim it does not create: pods, types, capacity type, zones."""
    types = ", ".join(planned.instance_types[:5]) + (
        f" and {len(planned.instance_types) - 5} other(s)" if len(planned.instance_types) > 5 else ""
    )
    zones = ", ".join(planned.zones) or "any"
    return (
        f"would create NodeClaim for {len(planned.pods)} pods: nodepool {planned.pool}, "
        f"types {types}, capacity type {planned.capacity_type}, zones {zones}"
    )


class Provisioner:
    """Pending pods to NodeClaims, batch by batch."""

    def __init__(
        self,
        *,
        kube: KubeClient,
        cloud: CloudProvider,
        batcher: Batcher,
        nominations: Nominations,
        clock: Clock,
        unavailable: UnavailableOfferings | None = None,
        retry_after: float = 10.0,
        prespin: bool = True,
        metrics: Metrics | None = None,
        risk: PoolRisk | None = None,
        informers: Informers | None = None,
        dry_run: bool = False,
    ) -> None:
        self._kube = kube
        #: Say what would be created; create nothing (the module docstring's dry-run point).
        self.dry_run = dry_run
        #: Where a pass reads the cluster: one informer per kind (shared with the operator's other
        #: readers of the same kinds), never a fresh LIST per pass (Karpenter's informer cache).
        self.informers = informers if informers is not None else Informers(kube)
        self._cache: dict[str, Informer] = {kind: self.informers.get(path) for kind, path in SNAPSHOT.items()}
        #: NodeClaims this process created that the cache has not shown launched (nor gone) yet:
        #: name -> (pool, what it is charged against the pool's limits, when, the object stored).
        #: Karpenter puts a created NodeClaim in its cluster state at once (``Create``:
        #: ``cluster.UpdateNodeClaim``) for this race: a claim the cache does not show yet is still
        #: in flight to the next pass (its pods count on it), and one not launched yet (no
        #: capacity) still counts against its pool's limits.
        self._charges: dict[str, tuple[str, dict[str, int], float, Obj]] = {}
        self._cache["NodeClaim"].subscribe(self._charge_seen)
        self._metrics = metrics
        self._risk = risk
        #: The last plan made and the offerings the launch path avoided then (its explanations:
        #: ``scheduling.report``'s ``avoided``).
        self.last_plan: tuple[Plan, list[AvoidedOffering]] | None = None
        self._cloud = cloud
        self.batcher = batcher
        self.nominations = nominations
        self._clock = clock
        self._unavailable = unavailable
        self._retry_after = retry_after
        #: Fenced nodes count as going away (launching.md §7); off, only deleted ones do.
        self.prespin = prespin
        self.nodeclaims = CustomObjects(kube, NODECLAIMS)
        self._retry_task: asyncio.Task[None] | None = None
        #: When ``run`` started and the last pass finished (None while not running here: /healthz).
        self.started: datetime | None = None
        self.last_pass: datetime | None = None
        #: When the pass under way started (None between passes).
        self.pass_started: datetime | None = None
        self.passes = 0
        #: NodeClaims seen deleted lately: one deleted before its creation's answer was handled
        #: (a launch failing within milliseconds) still releases its pods (``_create``).
        self._gone: dict[str, float] = {}
        #: What the last pass did (for tests and logs).
        self.last_result: PassResult | None = None
        #: Claims refused for insufficient capacity and their pods: replacements go wide (§2b).
        self.relaunch = RelaunchMemory()

    # -- the loops --------------------------------------------------------------------------------

    async def run(self) -> None:
        self.started = self._clock.now()
        # Whatever is pending when this replica starts leading is planned without waiting for an
        # event (the pod watch's first listing triggers too; this covers a cluster with no pods).
        self.batcher.trigger("start")
        try:
            while True:
                await self.batcher.wait()
                await self.run_pass(window=self.batcher.window)
        finally:
            self.started = self.last_pass = self.pass_started = None
            if self._retry_task is not None:
                self._retry_task.cancel()
                self._retry_task = None
            # Leadership lost: the informers drop their caches, and a claim deleted before this
            # replica leads again never comes back as a deletion from the fresh LIST. What was
            # remembered of this term's claims must go with it, or a phantom stays in flight and
            # charged (Karpenter exits on a lost lease and rebuilds its cluster state).
            self._charges.clear()
            self._gone.clear()
            self.nominations.keep_only(())

    async def watch_claims(self) -> None:
        """Release the pods of a NodeClaim that is deleted, and re-plan them at once: the NodeClaim
        informer tells ``_claim_changed`` of every change (and of the claims a re-list found gone)
        after its cache holds it, so the pass it triggers reads the deletion."""
        unsubscribe = self._cache["NodeClaim"].subscribe(self._claim_changed)
        try:
            await self._cache["NodeClaim"].wait_synced()
            await asyncio.Event().wait()
        finally:
            unsubscribe()

    def _claim_changed(self, op: str, obj: Obj) -> None:
        if op == "DELETED" or _meta(obj).get("deletionTimestamp"):
            self._released(str(_meta(obj).get("name") or ""))

    def _charge_seen(self, op: str, obj: Obj) -> None:
        """The cache shows a claim this process created launched (its capacity counts now) or gone:
        its remembered charge is no longer needed."""
        name = str(_meta(obj).get("name") or "")
        if name in self._charges and (op == "DELETED" or (obj.get("status") or {}).get("capacity")):
            del self._charges[name]

    def _usage(self, nodes: Sequence[Obj], claims: Sequence[Obj]) -> dict[str, dict[str, int]]:
        """What each pool uses against its limits, by name (a pool absent uses nothing): its nodes
        and NodeClaims as the cache shows them, the claims created here and not shown launched yet
        counted at their charge instead. Every pool's at once: each count reads every node."""
        now = self._clock.monotonic()
        for name in [n for n, (_, _, at, _) in self._charges.items() if now - at > CHARGE_TTL]:
            del self._charges[name]  # never seen launched nor gone: the launch timed out long ago
        usage = pools_in_use(nodes, [c for c in claims if _meta(c).get("name") not in self._charges])
        for pool, charge, _, _ in self._charges.values():
            used = usage.setdefault(pool, {"nodes": 0})
            for k, v in charge.items():
                used[k] = used.get(k, 0) + v
        return usage

    def _released(self, claim: str) -> None:
        now = self._clock.monotonic()
        self._gone[claim] = now
        if len(self._gone) > 1024:
            self._gone = {k: t for k, t in self._gone.items() if now - t < 60.0}
        pods = self.nominations.release(claim)
        wide = self.relaunch.released(claim, pods)
        if pods:
            log.info(
                "provisioning: nodeclaim %s is gone%s; re-planning its %d pods now",
                claim,
                " (insufficient capacity: its replacement carries every type that fits)" if wide else "",
                len(pods),
            )
            self.batcher.trigger_now(f"nodeclaim/{claim}")

    def capacity_refused(self, claim: str) -> None:
        """The NodeClaim controller is deleting ``claim`` for insufficient capacity: its pods'
        replacement claim is widened (``relaunch``). Called before the deletion is sent."""
        self.relaunch.refused(claim)

    def _retry_later(self) -> None:
        if self._retry_task is not None and not self._retry_task.done():
            return

        async def later() -> None:
            await self._clock.sleep(self._retry_after)
            self.batcher.trigger("retry")

        self._retry_task = asyncio.ensure_future(later())

    # -- one pass ---------------------------------------------------------------------------------

    async def run_pass(self, *, window: float | None = None) -> PassResult:
        self.pass_started = self._clock.now()
        result = PassResult()
        if window is not None:
            result.timings["window"] = window
        try:
            await self._pass(result)
        except KubeError as err:
            log.warning("provisioning: pass abandoned, retrying in %g s: %s", self._retry_after, err)
            result.retry = True
        except MalformedVolume as err:
            log.warning("provisioning: pass abandoned, retrying in %g s: %s", self._retry_after, err)
            result.retry = True
        except Exception:  # a bug must not stop provisioning for good: logged, tried again later
            log.exception("provisioning: pass failed, retrying in %g s", self._retry_after)
            result.retry = True
        finally:
            self.pass_started = None
            self.passes += 1
        if result.retry:
            self._retry_later()
        if result.pending:
            t = result.timings
            log.info(
                "provisioning: pass created %d nodeclaims for %d pods in %.3f s (window %s %.3f s, "
                "lists %.3f s, prepare %.3f s, simulation %.3f s, build %.3f s, creation %.3f s)",
                len(result.created),
                result.pending,
                sum(v for k, v in t.items() if k != "window"),
                self.batcher.last_close,
                t.get("window", 0.0),
                t.get("lists", 0.0),
                t.get("prepare", 0.0),
                t.get("simulation", 0.0),
                t.get("build", 0.0),
                t.get("creation", 0.0),
            )
        self.last_pass = self._clock.now()
        self.last_result = result
        return result

    async def _snapshot(self) -> dict[str, Sequence[Obj]]:
        """Every kind a pass reads, from the informers (started here if nobody runs them; the
        first pass waits for their first LIST, as Karpenter's waits for its cluster state's sync)."""
        await asyncio.gather(*(informer.wait_synced() for informer in self._cache.values()))
        objects: dict[str, Sequence[Obj]] = {kind: informer.items() for kind, informer in self._cache.items()}
        claims = self._cache["NodeClaim"]
        for name in [n for n in self._charges if n in self._gone]:
            del self._charges[name]  # shown deleted (or deleting): no longer in flight nor charged
        unseen = [obj for name, (*_, obj) in self._charges.items() if claims.get(name) is None]
        if unseen:
            # Created here, not brought by the watch yet: in flight all the same (Karpenter's
            # cluster.UpdateNodeClaim after Create).
            objects["NodeClaim"] = (*objects["NodeClaim"], *unseen)
        return objects

    async def _pass(self, result: PassResult) -> None:
        started = self._clock.monotonic()
        objects = await self._snapshot()
        read = self._clock.monotonic()
        result.timings["lists"] = read - started
        all_nodes, all_claims = objects["Node"], objects["NodeClaim"]
        # Nodes going away are gone to the simulation and their pods pending (launching.md §7).
        doomed = without_doomed(
            all_nodes, all_claims, objects["Pod"], doomed_nodes(all_nodes, all_claims, fence=self.prespin)
        )
        nodes, claims = doomed.nodes, doomed.claims
        moving = {uid_of(p) for p in doomed.moving} | doomed.held
        result.moving = len(moving)
        # Each moving pod's going node (its planned copy is unbound): the pre-spin event names it.
        going_from = {
            uid: str((p.get("spec") or {}).get("nodeName") or "")
            for p in objects["Pod"]
            if (uid := uid_of(p)) in moving
        }
        node_names = {str(_meta(n).get("name") or "") for n in nodes}
        in_flight = _in_flight(claims, node_names)

        # Pods nominated to an in-flight claim count on it; the others that wait are planned for.
        pending: list[Obj] = []
        unplannable: list[tuple[Obj, str]] = []
        counted: list[Obj] = []
        kept: list[str] = []
        for pod in [*doomed.pods, *doomed.moving]:
            if uid_of(pod) not in moving and not is_provisionable(pod):
                counted.append(pod)
                continue
            uid = uid_of(pod)
            claim = self.nominations.claim_of(uid)
            host = in_flight.get(claim) if claim is not None else None
            if host is not None:
                kept.append(uid)
                counted.append({**pod, "spec": {**(pod.get("spec") or {}), "nodeName": host}})
            elif (why := _unplannable_why(pod)) is None:
                pending.append(pod)
            else:
                unplannable.append((pod, why))
        self.nominations.keep_only(kept)
        result.nominated = len(kept)
        result.pending = len(pending)
        if unplannable:
            # One pod nobody can read (a request "1Gb") or no NodeClaim may carry (a restricted
            # key) must not stop the others being planned, nor be packed with them.
            await self.nominations.failed_to_schedule(unplannable)
        if not pending:
            return

        pool_objs = {str(_meta(o).get("name") or ""): o for o in _ready_pools(objects["NodePool"])}
        # A Ready pool whose class was just deleted is left out: the status loop will say so.
        todo = pools_to_plan(pool_objs.values(), objects["EC2NodeClass"])
        pools = [pool for pool, _ in todo.pools]
        types = {pool.name: await self._cloud.instance_types(pool, cls) for pool, cls in todo.pools}
        started = self._clock.monotonic()
        # The pods sorted out (doomed nodes, in-flight claims, events) and the catalog read.
        result.timings["prepare"] = started - read
        # The one planning flow ``kubespot plan`` runs too (scheduling.cluster_plan), with what only
        # the provisioner knows as its inputs: doomed nodes gone, pods counted on in-flight claims,
        # the claims created here charged, the pools that just refused capacity left out.
        # The simulation is pure and can take seconds of CPU on a big plan (the LP's searches):
        # it runs in a worker thread so this loop keeps renewing the leader Lease, following the
        # watches and answering /healthz meanwhile. What it reads is fixed here, on the loop: the
        # informers replace objects rather than edit them, the pass's own lists are its own, and
        # the unavailable offerings (which the launch path marks concurrently) are applied now.
        unavailable = self._unavailable
        offered = {
            name: unavailable.apply(ts) if unavailable is not None else list(ts) for name, ts in types.items()
        }
        usage = self._usage(all_nodes, all_claims)
        in_use = {pool.name: usage.get(pool.name, {"nodes": 0}) for pool in pools}
        # The explanation read with the offers: a mark made or expired during the simulation was
        # not what the plan saw.
        avoided = avoided_offerings(self._unavailable, self._risk)
        plan, inputs = await asyncio.to_thread(
            plan_cluster,
            {**objects, "Node": nodes, "NodeClaim": claims, "Pod": counted},
            pools,
            offered,
            pending=pending,
            in_use=in_use,
        )
        catalog, views = inputs.catalog, inputs.pending
        for skipped in inputs.incompatible:
            # scheduling/scheduler.go NewScheduler: the pool is skipped, with a Warning on it.
            await self.nominations.no_compatible_instance_types(pool_objs[skipped])
        result.plan = plan
        self.last_plan = (plan, avoided)
        simulated = self._clock.monotonic()
        result.timings["simulation"] = simulated - started
        by_key = {f"{_meta(p).get('namespace') or 'default'}/{_meta(p).get('name')}": p for p in pending}
        if plan.unschedulable:
            await self.nominations.failed_to_schedule(
                (by_key[k], "; ".join(why) or "no NodePool can run it")
                for k, why in plan.unschedulable.items()
                if k in by_key
            )
            log.info(
                "provisioning: %d of %d pending pods cannot be scheduled: %s (%d offerings avoided now)",
                len(plan.unschedulable),
                len(pending),
                "; ".join(f"{k}: {v[0]}" for k, v in list(plan.unschedulable.items())[:3] if v),
                len(avoided),
            )
            result.retry = True
        if not plan.claims:
            return
        limits_left: dict[str, dict[str, int]] = {}
        admitted = await self._admit(plan.claims, {p.name: p for p in pools}, result, limits_left)
        view_of = {v.key: v for v in views}
        specs = {name: parse_nodepool(obj).spec for name, obj in pool_objs.items()}
        splits = {name: split_of(obj) for name, obj in pool_objs.items()}
        counts: dict[str, dict[str, int]] = {}
        bodies: list[Obj] = []
        narrowed: list[Narrowing | None] = []
        # Built in order, so the split counts the claims of this pass before the next one
        # (they are created concurrently).
        pools_by_name = {p.name: p for p in pools}
        for i, planned in enumerate(admitted):
            planned, body = self._build(
                planned,
                specs[planned.pool],
                str(_meta(pool_objs[planned.pool]).get("uid") or ""),
                catalog.get(planned.pool, {}),
                pool=pools_by_name[planned.pool],
                views=[view_of[k] for k in planned.pods if k in view_of],
                wide=self.relaunch.wide(uid_of(by_key[k]) for k in planned.pods if k in by_key),
                limits_left=limits_left.get(planned.pool),
            )
            admitted[i] = planned
            split = splits.get(planned.pool)
            if split is not None and planned.pool not in counts:
                # Live capacity: a doomed node is going, its replacement must not count it.
                counts[planned.pool] = capacity_counts(planned.pool, nodes, claims)
            # The split's narrowing is told on the claim and its pool once it exists (§6).
            told = narrowing(body, split, counts[planned.pool]) if split is not None else None
            if told is not None:
                # What the claim now asks for (the created-claims metric labels it so).
                admitted[i] = replace(planned, capacity_type=told.capacity_type)
            narrowed.append(told)
            bodies.append(body)
        if self.dry_run:
            for planned in admitted:
                await self._would_create(planned, pool_objs[planned.pool], result)
            return
        started = self._clock.monotonic()
        # The events of unschedulable pods, the limits' re-check, the NodeClaims built.
        result.timings["build"] = started - simulated
        outcomes = await asyncio.gather(
            *(
                self._create(body, planned, pods=[by_key[k] for k in planned.pods if k in by_key])
                for planned, body in zip(admitted, bodies, strict=True)
            )
        )
        result.timings["creation"] = self._clock.monotonic() - started
        for planned, outcome, split_told in zip(admitted, outcomes, narrowed, strict=True):
            if outcome is not None and split_told is not None:
                await self.nominations.capacity_split(
                    outcome[0],
                    pool_objs[planned.pool],
                    split_told.capacity_type,
                    split_told.message,
                    claim_uid=outcome[1],
                )
            if outcome is None:
                result.refused.append((planned.pool, "create failed"))
                result.retry = True
            else:
                name, claim_uid = outcome
                result.created.append(name)
                # Pods of a node going away make it a pre-spin (launching.md §7).
                going = [by_key[k] for k in planned.pods if k in by_key and uid_of(by_key[k]) in moving]
                if self._metrics is not None:
                    reason = "prespin" if going else "provisioned"
                    self._metrics.nodeclaim_created(planned.pool, planned.capacity_type, reason)
                doomed_names = sorted({going_from.get(uid_of(p), "") for p in going} - {""})
                if doomed_names:
                    await self.nominations.prespin_launching(name, doomed_names, uid=claim_uid)

    async def _would_create(self, planned: PlannedClaim, pool_obj: Obj, result: PassResult) -> None:
        """Dry run: say what the NodeClaim for ``planned`` would be; create nothing."""
        what = dry_run_summary(planned)
        result.would_create.append(what)
        told = await self.nominations.dry_run(pool_obj, planned.pods, f"Dry run: {what}")
        if told:
            # Logged and counted once per pool and pod set within the events' timeout, as the
            # event: a pending pod is batched again every 10 s and would repeat it.
            log.info("dry-run: %s", what)
            if self._metrics is not None:
                self._metrics.nodeclaim_created(planned.pool, planned.capacity_type, "dry_run")

    async def _admit(
        self,
        planned: list[PlannedClaim],
        pools: Mapping[str, NodePool],
        result: PassResult,
        left: dict[str, dict[str, int]],
    ) -> list[PlannedClaim]:
        """The claims within their pool's limits against live usage (see the module docstring);
        ``left`` is filled with what each limited pool's limits still leave once they are charged
        (room a widened relaunch may use, ``_build``)."""
        if not any(pools[c.pool].limits for c in planned):
            return list(planned)
        # The cache as it is now (it moved on while the pass simulated and awaited the cloud): the
        # limits as they are now (an edit since the snapshot counts), else the snapshot's.
        latest, _ = usable_pools(self._cache["NodePool"].items())
        nodes, claims = self._cache["Node"].items(), self._cache["NodeClaim"].items()
        limits_of = {p.name: p.limits for p in pools.values()} | {p.name: p.limits for p in latest}
        usage = self._usage(nodes, claims)
        admitted: list[PlannedClaim] = []
        for claim in planned:
            limits = limits_of.get(claim.pool, {})
            if not limits:
                admitted.append(claim)
                continue
            used = usage.setdefault(claim.pool, {"nodes": 0})
            over = [
                k for k, limit in limits.items() if used.get(k, 0) + claim.limits_charged.get(k, 0) > limit
            ]
            if over:
                log.warning(
                    "provisioning: not creating a nodeclaim of nodepool %s for %d pods: limits %s "
                    "would be exceeded (live usage %s)",
                    claim.pool,
                    len(claim.pods),
                    ",".join(sorted(over)),
                    {k: used.get(k, 0) for k in sorted(over)},
                )
                result.refused.append((claim.pool, f"limits exceeded: {','.join(sorted(over))}"))
                result.retry = True
                continue
            for k, v in claim.limits_charged.items():
                used[k] = used.get(k, 0) + v
            admitted.append(claim)
        for name in {c.pool for c in planned}:
            if limits_of.get(name):
                used = usage.get(name, {})
                left[name] = {k: limit - used.get(k, 0) for k, limit in limits_of[name].items()}
        return admitted

    @staticmethod
    def _allowed_capacity(pool: NodePool, views: list[PodView]) -> Requirement:
        """The capacity types the pool and the claim's pods allow."""
        allowed = pool.requirements.get_or_any(CAPACITY_TYPE)
        for view in views:
            allowed = allowed.intersection(view.requirements.get_or_any(CAPACITY_TYPE))
        return allowed

    def _build(
        self,
        planned: PlannedClaim,
        spec: NodePoolSpec,
        pool_uid: str,
        types: Mapping[str, InstanceType],
        *,
        pool: NodePool,
        views: list[PodView],
        wide: bool,
        limits_left: dict[str, int] | None = None,
    ) -> tuple[PlannedClaim, Obj]:
        """The NodeClaim for ``planned`` (``to_nodeclaim``); with ``wide``, the replacement of a
        claim refused for insufficient capacity, carrying every type that fits (``relaunch.widen``)
        in the capacity types its NodeClaim will allow (a spot claim is opened to ``allowed``) and
        within its charge plus what the pool's limits still leave (``limits_left``, updated with
        the widened charge)."""
        allowed = self._allowed_capacity(pool, views)
        if wide:
            opened = (
                allowed if planned.capacity_type == SPOT else planned.requirements.get_or_any(CAPACITY_TYPE)
            )
            named = pool.requirements.get_or_any(INSTANCE_TYPE)
            for view in views:
                named = named.intersection(view.requirements.get_or_any(INSTANCE_TYPE))
            room = None
            if limits_left is not None:
                room = {k: v + planned.limits_charged.get(k, 0) for k, v in limits_left.items()}
            charged = planned.limits_charged
            planned = widen(planned, list(types.values()), opened, named, room)
            if limits_left is not None:
                for k in limits_left:
                    limits_left[k] -= planned.limits_charged.get(k, 0) - charged.get(k, 0)
        return planned, to_nodeclaim(planned, spec, pool_uid, types, allowed_capacity=allowed)

    async def _create(self, obj: Obj, planned: PlannedClaim, *, pods: list[Obj]) -> tuple[str, str] | None:
        """The created claim's name and UID; None when the create failed."""
        try:
            stored = await self.nodeclaims.create(obj)
        except KubeError as err:
            log.warning(
                "provisioning: creating a nodeclaim of nodepool %s for %d pods failed (%s), "
                "retrying in the next batch: %s",
                planned.pool,
                len(planned.pods),
                err.code,
                err,
            )
            return None
        name = str(_meta(stored).get("name") or "")
        seen = self._cache["NodeClaim"].get(name) or stored
        if name not in self._gone and not (seen.get("status") or {}).get("capacity"):
            # Until the cache shows it launched (or gone): see ``_charges``. One the cache has shown
            # deleted already (its DELETED handled before this answer) is not in flight: Karpenter's
            # ``cluster.DeleteNodeClaim`` removes it whatever the order.
            charge = {"nodes": 1, **planned.limits_charged}
            self._charges[name] = (planned.pool, charge, self._clock.monotonic(), stored)
        log.info(
            "created nodeclaim %s: nodepool %s, %d pods, requests %s, instance types %s",
            name,
            planned.pool,
            len(planned.pods),
            obj["spec"]["resources"]["requests"],
            ", ".join(planned.instance_types[:5])
            + (f" and {len(planned.instance_types) - 5} other(s)" if len(planned.instance_types) > 5 else ""),
        )
        await self.nominations.nominate(pods, name)
        if name in self._gone:
            self._released(name)  # deleted while this answer was on its way: re-plan now
        return name, str(_meta(stored).get("uid") or "")
