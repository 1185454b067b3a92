"""The NodeClaim lifecycle loop: every NodeClaim reconciled when it or its Node changes, and when a
timeout or a retry is due, as Karpenter's lifecycle controller (kubernetes-sigs/karpenter
``pkg/controllers/nodeclaim/lifecycle/controller.go``: NodeClaims watched, Nodes watched and mapped
to their claim by provider id, a per-object exponential rate limit of 1 s to 1 min). Both kinds come
from the process's shared informers (``kube.informer``: the caches the provisioner's passes read,
as Karpenter's controllers share controller-runtime's): their handlers tell the loop every change,
and of a re-list every object (what it found gone as deleted). The loop indexes the objects they
hand over (references, never copies) by name and provider id, and keeps the newer versions its
own writes returned until the informer brings them. It starts once both informers have synced:
an empty cache before its first LIST is not "no claims".

One reconcile of a claim not being deleted: the finalizer ``karpenter.sh/termination`` added
(conditional on the version read) before anything is launched; launch (``launch``); after a launch
its result is written at once and the claim looked at again; otherwise registration, initialization
and liveness (``lifecycle.advance``), the Node writes they ask for, the claim's labels and
annotations (merge patch) then its status (PUT with the version read). A deleted claim goes to
``termination``. At most one task works on a claim at a time; a change meanwhile makes it due again.

Never crashes on the API: 404 ends the reconcile (the watch says the rest), 409 retries soon after
the watch brought the newer object, anything else (429, 5xx, the cloud failing) is logged with the
claim and retried with ``model.backoff.full_jitter``. The state is rebuilt from the API on every
start (the lease won again): the informers' objects make every claim due, and the cloud's instances
(``cloud.list``, by the NodeClaim name they are tagged with) give a claim whose status write was
lost its instance back without a launch call (the cloud's idempotent launches would too). A launch
whose status write failed is remembered by the claim's UID, as core ``lifecycle/launch.go``
``Reconcile`` caches the created claim: the retry writes it without calling the cloud or counting
the launch again. ``started`` and
``last_pass`` (when the dispatcher last ran) are what /healthz reads; both are cleared on stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import logging
import random
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from kubespot.cloud.provider import CloudNodeClaim, CloudProvider
from kubespot.config.launch import LaunchSettings
from kubespot.kube import KubeError, ObjectRef
from kubespot.kube.custom import CustomObjects
from kubespot.kube.informer import Informer, Informers
from kubespot.model import Clock
from kubespot.model.backoff import full_jitter
from kubespot.model.clock import wait_event
from kubespot.observability.metrics import Metrics
from kubespot.scheduling.api.conditions import Condition
from kubespot.scheduling.labels import ON_DEMAND

from .launch import INSUFFICIENT, INSUFFICIENT_CAPACITY, LaunchOutcome, allows_spot, launch, populate
from .lifecycle import advance
from .liveness import LAUNCH_TIMEOUT, REGISTRATION_TIMEOUT, liveness
from .objects import (
    LAUNCHED,
    NODECLAIM_PHASES,
    TERMINATION_FINALIZER,
    Obj,
    annotations_of,
    deleting,
    finalizers,
    is_unknown,
    labels,
    managed,
    name,
    node_provider_id,
    phase_of,
    provider_id,
    resource_version,
    set_conditions,
    uid,
)
from .registration import RegistrationOutcome, outcome
from .termination import Events, Terminator

__all__ = ["NodeClaimLoop"]

log = logging.getLogger("kubespot.controller.nodeclaim")

CLAIM, NODE = "NodeClaim", "Node"
#: Attempts of one reconcile on re-read copies when a write conflicts, before the backoff.
CONFLICT_RETRIES = 3


class _Retry(Exception):
    """The reconcile wrote what it could and wants the backoff (a launch that failed)."""


def _newer(new: Obj, old: Obj | None) -> bool:
    if old is None:
        return True
    try:
        return int(resource_version(new)) >= int(resource_version(old))
    except ValueError:
        return True


class NodeClaimLoop:
    """Reconciles every NodeClaim while it runs (on the leader)."""

    def __init__(
        self,
        *,
        claims: CustomObjects,
        nodes: CustomObjects,
        informers: Informers,
        cloud: CloudProvider,
        terminator: Terminator,
        settings: LaunchSettings,
        clock: Clock,
        recorder: Events | None = None,
        metrics: Metrics | None = None,
        retry_base: float = 1.0,
        retry_cap: float = 60.0,
        concurrency: int = 64,
        idle_wake: float = 30.0,
        rng: Callable[[], float] = random.random,
        on_insufficient_capacity: Callable[[str], None] | None = None,
        on_registration: Callable[[RegistrationOutcome], None] | None = None,
    ) -> None:
        #: Writes and the re-reads after a conflict; the objects themselves come from the informers.
        self._claims_api = claims
        self._nodes_api = nodes
        self.informers = informers
        self._cache: dict[str, Informer] = {
            CLAIM: informers.get(claims.path),
            NODE: informers.get(nodes.path),
        }
        self._cloud = cloud
        self._terminator = terminator
        self._settings = settings
        self._clock = clock
        self._recorder = recorder
        self._metrics = metrics
        #: UIDs of claims whose timeout was counted (insertion-ordered, bounded).
        self._timed_out: dict[str, None] = {}
        self._retry_base, self._retry_cap = retry_base, retry_cap
        self._slots = asyncio.Semaphore(concurrency)
        self._idle_wake = idle_wake
        self._rng = rng
        #: Told a claim's name before it is deleted for insufficient capacity (the operator wires
        #: the provisioner's, whose replacement for its pods then carries every type that fits).
        self.on_insufficient_capacity = on_insufficient_capacity
        #: Told each claim that registers or times out (the operator wires the NodePool status
        #: loop's, which keeps the pool's ``NodeRegistrationHealthy``; launching.md §4).
        self.on_registration = on_registration
        self.claims: dict[str, Obj] = {}
        self.nodes: dict[str, Obj] = {}
        #: provider id → names of the Nodes carrying it, and of the claims that launched it.
        self._by_pid: dict[str, set[str]] = {}
        self._claims_by_pid: dict[str, set[str]] = {}
        #: What the cloud runs for claims not marked launched, by claim name (read at start).
        self._found: dict[str, CloudNodeClaim] = {}
        #: What this loop launched, by claim UID (insertion-ordered, bounded): a retry after the
        #: status write failed must neither call the cloud nor count the launch again.
        self._launched: dict[str, CloudNodeClaim] = {}
        self._due: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        #: claim → (its task, when it started).
        self._running: dict[str, tuple[asyncio.Task[None], datetime]] = {}
        self._wake = asyncio.Event()
        self.started: datetime | None = None
        self.last_pass: datetime | None = None
        #: Reconciles that failed, by kind of failure (for tests and metrics).
        self.errors: dict[str, int] = {}
        #: Claims this loop deleted whose deletion the watch has not brought yet: the echo of an
        #: earlier write must not launch them again (a wasted launch call after insufficient capacity).
        self._deleted: set[str] = set()

    # -- the loop ---------------------------------------------------------------------------------

    async def run(self) -> None:
        self.started = self._clock.now()
        self.claims.clear()
        self.nodes.clear()
        self._by_pid.clear()
        self._claims_by_pid.clear()
        self._due.clear()
        unsubscribe: list[Callable[[], None]] = []
        try:
            # Started here if nobody runs them yet (the operator's ``informers`` runnable does).
            await asyncio.gather(*(informer.wait_synced() for informer in self._cache.values()))
            self._found = await self._instances()
            # Subscribed before the caches are read: nothing that changes from here on is missed,
            # and whatever changed meanwhile is in what they hold now.
            for kind in (NODE, CLAIM):
                unsubscribe.append(self._cache[kind].subscribe(functools.partial(self._told, kind)))
            self._replace_all(NODE, self._cache[NODE].items())
            self._replace_all(CLAIM, self._cache[CLAIM].items())
            while True:
                self._dispatch()
                self.last_pass = self._clock.now()
                await self._wait()
        finally:
            self.started = self.last_pass = None
            for stop in unsubscribe:
                stop()
            tasks = [t for t, _ in self._running.values()]
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self._running.clear()

    async def _instances(self) -> dict[str, CloudNodeClaim]:
        """The cloud's instances by the claim name they are tagged with: a claim whose launch
        outlived its status write (the operator stopped in between) takes its instance from here
        instead of launching. The cloud failing only costs that shortcut (its launches are
        idempotent anyway)."""
        try:
            return {i.name: i for i in await self._cloud.list() if i.name}
        except Exception as err:  # never fatal: the launch path finds the instance again too
            log.warning("nodeclaim: cannot list the cloud's instances at start: %s", err)
            return {}

    def _told(self, kind: str, op: str, obj: Obj) -> None:
        """An informer's change: an event of its watch, or an object of a re-list (those the
        re-list found gone as DELETED), as the loop's own watch used to bring them."""
        self._changed(kind, op, obj)
        self._wake.set()

    def _dispatch(self) -> None:
        now = self._clock.monotonic()
        for key in [k for k, at in self._due.items() if at <= now and k not in self._running]:
            self._due.pop(key, None)
            task = asyncio.create_task(self._reconcile_task(key), name=f"kubespot-nodeclaim-{key}")
            self._running[key] = (task, self._clock.now())

    async def _wait(self) -> None:
        now = self._clock.monotonic()
        waiting = [at for k, at in self._due.items() if k not in self._running]
        delay = max(0.0, min(min(waiting, default=now + self._idle_wake) - now, self._idle_wake))
        if delay <= 0 and waiting:
            await asyncio.sleep(0)  # let the tasks just started run before dispatching again
            return
        self._wake.clear()
        await wait_event(self._wake, delay, self._clock)

    def overdue(self, now: datetime, after: float) -> list[str]:
        """Claims whose reconcile (not a termination: drains may take long) has run over ``after``."""
        return [
            key
            for key, (_, since) in self._running.items()
            if (now - since).total_seconds() > after and not deleting(self.claims.get(key) or {})
        ]

    # -- what changed -----------------------------------------------------------------------------

    def _replace_all(self, kind: str, items: Iterable[Obj]) -> None:
        cache = self.claims if kind == CLAIM else self.nodes
        fresh = {name(o): o for o in items if name(o)}
        for gone in set(cache) - set(fresh):
            self._changed(kind, "DELETED", cache[gone])
        for obj in fresh.values():
            self._changed(kind, "ADDED", obj)

    def _changed(self, kind: str, op: str, obj: Obj) -> None:
        key = name(obj)
        if not key:
            return
        now = self._clock.monotonic()
        if kind == CLAIM:
            previous = self.claims.get(key)
            if op == "DELETED":
                self._deleted.discard(key)
                self.claims.pop(key, None)
                self._due.pop(key, None)
                self._failures.pop(key, None)
                self._found.pop(key, None)
                self._launched.pop(uid(obj), None)
            elif _newer(obj, previous):
                self.claims[key] = obj
                self._due[key] = now
            else:
                return
            if previous is not None:
                self._claims_by_pid.get(provider_id(previous), set()).discard(key)
            if op != "DELETED" and provider_id(obj):
                self._claims_by_pid.setdefault(provider_id(obj), set()).add(key)
            return
        old = self.nodes.pop(key, None)
        if old is not None:
            self._by_pid.get(node_provider_id(old), set()).discard(key)
        if op != "DELETED":
            self.nodes[key] = obj
            self._by_pid.setdefault(node_provider_id(obj), set()).add(key)
        for pid in {node_provider_id(o) for o in (old, obj) if o is not None} - {""}:
            for claim_name in self._claims_by_pid.get(pid, ()):
                self._due[claim_name] = now

    def _stored(self, obj: Obj) -> None:
        """A version of a claim this loop wrote (the watch brings it too, maybe later)."""
        key = name(obj)
        old = self.claims.get(key)
        if old is not None and _newer(obj, old):
            self.claims[key] = obj
            self._claims_by_pid.get(provider_id(old), set()).discard(key)
            if provider_id(obj):
                self._claims_by_pid.setdefault(provider_id(obj), set()).add(key)

    def nodes_for(self, pid: str) -> list[Obj]:
        if not pid:
            return []
        return [self.nodes[n] for n in sorted(self._by_pid.get(pid, ())) if n in self.nodes]

    def _backoff(self, attempt: int) -> float:
        # At least a tenth of the base: a run of zero draws must not spin.
        base, cap = self._retry_base, self._retry_cap
        return max(base / 10, full_jitter(attempt, base=base, cap=cap, rng=self._rng))

    def _requeue(self, key: str, after: float) -> None:
        at = self._clock.monotonic() + after
        self._due[key] = min(self._due.get(key, at), at)

    def _failed(self, key: str, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1
        attempt = self._failures.get(key, 0)
        self._failures[key] = attempt + 1
        self._requeue(key, self._backoff(attempt))

    # -- one claim --------------------------------------------------------------------------------

    async def _reconcile_task(self, key: str) -> None:
        try:
            claim = self.claims.get(key)
            if claim is None or not managed(claim):
                return
            if deleting(claim):
                self._deleted.discard(key)
                after = await self._terminator.finalize(
                    claim, self.nodes_for(provider_id(claim)), self._stored
                )
            elif key in self._deleted:
                return  # its deletion is on the way: then the finalizer runs
            else:
                async with self._slots:
                    after = await self._reconcile_fresh(claim)
            self._failures.pop(key, None)
            if after is not None:
                self._requeue(key, after)
        except asyncio.CancelledError:
            self._due.setdefault(key, self._clock.monotonic())
            raise
        except _Retry:
            self._failed(key, "launch")
        except KubeError as err:
            if err.code == 404:
                return  # gone meanwhile: the watch says so
            if err.code == 409:
                log.debug("nodeclaim %s: conflict (%s); retrying", key, err)
                self._failed(key, "conflict")
                return
            log.warning("nodeclaim %s: API error %s: %s; retrying", key, err.code, err)
            self._failed(key, f"api-{err.code}")
        except Exception:  # one claim must never stop the others: logged, retried later
            log.exception("nodeclaim %s: reconcile failed; retrying", key)
            self._failed(key, "unexpected")
        finally:
            self._running.pop(key, None)
            self._wake.set()

    async def _reconcile_fresh(self, claim: Obj) -> float | None:
        """``_reconcile``, again at once on fresh copies after a conflict: a Node's version moves
        with every kubelet status update, so a write computed a moment ago often meets a 409 that
        a re-read settles (as ``KubeClient.update_node`` does); a third conflict goes to backoff."""
        for attempt in range(CONFLICT_RETRIES):
            try:
                return await self._reconcile(claim)
            except KubeError as err:
                log.debug("nodeclaim %s: conflict: %s", name(claim), err)
                if err.code != 409 or attempt == CONFLICT_RETRIES - 1:
                    raise
                self.errors["conflict-reread"] = self.errors.get("conflict-reread", 0) + 1
                fresh = await self._reread(claim)
                if fresh is None:
                    return None
                if deleting(fresh):
                    # Deleted meanwhile: the finalizer's turn, never a launch or a status write on
                    # it (core lifecycle/controller.go Reconcile routes a deleting claim to
                    # finalize). Due again at once, the task then runs the termination.
                    return 0.0
                claim = fresh
        raise AssertionError("unreachable")  # pragma: no cover

    async def _reread(self, claim: Obj) -> Obj | None:
        """The claim and its Nodes read again into the caches; None when the claim is gone."""
        fresh = await self._claims_api.get(name(claim))
        if fresh is None:
            return None
        self._stored(fresh)
        for node in self.nodes_for(provider_id(fresh)):
            current = await self._nodes_api.get(name(node))
            if current is not None:
                self._stored_node(current)
        return fresh

    async def _reconcile(self, claim: Obj) -> float | None:
        key = name(claim)
        if TERMINATION_FINALIZER not in finalizers(claim):
            # Before anything is launched: an instance must never exist for a claim that can be
            # deleted without its finalizer running.
            claim = await self._claims_api.patch(
                key,
                {
                    "metadata": {
                        "finalizers": [*finalizers(claim), TERMINATION_FINALIZER],
                        "resourceVersion": resource_version(claim),
                    }
                },
            )
            self._stored(claim)
        now = self._clock.now()
        work: Obj = copy.deepcopy(claim)
        set_conditions(work, [], now)
        if is_unknown(work, LAUNCHED):
            found = self._found.pop(key, None) or self._launched.get(uid(work))
            began = self._clock.monotonic()
            outcome = LaunchOutcome(launched=found) if found is not None else await launch(self._cloud, work)
            took = self._clock.monotonic() - began
            self._count_launch(work, outcome, from_cloud=found is not None)
            if found is None and outcome.launched is not None:
                self._remember_launch(uid(work), outcome.launched)
            if outcome.delete_reason:
                log.info("nodeclaim %s: deleting (%s; launch call %.3f s)", key, outcome.delete_reason, took)
                if outcome.delete_reason == INSUFFICIENT and self.on_insufficient_capacity is not None:
                    self.on_insufficient_capacity(key)
                await self._delete(key)
                # After the deletion: the re-plan of its pods must not wait for the event's write
                # (Karpenter's recorder publishes in the background; launching.md §2b).
                if outcome.event is not None:
                    await self._event(work, *outcome.event)
                return None
            if outcome.condition is not None:
                set_conditions(work, [outcome.condition], self._clock.now())
                await self._write(claim, work)
                log.warning(
                    "nodeclaim %s: launch failed: %s: %s",
                    key,
                    outcome.condition.reason,
                    outcome.condition.message,
                )
                # Liveness runs after a failed launch too (core lifecycle/controller.go Reconcile
                # gathers every step's error): otherwise a launch that always fails never times out.
                live = liveness(
                    work,
                    self._clock.now(),
                    launch_timeout=self._settings.launch_timeout,
                    registration_timeout=self._settings.registration_timeout,
                )
                if live.delete_reason:
                    self._count_timeout(work, live.delete_reason)
                    self._registration(work, registered=False)
                    log.info("nodeclaim %s: deleting (%s)", key, live.delete_reason)
                    await self._delete(key)
                    return None
                raise _Retry
            assert outcome.launched is not None
            populate(work, outcome.launched)
            set_conditions(work, [Condition(LAUNCHED, "True", LAUNCHED)], self._clock.now())
            launched = outcome.launched
            log.info(
                "nodeclaim %s: launched %s (%s, %s, %s) in %.3f s",
                key,
                launched.provider_id,
                launched.instance_type,
                launched.zone,
                launched.capacity_type,
                took,
            )
            await self._write(claim, work)
            return 0.0
        nodes = self.nodes_for(provider_id(work))
        if any(deleting(n) and TERMINATION_FINALIZER in finalizers(n) for n in nodes):
            # Its Node was deleted (kubectl delete node): the claim goes too, and its finalizer
            # drains the Node (Karpenter's node termination controller, finalize).
            await self._write(claim, work)
            log.info("nodeclaim %s: its node is being deleted; deleting the claim", key)
            await self._delete(key)
            return None
        step = advance(
            work,
            nodes,
            now,
            launch_timeout=self._settings.launch_timeout,
            registration_timeout=self._settings.registration_timeout,
        )
        if step.node_patch is not None:
            node_name, patch = step.node_patch
            self._stored_node(await self._nodes_api.patch(node_name, patch))
        if step.node_labels is not None:
            node_name, node_labels = step.node_labels
            self._stored_node(await self._nodes_api.patch(node_name, {"metadata": {"labels": node_labels}}))
        for reason, message in step.events:
            await self._event(work, reason, message)
        await self._write(claim, work)
        if step.registered:
            self._registration(work, registered=True)
        if step.delete_reason:
            self._count_timeout(work, step.delete_reason)
            self._registration(work, registered=False)
            log.info("nodeclaim %s: deleting (%s)", key, step.delete_reason)
            await self._delete(key)
            return None
        return step.requeue_after

    def _count_launch(self, claim: Obj, outcome: LaunchOutcome, *, from_cloud: bool) -> None:
        """The launch metrics of one attempt (aws pkg/cloudprovider/metrics: launches and failed
        pools; an instance found already running for the claim was counted when it launched)."""
        m = self._metrics
        if m is None or from_cloud:
            return
        got = outcome.launched
        failed = got.failed_offerings if got is not None else outcome.failed
        for o in failed:
            m.launch_failure(o.capacity_type, o.instance_type, o.zone, o.code)
        if got is not None:
            m.launched(got.capacity_type, got.instance_type, got.zone, self._clock.monotonic())
            if got.capacity_type == ON_DEMAND and allows_spot(claim):
                m.fallback("spot_to_on_demand")
        elif outcome.delete_reason == "insufficient_capacity":
            m.insufficient_capacity(self._clock.monotonic())
            m.fallback("ice_replan")
            if not failed:
                m.launch_failure("", "", "", INSUFFICIENT_CAPACITY)
        elif outcome.condition is not None:
            m.launch_failure("", "", "", outcome.condition.reason)

    def _remember_launch(self, claim_uid: str, launched: CloudNodeClaim) -> None:
        if not claim_uid:
            return
        if len(self._launched) >= 4096:  # claims long gone: forget the oldest
            del self._launched[next(iter(self._launched))]
        self._launched[claim_uid] = launched

    def _registration(self, claim: Obj, *, registered: bool) -> None:
        """The claim registered, or is deleted for a timeout: its NodePool's registration health
        learns it (core registration.go / liveness.go ``updateNodePoolRegistrationHealth``; after
        the status write, so a conflict's retry does not count a registration twice)."""
        if self.on_registration is None:
            return
        found = outcome(claim, registered)
        if found is not None:
            self.on_registration(found)

    def _count_timeout(self, claim: Obj, reason: str) -> None:
        """A claim deleted for a timeout, counted once: a reconcile of a version read before the
        delete landed decides the same again."""
        if reason not in (LAUNCH_TIMEOUT, REGISTRATION_TIMEOUT) or self._metrics is None:
            return
        if uid(claim) in self._timed_out:
            return
        if len(self._timed_out) >= 4096:  # claims long gone: forget the oldest
            del self._timed_out[next(iter(self._timed_out))]
        self._timed_out[uid(claim)] = None
        self._metrics.nodeclaim_timeout(reason)

    def phases(self) -> dict[tuple[str, ...], float]:
        """NodeClaims by lifecycle phase, for the ``kubespot_nodeclaims`` gauge (read at scrape)."""
        counts = dict.fromkeys(NODECLAIM_PHASES, 0.0)
        for claim in list(self.claims.values()):
            counts[phase_of(claim)] += 1
        return {(p,): n for p, n in counts.items()}

    async def _delete(self, key: str) -> None:
        await self._claims_api.delete(key)
        self._deleted.add(key)

    def _stored_node(self, node: Obj) -> None:
        if name(node) in self.nodes:
            self._changed(NODE, "MODIFIED", node)

    async def _write(self, claim: Obj, work: Obj) -> None:
        """``work``'s labels and annotations (merge patch), then its status (PUT with the version
        read), each only when it changed."""
        stored = claim
        meta: dict[str, Any] = {}
        if labels(work) != labels(claim):
            meta["labels"] = labels(work)
        if annotations_of(work) != annotations_of(claim):
            meta["annotations"] = annotations_of(work)
        if meta:
            stored = await self._claims_api.patch(name(claim), {"metadata": meta})
            self._stored(stored)
        if work.get("status") != claim.get("status"):
            self._stored(await self._claims_api.replace_status({**stored, "status": work["status"]}))

    async def _event(self, claim: Obj, reason: str, message: str) -> None:
        if self._recorder is None:
            return
        ref = ObjectRef(CLAIM, name(claim), None, uid(claim) or None, api_version="karpenter.sh/v1")
        await self._recorder.record(ref, reason, message, warning=True)
