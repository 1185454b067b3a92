"""What a node of an instance type will offer pods: capacity, the kubelet's reservations, allocatable.

One function of the instance type's facts, the AMI family and the EC2NodeClass's kubelet block,
following the model Karpenter's AWS provider documents and uses (``pkg/providers/instancetype/
types.go``; the generated table in its docs, ``reference/instance-types.md``, is what the tests
check against), so the node kubespot plans is the node the kubelet reports:

- capacity: vCPUs; memory less 64 MiB on arm64 (Graviton's CMA reservation) and less the VM
  overhead (``vm_memory_overhead_percent``, 7.5 %, rounded up to whole MiB); ephemeral storage of the
  root volume (20 GiB, 50 GiB on Windows) or the RAID0 instance store; pods from ``maxPods``, else
  the ENI limit ``usable ENIs * (IPv4 per ENI - 1) + 2`` where the family supports it, else 110,
  capped by ``podsPerCore * vCPUs``; accelerators as given.
- kube-reserved: memory ``11 MiB * pods + 255 MiB`` (AL2, AL2023 and Custom count the ENI-limited
  pods whatever ``maxPods`` says), ephemeral storage 1 GiB, CPU 6 % of the first core, 1 % of the
  second, 0.5 % of the next two and 0.25 % of the rest; each overridden by the user's value.
- system-reserved: only what the user sets.
- eviction threshold: memory 100 MiB and 10 % of ephemeral storage, or ``evictionHard``'s
  ``memory.available`` / ``nodefs.available`` (a percentage of capacity, 100 % meaning off).
- allocatable = capacity - kube-reserved - system-reserved - eviction threshold (never below zero).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from kubespot.model.capacity import AMIFamily, InstanceTypeInfo, KubeletConfig
from kubespot.model.quantity import GIB, MIB, milli, quantity, units

#: Karpenter's ``VM_MEMORY_OVERHEAD_PERCENT`` default.
VM_MEMORY_OVERHEAD_PERCENT = 0.075
#: Pods per node where the family has no ENI-limited density (Windows).
DEFAULT_MAX_PODS = 110
#: Kube-reserved CPU as a share of each band of millicores: (band start, band end, share).
_CPU_BANDS = ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025))

ResourceList = dict[str, int]


@dataclass(frozen=True, slots=True)
class NodeResources:
    """A node's capacity, what the kubelet holds back, and what is left for pods."""

    capacity: ResourceList
    kube_reserved: ResourceList
    system_reserved: ResourceList
    eviction_threshold: ResourceList
    allocatable: ResourceList


def _amount(resource: str, text: str) -> int:
    return milli(text) if resource == "cpu" else units(text)


def _reserved(values: Mapping[str, str]) -> ResourceList:
    return {name: _amount(name, text) for name, text in values.items()}


def eni_limited_pods(info: InstanceTypeInfo, reserved_enis: int = 0) -> int:
    """``usable ENIs * (IPv4 addresses per ENI - 1) + 2``; 0 when no ENI is left for pods."""
    usable = max(info.max_enis - reserved_enis, 0)
    return 0 if usable == 0 else usable * (info.ipv4_per_eni - 1) + 2


def _uses_eni_density(family: AMIFamily) -> bool:
    return not family.is_windows


def _eni_limited_memory_overhead(family: AMIFamily) -> bool:
    return family in (AMIFamily.AL2, AMIFamily.AL2023, AMIFamily.CUSTOM)


def _pods_per_core_enabled(family: AMIFamily) -> bool:
    return family is not AMIFamily.BOTTLEROCKET


def max_pods(
    info: InstanceTypeInfo, family: AMIFamily, kubelet: KubeletConfig, reserved_enis: int = 0
) -> int:
    if kubelet.max_pods is not None:
        count = kubelet.max_pods
    elif _uses_eni_density(family):
        count = eni_limited_pods(info, reserved_enis)
    else:
        count = DEFAULT_MAX_PODS
    if kubelet.pods_per_core and _pods_per_core_enabled(family):
        count = min(count, kubelet.pods_per_core * info.vcpus)
    return count


def kube_reserved_cpu(cpu_milli: int) -> int:
    total = 0.0
    for start, end, share in _CPU_BANDS:
        if cpu_milli >= start:
            total += (min(cpu_milli, end) - start) * share
    return int(total)


def _memory_capacity(info: InstanceTypeInfo, overhead_percent: float) -> int:
    mib = info.memory_mib - (64 if info.architecture == "arm64" else 0)
    return (mib - math.ceil(mib * overhead_percent)) * MIB


def _ephemeral_capacity(
    info: InstanceTypeInfo, family: AMIFamily, root_volume: int | None, raid0: bool
) -> int:
    if raid0 and info.local_storage_gb:
        return info.local_storage_gb * 10**9
    if root_volume is not None:
        return root_volume
    return (50 if family.is_windows else 20) * GIB


def _eviction_signal(capacity: int, threshold: str) -> int:
    if threshold.endswith("%"):
        percent = float(threshold[:-1])
        return 0 if percent == 100 else math.ceil(capacity / 100 * percent)
    return int(quantity(threshold))


def node_resources(
    info: InstanceTypeInfo,
    family: AMIFamily = AMIFamily.AL2023,
    kubelet: KubeletConfig | None = None,
    *,
    root_volume: int | None = None,
    raid0_instance_store: bool = False,
    vm_memory_overhead_percent: float = VM_MEMORY_OVERHEAD_PERCENT,
    reserved_enis: int = 0,
) -> NodeResources:
    """The resources of a node of ``info`` launched with ``family`` and ``kubelet`` (see module)."""
    kubelet = kubelet or KubeletConfig()
    pods = max_pods(info, family, kubelet, reserved_enis)
    memory = _memory_capacity(info, vm_memory_overhead_percent)
    storage = _ephemeral_capacity(info, family, root_volume, raid0_instance_store)
    capacity: ResourceList = {
        "cpu": info.vcpus * 1000,
        "memory": memory,
        "ephemeral-storage": storage,
        "pods": pods,
        **info.extended,
    }
    # Karpenter counts the ENI-limited pods (without reserved ENIs) for these families' memory.
    memory_pods = eni_limited_pods(info) if _eni_limited_memory_overhead(family) else pods
    kube: ResourceList = {
        "cpu": kube_reserved_cpu(capacity["cpu"]),
        "memory": (11 * memory_pods + 255) * MIB,
        "ephemeral-storage": GIB,
        **_reserved(kubelet.kube_reserved),
    }
    system = _reserved(kubelet.system_reserved)
    eviction: ResourceList = {"memory": 100 * MIB, "ephemeral-storage": math.ceil(storage / 100 * 10)}
    if "memory.available" in kubelet.eviction_hard:
        eviction["memory"] = _eviction_signal(memory, kubelet.eviction_hard["memory.available"])
    if "nodefs.available" in kubelet.eviction_hard:
        eviction["ephemeral-storage"] = _eviction_signal(storage, kubelet.eviction_hard["nodefs.available"])
    allocatable = {
        name: max(amount - kube.get(name, 0) - system.get(name, 0) - eviction.get(name, 0), 0)
        for name, amount in capacity.items()
    }
    return NodeResources(capacity, kube, system, eviction, allocatable)
