"""Which pods the provisioner finds capacity for, and the watch that tells the batcher about them.

``is_provisionable`` is Karpenter's ``IsProvisionable`` (kubernetes-sigs/karpenter
``pkg/utils/pod/scheduling.go``): not bound to a node, not preempting (no
``status.nominatedNodeName``: kube-scheduler already freed room for it), marked
``PodScheduled=False`` reason ``Unschedulable`` by kube-scheduler, not a DaemonSet's pod nor a
static (mirror) pod. kubespot also leaves out pods being deleted or finished (an unbound pod being
deleted will never run: a node for it would be wasted). Waiting for kube-scheduler's verdict means
a pod that fits an existing node never costs a NodeClaim.

``PendingWatch`` lists then watches every pod and triggers the batcher with the UID of each
provisionable one (Karpenter's provisioning pod controller); a broken watch is re-listed by the
Kubernetes adapter, and every pod of the new listing is judged again. As that controller requeues a
pod for as long as it stays provisionable ("the pod may require another provisioning loop"), the
pods still waiting are triggered again every ``requeue`` seconds (Karpenter's 10 s,
``pkg/controllers/provisioning/controller.go`` ``PodController.Reconcile``): a pod whose node came up but
that kube-scheduler could not place after all gets planned again without any change of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubespot.kube import KubeError
from kubespot.kube.custom import CustomObjects
from kubespot.kube.informer import Informer
from kubespot.model import Clock

__all__ = ["PODS", "PendingWatch", "is_provisionable"]

log = logging.getLogger("kubespot.controller.provisioning")

PODS = "api/v1/pods"
_TERMINAL = ("Succeeded", "Failed")
_MIRROR = "kubernetes.io/config.mirror"


def _failed_to_schedule(status: Mapping[str, Any]) -> bool:
    """``FailedToSchedule``: a ``PodScheduled`` condition with reason ``Unschedulable``."""
    return any(
        isinstance(c, Mapping) and c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in status.get("conditions") or ()
    )


def is_provisionable(pod: Mapping[str, Any]) -> bool:
    """True for a pod the provisioner should find a node for (see the module docstring)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if spec.get("nodeName") or status.get("nominatedNodeName") or meta.get("deletionTimestamp"):
        return False
    if status.get("phase") in _TERMINAL or _MIRROR in (meta.get("annotations") or {}):
        return False
    for ref in meta.get("ownerReferences") or ():
        kind = ref.get("kind")
        if kind == "Node" or (kind == "DaemonSet" and ref.get("apiVersion") == "apps/v1"):
            return False
    return _failed_to_schedule(status)


def uid_of(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


class PendingWatch:
    """Calls ``on_pending(uid)`` for every provisionable pod, listed first then as it changes."""

    def __init__(
        self,
        pods: CustomObjects | Informer,
        on_pending: Callable[[str], None],
        *,
        clock: Clock,
        retry: float = 1.0,
        requeue: float = 10.0,
    ) -> None:
        self._pods = pods
        self._on_pending = on_pending
        self._clock = clock
        self._retry = retry
        self._requeue = requeue
        #: UIDs of the pods provisionable as last seen.
        self.waiting: set[str] = set()

    def _judge(self, pods: Iterable[Mapping[str, Any]], *, deleted: bool = False) -> None:
        for pod in pods:
            uid = uid_of(pod)
            if not deleted and is_provisionable(pod):
                self.waiting.add(uid)
                self._on_pending(uid)
            else:
                self.waiting.discard(uid)

    async def _requeue_waiting(self) -> None:
        while True:
            await self._clock.sleep(self._requeue)
            for uid in list(self.waiting):
                self._on_pending(uid)

    async def run(self) -> None:
        if isinstance(self._pods, Informer):
            await self._run_on(self._pods)
            return
        while True:
            try:
                listing = await self._pods.list()
                break
            except KubeError as err:
                log.warning("provisioning: cannot list pods (retrying): %s", err)
                await self._clock.sleep(self._retry)
        self.waiting.clear()
        self._judge(listing.items)
        requeue = asyncio.ensure_future(self._requeue_waiting())
        try:
            async for op, obj, relisted in self._pods.watch(listing.resource_version):
                if relisted is not None:
                    self.waiting.clear()
                    self._judge(relisted.items)
                elif obj is not None:
                    self._judge((obj,), deleted=op == "DELETED")
        finally:
            requeue.cancel()

    async def _run_on(self, pods: Informer) -> None:
        """The same judged from the pod informer the provisioner reads (one pod watch, not two): its
        handlers run once its cache holds the change, so the pass a pod triggers sees that pod."""
        unsubscribe = pods.subscribe(lambda op, obj: self._judge((obj,), deleted=op == "DELETED"))
        try:
            await pods.wait_synced()
            self.waiting.clear()
            self._judge(pods.items())
            await self._requeue_waiting()
        finally:
            unsubscribe()
