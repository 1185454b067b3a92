"""Garbage collection: instances nothing claims and claims whose instance is gone, as Karpenter's two
collectors (aws/karpenter-provider-aws ``pkg/controllers/nodeclaim/garbagecollection/controller.go``
``Reconcile``, ``garbageCollect``; kubernetes-sigs/karpenter
``pkg/controllers/nodeclaim/garbagecollection/controller.go`` ``Reconcile``).

- The NodeClaims are read, then the cloud's instances listed, then the NodeClaims and Nodes read
  again. Orphans are judged from the second read (aws ``Reconcile`` lists the cloud first; an
  instance launched during the list is younger than ``min_age`` anyway), lost claims from the
  first (core ``Reconcile`` lists the claims first: one that launched and registered while the
  cloud list ran was not Registered then), if still there (same UID) and not being deleted.
  An instance not shutting down or terminated (a stopped one is collected, as aws), whose
  provider id no NodeClaim has, launched more than
  ``min_age`` (30 s, ``launch.garbage_collection_min_age``) ago → ``cloud.delete`` and its Node (if
  any) deleted, its finalizer released. **kubespot spares** an instance tagged with the name of a
  NodeClaim that exists and is not yet launched: its launch's status write was lost, and the
  claim's next launch returns that very instance (docs/designs/launching.md §3: no double launch).
- A Registered NodeClaim of an EC2NodeClass (``ListManaged``), not being deleted, whose provider id
  the cloud does not list (a stopped instance is listed: it keeps its claim), is deleted
  (reason ``garbage_collected``) unless its Node is still Ready (the kubelet is alive).
- NodeClaims and Nodes are read from the process's shared informers (``informers``; aws and core
  ``Reconcile`` list them through the manager's client, which reads controller-runtime's cache),
  in the order above; a pass waits until both informers have synced (an
  empty cache before its first LIST, or after the lease was lost and won back, is not "no
  claims": every instance would look orphaned). Built without informers it LISTs them per pass.
- A pass whose NodeClaim or Node list is not served (404) collects nothing (aws and core
  ``Reconcile`` return a list error before collecting): an empty answer is not "no claims".
- A deleting Node holding ``karpenter.sh/termination`` whose provider id no NodeClaim has and
  whose instance the cloud does not know has its finalizer removed (the node termination path of
  core ``node/termination/controller.go`` ``finalize`` for a Node without a claim).
- Dry run (``node_actions.dry_run``): the pass reads and decides as ever, logs what it would
  terminate, delete or release ("dry-run: would ...") and changes nothing.
- Passes every ``intervals[0]`` seconds for the first ``intervals[1]`` passes, then every
  ``intervals[2]`` (aws: 10 s for 20 passes, then 2 min; ``launch.garbage_collection_interval``
  and 12 times it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from kubespot.cloud.errors import NodeClaimNotFound
from kubespot.cloud.provider import CloudNodeClaim, CloudProvider
from kubespot.kube import KubeError
from kubespot.kube.custom import CustomObjects, ObjectList
from kubespot.kube.informer import Informer, Informers
from kubespot.model import Clock
from kubespot.observability.metrics import Metrics

from .objects import (
    LAUNCHED,
    REGISTERED,
    TERMINATION_FINALIZER,
    Obj,
    deleting,
    finalizers,
    is_true,
    managed,
    name,
    node_provider_id,
    node_ready,
    provider_id,
    uid,
)
from .termination import release_node

__all__ = ["GarbageCollector", "lost_claims", "orphan_instances"]

log = logging.getLogger("kubespot.controller.nodeclaim")

#: Instances younger than this may be launches whose claim status is not written yet.
MIN_AGE = 30.0
#: States of an instance on its way out: an orphan in them is not collected again, and a claim whose
#: instance is in them is lost (aws cloudprovider.go instanceToNodeClaim sets a deletionTimestamp
#: for these two only, and both collectors skip those). A stopped orphan still gets terminated (its
#: volumes and ENIs cost money); a stopped instance keeps its claim (the cloud still lists it: core
#: garbagecollection Reconcile deletes only claims whose instance the cloud no longer lists).
_TERMINATING_STATES = frozenset({"shutting-down", "terminated"})


def orphan_instances(
    instances: Iterable[CloudNodeClaim], claims: Iterable[Obj], now: float, *, min_age: float = MIN_AGE
) -> list[CloudNodeClaim]:
    """The instances to terminate: see the module's first point. ``now`` in seconds since the epoch."""
    claims = list(claims)
    claimed = {provider_id(c) for c in claims} - {""}
    waiting = {name(c) for c in claims if not is_true(c, LAUNCHED) and not deleting(c)}
    return [
        i
        for i in instances
        if i.state not in _TERMINATING_STATES
        and i.provider_id not in claimed
        and not (i.name and i.name in waiting)
        and now - i.launched_at > min_age
    ]


