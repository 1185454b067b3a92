"""Launch templates of one NodeClaim (``kubespot.aws.launch_templates``, pure half) and instances
read back (``kubespot.aws.instances.parse_instance``).

Sources: aws/karpenter-provider-aws ``pkg/providers/amifamily/resolver.go`` (``Resolve``,
``MapToInstanceTypes``, ``resolveLaunchTemplates``, ``RejectForbiddenLabels``),
``pkg/providers/amifamily/{al2023,bottlerocket,windows,custom}.go``
(``DefaultBlockDeviceMappings``), ``pkg/providers/launchtemplate/launchtemplate.go``
(``InjectDoNotSyncTaintsLabel``, ``blockDeviceMappings``, ``volumeSize``),
``pkg/providers/launchtemplate/types.go`` (``CreateLaunchTemplateInputBuilder.Build``),
``pkg/providers/instance/types.go`` (``capacityTypeFromInstance``).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping, Sequence
from typing import Any

from kubespot.aws.amis import AmiInfo
from kubespot.aws.instances import parse_instance
from kubespot.aws.launch_templates import (
    block_device_mappings,
    launch_groups,
    node_labels,
    node_taints,
)
from kubespot.aws.userdata import ClusterInfo, render_user_data
from kubespot.cloud import fake_type
from kubespot.model.capacity import AMIFamily
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.nodeclass import BlockDeviceMapping, EC2NodeClassSpec, Kubelet
from kubespot.scheduling.api.template import TemplateSpec
from kubespot.scheduling.taints import Taint

CLUSTER = ClusterInfo("prod", "https://api", "Q0E=", "10.100.0.0/16")
AMD = AmiInfo(
    "ami-amd", "al2023-x86", "2026-01-01T00:00:00Z", False, (("kubernetes.io/arch", "In", ("amd64",)),)
)
ARM = AmiInfo(
    "ami-arm", "al2023-arm", "2026-01-01T00:00:00Z", False, (("kubernetes.io/arch", "In", ("arm64",)),)
)
GPU_ONLY = AmiInfo(
    "ami-gpu", "al2023-nvidia", "2026-02-01T00:00:00Z", False,
    (("karpenter.k8s.aws/instance-gpu-count", "Exists", ()), ("kubernetes.io/arch", "In", ("amd64",))),
)  # fmt: skip
SPEC = EC2NodeClassSpec(
    name="default", ami_family="AL2023", instance_profile="NodeProfile", tags={"team": "a"}
)
TAGS = {"team": "a", "karpenter.sh/nodepool": "general", "karpenter.sh/nodeclaim": "general-abcde"}


class Recorder:
    """``render_user_data`` stand-in: records its arguments."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(
        self,
        family: AMIFamily,
        custom: str | None,
        cluster: ClusterInfo,
        kubelet: Kubelet | None,
        labels: Mapping[str, str],
        taints: Sequence[Taint],
        max_pods: int | None,
        instance_store_raid0: bool = False,
    ) -> str:
        self.calls.append(
            {"family": family, "cluster": cluster, "labels": labels, "taints": taints, "pods": max_pods}
        )
        return f"#!userdata pods={max_pods}"


def _claim(**labels: str) -> NodeClaimSpec:
    return NodeClaimSpec(
        "general-abcde",
        labels={"karpenter.sh/nodepool": "general", **labels},
        template=TemplateSpec(
            taints=(Taint("dedicated", "NoSchedule", "db"),),
            startup_taints=(Taint("cilium", "NoExecute"),),
        ),
    )


