"""Allocatable per Karpenter's documented model.

The expected figures are the ones Karpenter's AWS provider publishes for AL2023 without block device
mappings (aws/karpenter-provider-aws ``website/content/en/docs/reference/instance-types.md``,
generated from ``pkg/providers/instancetype/types.go``); the EC2 inputs are DescribeInstanceTypes'.
"""

from __future__ import annotations

import pytest

from kubespot.model.capacity import AMIFamily, InstanceTypeInfo, KubeletConfig
from kubespot.model.quantity import GIB, MIB
from kubespot.scheduling.allocatable import kube_reserved_cpu, node_resources

M5_LARGE = InstanceTypeInfo("m5.large", vcpus=2, memory_mib=8192, max_enis=3, ipv4_per_eni=10)


@pytest.mark.parametrize(
    ("info", "cpu_m", "memory_mi", "pods"),
    [
        (M5_LARGE, 1930, 6903, 29),
        (InstanceTypeInfo("m5.xlarge", 4, 16384, max_enis=4, ipv4_per_eni=15), 3920, 14162, 58),
        (InstanceTypeInfo("m5.24xlarge", 96, 393216, max_enis=15, ipv4_per_eni=50), 95690, 355262, 737),
        (InstanceTypeInfo("c6g.medium", 1, 2048, "arm64", max_enis=2, ipv4_per_eni=4), 940, 1392, 8),
        (InstanceTypeInfo("t3.micro", 2, 1024, max_enis=2, ipv4_per_eni=2), 1930, 548, 4),
    ],
    ids=lambda v: v.name if isinstance(v, InstanceTypeInfo) else None,
)
def test_allocatable_matches_karpenters_published_table(
    info: InstanceTypeInfo, cpu_m: int, memory_mi: int, pods: int
) -> None:
    alloc = node_resources(info, AMIFamily.AL2023).allocatable
    assert alloc == {
        "cpu": cpu_m,
        "memory": memory_mi * MIB,
        "ephemeral-storage": 17 * GIB,
        "pods": pods,
    }


def test_max_pods_does_not_lower_al2023s_memory_reservation() -> None:
    # AL2, AL2023 and Custom reserve memory for the ENI-limited pod count whatever maxPods says.
    res = node_resources(M5_LARGE, AMIFamily.AL2023, KubeletConfig(max_pods=110))
    assert res.capacity["pods"] == 110
    assert res.kube_reserved["memory"] == (11 * 29 + 255) * MIB


def test_windows_has_110_pods_a_50gi_root_and_reserves_for_them() -> None:
    res = node_resources(M5_LARGE, AMIFamily.WINDOWS2022)
    assert res.allocatable["pods"] == 110
    assert res.allocatable["memory"] == (7577 - (11 * 110 + 255) - 100) * MIB
    assert res.allocatable["ephemeral-storage"] == 50 * GIB - GIB - 5 * GIB


def test_pods_per_core_caps_except_on_bottlerocket() -> None:
    cfg = KubeletConfig(pods_per_core=4)
    assert node_resources(M5_LARGE, AMIFamily.AL2, cfg).capacity["pods"] == 8
    assert node_resources(M5_LARGE, AMIFamily.BOTTLEROCKET, cfg).capacity["pods"] == 29


def test_user_reservations_and_eviction_thresholds_replace_the_defaults() -> None:
    cfg = KubeletConfig(
        kube_reserved={"cpu": "200m", "memory": "1Gi"},
        system_reserved={"cpu": "100m"},
        eviction_hard={"memory.available": "5%", "nodefs.available": "100%"},
    )
    res = node_resources(M5_LARGE, AMIFamily.AL2023, cfg, root_volume=100 * GIB)
    memory = 7577 * MIB
    assert res.allocatable["cpu"] == 2000 - 200 - 100
    assert res.eviction_threshold["memory"] == -(-memory * 5 // 100)  # ceil
    assert res.allocatable["memory"] == memory - GIB - res.eviction_threshold["memory"]
    assert res.allocatable["ephemeral-storage"] == 100 * GIB - GIB  # 100 % turns the signal off


def test_raid0_instance_store_is_the_ephemeral_storage() -> None:
    info = InstanceTypeInfo("m5d.large", 2, 8192, local_storage_gb=75)
    res = node_resources(info, AMIFamily.AL2023, raid0_instance_store=True)
    assert res.capacity["ephemeral-storage"] == 75 * 10**9


@pytest.mark.parametrize(("cpu", "reserved"), [(1000, 60), (2000, 70), (4000, 80), (8000, 90), (96000, 310)])
def test_kube_reserved_cpu_bands(cpu: int, reserved: int) -> None:
    assert kube_reserved_cpu(cpu) == reserved


def test_accelerators_are_node_resources() -> None:
    info = InstanceTypeInfo("g4dn.xlarge", 4, 16384, extended={"nvidia.com/gpu": 1})
    assert node_resources(info).allocatable["nvidia.com/gpu"] == 1
