"""``launch_pools``: the filters Karpenter applies to a NodeClaim's types before CreateFleet.

Sources: aws/karpenter-provider-aws ``pkg/providers/instance/instance.go`` ``filterInstanceTypes``
(the filters in order, then ``Truncate`` to ``maxInstanceTypes`` 60) and
``pkg/providers/instance/filter/filter.go`` (``CompatibleAvailableFilter`` with ``resources.Fits``,
``ExoticInstanceTypeFilter``, ``SpotOfferingFilter``); kubernetes-sigs/karpenter
``pkg/cloudprovider/types.go`` ``Truncate`` / ``SatisfiesMinValues``.
"""

from __future__ import annotations

from dataclasses import replace

from kubespot.cloud import fake_type
from kubespot.cloud.candidates import launch_capacity_type, launch_pools
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.template import NodeClassRef, RequirementSpec, TemplateSpec
from kubespot.scheduling.instance_types import InstanceType
from kubespot.scheduling.requirements import Requirement

Z = ("us-east-1a",)
SPOT_ONLY = RequirementSpec("karpenter.sh/capacity-type", "In", ("spot",))


def _claim(*reqs: RequirementSpec, requests: dict[str, str] | None = None) -> NodeClaimSpec:
    return NodeClaimSpec(
        "c",
        requests=requests or {},
        template=TemplateSpec(requirements=reqs, node_class_ref=NodeClassRef(name="d")),
    )


def _sized(t: InstanceType, size: str) -> InstanceType:
    reqs = t.requirements.copy()
    reqs.add(Requirement.of("karpenter.k8s.aws/instance-size", "In", [size]))
    return replace(t, requirements=reqs)


def _gpu(t: InstanceType, resource: str = "nvidia.com/gpu") -> InstanceType:
    capacity = {**t.resources.capacity, resource: 1}
    allocatable = {**t.resources.allocatable, resource: 1}
    return replace(t, resources=replace(t.resources, capacity=capacity, allocatable=allocatable))


def _names(pools: list) -> list[str]:  # type: ignore[type-arg]
    return list(dict.fromkeys(p.instance_type.name for p in pools))


def test_exotic_types_only_when_nothing_else_is_left() -> None:
    """``ExoticInstanceTypeFilter``: a ``metal`` size or a type with GPUs/Neuron/Gaudi in its
    capacity is dropped while a generic type is left, even when it is cheaper; a claim whose
    requirements leave only exotic types launches them."""
    general = fake_type("m5.large", 2, 8, 0.096, 0.040, zones=Z)
    metal = _sized(fake_type("c5.metal", 96, 192, 4.08, 0.02, zones=Z), "metal")
    gpu = _gpu(fake_type("g4dn.xlarge", 4, 16, 0.5, 0.03, zones=Z))
    neuron = _gpu(fake_type("inf1.xlarge", 4, 8, 0.2, 0.01, zones=Z), "aws.amazon.com/neuron")
    types = [general, metal, gpu, neuron]
    assert _names(launch_pools(_claim(SPOT_ONLY), types)) == ["m5.large"]
    only_exotic = RequirementSpec("node.kubernetes.io/instance-type", "In", ("c5.metal", "g4dn.xlarge"))
    assert set(_names(launch_pools(_claim(SPOT_ONLY, only_exotic), types))) == {"c5.metal", "g4dn.xlarge"}


def test_requests_must_fit_the_allocatable() -> None:
    """``CompatibleAvailableFilter``: ``resources.Fits(nodeClaim.Spec.Resources.Requests,
    allocatable)``; a type too small for the claim's requests (or lacking a requested resource)
    is no candidate even when it is the cheapest."""
    types = [
        fake_type("m5.large", 2, 8, 0.096, 0.04, zones=Z),
        fake_type("m5.2xlarge", 8, 32, 0.384, 0.15, zones=Z),
    ]
    claim = _claim(SPOT_ONLY, requests={"cpu": "6", "memory": "20Gi", "pods": "3"})
    assert _names(launch_pools(claim, types)) == ["m5.2xlarge"]
    assert _names(launch_pools(_claim(SPOT_ONLY, requests={"cpu": "1500m"}), types)) == [
        "m5.large",
        "m5.2xlarge",
    ]
    assert launch_pools(_claim(requests={"nvidia.com/gpu": "1"}), types) == []


def test_min_values_keeps_dear_spot_and_exotic_types() -> None:
    """``SpotOfferingFilter`` and ``ExoticInstanceTypeFilter`` return early when the requirements
    have minValues: spot dearer than the cheapest on-demand stays, so the spot launch keeps the
    three types minValues asks for. Without minValues the dear spot offering is dropped."""
    types = [
        fake_type("a.large", 2, 4, 0.10, 0.03, zones=Z),
        fake_type("b.large", 2, 4, 0.05, 0.04, zones=Z),
        fake_type("c.large", 2, 4, 0.09, 0.08, zones=Z),
    ]
    names = ("a.large", "b.large", "c.large")
    with_min = RequirementSpec("node.kubernetes.io/instance-type", "In", names, min_values=3)
    pools = launch_pools(_claim(with_min), types)
    assert launch_capacity_type(pools) == "spot"
    assert {p.instance_type.name for p in pools if p.capacity_type == "spot"} == set(names)
    plain = launch_pools(_claim(RequirementSpec("node.kubernetes.io/instance-type", "In", names)), types)
    assert {p.instance_type.name for p in plain if p.capacity_type == "spot"} == {"a.large", "b.large"}


def test_truncate_keeps_min_values_and_runs_after_the_filters() -> None:
    """``filterInstanceTypes`` filters first and then ``Truncate``s to 60; with minValues the cut
    keeps the types that bring the values (``scheduling.minvalues.truncate``), and a claim whose
    minValues the types left cannot meet gets no pool (Strict policy: insufficient capacity)."""
    cheap = [fake_type(f"m{i:02d}.large", 2, 8, 0.10 + i / 1000, 0.03 + i / 1000, zones=Z) for i in range(65)]
    # Seventy cheaper exotic types would fill the 60 if the cut came before the exotic filter.
    exotic = [_gpu(fake_type(f"g{i:02d}.large", 2, 8, 0.01, 0.001, zones=Z)) for i in range(70)]
    pools = launch_pools(_claim(SPOT_ONLY), cheap + exotic)
    assert _names(pools) == [t.name for t in cheap[:60]]

    arm = fake_type("z.large", 2, 8, 0.5, 0.45, zones=Z, arch="arm64")
    arch_min = RequirementSpec("kubernetes.io/arch", "In", ("amd64", "arm64"), min_values=2)
    kept = _names(launch_pools(_claim(SPOT_ONLY, arch_min), [*cheap, arm]))
    assert len(kept) == 60 and "z.large" in kept
    assert launch_pools(_claim(SPOT_ONLY, arch_min), cheap) == []
