"""Instance types for the scheduling tests: exact allocatable, given prices, no overhead."""

from __future__ import annotations

from kubespot.model.capacity import InstanceTypeInfo
from kubespot.model.quantity import GIB
from kubespot.scheduling.allocatable import NodeResources
from kubespot.scheduling.instance_types import InstanceType, Offering, instance_type
from kubespot.scheduling.labels import ON_DEMAND, SPOT

ZONES = ("z1", "z2")


def itype(
    name: str,
    cpu: int,
    mem_gib: int,
    od: float,
    spot: float | None = None,
    zones: tuple[str, ...] = ZONES,
    arch: str = "x86_64",
) -> InstanceType:
    """A type whose allocatable is exactly ``cpu`` cores and ``mem_gib`` (no overhead, 110 pods)."""
    alloc = {"cpu": cpu * 1000, "memory": mem_gib * GIB, "pods": 110}
    offerings = [Offering(z, ON_DEMAND, od) for z in zones]
    if spot is not None:
        offerings += [Offering(z, SPOT, spot) for z in zones]
    res = NodeResources(dict(alloc), {}, {}, {}, alloc)
    return instance_type(InstanceTypeInfo(name, cpu, mem_gib * 1024, arch), res, offerings)
