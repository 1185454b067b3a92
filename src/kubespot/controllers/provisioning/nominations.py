"""Pods nominated to the NodeClaims created for them: the record the next batch reads, and the
``Nominated`` events.

The record (pod UID → NodeClaim name) is what keeps a pod from being planned twice: while its
NodeClaim is in flight (created, not deleted, its node not initialized) the provisioner counts
the pod on that claim instead of planning it again (Karpenter reaches the same through its cluster
state, ``state/cluster.go`` ``NominateNodeForPod`` and the in-flight NodeClaims its scheduler
packs first). When the claim goes away (deleted for insufficient capacity, a timeout) its pods are
``released``: pending again, planned in the next batch.

The events follow Karpenter's (kubernetes-sigs/karpenter
``pkg/controllers/provisioning/scheduling/events.go``, ``pkg/events/recorder.go``):

- ``NominatePodEvent``: on the pod, Normal, reason ``Nominated``, "Pod should schedule on:
  nodeclaim/<name>"; one token bucket of 5 per second, burst 10, shared by every nomination, and
  an event over budget is dropped, not delayed (client-go's ``TryAccept``);
- ``PodFailedToScheduleEvent``: Warning ``FailedScheduling``, "Failed to schedule pod, <why>";
- ``NoCompatibleInstanceTypes``: on the NodePool, Warning, "NodePool requirements filtered out all
  compatible available instance types", de-duplicated per NodePool UID for a minute;
- pre-spin (kubespot's, launching.md §7): on the new NodeClaim, Normal, reason
  ``DisruptionLaunching`` as Karpenter's disruption controller's replacements
  (``disruption/events/events.go`` ``Launching``), "Launching NodeClaim: Interruption, replacing
  node(s) <names> before their drain";
- the capacity split (kubespot's, launching.md §6): Normal ``CapacitySplit`` on a NodeClaim the
  split narrowed to spot or on-demand (the type and why: ``capacity_split.narrowing``), and on its
  NodePool once per capacity type within the timeout; the NodeClaims' through a token bucket of
  their own (5 per second, burst 10), dropped over budget as ``Nominated``;
- dry run (``node_actions.dry_run``): Normal ``DryRun`` on the NodePool with what would be created,
  as the interruption half's dry-run events on its node (``controllers/response/dry_run``), once
  per NodePool and pod set within the timeout;
- all de-duplicated per (reason, object UID), whatever the message, for the event's timeout (2
  minutes by default, 5 for ``FailedScheduling``). As in Karpenter's recorder, the de-duplication
  is checked (and armed) before the rate limit: a dropped event is not retried within the timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubespot.kube import ObjectRef
from kubespot.kube.events import EventRecorder
from kubespot.kube.ratelimit import TokenBucket

__all__ = ["Nominations"]

NOMINATED = "Nominated"
FAILED_SCHEDULING = "FailedScheduling"
NO_COMPATIBLE_INSTANCE_TYPES = "NoCompatibleInstanceTypes"
NO_COMPATIBLE_MESSAGE = "NodePool requirements filtered out all compatible available instance types"
NO_COMPATIBLE_DEDUPE_SECONDS = 60.0
DISRUPTION_LAUNCHING = "DisruptionLaunching"
CAPACITY_SPLIT = "CapacitySplit"
DRY_RUN = "DryRun"
#: Karpenter's recorder's default de-duplication timeout, and FailedScheduling's own.
DEDUPE_SECONDS = 120.0
FAILED_DEDUPE_SECONDS = 300.0


def nominated_message(claim: str) -> str:
    return f"Pod should schedule on: nodeclaim/{claim}"


class Nominations:
    """Pod → NodeClaim, and the rate-limited ``Nominated`` events."""

    def __init__(
        self,
        recorder: EventRecorder | None,
        *,
        qps: float = 5.0,
        burst: int = 10,
        dedupe: float = DEDUPE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._recorder = recorder
        self._bucket = TokenBucket(qps=qps, burst=burst, monotonic=monotonic)
        #: The capacity split's events: a budget of their own, so a large pass's narrowings never
        #: take the nominations' (Karpenter gives each rate-limited event its own limiter).
        self._split_bucket = TokenBucket(qps=qps, burst=burst, monotonic=monotonic)
        self._dedupe = dedupe
        self._monotonic = monotonic
        self._claim_of: dict[str, str] = {}
        #: (reason, pod UID) -> until when a repeat is not published.
        self._quiet: dict[tuple[str, str], float] = {}
        #: Events dropped over the rate limit (for tests and metrics).
        self.dropped = 0

    def claim_of(self, uid: str) -> str | None:
        return self._claim_of.get(uid)

    def __len__(self) -> int:
        return len(self._claim_of)

    def nominated(self) -> Mapping[str, str]:
        """Every pod UID with its NodeClaim's name."""
        return dict(self._claim_of)

    def release(self, claim: str) -> list[str]:
        """Forget the pods nominated to ``claim`` (it is gone); their UIDs."""
        gone = [uid for uid, c in self._claim_of.items() if c == claim]
        for uid in gone:
            del self._claim_of[uid]
        return gone

    def keep_only(self, uids: Iterable[str]) -> None:
        """Forget pods not in ``uids`` (bound, deleted, or their claim gone)."""
        live = set(uids)
        for uid in [u for u in self._claim_of if u not in live]:
            del self._claim_of[uid]

    def _should_publish(self, reason: str, uid: str, timeout: float, now: float) -> bool:
        """``shouldCreateEvent``: False while a (reason, pod) event is within its timeout; else
        arms the timeout and says True."""
        key = (reason, uid)
        until = self._quiet.get(key)
        if until is not None and now < until:
            return False
        self._quiet[key] = now + timeout
        return True

    async def nominate(self, pods: Iterable[Mapping[str, Any]], claim: str) -> None:
        """Record ``pods`` as nominated to ``claim`` and tell each one (within the event budget)."""
        now = self._monotonic()
        message = nominated_message(claim)
        due: list[ObjectRef] = []
        for pod in pods:
            uid = str(_meta(pod).get("uid") or "")
            if not uid:
                continue
            self._claim_of[uid] = claim
            if self._recorder is None or not self._should_publish(NOMINATED, uid, self._dedupe, now):
                continue
            if not self._bucket.try_acquire():
                self.dropped += 1
                continue
            due.append(_ref(pod))
        self._forget_old(now)
        await self._publish(due, NOMINATED, message, warning=False)

    async def failed_to_schedule(self, pods: Iterable[tuple[Mapping[str, Any], str]]) -> None:
        """Tell each pod why no capacity was planned for it (``PodFailedToScheduleEvent``)."""
        if self._recorder is None:
            return
        now = self._monotonic()
        by_message: dict[str, list[ObjectRef]] = {}
        for pod, why in pods:
            uid = str(_meta(pod).get("uid") or "")
            if uid and self._should_publish(FAILED_SCHEDULING, uid, FAILED_DEDUPE_SECONDS, now):
                by_message.setdefault(f"Failed to schedule pod, {why}", []).append(_ref(pod))
        self._forget_old(now)
        for message, refs in by_message.items():
            await self._publish(refs, FAILED_SCHEDULING, message, warning=True)

    async def no_compatible_instance_types(self, nodepool: Mapping[str, Any]) -> None:
        """Warn on ``nodepool`` that its requirements leave no available instance type (Karpenter's
        ``NoCompatibleInstanceTypes``, published when its scheduler skips the pool)."""
        meta = _meta(nodepool)
        uid = str(meta.get("uid") or "")
        now = self._monotonic()
        if self._recorder is None or not uid:
            return
        if not self._should_publish(NO_COMPATIBLE_INSTANCE_TYPES, uid, NO_COMPATIBLE_DEDUPE_SECONDS, now):
            return
        ref = ObjectRef("NodePool", str(meta.get("name") or ""), None, uid, api_version="karpenter.sh/v1")
        await self._publish([ref], NO_COMPATIBLE_INSTANCE_TYPES, NO_COMPATIBLE_MESSAGE, warning=True)

    async def prespin_launching(self, claim: str, nodes: list[str], *, uid: str | None = None) -> None:
        """Tell on NodeClaim ``claim`` (``uid``: the created claim's) that it replaces ``nodes``
        (going away) before their drain. The UID is what ``kubectl describe`` selects the
        object's events by (``involvedObject.uid``)."""
        if self._recorder is None or not nodes:
            return
        if not self._should_publish(DISRUPTION_LAUNCHING, claim, self._dedupe, self._monotonic()):
            return
        message = (
            f"Launching NodeClaim: Interruption, replacing node(s) {', '.join(nodes)} before their drain"
        )
        ref = ObjectRef("NodeClaim", claim, None, uid or None, api_version="karpenter.sh/v1")
        await self._publish([ref], DISRUPTION_LAUNCHING, message, warning=False)

    async def capacity_split(
        self,
        claim: str,
        nodepool: Mapping[str, Any],
        capacity_type: str,
        message: str,
        *,
        claim_uid: str | None = None,
    ) -> None:
        """Tell on NodeClaim ``claim`` and on its NodePool that the capacity split narrowed it to
        ``capacity_type`` (``message``: why). The claim's is published once; the pool's once per
        capacity type within the de-duplication timeout (its first claim's counts)."""
        if self._recorder is None:
            return
        now = self._monotonic()
        due: list[ObjectRef] = []
        if self._should_publish(CAPACITY_SPLIT, f"nodeclaim/{claim}", self._dedupe, now):
            if self._split_bucket.try_acquire():
                # With its UID, or kubectl describe's field selector (involvedObject.uid) misses it.
                due.append(ObjectRef("NodeClaim", claim, None, claim_uid, api_version="karpenter.sh/v1"))
            else:
                self.dropped += 1
        meta = _meta(nodepool)
        uid = str(meta.get("uid") or "")
        # At most one per capacity type and timeout: the de-duplication is its budget.
        if uid and self._should_publish(CAPACITY_SPLIT, f"{uid}/{capacity_type}", self._dedupe, now):
            name = str(meta.get("name") or "")
            due.append(ObjectRef("NodePool", name, None, uid, api_version="karpenter.sh/v1"))
        self._forget_old(now)
        if due:
            text = f"NodeClaim {claim}: {message}"
            await self._publish(due, CAPACITY_SPLIT, text, warning=False)

    async def dry_run(self, nodepool: Mapping[str, Any], pods: Iterable[str], message: str) -> bool:
        """Tell on ``nodepool`` what a dry run would create for ``pods`` (their keys); False when
        the same pool and pods were told within the timeout (nothing said)."""
        meta = _meta(nodepool)
        key = f"{meta.get('uid') or meta.get('name') or ''}/{','.join(sorted(pods))}"
        now = self._monotonic()
        if not self._should_publish(DRY_RUN, key, self._dedupe, now):
            return False
        self._forget_old(now)
        uid = str(meta.get("uid") or "") or None
        ref = ObjectRef("NodePool", str(meta.get("name") or ""), None, uid, api_version="karpenter.sh/v1")
        await self._publish([ref], DRY_RUN, message, warning=False)
        return True

    async def _publish(self, refs: list[ObjectRef], reason: str, message: str, *, warning: bool) -> None:
        if refs and self._recorder is not None:
            recorder = self._recorder
            await asyncio.gather(*(recorder.record(ref, reason, message, warning=warning) for ref in refs))

    def _forget_old(self, now: float) -> None:
        if len(self._quiet) < 4096:
            return
        for key in [k for k, until in self._quiet.items() if until <= now]:
            del self._quiet[key]


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = pod.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _ref(pod: Mapping[str, Any]) -> ObjectRef:
    meta = _meta(pod)
    return ObjectRef(
        "Pod", str(meta.get("name") or ""), str(meta.get("namespace") or ""), str(meta.get("uid") or "")
    )
