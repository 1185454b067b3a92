"""The shipped fake cloud: a configurable catalog narrowed to the class's zones, and launches.

Sources: kubernetes-sigs/karpenter ``pkg/cloudprovider/types.go`` (``CloudProvider``:
GetInstanceTypes, Create, Delete, Get, List; ``NodeClaimNotFoundError``) and
``pkg/cloudprovider/fake/cloudprovider.go`` (a fake with configurable instance types whose Create
picks an offering and records the claim).
"""

from __future__ import annotations

import pytest

from kubespot.aws.cloud import AwsCloud
from kubespot.cloud import CloudProvider, FakeCloud, NodeClaimNotFound, fake_type
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec
from kubespot.scheduling.api.template import RequirementSpec, TemplateSpec
from kubespot.scheduling.nodepool import NodePool
from kubespot.scheduling.requirements import Requirements

POOL = NodePool("default", Requirements([]))
CLASS = EC2NodeClassSpec(name="default")


async def test_instance_types_narrowed_to_the_class_zones() -> None:
    cloud: CloudProvider = FakeCloud(
        [fake_type("a", 2, 4, 0.1, 0.03), fake_type("b", 4, 8, 0.2, zones=("z2",))], zones={"z1"}
    )
    types = await cloud.instance_types(POOL, CLASS)
    assert [t.name for t in types] == ["a"]
    assert {o.zone for o in types[0].offerings} == {"z1"}


async def test_create_takes_the_cheapest_offering_and_can_be_listed_and_deleted() -> None:
    cloud = FakeCloud([fake_type("a", 2, 4, 0.1, 0.03), fake_type("b", 4, 8, 0.2, 0.05)])
    req = RequirementSpec("node.kubernetes.io/instance-type", "In", ("b",))
    launched = await cloud.create(NodeClaimSpec("claim-1", TemplateSpec(requirements=(req,))))
    assert (launched.instance_type, launched.capacity_type) == ("b", "spot")
    assert await cloud.get(launched.provider_id) == launched
    assert await cloud.list() == [launched]
    await cloud.delete(launched.provider_id)
    with pytest.raises(NodeClaimNotFound):
        await cloud.get(launched.provider_id)
    cloud.fail_create = 1
    with pytest.raises(RuntimeError):
        await cloud.create(NodeClaimSpec("claim-2"))


async def test_aws_cloud_does_not_launch_yet() -> None:
    """Issue 14 fills the launch path; until then the AWS provider says so instead of pretending."""
    cloud = AwsCloud(catalog=None)  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError):
        await cloud.create(NodeClaimSpec("c"))
    with pytest.raises(NotImplementedError):
        await cloud.list()
