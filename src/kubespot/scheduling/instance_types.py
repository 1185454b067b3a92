"""Instance types as the simulation sees them: the labels of their nodes, offerings, resources.

An *offering* is one way to buy the type (a zone and a capacity type) with its price per hour and whether
it can be bought now (Karpenter's ``cloudprovider.Offering``): an offering is unavailable while its
(capacity type, type, zone) sits in the insufficient-capacity cache, when its zone has no subnet of
the EC2NodeClass, or when no price is known for it (so no spot price, no spot offering).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubespot.model.capacity import InstanceTypeInfo

from .allocatable import NodeResources
from .labels import ARCH, CAPACITY_TYPE, INSTANCE_TYPE, OS, ZONE
from .requirements import Requirement, Requirements

_FAMILY = re.compile(r"([a-z]+)(\d+)")
#: The GPUs' extended resources (aws/catalog.py names them by manufacturer, as Karpenter does).
_GPU_RESOURCES = frozenset({"nvidia.com/gpu", "amd.com/gpu", "habana.ai/gaudi"})


@dataclass(frozen=True, slots=True)
class Offering:
    zone: str
    capacity_type: str
    #: US dollars per hour, after the account's discounts.
    price: float
    available: bool = True

    def requirements(self) -> Requirements:
        return Requirements(
            [
                Requirement.of(ZONE, "In", [self.zone]),
                Requirement.of(CAPACITY_TYPE, "In", [self.capacity_type]),
            ]
        )


@dataclass(frozen=True, slots=True)
class InstanceType:
    name: str
    #: The labels a node of this type carries, as ``In`` requirements (zone and capacity type as
    #: the set its offerings cover).
    requirements: Requirements
    offerings: tuple[Offering, ...]
    resources: NodeResources

    @property
    def allocatable(self) -> Mapping[str, int]:
        return self.resources.allocatable

    def available_offerings(self, reqs: Requirements | None = None) -> list[Offering]:
        """The offerings that can be bought now and satisfy ``reqs`` (zone, capacity type)."""
        out = []
        for offering in self.offerings:
            if not offering.available:
                continue
            if reqs is not None and not (
                reqs.get_or_any(ZONE).has(offering.zone)
                and reqs.get_or_any(CAPACITY_TYPE).has(offering.capacity_type)
            ):
                continue
            out.append(offering)
        return out

    def cheapest(self, reqs: Requirements | None = None) -> Offering | None:
        offerings = self.available_offerings(reqs)
        return min(offerings, key=lambda o: o.price) if offerings else None


def type_labels(info: InstanceTypeInfo, os_name: str = "linux") -> dict[str, str]:
    """The well-known labels of a node of ``info`` (Karpenter's AWS provider sets many more)."""
    family, _, size = info.name.partition(".")
    match = _FAMILY.match(family)  # m5 -> m, 5; c7gn -> c, 7; inf2 -> inf, 2
    labels = {
        INSTANCE_TYPE: info.name,
        ARCH: "arm64" if info.architecture == "arm64" else "amd64",
        OS: os_name,
        "karpenter.k8s.aws/instance-family": family,
        "karpenter.k8s.aws/instance-size": size,
        "karpenter.k8s.aws/instance-category": match.group(1) if match else family,
        "karpenter.k8s.aws/instance-generation": match.group(2) if match else "",
        "karpenter.k8s.aws/instance-cpu": str(info.vcpus),
        "karpenter.k8s.aws/instance-memory": str(info.memory_mib),
    }
    # The AWS provider labels GPU and Neuron device counts on the types that have them only
    # (instancetype/types.go computeRequirements): a pool's DoesNotExist keeps such types out.
    gpus = sum(n for name, n in info.extended.items() if name in _GPU_RESOURCES)
    if gpus:
        labels["karpenter.k8s.aws/instance-gpu-count"] = str(gpus)
    if info.extended.get("aws.amazon.com/neuron"):
        labels["karpenter.k8s.aws/instance-accelerator-count"] = str(info.extended["aws.amazon.com/neuron"])
    return labels


def instance_type(
    info: InstanceTypeInfo, resources: NodeResources, offerings: Iterable[Offering]
) -> InstanceType:
    offers = tuple(offerings)
    reqs = Requirements.from_labels(type_labels(info))
    reqs.add(Requirement.of(ZONE, "In", sorted({o.zone for o in offers})))
    reqs.add(Requirement.of(CAPACITY_TYPE, "In", sorted({o.capacity_type for o in offers})))
    return InstanceType(info.name, reqs, offers, resources)
