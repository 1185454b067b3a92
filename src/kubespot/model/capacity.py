"""The capacity model's data: what EC2 says of an instance type, and the kubelet settings that shape a node.

Frozen data, filled by the AWS adapter from ``DescribeInstanceTypes`` (or by tests and the fake
cloud) and read by the pure scheduling core. Resource amounts are integers: CPU in millicores,
memory and storage in bytes, everything else in whole units.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class AMIFamily(StrEnum):
    """The node image families of ``EC2NodeClass.spec.amiFamily`` (v1)."""

    AL2 = "AL2"
    AL2023 = "AL2023"
    BOTTLEROCKET = "Bottlerocket"
    CUSTOM = "Custom"
    WINDOWS2019 = "Windows2019"
    WINDOWS2022 = "Windows2022"
    WINDOWS2025 = "Windows2025"

    @property
    def is_windows(self) -> bool:
        return self.value.startswith("Windows")


@dataclass(frozen=True, slots=True)
class InstanceTypeInfo:
    """The facts of one EC2 instance type the capacity model needs (``DescribeInstanceTypes``)."""

    name: str
    #: ``VCpuInfo.DefaultVCpus``.
    vcpus: int
    #: ``MemoryInfo.SizeInMiB``.
    memory_mib: int
    #: ``ProcessorInfo.SupportedArchitectures[0]``: ``x86_64`` or ``arm64``.
    architecture: str = "x86_64"
    #: ``MaximumNetworkInterfaces`` of the default network card (the VPC CNI uses only that one).
    max_enis: int = 3
    #: ``NetworkInfo.Ipv4AddressesPerInterface``.
    ipv4_per_eni: int = 10
    #: ``InstanceStorageInfo.TotalSizeInGB`` (0: no instance store).
    local_storage_gb: int = 0
    #: Accelerators as node resources (``nvidia.com/gpu``: 1 …), from the GPU/accelerator info.
    extended: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class KubeletConfig:
    """The ``EC2NodeClass.spec.kubelet`` fields that change what a node can hold (None: not set)."""

    max_pods: int | None = None
    pods_per_core: int | None = None
    #: Resource name → quantity text (``cpu``, ``memory``, ``ephemeral-storage``, ``pid``).
    kube_reserved: Mapping[str, str] = field(default_factory=dict)
    system_reserved: Mapping[str, str] = field(default_factory=dict)
    #: Signal → threshold (``memory.available``: ``"500Mi"`` or ``"5%"``; ``nodefs.available``).
    eviction_hard: Mapping[str, str] = field(default_factory=dict)
