"""A NodePool's ``status.resources`` and ``status.nodes``: what its nodes have, counted every 5 s.

As Karpenter's counter (kubernetes-sigs/karpenter ``pkg/controllers/nodepool/counter/controller.go``
with ``state/cluster.go`` ``updateNodePoolResources`` and ``state/statenode.go`` ``Capacity``):
the **capacity** (not allocatable) of the pool's state nodes that are not being deleted
(``StateNode.deleting``, Karpenter's ``Deleted``): a Node and its NodeClaim are one state node
(``scheduling.cluster.state_nodes``, matched by ``nodeName`` or provider ID), of the pool its
labels name (the NodeClaim's until the Node is registered); until it is initialized its capacity
is the Node's with zero or missing figures taken from the NodeClaim (the NodeClaim's alone before
the Node exists), and each counts one node (v1.11+), a NodeClaim not launched yet included. The
provisioner's limit check counts the very same (``scheduling.cluster.pools_in_use``).
``resources`` always carries ``cpu``, ``memory``, ``pods``, ``ephemeral-storage`` and ``nodes``
(zero when none), and ``nodes`` is the count.

``pool_counts`` is pure. ``NodePoolCounter`` counts every ``interval`` from the process's shared
Node and NodeClaim informers (``kube.informer``: what the provisioner's passes read; Karpenter's
counter reads its ``state.Cluster``, fed by the same controller-runtime cache), so a tick costs the
API server nothing, and hands the counts to the status loop (``StatusLoop.set_counts``), which
writes them with the conditions, so one writer owns the NodePool's status and the two never fight
over its version. A tick waits until both informers have synced from a served LIST (a 404 is
no answer): an empty cache is not "no nodes", and publishing from it would write the NodePool's
``status.resources`` and ``status.nodes`` too low, for ``kubectl`` and every reader of the status
(core counter ``Reconcile`` requeues while ``cluster.Synced`` is false, as on a list error).
kubespot's own limits are checked against the caches (``pools_in_use``), never against the
status, so the limits do not depend on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubespot.kube.informer import Informer
from kubespot.model import Clock
from kubespot.model.quantity import quantity_text
from kubespot.scheduling.cluster import pools_in_use

__all__ = ["BASE_RESOURCES", "NodePoolCounter", "PoolCounts", "empty_counts", "pool_counts"]

Obj = Mapping[str, Any]
#: (``status.resources`` as quantities, ``status.nodes``).
PoolCounts = tuple[dict[str, str], int]
BASE_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")


def pool_counts(nodes: Iterable[Obj], nodeclaims: Iterable[Obj]) -> dict[str, PoolCounts]:
    """Every NodePool's counts, by name (pools with no node are absent: they count zero): the
    usage its limits are checked against (``pools_in_use``), so ``status.nodes`` and
    ``limits.nodes`` count the same nodes."""
    return {
        pool: _as_status({k: v for k, v in used.items() if k != "nodes"}, used["nodes"])
        for pool, used in pools_in_use(nodes, nodeclaims).items()
    }


def _as_status(total: Mapping[str, int], count: int) -> PoolCounts:
    resources = {k: quantity_text(k, 0) for k in BASE_RESOURCES}
    resources.update({k: quantity_text(k, v) for k, v in total.items()})
    resources["nodes"] = str(count)
    return resources, count


def empty_counts() -> PoolCounts:
    return _as_status({}, 0)


class NodePoolCounter:
    """Counts every ``interval`` seconds from the Node and NodeClaim informers and hands each pool's
    counts to ``publish``."""

    def __init__(
        self,
        nodes: Informer,
        claims: Informer,
        publish: Callable[[Mapping[str, PoolCounts]], None],
        *,
        clock: Clock,
        interval: float = 5.0,
    ) -> None:
        self._nodes = nodes
        self._claims = claims
        self._publish = publish
        self._clock = clock
        self._interval = interval
        self.last_count: Mapping[str, PoolCounts] | None = None
        #: The informers' generations ``last_count`` was counted at: unchanged caches are not
        #: counted again (at 5 000 nodes a count is the tick's whole cost).
        self._counted_at: tuple[int, int] | None = None

    async def count_once(self) -> Mapping[str, PoolCounts]:
        # Waits rather than skips: the informers start here if nobody runs them, and the first
        # tick after they sync counts at once. Never a count of a cache not (or no longer) synced
        # (leadership lost and won back: the informers were dropped and list again), nor of one
        # whose last LIST was answered 404 (``wait_served``; ``state/cluster.go`` ``Synced`` is
        # false when its NodeClaim list fails): ``{}`` would write every pool's figures as zero.
        await asyncio.gather(self._nodes.wait_served(), self._claims.wait_served())
        at = (self._nodes.generation, self._claims.generation)
        counts = self.last_count
        if counts is None or at != self._counted_at:
            counts = pool_counts(self._nodes.items(), self._claims.items())
            self.last_count, self._counted_at = counts, at
        # Published every tick even when unchanged: a NodePool created since reads its figures.
        self._publish(counts)
        return counts

    async def run(self) -> None:
        while True:
            await self.count_once()
            await self._clock.sleep(self._interval)
