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

``pool_counts`` is pure. ``NodePoolCounter`` lists nodes and NodeClaims every ``interval`` and
hands the counts to the status loop (``StatusLoop.set_counts``), which writes them with the
conditions, so one writer owns the NodePool's status and the two never fight over its version.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubespot.kube import KubeClient, KubeError
from kubespot.model import Clock
from kubespot.model.quantity import quantity_text
from kubespot.scheduling.cluster import pools_in_use

__all__ = ["BASE_RESOURCES", "NodePoolCounter", "PoolCounts", "empty_counts", "pool_counts"]

log = logging.getLogger("kubespot.controller.provisioning")

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
    """Counts every ``interval`` seconds and hands each pool's counts to ``publish``."""

    def __init__(
        self,
        kube: KubeClient,
        publish: Callable[[Mapping[str, PoolCounts]], None],
        *,
        clock: Clock,
        interval: float = 5.0,
        nodeclaims_path: str = "apis/karpenter.sh/v1/nodeclaims",
    ) -> None:
        self._kube = kube
        self._publish = publish
        self._clock = clock
        self._interval = interval
        self._claims_path = nodeclaims_path
        self.last_count: Mapping[str, PoolCounts] | None = None

    async def count_once(self) -> Mapping[str, PoolCounts]:
        nodes = await self._kube.list_objects("api/v1/nodes")
        claims = await self._kube.list_objects(self._claims_path)
        counts = pool_counts(nodes, claims)
        self.last_count = counts
        self._publish(counts)
        return counts

    async def run(self) -> None:
        while True:
            try:
                await self.count_once()
            except KubeError as err:
                log.warning(
                    "provisioning: cannot count the NodePools' nodes (next try in %.0f s): %s",
                    self._interval,
                    err,
                )
            await self._clock.sleep(self._interval)
