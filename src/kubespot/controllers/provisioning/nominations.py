"""Pods nominated to the NodeClaims created for them: the record the next batch reads, and the
``Nominated`` events.

The record (pod UID → NodeClaim name) is what keeps a pod from being planned twice: while its
NodeClaim is in flight (created, not deleted, its node not initialized) the provisioner counts
the pod on that claim instead of planning it again (Karpenter reaches the same through its cluster
state, ``state/cluster.go`` ``NominateNodeForPod`` and the in-flight NodeClaims its scheduler
packs first). When the claim goes away (deleted for insufficient capacity, a timeout) its pods are
``released``: pending again, planned in the next batch.

The events follow Karpenter's ``NominatePodEvent`` (kubernetes-sigs/karpenter
``pkg/controllers/provisioning/scheduling/events.go``): on the pod, Normal, reason ``Nominated``,
"Pod should schedule on: nodeclaim/<name>"; de-duplicated per pod UID (and message) for Karpenter's
default two minutes (``pkg/events/recorder.go``); one token bucket of 5 per second, burst 10, shared
by every nomination, and an event over budget is dropped, not delayed (client-go's ``TryAccept``).
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
DEDUPE_SECONDS = 120.0


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
        self._dedupe = dedupe
        self._monotonic = monotonic
        self._claim_of: dict[str, str] = {}
        self._sent: dict[tuple[str, str], float] = {}
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

    async def nominate(self, pods: Iterable[Mapping[str, Any]], claim: str) -> None:
        """Record ``pods`` as nominated to ``claim`` and tell each one (within the event budget)."""
        now = self._monotonic()
        message = nominated_message(claim)
        due: list[ObjectRef] = []
        for pod in pods:
            meta = pod.get("metadata") or {}
            uid = str(meta.get("uid") or "")
            if not uid:
                continue
            self._claim_of[uid] = claim
            if self._recorder is None:
                continue
            key = (uid, message)
            sent = self._sent.get(key)
            if sent is not None and now - sent < self._dedupe:
                continue
            if not self._bucket.try_acquire():
                self.dropped += 1
                continue
            self._sent[key] = now
            due.append(ObjectRef("Pod", str(meta.get("name") or ""), str(meta.get("namespace") or ""), uid))
        self._forget_old(now)
        if due and self._recorder is not None:
            recorder = self._recorder
            await asyncio.gather(*(recorder.record(ref, NOMINATED, message) for ref in due))

    def _forget_old(self, now: float) -> None:
        if len(self._sent) < 4096:
            return
        for key in [k for k, at in self._sent.items() if now - at >= self._dedupe]:
            del self._sent[key]
