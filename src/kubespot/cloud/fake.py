"""``FakeCloud``: a configurable in-memory ``CloudProvider`` for tests (Karpenter ships
``pkg/cloudprovider/fake`` for the same purpose), and ``fake_type``, a type with exact allocatable.

The catalog is the list of types it is given; ``instance_types`` narrows their offerings to the
zones the class allows (``zones``, when set: what the class's subnets cover). A launch takes the
claim's pools (``candidates.launch_pools``) and the first with capacity: ``capacity`` limits a pool
(capacity type, type, zone) to a number of instances (absent: unlimited), an exhausted pool fails
as EC2's ``InsufficientInstanceCapacity`` would, is marked in the ``UnavailableOfferings`` cache
and reported on the launch; when every pool fails, ``InsufficientCapacityError``. Launches are
idempotent per claim name, can be listed, fetched and deleted; ``fail_create`` makes the next
launches raise a ``CreateError``. ``delete`` terminates at once unless ``linger`` is set: then the
instance stays ``shutting-down`` (still got and listed, ``delete`` returns without error) until
``finish_shutdown``, as EC2's instances do (``AwsCloud.delete``'s contract). A launch reports the
type's capacity and allocatable and its time (``now``, injectable).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from kubespot.model.capacity import InstanceTypeInfo
from kubespot.model.quantity import GIB, quantity_text
from kubespot.scheduling.allocatable import NodeResources
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec
from kubespot.scheduling.instance_types import InstanceType, Offering, instance_type
from kubespot.scheduling.labels import CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL, ON_DEMAND, SPOT, ZONE
from kubespot.scheduling.nodepool import NodePool

from .candidates import launch_capacity_type, launch_pools
from .errors import CreateError, FailedOffering, InsufficientCapacityError, NodeClaimNotFound
from .provider import CloudNodeClaim
from .unavailable import OfferingKey, UnavailableOfferings

__all__ = ["DEFAULT_ZONES", "FakeCloud", "fake_type"]

DEFAULT_ZONES = ("z1", "z2")


def fake_type(
    name: str,
    cpu: int,
    mem_gib: int,
    od: float,
    spot: float | None = None,
    zones: tuple[str, ...] = DEFAULT_ZONES,
    arch: str = "x86_64",
    pods: int = 110,
) -> InstanceType:
    """A type whose allocatable is exactly ``cpu`` cores, ``mem_gib`` GiB and ``pods`` pods (no
    overhead), on-demand at ``od`` and, when ``spot`` is given, spot at that price, in ``zones``."""
    alloc = {"cpu": cpu * 1000, "memory": mem_gib * GIB, "pods": pods}
    offerings = [Offering(z, ON_DEMAND, od) for z in zones]
    if spot is not None:
        offerings += [Offering(z, SPOT, spot) for z in zones]
    res = NodeResources(dict(alloc), {}, {}, {}, alloc)
    return instance_type(InstanceTypeInfo(name, cpu, mem_gib * 1024, arch), res, offerings)


class FakeCloud:
    """An in-memory cloud serving a fixed catalog with optionally finite pools."""

    name = "fake"

    def __init__(
        self,
        types: Iterable[InstanceType] = (),
        *,
        zones: Iterable[str] | None = None,
        unavailable: UnavailableOfferings | None = None,
    ) -> None:
        self.types = list(types)
        #: The zones the node classes' subnets cover (None: every zone of the catalog).
        self.zones = set(zones) if zones is not None else None
        self.unavailable = unavailable
        #: Instances left per pool (capacity type, type, zone); a pool not listed is unlimited.
        self.capacity: dict[OfferingKey, int] = {}
        self.launched: dict[str, CloudNodeClaim] = {}
        #: Every ``create`` call's claim name, in order (tests count launches with it).
        self.create_calls: list[str] = []
        self.fail_create = 0
        #: Deleted instances stay ``shutting-down`` until ``finish_shutdown`` (False: gone at once).
        self.linger = False
        #: Launch times (seconds since the epoch) come from here; tests age instances with it.
        self.now: Callable[[], float] = time.time
        self._ids = itertools.count(1)

    async def instance_types(self, nodepool: NodePool, nodeclass: EC2NodeClassSpec) -> list[InstanceType]:
        return self.catalog()

    def catalog(self) -> list[InstanceType]:
        """The types with their offerings narrowed to ``zones`` (types left without any dropped)."""
        if self.zones is None:
            return list(self.types)
        out = []
        for t in self.types:
            offers = [o for o in t.offerings if o.zone in self.zones]
            if offers:
                out.append(InstanceType(t.name, t.requirements, tuple(offers), t.resources))
        return out

    async def create(self, claim: NodeClaimSpec) -> CloudNodeClaim:
        self.create_calls.append(claim.name)
        for existing in self.launched.values():
            if claim.name and existing.name == claim.name:
                return existing
        if self.fail_create > 0:
            self.fail_create -= 1
            raise CreateError("LaunchFailed", f"injected failure for {claim.name}")
        pools = launch_pools(claim, self.catalog(), self.unavailable)
        capacity_type = launch_capacity_type(pools)
        if capacity_type is None:
            raise InsufficientCapacityError(f"no offering left for {claim.name}")
        failed: list[FailedOffering] = []
        for pool in pools:
            offer, chosen = pool.offering, pool.instance_type
            if offer.capacity_type != capacity_type:
                continue
            key = (offer.capacity_type, chosen.name, offer.zone)
            left = self.capacity.get(key)
            if left is not None and left <= 0:
                failed.append(
                    FailedOffering(*key, "InsufficientInstanceCapacity", f"no {chosen.name} in {offer.zone}")
                )
                if self.unavailable is not None:
                    self.unavailable.mark(*key, reason="InsufficientInstanceCapacity")
                continue
            if left is not None:
                self.capacity[key] = left - 1
            provider_id = f"fake:///{offer.zone}/i-{next(self._ids):017x}"
            labels = {
                INSTANCE_TYPE: chosen.name,
                ZONE: offer.zone,
                CAPACITY_TYPE: offer.capacity_type,
            }
            nodepool = claim.labels.get(NODEPOOL, "")
            if nodepool:
                labels[NODEPOOL] = nodepool
            launched = CloudNodeClaim(
                claim.name,
                provider_id,
                chosen.name,
                offer.zone,
                offer.capacity_type,
                labels,
                nodepool=nodepool,
                nodeclass=claim.template.node_class_ref.name,
                failed_offerings=tuple(failed),
                capacity={k: quantity_text(k, v) for k, v in chosen.resources.capacity.items()},
                allocatable={k: quantity_text(k, v) for k, v in chosen.allocatable.items()},
                launched_at=self.now(),
            )
            self.launched[provider_id] = launched
            return launched
        raise InsufficientCapacityError(f"every pool of {claim.name} is out of capacity", tuple(failed))

    async def delete(self, provider_id: str) -> None:
        launched = self.launched.get(provider_id)
        if launched is None:
            raise NodeClaimNotFound(provider_id)
        if not self.linger:
            del self.launched[provider_id]
        elif launched.state != "shutting-down":
            self.launched[provider_id] = replace(launched, state="shutting-down")

    def finish_shutdown(self) -> None:
        """Every ``shutting-down`` instance becomes terminated (gone from get, list and delete)."""
        for provider_id in [p for p, c in self.launched.items() if c.state == "shutting-down"]:
            del self.launched[provider_id]

    async def get(self, provider_id: str) -> CloudNodeClaim:
        try:
            return self.launched[provider_id]
        except KeyError:
            raise NodeClaimNotFound(provider_id) from None

    async def list(self) -> list[CloudNodeClaim]:
        return list(self.launched.values())
