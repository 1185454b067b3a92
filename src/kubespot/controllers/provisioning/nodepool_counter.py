"""A NodePool's ``status.resources`` and ``status.nodes``: what its nodes have, counted every 5 s.

As Karpenter's counter (kubernetes-sigs/karpenter ``pkg/controllers/nodepool/counter/controller.go``
with ``state/cluster.go`` ``updateNodePoolResources`` and ``state/statenode.go`` ``Capacity``):
the **capacity** (not allocatable) of the pool's state nodes that are not being deleted: a Node
(labelled ``karpenter.sh/nodepool``) and its NodeClaim are one state node (matched by
``nodeName`` or provider ID, ``scheduling.cluster.claim_node_names``); until it is
initialized its capacity is the Node's with zero or missing figures taken from the NodeClaim (the
NodeClaim's alone before the Node registers). ``resources`` always carries ``cpu``, ``memory``,
``pods``, ``ephemeral-storage`` and ``nodes`` (zero when none), and ``nodes`` is the count.

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
from kubespot.model.quantity import milli, quantity_text, units
from kubespot.scheduling.cluster import claim_node_names
from kubespot.scheduling.labels import NODEPOOL

__all__ = ["BASE_RESOURCES", "NodePoolCounter", "PoolCounts", "empty_counts", "pool_counts"]

log = logging.getLogger("kubespot.controller.provisioning")

Obj = Mapping[str, Any]
#: (``status.resources`` as quantities, ``status.nodes``).
PoolCounts = tuple[dict[str, str], int]
BASE_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")
_INITIALIZED = "karpenter.sh/initialized"


def _amounts(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    if not isinstance(values, Mapping):
        return out
    for k, v in values.items():
        try:
            out[str(k)] = milli(v) if k == "cpu" else units(v)
        except ValueError:
            continue  # a figure nobody can read counts as missing
    return out


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _initialized(claim: Obj | None, node: Obj | None) -> bool:
    if claim is None:
        return True  # a node without a NodeClaim is as it is
    if node is not None and (_meta(node).get("labels") or {}).get(_INITIALIZED) == "true":
        return True
    return any(
        isinstance(c, Mapping) and c.get("type") == "Initialized" and c.get("status") == "True"
        for c in (claim.get("status") or {}).get("conditions") or ()
    )


def pool_counts(nodes: Iterable[Obj], nodeclaims: Iterable[Obj]) -> dict[str, PoolCounts]:
    """Every NodePool's counts, by name (pools with no node are absent: they count zero)."""
    node_list = [n for n in nodes]
    claim_list = list(nodeclaims)
    by_name = {str(_meta(n).get("name") or ""): n for n in node_list}
    node_of = claim_node_names(node_list, claim_list)
    sums: dict[str, dict[str, int]] = {}
    counts: dict[str, int] = {}
    claimed: set[str] = set()

    def add(pool: str, capacity: Mapping[str, int]) -> None:
        total = sums.setdefault(pool, {})
        for k, v in capacity.items():
            total[k] = total.get(k, 0) + v
        counts[pool] = counts.get(pool, 0) + 1

    for claim, node_name in zip(claim_list, node_of, strict=True):
        meta = _meta(claim)
        pool = str((meta.get("labels") or {}).get(NODEPOOL) or "")
        node = by_name.get(node_name) if node_name else None
        if node is not None:
            claimed.add(node_name)
        node_deleting = node is not None and bool(_meta(node).get("deletionTimestamp"))
        if not pool or meta.get("deletionTimestamp") or node_deleting:
            continue
        claim_capacity = _amounts((claim.get("status") or {}).get("capacity"))
        if node is None:
            # Karpenter's updateNodePoolResources counts a state node only once it has capacity:
            # a claim not launched yet (or failing to launch) is not a node.
            if claim_capacity:
                add(pool, claim_capacity)
            continue
        capacity = _amounts((node.get("status") or {}).get("capacity"))
        if not _initialized(claim, node):
            for k, v in claim_capacity.items():
                if not capacity.get(k):
                    capacity[k] = v
        add(pool, capacity)
    for name, node in by_name.items():
        meta = _meta(node)
        pool = str((meta.get("labels") or {}).get(NODEPOOL) or "")
        if name in claimed or not pool or meta.get("deletionTimestamp"):
            continue
        add(pool, _amounts((node.get("status") or {}).get("capacity")))
    return {pool: _as_status(sums[pool], counts[pool]) for pool in counts}


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