def test_types_grouped_by_ami_and_max_pods_one_template_each() -> None:
    """``Resolve``: each type takes the first (newest) image it is compatible with (the GPU image
    needs a GPU count the types do not have); one template per (image, max pods)."""
    types = [
        fake_type("m5.large", 2, 8, 0.1, pods=29),
        fake_type("m5.xlarge", 4, 16, 0.2, pods=58),
        fake_type("c5.large", 2, 4, 0.09, pods=29),
        fake_type("m7g.large", 2, 8, 0.08, arch="arm64", pods=29),
    ]
    render = Recorder()
    groups = launch_groups(
        SPEC, _claim(), types, amis=[GPU_ONLY, AMD, ARM], security_groups=["sg-1"],
        capacity_type="spot", cluster=CLUSTER, tags=TAGS, render=render,
    )  # fmt: skip
    assert [(g.image_id, g.max_pods, g.types) for g in groups] == [
        ("ami-amd", 29, ("m5.large", "c5.large")),
        ("ami-amd", 58, ("m5.xlarge",)),
        ("ami-arm", 29, ("m7g.large",)),
    ]
    assert len({g.template.name for g in groups}) == 3
    assert all(g.template.name.startswith("kubespot.io/") for g in groups)
    assert [c["pods"] for c in render.calls] == [29, 58, 29]
    data = groups[0].template.data
    assert base64.b64decode(data["UserData"]).decode() == "#!userdata pods=29"
    assert data["ImageId"] == "ami-amd"
    assert data["IamInstanceProfile"] == {"Name": "NodeProfile"}
    assert data["SecurityGroupIds"] == ["sg-1"]
    assert data["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpProtocolIpv6": "disabled",
        "HttpPutResponseHopLimit": 1,
        "HttpTokens": "required",
        "InstanceMetadataTags": "disabled",
    }
    assert data["Monitoring"] == {"Enabled": False}
    assert data["BlockDeviceMappings"] == [
        {"DeviceName": "/dev/xvda", "Ebs": {"Encrypted": True, "VolumeType": "gp3", "VolumeSize": 20}}
    ]
    # Interfaces and spot requests tagged (spot template); instance and volume tags come from the fleet.
    assert [t["ResourceType"] for t in data["TagSpecifications"]] == [
        "network-interface",
        "spot-instances-request",
    ]
    request = groups[0].template.request()
    assert request["LaunchTemplateName"] == groups[0].template.name
    assert request["TagSpecifications"][0]["ResourceType"] == "launch-template"


def test_template_names_are_stable_and_shared_by_a_pools_claims() -> None:
    """The name hashes the content; the NodeClaim's own tag is left out, so the next NodeClaim of
    the NodePool reuses the template (Karpenter's launch tags carry no NodeClaim at all)."""
    types = [fake_type("m5.large", 2, 8, 0.1, pods=29)]

    def name(tags: Mapping[str, str], capacity_type: str = "spot", spec: EC2NodeClassSpec = SPEC) -> str:
        (group,) = launch_groups(
            spec, _claim(), types, amis=[AMD], security_groups=["sg-1"], capacity_type=capacity_type,
            cluster=CLUSTER, tags=tags, render=Recorder(),
        )  # fmt: skip
        return group.template.name

    first = name(TAGS)
    assert name({**TAGS, "karpenter.sh/nodeclaim": "general-fghij"}) == first
    assert name(TAGS, "on-demand") != first  # no spot-request tags, other labels
    assert name({**TAGS, "team": "b"}) != first
    assert name(TAGS, spec=EC2NodeClassSpec(name="default", instance_profile="Other")) != first


def test_labels_and_taints_handed_to_the_user_data() -> None:
    """``CreateAMIOptions``: the user data is given the NodeClaim's labels plus its capacity type,
    and its taints then startup taints; the renderer (aws/userdata.py, ``resolveLaunchTemplates``)
    adds the unregistered taint and do-not-sync-taints and drops what kubelet may not set."""
    claim = _claim(**{"team": "a", "topology.kubernetes.io/zone": "us-east-1a"})
    assert node_labels(claim, "spot") == {
        "karpenter.sh/nodepool": "general",
        "team": "a",
        "topology.kubernetes.io/zone": "us-east-1a",
        "karpenter.sh/capacity-type": "spot",
    }
    assert node_taints(claim) == (Taint("dedicated", "NoSchedule", "db"), Taint("cilium", "NoExecute"))
    (group,) = launch_groups(
        SPEC, claim, [fake_type("m5.large", 2, 8, 0.1, pods=29)], amis=[AMD], security_groups=["sg-1"],
        capacity_type="spot", cluster=CLUSTER, tags=TAGS, render=render_user_data,
    )  # fmt: skip
    text = base64.b64decode(group.template.data["UserData"]).decode()
    assert "karpenter.sh/unregistered" in text and "karpenter.sh/capacity-type=spot" in text
    assert "karpenter.sh/do-not-sync-taints=true" in text and "topology.kubernetes.io/zone" not in text
    assert "maxPods: 29" in text


