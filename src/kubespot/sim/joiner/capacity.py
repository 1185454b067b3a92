"""A node's capacity and allocatable from what EC2 says of its instance type.

Capacity is what the kubelet reports from the machine (cAdvisor): the vCPUs, the memory the kernel
sees (a little under the type's nominal memory: kubesim's generator uses the same 94.7 %), the
pods the kubelet is configured for and the size of the volume its filesystem is on (the caller
reads it from EC2; 20 GiB, the EKS AMIs' and Karpenter's default, when EC2 does not say).
Allocatable takes off what the EKS AMIs reserve (k8s pkg/kubelet/cm
``GetNodeAllocatableReservation``: kube-reserved + system-reserved + hard eviction thresholds):
CPU by the AMI's per-core steps, memory ``11 MiB x max pods + 255 MiB`` plus the 100 MiB
``memory.available`` threshold, storage the 10 % ``nodefs.available`` threshold and 1 GiB. Max
pods without a ``maxPods`` in the user data: the AMI's ENI formula, ``ENIs x (IPv4 per ENI - 1) + 2``.
Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: Share of the nominal memory the kernel reports (as kubesim's generator).
_VISIBLE_MEMORY = 0.947
#: The volume size when EC2 does not say: the EKS AMIs' and Karpenter's default (20 GiB gp3).
DEFAULT_VOLUME_GIB = 20
_EVICTION_MEMORY_MI = 100
_ARCH = {"x86_64": "amd64", "arm64": "arm64", "i386": "386"}


@dataclass(frozen=True, slots=True)
class InstanceTypeFacts:
    """What DescribeInstanceTypes says of one type, as the node needs it."""

    name: str
    vcpu: int
    memory_mib: int
    arch: str  # Kubernetes spelling
    enis: int
    ipv4_per_eni: int

    @classmethod
    def from_ec2(cls, info: dict[str, Any]) -> InstanceTypeFacts:
        network = info.get("NetworkInfo") or {}
        arches = (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or ["x86_64"]
        return cls(
            name=str(info["InstanceType"]),
            vcpu=int((info.get("VCpuInfo") or {}).get("DefaultVCpus") or 2),
            memory_mib=int((info.get("MemoryInfo") or {}).get("SizeInMiB") or 4096),
            arch=_ARCH.get(str(arches[0]), str(arches[0])),
            enis=int(network.get("MaximumNetworkInterfaces") or 3),
            ipv4_per_eni=int(network.get("Ipv4AddressesPerInterface") or 10),
        )

    def eni_max_pods(self) -> int:
        return self.enis * (self.ipv4_per_eni - 1) + 2


def eks_reserved_cpu_m(vcpu: int) -> int:
    """The EKS AMIs' kube-reserved CPU: 6 % of the first core, 1 % of the second, 0.5 % of the
    next two, 0.25 % of the rest."""
    reserved = 60.0 + (10 if vcpu > 1 else 0) + 5 * max(0, min(vcpu, 4) - 2) + 2.5 * max(0, vcpu - 4)
    return math.ceil(reserved)


def resources(
    facts: InstanceTypeFacts, max_pods: int | None, volume_gib: int | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) as the kubelet reports them; ``volume_gib``: the size of the volume
    the kubelet's filesystem is on."""
    pods = max_pods or facts.eni_max_pods()
    volume_ki = (volume_gib or DEFAULT_VOLUME_GIB) * 1024 * 1024
    memory_ki = int(facts.memory_mib * 1024 * _VISIBLE_MEMORY)
    capacity = {
        "cpu": str(facts.vcpu),
        "memory": f"{memory_ki}Ki",
        "pods": str(pods),
        "ephemeral-storage": f"{volume_ki}Ki",
    }
    reserved_memory_ki = (11 * pods + 255 + _EVICTION_MEMORY_MI) * 1024
    storage_ki = max(0, int(volume_ki * 0.9) - 1024 * 1024)
    allocatable = {
        "cpu": f"{facts.vcpu * 1000 - eks_reserved_cpu_m(facts.vcpu)}m",
        "memory": f"{max(0, memory_ki - reserved_memory_ki)}Ki",
        "pods": str(pods),
        "ephemeral-storage": f"{storage_ki}Ki",
    }
    return capacity, allocatable
