"""The status loop: every EC2NodeClass and NodePool reconciled on change and on a schedule.

Like Karpenter's nodeclass and nodepool controllers (aws/karpenter-provider-aws
``pkg/controllers/nodeclass/controller.go``, kubernetes-sigs/karpenter
``pkg/controllers/nodepool/{validation,readiness}``), in one loop on the elected replica:

- the objects of each kind are kept in memory from the process's shared informers (``informers``:
  the NodePool and EC2NodeClass caches the provisioner's passes read, one LIST and one WATCH per
  kind for the whole process, as Karpenter's controllers share controller-runtime's cache; without
  them, built alone, from a watch of its own); a class is resolved again when its generation
  changes (its own status writes do not count) and every ``nodeclass_resync_interval``; a pool is
  reconciled when it changes and whenever its class does (its ``NodeClassReady`` follows the class);
- the status is written (PUT to ``/status`` with the version read) only when it differs from the
  stored one; a 409 is retried after the watch has brought the newer object;
- a class whose resolution failed in part keeps its last good status for that part and is retried
  with ``model.backoff.full_jitter`` (``retry_base`` doubling to ``retry_cap``);
- an object that cannot be read (any shape) gets ``ValidationSucceeded`` False with a reason, and
  an unexpected error in one reconcile is logged and retried: the loop itself never stops.

``last_pass`` (when a pass last finished) is what /healthz checks; ``started`` and ``last_pass``
are cleared when the loop stops (the lease lost), so a standby replica's check holds. A start (the
lease won, again) reconciles every object once, as a controller's first list enqueues them all; a
reconcile cancelled midway stays due. The cache holds what the watch brought: a status write's
answer replaces the cached object only while the watch has brought nothing newer meanwhile.
With a ``termination`` (``nodeclass_termination``) each class gets Karpenter's termination
finalizer, a class being deleted is finalized (its instance profiles and launch templates deleted
once no NodeClaim names it) instead of resolved, looked at again as soon as a NodeClaim naming it
is deleted or the NodeClaim cache syncs (aws nodeclass controller ``Register``), and after each
pass the idle launch templates and unused instance profiles that are due are collected (the loop
wakes for them).
A NodePool's ``resources`` and ``nodes`` come from the counter (``set_counts``) and are written
by this loop with its conditions: one writer per status. So does its ``NodeRegistrationHealthy``
(``registration_health``): the NodeClaim controller reports each claim that registers or times out
(``registration_outcome``, wired by the operator), and each reconcile of a pool resets the
condition when the pool or its class changed, as Karpenter's registrationhealth controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from kubespot.aws.resolved import ResolvedNodeClass
from kubespot.config.provisioning import ProvisioningSettings
from kubespot.kube import KubeError
from kubespot.kube.custom import CustomObjects, ObjectList
from kubespot.kube.informer import Informer, Informers
from kubespot.model import Clock
from kubespot.model.backoff import full_jitter
from kubespot.model.clock import wait_event
from kubespot.scheduling.api.conditions import Condition
from kubespot.scheduling.api.validate import validate_nodepool
from kubespot.scheduling.api.validate_nodeclass import validate_nodeclass

from .capacity_split import split_validation
from .nodeclass_status import nodeclass_status
from .nodeclass_termination import NodeClassTermination, deleting
from .nodepool_counter import PoolCounts, empty_counts
from .nodepool_status import nodepool_status
from .registration_health import RegistrationHealth, health_condition
from .resolver import NodeClassResolver

__all__ = ["StatusLoop"]

log = logging.getLogger("kubespot.controller.provisioning")

Obj = dict[str, Any]
Key = tuple[str, str]  # (kind, name)
CLASS, POOL = "EC2NodeClass", "NodePool"
_NODECLASS_GROUP = "karpenter.k8s.aws"


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def _generation(obj: Mapping[str, Any]) -> int:
    meta = obj.get("metadata")
    gen = meta.get("generation") if isinstance(meta, Mapping) else None
    return gen if isinstance(gen, int) else 0


def _uid(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    uid = meta.get("uid") if isinstance(meta, Mapping) else None
    return uid if isinstance(uid, str) else ""


def _lifetime(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the condition set reads of the object itself (``condition_set.merge_conditions``):
    when it was created and whether it is being deleted."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    created = meta.get("creationTimestamp")
    return {
        "created": created if isinstance(created, str) else None,
        "deleting": bool(meta.get("deletionTimestamp")),
    }


def _status_profile(obj: Mapping[str, Any]) -> str | None:
    status = obj.get("status")
    found = status.get("instanceProfile") if isinstance(status, Mapping) else None
    return found if isinstance(found, str) and found else None


def _class_of(pool: Mapping[str, Any]) -> str | None:
    """The EC2NodeClass a pool names; None when it names another kind of class (not ours)."""
    try:
        ref = pool["spec"]["template"]["spec"]["nodeClassRef"]
        group, kind, name = ref.get("group", ""), ref.get("kind", ""), ref.get("name", "")
    except (KeyError, TypeError, AttributeError):
        return ""  # unreadable: validation says why; the class counts as not found
    if (group, kind) not in ((_NODECLASS_GROUP, CLASS), ("", "")):
        return None
    return name if isinstance(name, str) else ""


class StatusLoop:
    """Reconciles the status of every EC2NodeClass and NodePool while it runs."""

    def __init__(
        self,
        *,
        nodeclasses: CustomObjects,
        nodepools: CustomObjects,
        resolver: NodeClassResolver,
        settings: ProvisioningSettings,
        clock: Clock,
        on_resolved: Callable[[str, ResolvedNodeClass | None], None] | None = None,
        rng: Callable[[], float] = random.random,
        termination: NodeClassTermination | None = None,
        informers: Informers | None = None,
    ) -> None:
        self._api = {CLASS: nodeclasses, POOL: nodepools}
        #: Where the objects are read from: the process's informers of the two paths (None: a LIST
        #: and a WATCH of the loop's own).
        self._cache: dict[str, Informer] | None = (
            None if informers is None else {kind: informers.get(api.path) for kind, api in self._api.items()}
        )
        self._termination = termination
        self._resolver = resolver
        self._settings = settings
        self._clock = clock
        self._on_resolved = on_resolved
        self._rng = rng
        self._objects: dict[str, dict[str, Obj]] = {CLASS: {}, POOL: {}}
        #: The generation each class was last resolved at (a status write does not bump it).
        self._resolved_gen: dict[str, int] = {}
        self._due: dict[Key, float] = {}
        self._failures: dict[Key, int] = {}
        self._wake = asyncio.Event()
        #: When the last pass finished (None before the first).
        self.last_pass: datetime | None = None
        self.started: datetime | None = None
        #: Status writes made, per kind (for tests and metrics).
        self.writes: dict[str, int] = {CLASS: 0, POOL: 0}
        #: The NodePools' resources and node counts from the counter (None until it has counted).
        self._counts: Mapping[str, PoolCounts] | None = None
        #: Registration outcomes per NodePool UID, and the NodeRegistrationHealthy condition a
        #: NodePool is due to get, by name (written by its next reconcile).
        self.health = RegistrationHealth()
        self._health_due: dict[str, Condition] = {}
        #: The own watch's "listed by a served LIST" per kind (None: informers, or not running).
        self._served: dict[str, asyncio.Event] | None = None

    def unserved(self) -> list[str]:
        """The kinds the first pass waits for because their LIST was answered 404 (a CRD not
        installed): /healthz says so rather than calling the loop stuck (a restart cannot install
        a CRD; the loop goes on by itself once it is served)."""
        if self._cache is not None:
            return [kind for kind, informer in self._cache.items() if not informer.served]
        if self._served is not None:
            return [kind for kind, event in self._served.items() if not event.is_set()]
        return []

    def set_counts(self, counts: Mapping[str, PoolCounts]) -> None:
        """The counter's figures (``nodepool_counter``): written with the conditions, by this
        loop, so one writer owns a NodePool's status; a pool whose figures changed is due."""
        self._counts = counts
        now = self._clock.monotonic()
        for name, obj in self._objects[POOL].items():
            wanted = counts.get(name) or empty_counts()
            found = obj.get("status")
            status: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
            if status.get("resources") != wanted[0] or status.get("nodes") != wanted[1]:
                self._due.setdefault((POOL, name), now)
                self._wake.set()

    def registration_outcome(
        self, pool: str, pool_uid: str, registered: bool, launched: Condition | None = None
    ) -> None:
        """A NodeClaim of ``pool`` registered, or was deleted for a launch or registration timeout
        (the NodeClaim controller; ``registration_health``). Counted only by the NodePool that
        owns the claim (``pool_uid``); a change of its ``NodeRegistrationHealthy`` makes it due."""
        obj = self._objects[POOL].get(pool)
        if obj is None or _uid(obj) != pool_uid:
            return
        due = self._health_due.get(pool)
        found = obj.get("status")
        current = (
            {"status": due.status}
            if due is not None
            else health_condition(found if isinstance(found, Mapping) else None)
        )
        change = self.health.outcome(pool_uid, registered, current, launched)
        if change is not None:
            self._health_due[pool] = change
            self._due.setdefault((POOL, pool), self._clock.monotonic())
            self._wake.set()

    # -- the loop ---------------------------------------------------------------------------------

    async def run(self) -> None:
        self.started = self._clock.now()
        # Whatever was resolved while this replica led before may be stale now: resolve all again.
        self._resolved_gen.clear()
        # Nor is the last term's count written: another leader may have counted since. Nothing is
        # until the counter publishes from this term's synced caches (core counter ``Reconcile``).
        self._counts = None
        watches: list[asyncio.Task[None]] = []
        unsubscribe: list[Callable[[], None]] = []
        claims = self._termination.claims_informer if self._termination is not None else None
        if claims is not None:
            # aws nodeclass/controller.go ``Register`` watches NodeClaims and reconciles the class
            # a deleted one names: a deleting class is finalized once its last claim goes, not a
            # resync later; so is one that waited for the claim cache's first LIST.
            unsubscribe.append(claims.subscribe(self._claim_told))
            if not claims.synced.is_set():
                watches.append(asyncio.create_task(self._when_synced(claims), name="kubespot-claims-synced"))
        try:
            if self._cache is None:
                listings = {kind: await self._list(kind) for kind in (CLASS, POOL)}
                served = self._served = {kind: asyncio.Event() for kind in listings}
                for kind, listing in listings.items():
                    if listing.served:
                        self._replace_all(kind, listing.items)
                        served[kind].set()
                watches += [
                    asyncio.create_task(
                        self._watch(kind, listing, served[kind]), name=f"kubespot-watch-{kind}"
                    )
                    for kind, listing in listings.items()
                ]
                # As below: no pass before both kinds were listed by a served LIST.
                await asyncio.gather(*(e.wait() for e in served.values()))
            else:
                unsubscribe += [
                    informer.subscribe(functools.partial(self._told, kind))
                    for kind, informer in self._cache.items()
                ]
                # The first pass waits for both caches: an empty one before its LIST is in is not
                # "no objects" (a class's pools would be judged against a class not found). Nor is
                # one whose LIST was answered 404 (``wait_served``): every NodePool would be written
                # NodeClassNotFound and the last term's classes dropped from launching, where
                # controller-runtime's cache answers no read before its list is in (its
                # ``WaitForCacheSync``); a CRD not installed leaves the statuses unwritten.
                await asyncio.gather(*(i.wait_served() for i in self._cache.values()))
                for kind, informer in self._cache.items():
                    self._replace_all(kind, informer.items())
            # /healthz's "no pass finished yet" bound runs from here: a CRD installed hours into
            # the term must not make the first pass look stuck the moment it is served.
            self.started = self._clock.now()
            while True:
                await self.run_pass()
                await self._wait()
        finally:
            self.started = self.last_pass = None
            self._served = None
            for stop in unsubscribe:
                stop()
            for task in watches:
                task.cancel()
            for task in watches:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def _told(self, kind: str, op: str, obj: Obj) -> None:
        """An informer's change (a re-list's objects too, and those it found gone)."""
        self._changed(kind, op, obj)
        self._wake.set()

    def _claim_told(self, op: str, obj: Obj) -> None:
        """A NodeClaim deleted: the deleting class it named is due now (its last claim may be gone)."""
        if op != "DELETED":
            return
        spec = obj.get("spec")
        ref = spec.get("nodeClassRef") if isinstance(spec, Mapping) else None
        name = ref.get("name") if isinstance(ref, Mapping) else None
        if isinstance(name, str) and name:
            self._requeue_deleting({name})

    async def _when_synced(self, claims: Informer) -> None:
        await claims.synced.wait()
        self._requeue_deleting(None)

    def _requeue_deleting(self, names: set[str] | None) -> None:
        """The deleting classes among ``names`` (None: all of them) due now."""
        now = self._clock.monotonic()
        for name, obj in self._objects[CLASS].items():
            if deleting(obj) and (names is None or name in names):
                self._due[(CLASS, name)] = now
                self._wake.set()

    async def _list(self, kind: str) -> ObjectList:
        attempt = 0
        while True:
            try:
                return await self._api[kind].list()
            except KubeError as err:
                log.warning("provisioning: cannot list %ss: %s", kind, err)
                await self._clock.sleep(self._backoff(attempt))
                attempt += 1

    async def _watch(self, kind: str, listing: ObjectList, served: asyncio.Event) -> None:
        if not listing.served:
            # No CRD: said once, then looked for again every resync (installing the chart's CRDs
            # later needs no restart); a watch of an unserved path would only fail in a loop.
            log.warning("provisioning: the API server does not serve %ss (CRD not installed?)", kind)
            while not listing.served:
                await self._clock.sleep(self._settings.nodeclass_resync_interval)
                listing = await self._list(kind)
            log.info("provisioning: %ss are served now", kind)
            self._replace_all(kind, listing.items)
            served.set()
            self._wake.set()
        async for op, obj, relisted in self._api[kind].watch(listing.resource_version):
            if relisted is not None:
                if relisted.served:  # a 404 is no deletion of every object (reflector.go list)
                    self._replace_all(kind, relisted.items)
            elif obj is not None:
                self._changed(kind, op, obj)
            self._wake.set()

    async def _wait(self) -> None:
        now = self._clock.monotonic()
        soonest = min(self._due.values(), default=now + self._settings.nodeclass_resync_interval)
        collect = self._termination.next_due() if self._termination is not None else None
        if collect is not None:
            soonest = min(soonest, collect)
        delay = max(0.0, min(soonest - now, self._settings.nodeclass_resync_interval))
        if delay <= 0:
            return
        self._wake.clear()
        await wait_event(self._wake, delay, self._clock)

    async def run_pass(self) -> None:
        """Reconcile every object that is due: classes first, so their pools see the new status."""
        now = self._clock.monotonic()
        due = sorted((k for k, at in self._due.items() if at <= now), key=lambda k: (k[0] != CLASS, k[1]))
        for key in due:
            self._due.pop(key, None)
            try:
                await self._reconcile(key)
            except asyncio.CancelledError:
                # Stopped midway (the lease lost): still due, or nothing would schedule it again.
                self._due.setdefault(key, now)
                raise
            except Exception:  # one object must never stop the others: logged, retried later
                log.exception("provisioning: reconciling %s %s failed", *key)
                self._retry(key)
        if self._termination is not None:
            await self._termination.collect(self._objects[CLASS].values())
        self.last_pass = self._clock.now()

    # -- what changed -----------------------------------------------------------------------------

    def _replace_all(self, kind: str, items: Iterable[Obj]) -> None:
        fresh = {_name(o): o for o in items if _name(o)}
        for gone in set(self._objects[kind]) - set(fresh):
            self._changed(kind, "DELETED", self._objects[kind][gone])
        for obj in fresh.values():
            self._changed(kind, "ADDED", obj)

    def _changed(self, kind: str, op: str, obj: Obj) -> None:
        name = _name(obj)
        if not name:
            return
        now = self._clock.monotonic()
        if op == "DELETED":
            self._objects[kind].pop(name, None)
            self._due.pop((kind, name), None)
            if kind == POOL:
                self.health.forget(_uid(obj))
                self._health_due.pop(name, None)
            if kind == CLASS:
                self._resolved_gen.pop(name, None)
                if self._on_resolved is not None:
                    self._on_resolved(name, None)
        else:
            self._objects[kind][name] = obj
            if kind == POOL or self._resolved_gen.get(name) != _generation(obj) or deleting(obj):
                self._due[(kind, name)] = now
        if kind == CLASS:
            # Its pools' NodeClassReady follows it (a status write of the class included).
            for pool_name, pool in self._objects[POOL].items():
                if _class_of(pool) == name:
                    self._due.setdefault((POOL, pool_name), now)

    def _retry(self, key: Key) -> None:
        attempt = self._failures.get(key, 0)
        self._failures[key] = attempt + 1
        self._due[key] = self._clock.monotonic() + self._backoff(attempt)

    def _backoff(self, attempt: int) -> float:
        s = self._settings
        # At least a tenth of the base: a run of zero draws must not spin.
        return max(s.retry_base / 10, full_jitter(attempt, base=s.retry_base, cap=s.retry_cap, rng=self._rng))

    # -- reconciles -------------------------------------------------------------------------------

    async def _reconcile(self, key: Key) -> None:
        kind, name = key
        obj = self._objects[kind].get(name)
        if obj is None:
            return
        if kind == CLASS:
            await self._reconcile_class(obj)
        else:
            await self._reconcile_pool(obj)

    async def _reconcile_class(self, obj: Obj) -> None:
        name = _name(obj)
        key = (CLASS, name)
        spec, validation = validate_nodeclass(obj)
        if self._termination is not None:
            try:
                if deleting(obj):
                    if not await self._termination.finalize(obj, spec.role):
                        # NodeClaims still use it (or are not known yet): looked at again when
                        # one is deleted or the claim cache syncs (``_claim_told``), else later.
                        # A requeue that came while ``finalize`` awaited is kept (client-go
                        # ``workqueue`` ``Add``: an item added while processing is processed again).
                        self._due.setdefault(
                            key, self._clock.monotonic() + self._settings.nodeclass_resync_interval
                        )
                    return
                stored = await self._termination.ensure_finalizer(obj)
            except KubeError as err:
                if err.code not in (404, 409):
                    raise
                self._retry(key)  # gone, or changed meanwhile: the watch brings the news
                return
            if stored is not None:
                if self._objects[CLASS].get(name) is obj:
                    self._objects[CLASS][name] = stored
                obj = stored  # the status write needs the version the patch made
        now = self._clock.now()
        generation = _generation(obj)
        resolution = None
        failures: tuple[str, ...] = ()
        if validation.is_true:
            resolved = await self._resolver.resolve(
                spec, now=now, uid=_uid(obj), profile=_status_profile(obj)
            )
            resolution, failures = resolved.resolution, resolved.failures
            if self._on_resolved is not None:
                # What launching needs; an alias without images leaves none to launch with.
                amis = () if resolution.unsupported_alias is not None else resolution.amis
                # IAM failed this pass: the profile the status names (made before a restart)
                # still launches, as the status keeps it.
                profile = (resolution.instance_profile or _status_profile(obj)) if spec.role else None
                self._on_resolved(
                    name,
                    ResolvedNodeClass(
                        spec,
                        resolution.subnets,
                        resolution.security_groups,
                        amis,
                        profile,
                    ),
                )
        elif self._on_resolved is not None:
            self._on_resolved(name, None)  # invalid: nothing launches through it
        old = obj.get("status") if isinstance(obj.get("status"), Mapping) else None
        status = nodeclass_status(
            old, spec, validation, resolution, generation=generation, now=now, **_lifetime(obj)
        )
        await self._write(CLASS, obj, status)
        self._resolved_gen[name] = generation
        if failures:
            self._retry(key)
        else:
            self._failures.pop(key, None)
            self._due.setdefault(key, self._clock.monotonic() + self._settings.nodeclass_resync_interval)

    async def _reconcile_pool(self, obj: Obj) -> None:
        class_name = _class_of(obj)
        if class_name is None:
            return  # another provider's class: not ours to judge (Karpenter's IsManaged)
        _, validation = validate_nodepool(obj)
        if validation.status == "True":
            # kubespot's own annotation: reported, the pool used without a split (launching.md §6).
            validation = split_validation(obj) or validation
        nodeclass = self._objects[CLASS].get(class_name) if class_name else None
        old = obj.get("status") if isinstance(obj.get("status"), Mapping) else None
        counts = None
        if self._counts is not None:
            counts = self._counts.get(_name(obj)) or empty_counts()
        # Karpenter's registrationhealth reconcile: reset when the pool or its class changed;
        # otherwise what the claims' outcomes decided since the last write.
        name = _name(obj)
        class_generation = _generation(nodeclass) if nodeclass is not None else None
        due = self._health_due.get(name)
        reset = self.health.reconcile(_uid(obj), _generation(obj), old, class_generation)
        registration = [reset] if reset is not None else [due] if due is not None else []
        status = nodepool_status(
            old,
            validation,
            nodeclass,
            generation=_generation(obj),
            now=self._clock.now(),
            counts=counts,
            registration=registration,
            class_generation=class_generation,
            **_lifetime(obj),
        )
        if await self._write(POOL, obj, status) and self._health_due.get(name) is due:
            self._health_due.pop(name, None)  # written (or dropped by a reset): not due again
        self._failures.pop((POOL, name), None)

    async def _write(self, kind: str, obj: Obj, status: Obj) -> bool:
        """``status`` stored (or already so); False when it was not (gone, or changed meanwhile:
        retried)."""
        if status == obj.get("status"):
            return True
        name = _name(obj)
        try:
            stored = await self._api[kind].replace_status({**obj, "status": status})
        except KubeError as err:
            if err.code == 404:
                return False  # deleted meanwhile; the watch says so
            if err.code == 409:
                # Changed since it was read: the watch brings the newer object; try again then.
                log.debug("provisioning: %s %s changed meanwhile; retrying", kind, name)
                self._retry((kind, name))
                return False
            raise
        self.writes[kind] += 1
        # The watch may have brought a newer object (a spec edit) while the PUT was awaited: the
        # answer would hide it (and the reconcile it is due for), so it only replaces what was read.
        if _name(stored) == name and self._objects[kind].get(name) is obj:
            self._objects[kind][name] = stored
        return True