def lost_claims(
    claims: Iterable[Obj], instances: Iterable[CloudNodeClaim], nodes: Mapping[str, Sequence[Obj]]
) -> list[Obj]:
    """The claims to delete: see the module's second point. ``nodes``: provider id → its Nodes."""
    live = {i.provider_id for i in instances if i.state not in _TERMINATING_STATES}
    out = []
    for c in claims:
        pid = provider_id(c)
        if not managed(c) or not is_true(c, REGISTERED) or deleting(c) or pid in live:
            continue
        found = nodes.get(pid, ())
        if len(found) == 1 and node_ready(found[0]):
            continue
        out.append(c)
    return out


class GarbageCollector:
    """The two collectors in one singleton loop (the leader's)."""

    def __init__(
        self,
        *,
        cloud: CloudProvider,
        claims: CustomObjects,
        nodes: CustomObjects,
        clock: Clock,
        intervals: tuple[float, int, float] = (10.0, 20, 120.0),
        min_age: float = MIN_AGE,
        metrics: Metrics | None = None,
        dry_run: bool = False,
        informers: Informers | None = None,
    ) -> None:
        self._cloud = cloud
        #: Where a pass reads NodeClaims and Nodes (None: a LIST of each per pass).
        self._cache: tuple[Informer, Informer] | None = (
            None if informers is None else (informers.get(claims.path), informers.get(nodes.path))
        )
        self.dry_run = dry_run
        self._metrics = metrics
        self._claims = claims
        self._nodes = nodes
        self._clock = clock
        self.intervals = intervals
        self.min_age = min_age
        self.passes = 0
        #: Passes that collected nothing because a list was not served (404).
        self.skipped = 0
        #: When a pass last finished (None while not running: a standby replica).
        self.last_pass: datetime | None = None
        self.started: datetime | None = None

    async def run(self) -> None:
        self.started = self._clock.now()
        self.passes = 0
        try:
            while True:
                try:
                    await self.run_pass()
                except asyncio.CancelledError:
                    raise
                except Exception:  # a failed pass (cloud or API down) is logged and tried again
                    log.exception("nodeclaim garbage collection: pass failed")
                self.passes += 1
                first, count, then = self.intervals
                await self._clock.sleep(first if self.passes < count else then)
        finally:
            self.started = self.last_pass = None

    async def run_pass(self) -> None:
        # Core ``Reconcile`` reads the NodeClaims before the cloud: a claim that launches and
        # registers while the cloud list runs was not Registered then, so it is not taken for lost.
        earlier = await self._read_claims()
        instances = await self._cloud.list()
        claim_list, node_list = await self._read()
        if not (earlier.served and claim_list.served and node_list.served):
            # A 404 on a list (CRD not installed yet, an API server whose CRD informer has not
            # synced) says nothing about what exists: taking it for "no claims" would terminate
            # the whole fleet. Upstream's GC returns the list error and collects nothing.
            self.skipped += 1
            log.warning(
                "nodeclaim garbage collection: %s not served; nothing collected this pass",
                " and ".join(
                    p
                    for p, ok in (
                        (self._claims.path, earlier.served and claim_list.served),
                        (self._nodes.path, node_list.served),
                    )
                    if not ok
                ),
            )
            self.last_pass = self._clock.now()
            return
        claims = list(claim_list.items)
        nodes = list(node_list.items)
        by_pid: dict[str, list[Obj]] = {}
        for n in nodes:
            by_pid.setdefault(node_provider_id(n), []).append(n)
        now = self._clock.now().timestamp()
        # The orphans from the claims read after the cloud (aws ``Reconcile``; an instance launched
        # during the list is younger than ``min_age``); the lost claims from the earlier read, those
        # still there (same UID) and not being deleted.
        orphans = orphan_instances(instances, claims, now, min_age=self.min_age)
        current = {(name(c), uid(c)) for c in claims if not deleting(c)}
        lost = [c for c in lost_claims(earlier.items, instances, by_pid) if (name(c), uid(c)) in current]
        if self.dry_run:
            self._say(orphans, lost)
            self.last_pass = self._clock.now()
            return
        for instance in orphans:
            log.info(
                "nodeclaim garbage collection: terminating %s (%s, no NodeClaim)",
                instance.provider_id,
                instance.instance_type,
            )
            with contextlib.suppress(NodeClaimNotFound):
                await self._cloud.delete(instance.provider_id)
            for node in by_pid.get(instance.provider_id, ()):
                await self._delete_node(node)
            if self._metrics is not None:
                self._metrics.garbage_collected("orphan_instance")
        for claim in lost:
            log.info(
                "nodeclaim garbage collection: deleting nodeclaim %s (instance %s is gone)",
                name(claim),
                provider_id(claim),
            )
            await self._claims.delete(name(claim))
            if self._metrics is not None:
                self._metrics.garbage_collected("lost_claim")
        await self._release_stranded(nodes, claims)
        self.last_pass = self._clock.now()

    async def _read_claims(self) -> ObjectList:
        """The NodeClaims alone, from the informer once synced (else a LIST)."""
        if self._cache is None:
            return await self._claims.list()
        claims = self._cache[0]
        await claims.wait_synced()
        return ObjectList(claims.items(), "", served=claims.served)

    async def _read(self) -> tuple[ObjectList, ObjectList]:
        """The NodeClaims and the Nodes, from the informers once both have synced."""
        if self._cache is None:
            return await self._claims.list(), await self._nodes.list()
        claims, nodes = self._cache
        await asyncio.gather(claims.wait_synced(), nodes.wait_synced())
        return (
            ObjectList(claims.items(), "", served=claims.served),
            ObjectList(nodes.items(), "", served=nodes.served),
        )

    def _say(self, orphans: Sequence[CloudNodeClaim], lost: Sequence[Obj]) -> None:
        """Dry run: what this pass would collect, logged; nothing terminated or deleted (the
        stranded Nodes' release, which asks the cloud per Node, is not rehearsed)."""
        for instance in orphans:
            log.info(
                "dry-run: nodeclaim garbage collection would terminate %s (%s, no NodeClaim)",
                instance.provider_id,
                instance.instance_type,
            )
        for claim in lost:
            log.info(
                "dry-run: nodeclaim garbage collection would delete nodeclaim %s (instance %s is gone)",
                name(claim),
                provider_id(claim),
            )

    async def _delete_node(self, node: Obj) -> None:
        """The Node of a terminated instance: deleted, its finalizer released (nothing is left to
        drain: the instance is gone). A conflict is left to the next pass."""
        try:
            await release_node(self._nodes, node)
        except KubeError as err:
            if err.code != 409:
                raise

    async def _release_stranded(self, nodes: Sequence[Obj], claims: Sequence[Obj]) -> None:
        """Deleting Nodes holding ``karpenter.sh/termination`` that no NodeClaim has the provider id
        of and whose instance the cloud no longer knows: nobody else would ever release them (a
        claim that lost its Registered write, a claim finalizer removed by hand). Core
        node/termination/controller.go finalize handles a Node without a NodeClaim too."""
        claimed = {provider_id(c) for c in claims} - {""}
        for node in nodes:
            pid = node_provider_id(node)
            if (
                not deleting(node)
                or TERMINATION_FINALIZER not in finalizers(node)
                or not pid
                or pid in claimed
            ):
                continue
            try:
                await self._cloud.get(pid)
            except NodeClaimNotFound:
                log.info(
                    "nodeclaim garbage collection: releasing node %s (no NodeClaim, instance %s gone)",
                    name(node),
                    pid,
                )
                await self._delete_node(node)