def test_block_devices_from_the_class_or_the_familys_defaults() -> None:
    """``blockDeviceMappings`` / ``volumeSize`` (sizes rounded up to whole GiB) and each family's
    ``DefaultBlockDeviceMappings`` (Custom: none, the AMI's own)."""
    written = EC2NodeClassSpec(
        name="x",
        block_device_mappings=(
            BlockDeviceMapping(
                "/dev/xvda",
                True,
                {"volumeSize": "100G", "volumeType": "io2", "iops": 3000, "encrypted": True, "kmsKeyID": "k"},
            ),
        ),
    )
    assert block_device_mappings(written) == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {"VolumeSize": 94, "VolumeType": "io2", "Iops": 3000, "Encrypted": True, "KmsKeyId": "k"},
        }
    ]
    bottlerocket = block_device_mappings(EC2NodeClassSpec(name="b", ami_family="Bottlerocket"))
    assert [(b["DeviceName"], b["Ebs"]["VolumeSize"]) for b in bottlerocket] == [
        ("/dev/xvda", 4),
        ("/dev/xvdb", 20),
    ]
    windows = block_device_mappings(EC2NodeClassSpec(name="w", ami_family="Windows2022"))
    assert [(b["DeviceName"], b["Ebs"]["VolumeSize"]) for b in windows] == [("/dev/sda1", 50)]
    assert block_device_mappings(EC2NodeClassSpec(name="c", ami_family="Custom")) == []


def test_public_ip_moves_the_groups_into_an_interface() -> None:
    """``generateNetworkInterfaces``: with ``associatePublicIPAddress`` the template declares
    interface 0 with the groups, and no top-level ``SecurityGroupIds``."""
    spec = EC2NodeClassSpec(name="p", instance_profile="P", associate_public_ip_address=True)
    (group,) = launch_groups(
        spec, _claim(), [fake_type("m5.large", 2, 8, 0.1)], amis=[AMD], security_groups=["sg-1", "sg-2"],
        capacity_type="on-demand", cluster=CLUSTER, tags=TAGS, render=Recorder(),
    )  # fmt: skip
    data = group.template.data
    assert "SecurityGroupIds" not in data
    assert data["NetworkInterfaces"] == [
        {"AssociatePublicIpAddress": True, "DeviceIndex": 0, "Groups": ["sg-1", "sg-2"]}
    ]
    assert [t["ResourceType"] for t in data["TagSpecifications"]] == ["network-interface"]


def test_capacity_type_read_back_from_the_instance() -> None:
    """``capacityTypeFromInstance``: spot when ``SpotInstanceRequestId`` is set; moto sets only
    ``InstanceLifecycle: spot`` (which AWS also sets), read as spot too; else on-demand."""
    base: dict[str, Any] = {
        "InstanceId": "i-1",
        "InstanceType": "m5.large",
        "Placement": {"AvailabilityZone": "us-east-1a"},
        "State": {"Name": "running"},
        "Tags": [
            {"Key": "karpenter.sh/nodeclaim", "Value": "c1"},
            {"Key": "karpenter.sh/nodepool", "Value": "p"},
        ],
    }
    assert parse_instance({**base, "SpotInstanceRequestId": "sir-1"}).capacity_type == "spot"
    assert parse_instance({**base, "InstanceLifecycle": "spot"}).capacity_type == "spot"
    on_demand = parse_instance(base)
    assert on_demand.capacity_type == "on-demand"
    assert (on_demand.nodeclaim, on_demand.nodepool) == ("c1", "p")
    assert on_demand.provider_id == "aws:///us-east-1a/i-1"


