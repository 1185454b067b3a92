"""Termination: a deleted NodeClaim holding ``karpenter.sh/termination`` gives its Node back and its
instance up, then lets go, as Karpenter's finalizer (kubernetes-sigs/karpenter
``pkg/controllers/nodeclaim/lifecycle/controller.go`` ``finalize``) with the Node's drain done here
by kubespot's drain engine (where Karpenter's node termination controller drains,
``pkg/controllers/node/termination``).

0. With a ``spec.terminationGracePeriod``: the claim annotated
   ``karpenter.sh/nodeclaim-termination-timestamp`` (deletion + grace) and a Warning event
   ``TerminationGracePeriodExpiring`` "All pods will be deleted by <time>".
1. Registered: each Node with the claim's provider id (deleted already or not) is cordoned and
   drained by
   ``actions.drain.drain_node`` (tiers, PodDisruptionBudgets, deadline), deleted, and its
   ``karpenter.sh/termination`` finalizer removed. The deadline is the claim's
   ``deletionTimestamp`` + ``spec.terminationGracePeriod`` when set (pods a budget still blocks then
   are handled by ``drain.pdb_deadline_action``, as Karpenter deletes them at that time); without
   one, ``drain.voluntary_timeout`` from now with budgets kept to the end (Karpenter waits for
   them for ever). The drain never refuses (``drain_deadline``: emptyDir pods evicted, DaemonSet
   pods left to the instance); a refusal would be an error retried, never taken for a drain.
   A NotReady Node whose instance the cloud no longer knows (a reclaimed spot node) is not
   drained: deleted and released at once (core ``node/termination/controller.go`` ``finalize``).
   Then, while VolumeAttachments of PersistentVolumes name the claim's Node, a look again
   ``volume_recheck`` seconds later (1 s), at most until the termination time or
   ``deletionTimestamp + drain.voluntary_timeout`` (``volumes``, core ``awaitVolumeDetachment``).
2. A provider id: ``cloud.delete`` until it answers ``NodeClaimNotFound``; meanwhile
   ``InstanceTerminating=True`` and a look again ``recheck`` seconds later (Karpenter: 5 s).
3. The claim's finalizer is removed last. A claim deleted before it launched has no provider id
   and no Node: its finalizer goes at once.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from kubespot.actions.drain import DrainEvents, drain_node
from kubespot.cloud.errors import NodeClaimNotFound
from kubespot.cloud.provider import CloudProvider
from kubespot.config.drain import DrainSettings
from kubespot.kube import KubeClient, KubeError, ObjectRef
from kubespot.kube.custom import CustomObjects
from kubespot.model import Clock
from kubespot.scheduling.api.condition_set import rfc3339
from kubespot.scheduling.api.conditions import Condition

from .objects import (
    INSTANCE_TERMINATING,
    REGISTERED,
    TERMINATION_FINALIZER,
    Obj,
    annotations_of,
    deleting,
    finalizers,
    is_true,
    meta,
    name,
    node_provider_id,
    node_ready,
    provider_id,
    resource_version,
    set_conditions,
    uid,
)
from .volumes import attached_volumes

__all__ = [
    "TERMINATION_TIMESTAMP",
    "DrainRefused",
    "Events",
    "Terminator",
    "drain_deadline",
    "release_node",
    "termination_time",
]

#: When the pods of a deleted claim with a ``terminationGracePeriod`` must be gone (RFC 3339).
TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"


class Events(Protocol):
    """What the controller records on NodeClaims (``kube.EventRecorder.record`` fits)."""

    async def record(self, obj: ObjectRef, reason: str, message: str, *, warning: bool = False) -> None: ...


log = logging.getLogger("kubespot.controller.nodeclaim")

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _seconds(duration: str) -> float | None:
    """A Go duration (``1h30m``, ``45s``) in seconds; None when it is not one."""
    text = duration.strip()
    if not text or _DURATION.sub("", text):
        return None
    return sum(float(n) * _UNIT[u] for n, u in _DURATION.findall(text))


def _time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def termination_time(claim: Obj) -> datetime | None:
    """When the claim's pods must be gone: its ``karpenter.sh/nodeclaim-termination-timestamp``
    annotation, else ``deletionTimestamp + spec.terminationGracePeriod``; None without a grace
    period (core lifecycle/controller.go ensureTerminationGracePeriodTerminationTimeAnnotation,
    node/termination/controller.go nodeTerminationTime)."""
    stamped = annotations_of(claim).get(TERMINATION_TIMESTAMP)
    if stamped and (at := _time(stamped)) is not None:
        return at
    grace = (claim.get("spec") or {}).get("terminationGracePeriod")
    seconds = _seconds(grace) if isinstance(grace, str) else None
    stamp = meta(claim).get("deletionTimestamp")
    deleted = _time(stamp) if isinstance(stamp, str) else None
    if seconds is None or deleted is None:
        return None
    return deleted + timedelta(seconds=seconds)


def drain_deadline(claim: Obj, settings: DrainSettings, now: datetime) -> tuple[DrainSettings, datetime]:
    """The drain's settings and deadline for a deleted ``claim`` (see the module's step 1).

    The node is going whatever the pods hold, so the drain never refuses (core
    node/termination/terminator Drain evicts emptyDir pods too): emptyDir pods are evicted (their
    data dies with the instance anyway) and DaemonSet pods are left to end with the instance
    (Karpenter evicts them in its last groups; kubespot's engine leaves them, as they serve the
    node to the end). The operator's ``DELETE_LOCAL_DATA``/``IGNORE_DAEMON_SETS`` are for the
    interruption drains, where a refusal leaves the node as it is."""
    settings = dataclasses.replace(settings, delete_local_data=True, ignore_daemon_sets=True)
    ends = termination_time(claim)
    if ends is not None:
        return settings, ends
    return dataclasses.replace(settings, pdb_deadline_action="keep"), now + timedelta(
        seconds=settings.voluntary_timeout
    )


class DrainRefused(Exception):
    """The drain evicted nothing (it refused): the instance must not be terminated as if drained."""


class Terminator:
    """Runs the finalizer of one deleted NodeClaim at a time (the loop keeps one task per claim)."""

    def __init__(
        self,
        *,
        kube: KubeClient,
        claims: CustomObjects,
        nodes: CustomObjects,
        cloud: CloudProvider,
        drain: DrainSettings,
        clock: Clock,
        recorder: DrainEvents | None = None,
        events: Events | None = None,
        recheck: float = 5.0,
        volume_recheck: float = 1.0,
    ) -> None:
        self._kube = kube
        self._claims = claims
        self._nodes = nodes
        self._cloud = cloud
        self._drain = drain
        self._clock = clock
        self._recorder = recorder
        self._events = events
        self.recheck = recheck
        self.volume_recheck = volume_recheck

    async def finalize(
        self, claim: Obj, nodes: Sequence[Obj], on_stored: Callable[[Obj], None]
    ) -> float | None:
        """One step of the finalizer; seconds until the next (None: done or nothing to do).
        ``on_stored`` is told of every version of the claim this writes."""
        if TERMINATION_FINALIZER not in finalizers(claim):
            return None
        ends = termination_time(claim)
        if ends is not None and TERMINATION_TIMESTAMP not in annotations_of(claim):
            stamp = rfc3339(ends)
            patch = {
                "metadata": {
                    "annotations": {TERMINATION_TIMESTAMP: stamp},
                    "resourceVersion": resource_version(claim),
                }
            }
            claim = await self._claims.patch(name(claim), patch)
            on_stored(claim)
            if self._events is not None:
                ref = ObjectRef(
                    "NodeClaim", name(claim), None, uid(claim) or None, api_version="karpenter.sh/v1"
                )
                await self._events.record(
                    ref,
                    "TerminationGracePeriodExpiring",
                    f"All pods will be deleted by {stamp}",
                    warning=True,
                )
        if is_true(claim, REGISTERED):
            dead = False
            for node in nodes:
                dead = await self._retire(claim, node) or dead
            if not dead and (wait := await self._volumes_attached(claim)):
                return wait
        pid = provider_id(claim)
        if pid:
            try:
                await self._cloud.delete(pid)
            except NodeClaimNotFound:
                pass
            else:
                work: Obj = {**claim, "status": dict(claim.get("status") or {})}
                set_conditions(
                    work, [Condition(INSTANCE_TERMINATING, "True", INSTANCE_TERMINATING)], self._clock.now()
                )
                if work["status"] != claim.get("status"):
                    on_stored(await self._claims.replace_status(work))
                return self.recheck
        kept = [f for f in finalizers(claim) if f != TERMINATION_FINALIZER]
        stored = await self._claims.patch(
            name(claim), {"metadata": {"finalizers": kept, "resourceVersion": resource_version(claim)}}
        )
        on_stored(stored)
        log.info("nodeclaim %s: deleted (instance %s)", name(claim), pid or "never launched")
        return None

    async def _instance_gone(self, node: Obj, claim: Obj) -> bool:
        """The Node is not Ready and the cloud no longer knows its instance: nothing is left to
        drain (a reclaimed spot instance, its kubelet dead)."""
        if node_ready(node):
            return False
        pid = node_provider_id(node) or provider_id(claim)
        if not pid:
            return False
        try:
            await self._cloud.get(pid)
        except NodeClaimNotFound:
            return True
        return False

    async def _volumes_attached(self, claim: Obj) -> float | None:
        """Seconds until the volumes of the claim's Node are looked at again while some are still
        attached (None: none, or the wait is over). Bounded by the termination time, else
        ``deletionTimestamp + drain.voluntary_timeout`` (Karpenter bounds it by the grace period
        only, and waits for ever without one)."""
        node_name = str((claim.get("status") or {}).get("nodeName") or "")
        if not node_name:
            return None
        attached = await attached_volumes(self._kube, node_name)
        if not attached:
            return None
        ends = termination_time(claim)
        if ends is None:
            stamp = meta(claim).get("deletionTimestamp")
            deleted = _time(stamp) if isinstance(stamp, str) else None
            ends = (deleted or self._clock.now()) + timedelta(seconds=self._drain.voluntary_timeout)
        if self._clock.now() >= ends:
            log.warning(
                "nodeclaim %s: volumes %s still attached to %s at the deadline; terminating anyway",
                name(claim),
                ", ".join(attached),
                node_name,
            )
            return None
        log.info("nodeclaim %s: waiting for volumes %s to detach", name(claim), ", ".join(attached))
        return self.volume_recheck

    async def _retire(self, claim: Obj, node: Obj) -> bool:
        """Cordon, drain, delete the Node and release its finalizer. A Node deleted first (by
        hand: its finalizer holds it) is drained all the same, as Karpenter's node termination
        controller drains a deleted Node. A NotReady Node whose instance is gone is not drained
        (core node/termination/controller.go finalize: evicting from a dead kubelet only leaves
        pods Terminating until the deadline); it is deleted at once and the pod garbage collector
        deletes its pods, as for any Node that disappears. True when the Node was dead (no volume
        detach to wait for then: core finalize removes the finalizer at once)."""
        node_name = name(node)
        if await self._instance_gone(node, claim):
            log.info(
                "nodeclaim %s: node %s is NotReady and its instance gone; not drained", name(claim), node_name
            )
            await release_node(self._nodes, node)
            return True
        try:
            await self._kube.cordon(node_name)
        except KubeError as err:
            if err.code != 404:
                raise
            return False
        settings, deadline = drain_deadline(claim, self._drain, self._clock.now())
        result = await drain_node(
            node_name,
            kube=self._kube,
            settings=settings,
            deadline=deadline,
            clock=self._clock,
            recorder=self._recorder,
        )
        counts = ", ".join(f"{k} {v}" for k, v in sorted(result.counts().items())) or "no pods"
        if result.refused:
            # A refusal evicts nothing, not even what may leave: never taken for a drain (the loop
            # retries with backoff). drain_deadline's settings make it unreachable.
            raise DrainRefused(f"drain of node {node_name} refused ({counts})")
        if not result.sent_away:
            # The deadline came first. The claim is going whatever the drain says (as Karpenter's
            # finalizer goes on once its grace period ends): what could not leave ends with the
            # instance.
            log.warning(
                "nodeclaim %s: node %s not fully drained (%s); terminating anyway",
                name(claim),
                node_name,
                counts,
            )
        else:
            log.info("nodeclaim %s: node %s drained (%s)", name(claim), node_name, counts)
        await release_node(self._nodes, node)
        return False


async def release_node(nodes: CustomObjects, node: Obj) -> None:
    """Delete ``node`` (unless it is being deleted already) and remove its
    ``karpenter.sh/termination`` finalizer (core node/termination/controller.go removeFinalizer)."""
    node_name = name(node)
    if not deleting(node):
        await nodes.delete(node_name)
    current = await nodes.get(node_name)
    if current is None or TERMINATION_FINALIZER not in finalizers(current):
        return
    kept = [f for f in finalizers(current) if f != TERMINATION_FINALIZER]
    try:
        await nodes.patch(
            node_name, {"metadata": {"finalizers": kept, "resourceVersion": resource_version(current)}}
        )
    except KubeError as err:
        if err.code != 404:
            raise
