"""``FakeCloud``: a configurable in-memory ``CloudProvider`` for tests (Karpenter ships
``pkg/cloudprovider/fake`` for the same purpose), and ``fake_type``, a type with exact allocatable.

The catalog is the list of types it is given; ``instance_types`` narrows their offerings to the
zones the class allows (``zones``, when set: what the class's subnets cover). Launches pick the
cheapest available offering of the claim's first type, record it, and can be listed and deleted;
``fail_create`` makes the next launches raise, as an insufficient-capacity answer would.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from kubespot.model.capacity import InstanceTypeInfo
from kubespot.model.quantity import GIB
from kubespot.scheduling.allocatable import NodeResources
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec
from kubespot.scheduling.instance_types import InstanceType, Offering, instance_type
from kubespot.scheduling.labels import CAPACITY_TYPE, INSTANCE_TYPE, ON_DEMAND, SPOT, ZONE
from kubespot.scheduling.nodepool import NodePool

from .provider import CloudNodeClaim, NodeClaimNotFound

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
    """An in-memory cloud serving a fixed catalog."""

    name = "fake"

    def __init__(self, types: Iterable[InstanceType] = (), *, zones: Iterable[str] | None = None) -> None:
        self.types = list(types)
        #: The zones the node classes' subnets cover (None: every zone of the catalog).
        self.zones = set(zones) if zones is not None else None
        self.launched: dict[str, CloudNodeClaim] = {}
        self.fail_create = 0
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
        if self.fail_create > 0:
            self.fail_create -= 1
            raise RuntimeError(f"insufficient capacity for {claim.name}")
        wanted = [
            r.values for r in claim.template.requirements if r.key == INSTANCE_TYPE and r.operator == "In"
        ]
        names = set(wanted[0]) if wanted else {t.name for t in self.types}
        offers = [(o, t) for t in self.catalog() if t.name in names for o in t.offerings if o.available]
        if not offers:
            raise RuntimeError(f"no offering for {claim.name}")
        offer, chosen = min(offers, key=lambda p: (p[0].price, p[1].name, p[0].zone))
        provider_id = f"fake:///{offer.zone}/i-{next(self._ids):017x}"
        labels = {INSTANCE_TYPE: chosen.name, ZONE: offer.zone, CAPACITY_TYPE: offer.capacity_type}
        launched = CloudNodeClaim(
            claim.name, provider_id, chosen.name, offer.zone, offer.capacity_type, labels
        )
        self.launched[provider_id] = launched
        return launched

    async def delete(self, provider_id: str) -> None:
        if self.launched.pop(provider_id, None) is None:
            raise NodeClaimNotFound(provider_id)

    async def get(self, provider_id: str) -> CloudNodeClaim:
        try:
            return self.launched[provider_id]
        except KeyError:
            raise NodeClaimNotFound(provider_id) from None

    async def list(self) -> list[CloudNodeClaim]:
        return list(self.launched.values())