def test_a_resolution_keeps_the_parts_a_failed_pass_left_out() -> None:
    """The status loop's contract (``controllers/provisioning/resolver.py``, as Karpenter's
    nodeclass controller keeps ``status.subnets`` when a DescribeSubnets fails): a part left None
    keeps its last value; the class is ready to launch only with subnets, groups, AMIs and an
    instance profile (Karpenter's ``NodeClassNotReadyError`` otherwise)."""
    from kubespot.aws.resolved import ResolvedNodeClass
    from kubespot.aws.security_groups import SecurityGroupInfo
    from kubespot.aws.subnets import SubnetInfo

    subnets = [SubnetInfo("subnet-1", "us-east-1a", "use1-az1", 100)]
    full = ResolvedNodeClass(SPEC, subnets, [SecurityGroupInfo("sg-1", "nodes")], [AMD])
    assert full.not_ready() is None and full.zones == {"us-east-1a"}
    partial = ResolvedNodeClass(SPEC, None, [SecurityGroupInfo("sg-2", "nodes")], None).merged(full)
    assert partial.subnets == subnets and partial.amis == [AMD]
    assert [g.id for g in partial.security_groups or ()] == ["sg-2"]
    assert ResolvedNodeClass(SPEC, subnets, [SecurityGroupInfo("sg-1", "n")], []).not_ready() == (
        "AMISelector did not match any AMIs"
    )
    role_only = ResolvedNodeClass(
        EC2NodeClassSpec(name="r", role="NodeRole"), subnets, full.security_groups, [AMD]
    )
    assert "NodeRole" in (role_only.not_ready() or "")
    planning = ResolvedNodeClass.in_zones(["us-east-1b"])
    assert planning.zones == {"us-east-1b"} and planning.not_ready() == "EC2NodeClass not resolved"


class _Ec2:
    """DescribeLaunchTemplates / CreateLaunchTemplate answered in memory, slowly enough that
    concurrent callers overlap; ``create_fails`` makes CreateLaunchTemplate answer that code."""

    def __init__(self, create_fails: str = "") -> None:
        self.existing: set[str] = set()
        self.calls: list[str] = []
        self.create_fails = create_fails

    async def call(self, service: str, operation: str, **kwargs: Any) -> dict[str, Any]:
        from kubespot.aws.session import AwsError

        self.calls.append(operation)
        await asyncio.sleep(0.01)
        if operation == "DescribeLaunchTemplates":
            if kwargs["LaunchTemplateNames"][0] not in self.existing:
                raise AwsError("InvalidLaunchTemplateName.NotFoundException", "not found")
            return {"LaunchTemplates": [{}]}
        if self.create_fails:
            raise AwsError(self.create_fails, "no")
        self.existing.add(kwargs["LaunchTemplateName"])
        return {"LaunchTemplate": {}}


async def test_a_template_is_made_sure_of_once_per_name() -> None:
    """``ensureLaunchTemplate``: looked up by name, created when EC2 says it is not found, then
    known; concurrent launches of one NodePool share the one check; another replica creating it
    first (AlreadyExists) is as good; any other failure reaches every waiter and is not cached."""
    from kubespot.aws.launch_templates import LaunchTemplate, LaunchTemplates
    from kubespot.aws.session import AwsError

    template = LaunchTemplate({"ImageId": "ami-1"}, {"team": "a"})
    ec2 = _Ec2()
    templates = LaunchTemplates(ec2)  # type: ignore[arg-type]
    names = await asyncio.gather(*(templates.ensure(template) for _ in range(5)))
    assert set(names) == {template.name}
    assert ec2.calls == ["DescribeLaunchTemplates", "CreateLaunchTemplate"]
    await templates.ensure(template)
    assert len(ec2.calls) == 2 and templates.created == [template.name]

    raced = LaunchTemplates(_Ec2(create_fails="InvalidLaunchTemplateName.AlreadyExistsException"))  # type: ignore[arg-type]
    assert await raced.ensure(template) == template.name

    failing = _Ec2(create_fails="UnauthorizedOperation")
    refused = LaunchTemplates(failing)  # type: ignore[arg-type]
    results = await asyncio.gather(refused.ensure(template), refused.ensure(template), return_exceptions=True)
    assert all(isinstance(r, AwsError) and r.code == "UnauthorizedOperation" for r in results)
    failing.create_fails = ""
    assert await refused.ensure(template) == template.name  # tried again, not cached
