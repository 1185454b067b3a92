"""``scheduling.api.convert_eksctl``: eksctl ``ClusterConfig`` node groups to v1 NodePools and
EC2NodeClasses, round-trip tested (convert, parse, validate: ValidationSucceeded True, and the fields
carried over compare equal), on the files in tests/fixtures/eksctl/.

Sources: eksctl-io/eksctl ``pkg/apis/eksctl.io/v1alpha5/types.go`` (``NodeGroupBase``, ``NodeGroup``,
``ManagedNodeGroup``, ``NodeGroupInstancesDistribution`` and its documented defaults, ``taintsWrapper``),
``defaults.go`` (``SetNodeGroupDefaults``, ``setVolumeDefaults``: 80 GiB gp3, AL2023, the Bottlerocket
data disk), ``pkg/cfn/builder/nodegroup.go`` ``makeMetadataOptions``,
``userdocs/src/usage/spot-instances.md``;
Auto Scaling's ``InstancesDistribution`` through docs/designs/launching.md §6 (the split annotation);
Karpenter v1 ``pkg/apis/v1/nodepool.go`` (``limits`` with ``nodes``, KARPENTER.md §2) and the AWS
provider's ``ec2nodeclass.go`` (selector terms, ``role`` / ``instanceProfile``, ``kubelet``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubespot.aws.userdata import ClusterInfo, render_user_data
from kubespot.cloud import FakeCloud, fake_type
from kubespot.model.capacity import AMIFamily, InstanceTypeInfo
from kubespot.plan_cli import build_plan
from kubespot.scheduling.api.convert import convert
from kubespot.scheduling.api.load import load
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec, SelectorTerm
from kubespot.scheduling.api.nodepool import NodePoolSpec
from kubespot.scheduling.api.template import RequirementSpec
from kubespot.scheduling.instance_types import instance_type
from kubespot.scheduling.taints import Taint
from support.crd_schema import crd_schema, schema_problems

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "eksctl"
SPLIT = "kubespot.io/capacity-split"


def fixture(name: str) -> list[Any]:
    return [d for d in yaml.safe_load_all((FIXTURES / name).read_text()) if d]


def cluster(*groups: dict[str, Any], managed: bool = True, **extra: Any) -> dict[str, Any]:
    section = "managedNodeGroups" if managed else "nodeGroups"
    return {
        "apiVersion": "eksctl.io/v1alpha5",
        "kind": "ClusterConfig",
        "metadata": {"name": "c1", "region": "us-east-1"},
        section: list(groups),
        **extra,
    }


def loaded(documents: tuple[dict[str, Any], ...]) -> dict[tuple[str, str], Any]:
    """Every converted document parsed and validated: each must be ValidationSucceeded True."""
    out = {}
    for doc in documents:
        result = load(doc)
        assert result.valid, (doc["kind"], doc["metadata"]["name"], result.condition)
        out[(result.kind, result.name)] = result.spec
    return out


def raw(documents: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in documents if d["kind"] == kind and d["metadata"]["name"] == name)


def requirement(pool: NodePoolSpec, key: str) -> tuple[str, ...]:
    return next(r.values for r in pool.template.requirements if r.key == key)


def test_managed_spot_groups_from_the_eksctl_docs_round_trip() -> None:
    """types.go ``ManagedNodeGroup.Spot`` / ``InstanceTypeList`` (``instanceTypes`` default m5.large):
    spot groups allow spot only, the others on-demand only; ``maxSize`` is ``limits.nodes`` (Karpenter
    v1 ``nodepool.go`` ``Limits``, ``nodes`` counted exactly); identical node settings share one class."""
    result = convert(fixture("spot-managed.yaml"))
    specs = loaded(result.documents)
    assert sorted(specs) == [
        ("EC2NodeClass", "spot-web"),
        ("NodePool", "on-demand"),
        ("NodePool", "spot-default"),
        ("NodePool", "spot-web"),
    ]
    web, default, on_demand = (specs[("NodePool", n)] for n in ("spot-web", "spot-default", "on-demand"))
    assert requirement(web, "node.kubernetes.io/instance-type") == (
        "c5.large",
        "c5a.large",
        "c6i.large",
        "m5.large",
    )
    assert requirement(web, "karpenter.sh/capacity-type") == ("spot",)
    assert requirement(default, "node.kubernetes.io/instance-type") == ("m5.large",)
    assert requirement(default, "karpenter.sh/capacity-type") == ("spot",)
    assert requirement(on_demand, "karpenter.sh/capacity-type") == ("on-demand",)
    assert (web.limits, default.limits, on_demand.limits) == ({"nodes": "20"}, {"nodes": "5"}, {"nodes": "4"})
    assert {p.template.node_class_ref.name for p in (web, default, on_demand)} == {"spot-web"}
    # An ASG keeps its instances: no expiry; nodes not needed go after CA's default 10 minutes.
    assert web.template.expire_after == "Never"
    assert (web.disruption.consolidation_policy, web.disruption.consolidate_after) == (
        "WhenEmptyOrUnderutilized",
        "10m",
    )
    nodeclass = specs[("EC2NodeClass", "spot-web")]
    assert nodeclass.ami_selector_terms == (SelectorTerm(alias="al2023@latest"),)
    # No split: a managed group is all spot or all on-demand.
    assert all(SPLIT not in d["metadata"].get("annotations", {}) for d in result.documents)
    assert (
        "managedNodeGroups/spot-web: minSize: has no equivalent; dropped (no minimum: nodes are launched "
        "for pending pods only; keep a small node group for a floor)" in result.warnings
    )
    assert any(w.startswith("managedNodeGroups/spot-web: desiredCapacity: ") for w in result.warnings)
    assert any(w.startswith("managedNodeGroups/spot-default: amiFamily: unset") for w in result.warnings)


def test_instances_distribution_becomes_capacity_types_and_the_split_annotation() -> None:
    """types.go ``NodeGroupInstancesDistribution`` (base default 0, percentage above it default 100):
    a split group allows both capacity types and carries ``onDemandBase`` / ``onDemandPercentAboveBase``
    (launching.md §6); 0/0 is all spot; only ``maxPrice`` (spot-instances.md's GPU example) is all
    on-demand; ``instanceType: mixed`` is not a type."""
    result = convert(fixture("spot-self-managed.yaml"))
    specs = loaded(result.documents)
    mixed, spot, gpu = (specs[("NodePool", n)] for n in ("mixed", "all-spot", "gpu"))
    assert requirement(mixed, "karpenter.sh/capacity-type") == ("spot", "on-demand")
    assert raw(result.documents, "NodePool", "mixed")["metadata"]["annotations"] == {
        SPLIT: "onDemandBase=2,onDemandPercentAboveBase=30"
    }
    assert requirement(mixed, "node.kubernetes.io/instance-type") == ("m5.large", "m5a.large", "m6i.large")
    assert requirement(spot, "karpenter.sh/capacity-type") == ("spot",)
    assert requirement(gpu, "karpenter.sh/capacity-type") == ("on-demand",)
    assert requirement(gpu, "node.kubernetes.io/instance-type") == ("g5.xlarge", "g5.2xlarge")
    for name in ("all-spot", "gpu"):
        assert "annotations" not in raw(result.documents, "NodePool", name)["metadata"]
    dropped = [
        w.split(": ")[1] for w in result.warnings if w.startswith("nodeGroups/mixed: instancesDistribution.")
    ]
    assert dropped == [
        "instancesDistribution.maxPrice",
        "instancesDistribution.spotInstancePools",
        "instancesDistribution.spotAllocationStrategy",
        "instancesDistribution.capacityRebalance",
    ]


def test_a_production_file_carries_every_node_setting_over() -> None:
    """types.go ``NodeGroupBase`` fields, each to its EC2NodeClass / NodePool place: subnets named in
    ``vpc.subnets`` by id, private subnets of the group's zones, security groups by id plus the EKS
    cluster group, role and instance profile names from their ARNs, kubelet fields, volumes
    (defaults.go: 80 GiB; Bottlerocket's data disk /dev/xvdb), IMDS as ``makeMetadataOptions`` sets
    it, taints in both of ``taintsWrapper``'s forms, pre-bootstrap commands as a shell script."""
    result = convert(fixture("production.yaml"))
    specs = loaded(result.documents)
    classes = sorted(name for kind, name in specs if kind == "EC2NodeClass")
    assert classes == ["apps", "jobs", "system"]  # apps-on-demand shares apps' class
    apps_pool: NodePoolSpec = specs[("NodePool", "apps")]
    assert specs[("NodePool", "apps-on-demand")].template.node_class_ref.name == "apps"
    assert apps_pool.labels == {"team": "apps", "tier": "web"}
    assert apps_pool.template.taints == (Taint("example.com/spot", "PreferNoSchedule", "true"),)
    assert RequirementSpec("topology.kubernetes.io/zone", "In", ("us-east-1a", "us-east-1b")) in (
        apps_pool.template.requirements
    )
    apps: EC2NodeClassSpec = specs[("EC2NodeClass", "apps")]
    assert apps.subnet_selector_terms == (
        SelectorTerm(id="subnet-0aa00000000000001"),
        SelectorTerm(id="subnet-0bb00000000000002"),
    )
    assert apps.security_group_selector_terms == (
        SelectorTerm(id="sg-0123456789abcdef0"),
        SelectorTerm(tags={"aws:eks:cluster-name": "prod"}),
    )
    assert (apps.role, apps.instance_profile) == ("prod-node-role", None)
    assert apps.kubelet is not None and apps.kubelet.max_pods == 58
    assert [(m.device_name, dict(m.ebs)) for m in apps.block_device_mappings] == [
        (
            "/dev/xvda",
            {
                "volumeSize": "120Gi",
                "volumeType": "gp3",
                "iops": 4000,
                "throughput": 250,
                "encrypted": True,
                "deleteOnTermination": True,
            },
        )
    ]
    assert (apps.metadata_options.http_tokens, apps.metadata_options.http_put_response_hop_limit) == (
        "required",
        2,
    )
    assert apps.tags == {"cost-center": "1234"}  # the Cluster Autoscaler tags dropped
    assert apps.user_data == "#!/bin/bash\nsysctl -w vm.max_map_count=262144\n"

    jobs_pool: NodePoolSpec = specs[("NodePool", "jobs")]
    assert jobs_pool.template.taints == (
        Taint("dedicated", "NoSchedule", "jobs"),
        Taint("example.com/batch", "NoExecute"),
    )
    jobs: EC2NodeClassSpec = specs[("EC2NodeClass", "jobs")]
    assert jobs.ami_selector_terms == (SelectorTerm(alias="al2@latest"),)
    assert jobs.subnet_selector_terms == (SelectorTerm(id="subnet-0cc00000000000003"),)
    assert (jobs.role, jobs.instance_profile) == (None, "jobs-profile")
    assert jobs.kubelet is not None
    assert jobs.kubelet.cluster_dns == ("169.254.20.10",)
    assert jobs.kubelet.kube_reserved == {"cpu": "300m", "memory": "300Mi", "ephemeral-storage": "1Gi"}
    assert jobs.kubelet.eviction_hard == {"memory.available": "200Mi", "nodefs.available": "10%"}
    assert jobs.metadata_options.http_put_response_hop_limit == 1  # disablePodIMDS
    assert [dict(m.ebs)["volumeSize"] for m in jobs.block_device_mappings] == ["80Gi"]

    system: EC2NodeClassSpec = specs[("EC2NodeClass", "system")]
    assert system.ami_selector_terms == (SelectorTerm(alias="bottlerocket@latest"),)
    assert [(m.device_name, dict(m.ebs)["volumeSize"]) for m in system.block_device_mappings] == [
        ("/dev/xvda", "4Gi"),
        ("/dev/xvdb", "50Gi"),
    ]
    # Every private subnet of the cluster: the group names no zone.
    assert len(system.subnet_selector_terms) == 3

    fields = {tuple(w.split(": ")[:2]) for w in result.warnings}
    assert {
        ("managedNodeGroups/apps", "ssh"),
        ("managedNodeGroups/apps", "updateConfig"),
        ("managedNodeGroups/apps", "minSize"),
        ("managedNodeGroups/apps", "desiredCapacity"),
        ("managedNodeGroups/apps", "tags.k8s.io/cluster-autoscaler/enabled"),
        ("nodeGroups/jobs", "kubeletExtraConfig.featureGates"),
        ("nodeGroups/jobs", "containerRuntime"),
        ("nodeGroups/jobs", "asgSuspendProcesses"),
        ("nodeGroups/system", "bottlerocket"),
    } <= fields
    # Fields that were converted are not warned about.
    assert not {f for _, f in fields} & {"volumeSize", "labels", "taints", "maxPodsPerNode", "iam", "subnets"}


def test_every_field_without_an_equivalent_is_one_warning_naming_group_and_field() -> None:
    """types.go fields with no EC2NodeClass or NodePool place (ASG, SSH, update and placement
    settings, anything unknown): one warning each, naming the group and the field."""
    group = {
        "name": "ng",
        "instanceType": "m5.large",
        "minSize": 1,
        "desiredCapacity": 2,
        "ssh": {"allow": True},
        "updateConfig": {"maxUnavailable": 1},
        "overrideBootstrapCommand": "#!/bin/bash\n/etc/eks/bootstrap.sh c1",
        "placement": {"groupName": "pg"},
        "futureField": 1,
    }
    result = convert([cluster(group, managed=False)])
    named = [w.split(": ")[1] for w in result.warnings if w.startswith("nodeGroups/ng: ")]
    for field in (
        "minSize",
        "desiredCapacity",
        "ssh",
        "updateConfig",
        "overrideBootstrapCommand",
        "placement",
    ):
        assert named.count(field) == 1, field
    assert "nodeGroups/ng: futureField: has no equivalent; dropped" in result.warnings
    loaded(result.documents)


def test_without_subnet_ids_the_subnets_eksctl_created_are_selected_by_tag() -> None:
    """pkg/cfn/builder/vpc_ipv4.go tags private subnets ``kubernetes.io/role/internal-elb`` (public:
    ``kubernetes.io/role/elb``) and pkg/cfn/manager/api.go the stack ``alpha.eksctl.io/cluster-name``;
    without a role ARN the class gets a placeholder role and a warning."""
    result = convert([cluster({"name": "ng", "privateNetworking": True})])
    nodeclass = loaded(result.documents)[("EC2NodeClass", "ng")]
    assert nodeclass.subnet_selector_terms == (
        SelectorTerm(tags={"alpha.eksctl.io/cluster-name": "c1", "kubernetes.io/role/internal-elb": "1"}),
    )
    assert nodeclass.role == "KarpenterNodeRole-c1"
    assert any(w.startswith("managedNodeGroups/ng: subnets: no subnet ids") for w in result.warnings)
    assert any(
        w.startswith("managedNodeGroups/ng: iam: eksctl created this group's role") for w in result.warnings
    )


def test_families_windows_custom_and_lifetime() -> None:
    """types.go ``NodeImageFamily*`` → Karpenter families (AL2, AL2023, Bottlerocket, Windows20xx with
    ``kubernetes.io/os In [windows]``); a family Karpenter lacks (Ubuntu) is Custom with a warning;
    ``maxInstanceLifetime`` (seconds) is ``expireAfter``; a custom ``ami`` id is an id term."""
    windows = {"name": "win", "amiFamily": "WindowsServer2022CoreContainer", "maxInstanceLifetime": 604800}
    custom = {"name": "ubuntu", "amiFamily": "Ubuntu2204", "ami": "ami-0123456789abcdef0"}
    result = convert([cluster(windows, custom, managed=False)])
    specs = loaded(result.documents)
    win_pool: NodePoolSpec = specs[("NodePool", "win")]
    assert requirement(win_pool, "kubernetes.io/os") == ("windows",)
    assert win_pool.template.expire_after == "168h"
    win: EC2NodeClassSpec = specs[("EC2NodeClass", "win")]
    assert win.ami_selector_terms == (SelectorTerm(alias="windows2022@latest"),)
    assert win.block_device_mappings[0].device_name == "/dev/sda1"
    ubuntu: EC2NodeClassSpec = specs[("EC2NodeClass", "ubuntu")]
    assert (ubuntu.ami_family, ubuntu.ami_selector_terms) == (
        "Custom",
        (SelectorTerm(id="ami-0123456789abcdef0"),),
    )
    assert any(
        w.startswith("nodeGroups/ubuntu: amiFamily: Ubuntu2204 has no Karpenter family")
        for w in result.warnings
    )


def test_pre_bootstrap_commands_outside_amazon_linux_are_a_warning() -> None:
    """Karpenter merges a plain shell script into AL2 / AL2023 user data; Bottlerocket's is TOML
    (launching-research.md §3.2), so the commands are not converted there."""
    group = {"name": "br", "amiFamily": "Bottlerocket", "preBootstrapCommands": ["echo hi"]}
    result = convert([cluster(group)])
    nodeclass = loaded(result.documents)[("EC2NodeClass", "br")]
    assert nodeclass.user_data is None
    assert any(
        w.startswith("managedNodeGroups/br: preBootstrapCommands: not converted for Bottlerocket")
        for w in result.warnings
    )


def test_instance_selector_becomes_karpenter_requirements() -> None:
    """types.go ``InstanceSelector`` (vCPUs, GPUs, CPU architecture) as Karpenter's well-known
    ``karpenter.k8s.aws/instance-cpu``, ``instance-gpu-count`` and ``kubernetes.io/arch`` labels;
    ``gpus: 0`` ("select non-GPU types") is ``instance-gpu-count DoesNotExist``, which the AWS
    provider's non-GPU types meet (instancetype/types.go ``computeRequirements`` leaves them without
    the label)."""
    group = {"name": "sel", "instanceSelector": {"vCPUs": 4, "gpus": 0, "cpuArchitecture": "arm64"}}
    pool = loaded(convert([cluster(group)]).documents)[("NodePool", "sel")]
    assert requirement(pool, "karpenter.k8s.aws/instance-cpu") == ("4",)
    assert requirement(pool, "kubernetes.io/arch") == ("arm64",)
    gpu = [r for r in pool.template.requirements if r.key == "karpenter.k8s.aws/instance-gpu-count"]
    assert [(r.operator, r.values) for r in gpu] == [("DoesNotExist", ())]


def _selector_plan(documents: tuple[dict[str, Any], ...]) -> list[tuple[str, ...]]:
    """The instance types of each NodeClaim ``kubespot plan``'s simulation makes for 4 pods of 3 CPUs
    over a catalog with one type of each kind the selector must tell apart."""
    pending = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"p{i}"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "3", "memory": "4Gi"}}}]},
            "status": {"phase": "Pending"},
        }
        for i in range(4)
    ]
    gpu = fake_type("g4dn.2xlarge", 8, 32, 0.2)  # cheapest: picked unless the selector keeps it out
    gpu_info = InstanceTypeInfo("g4dn.2xlarge", 8, 32 * 1024, extended={"nvidia.com/gpu": 1})
    gpu = instance_type(gpu_info, gpu.resources, gpu.offerings)
    cloud = FakeCloud(
        [
            gpu,
            fake_type("m5.2xlarge", 8, 32, 0.384),
            fake_type("c5.2xlarge", 8, 16, 0.34),
            fake_type("m6g.2xlarge", 8, 32, 0.3, arch="arm64"),
            fake_type("m5.large", 2, 8, 0.096),
        ]
    )
    objects = {
        "NodePool": [d for d in documents if d["kind"] == "NodePool"],
        "EC2NodeClass": [d for d in documents if d["kind"] == "EC2NodeClass"],
        "Pod": pending,
        "Node": [],
        "DaemonSet": [],
    }
    plan, _ = asyncio.run(build_plan(objects, cloud))
    assert not plan.unschedulable
    return [tuple(c.instance_types) for c in plan.claims]


@pytest.mark.parametrize("managed", [True, False], ids=["managed", "self-managed"])
def test_an_instance_selector_without_types_plans_into_the_types_it_selects(managed: bool) -> None:
    """eksctl fills a selector group's types from the selector (pkg/eks/nodegroup_service.go
    ``ExpandInstanceSelectorOptions``: vCPUs and memory as ranges with equal bounds, GPUs 0 for none,
    x86_64 unless ``cpuArchitecture`` says otherwise, ``expandInstanceSelector``), so the pool pins no
    instance type: it plans into the 8-vCPU, 32 GiB, GPU-less x86 type only (Karpenter's
    requirements: kubernetes-sigs/karpenter pkg/scheduling/requirements.go ``Compatible``)."""
    group = {"name": "sel", "instanceSelector": {"vCPUs": 8, "memory": "32", "gpus": 0}}
    result = convert([cluster(group, managed=managed)])
    pool = loaded(result.documents)[("NodePool", "sel")]
    assert all(r.key != "node.kubernetes.io/instance-type" for r in pool.template.requirements)
    assert requirement(pool, "karpenter.k8s.aws/instance-memory") == ("32768",)
    assert not any("instanceTypes: kept as written" in w for w in result.warnings)
    claims = _selector_plan(result.documents)
    assert claims and {t for c in claims for t in c} == {"m5.2xlarge"}


def test_instance_type_beside_a_selector_is_eksctls_error_and_the_selector_decides() -> None:
    """validation.go: "cannot set instanceType when instanceSelector is specified" (managed) and
    "instanceType should be "mixed" or unset when using the instance selector feature"; listed
    ``instanceTypes`` must equal the selector's (``ExpandInstanceSelectorOptions``), so they stay."""
    selector = {"vCPUs": 8, "memory": "32GiB"}
    single = {"name": "one", "instanceType": "m5.large", "instanceSelector": selector}
    listed = {"name": "listed", "instanceTypes": ["m5.2xlarge"], "instanceSelector": {"vCPUs": 8}}
    result = convert([cluster(single, listed)])
    specs = loaded(result.documents)
    assert all(
        r.key != "node.kubernetes.io/instance-type" for r in specs[("NodePool", "one")].template.requirements
    )
    assert any(
        w.startswith("managedNodeGroups/one: instanceType: eksctl refuses it") for w in result.warnings
    )
    assert requirement(specs[("NodePool", "listed")], "node.kubernetes.io/instance-type") == ("m5.2xlarge",)


#: The review's malformed shapes (/tmp/reviews/launch14.md §12) and more of the kind: group, the
#: field the warning must name.
MALFORMED: dict[str, tuple[dict[str, Any], str]] = {
    "taints of non-objects": ({"taints": ["x", {"key": "ok", "effect": "NoSchedule"}]}, "taints[0]"),
    "taint with a bad effect": ({"taints": [{"key": "k", "effect": "Sometimes"}]}, "taints[0]"),
    "taint map with a bad effect": ({"taints": {"k": "v:Never"}}, "taints.k"),
    "taints a string": ({"taints": "dedicated=gpu:NoSchedule"}, "taints"),
    "volume without a name": ({"additionalVolumes": [{"volumeSize": 10}]}, "additionalVolumes[0]"),
    "volumes a mapping": ({"additionalVolumes": {"volumeName": "/dev/xvdc"}}, "additionalVolumes"),
    "volume of a string": ({"additionalVolumes": ["x"]}, "additionalVolumes[0]"),
    "lifetime a string": ({"maxInstanceLifetime": "604800"}, "maxInstanceLifetime"),
    "maxSize true": ({"maxSize": True}, "maxSize"),
    "maxSize a string": ({"maxSize": "10"}, "maxSize"),
    "volumeSize a string": ({"volumeSize": "100"}, "volumeSize"),
    "labels a list": ({"labels": ["a=b"]}, "labels"),
    "label of a list": ({"labels": {"a": ["b"]}}, "labels.a"),
    "distribution percentage a string": (
        {
            "instancesDistribution": {
                "instanceTypes": ["m5.large"],
                "onDemandPercentageAboveBaseCapacity": "50",
            }
        },
        "instancesDistribution.onDemandPercentageAboveBaseCapacity",
    ),
    "instance types a string": ({"instanceTypes": "m5.large"}, "instanceTypes"),
    "selector a list": ({"instanceSelector": ["x"]}, "instanceSelector"),
    "attachIDs a string": ({"securityGroups": {"attachIDs": "sg-1"}}, "securityGroups.attachIDs"),
    "preBootstrapCommands a string": ({"preBootstrapCommands": "echo hi"}, "preBootstrapCommands"),
    "iam a string": ({"iam": "arn"}, "iam"),
    "taint key Karpenter refuses": (
        {"taints": [{"key": "bad key!", "effect": "NoSchedule"}]},
        "(node group)",
    ),
}


@pytest.mark.parametrize("shape", list(MALFORMED), ids=list(MALFORMED))
@pytest.mark.parametrize("managed", [True, False], ids=["managed", "self-managed"])
def test_malformed_input_is_a_warning_naming_group_and_field_never_an_invalid_object(
    shape: str, managed: bool
) -> None:
    """eksctl loads a ClusterConfig into typed structs (pkg/apis/eksctl.io/v1alpha5/types.go) and
    checks taints (validation.go ``validateTaints``) and volume names (``VolumeMapping.VolumeName``):
    what it would refuse is one warning naming the group and the field, left out; everything
    written validates (Karpenter's v1 rules: ValidationSucceeded) and fits the chart's CRDs."""
    fields, field = MALFORMED[shape]
    group = {"name": "ng", "instanceType": "m5.large", **fields}
    if not managed and "instanceTypes" in fields:
        group["instancesDistribution"] = {"instanceTypes": fields["instanceTypes"]}
        del group["instanceTypes"], group["instanceType"]
        field = "instancesDistribution.instanceTypes"
    section = "managedNodeGroups" if managed else "nodeGroups"
    result = convert([cluster(group, managed=managed)])
    assert any(w.startswith(f"{section}/ng: {field}: ") for w in result.warnings), result.warnings
    loaded(result.documents)
    for doc in result.documents:
        assert schema_problems(doc, crd_schema(doc["kind"])) == [], doc
        assert doc["kind"] != "EC2NodeClass" or all(
            m["deviceName"] for m in doc["spec"]["blockDeviceMappings"]
        )


def test_groups_without_a_name_or_with_a_taken_one_are_not_converted() -> None:
    """types.go ``NodeGroupBase.Name`` names the group (eksctl requires it, and names are unique in a
    ClusterConfig): a group without one, or a second of the same name, would be a nameless or
    clobbering NodePool; it is one warning and left out."""
    result = convert(
        [cluster({"instanceType": "m5.large"}, {"name": "a"}, {"name": "a", "instanceType": "c5"}, "x")]  # type: ignore[arg-type]
    )
    pools = [d["metadata"]["name"] for d in result.documents if d["kind"] == "NodePool"]
    assert pools == ["a"]
    assert "managedNodeGroups[0]: name: a node group needs a name; not converted" in result.warnings
    assert "managedNodeGroups[3]: name: a node group needs a name; not converted" in result.warnings
    assert (
        "managedNodeGroups/a: name: a node group of that name came before; not converted" in result.warnings
    )


def test_other_documents_pass_through_beside_a_cluster_config() -> None:
    """convert(): documents of other kinds are kept, in order, next to the converted node groups."""
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    result = convert([config_map, cluster({"name": "ng"})])
    assert [d["kind"] for d in result.documents] == ["ConfigMap", "NodePool", "EC2NodeClass"]


def test_max_size_with_known_type_sizes_adds_estimated_cpu_and_memory_limits() -> None:
    """Karpenter's ``limits`` (v1 ``nodepool.go``): ``nodes`` is exact but counted only from v1.11
    (kubernetes-sigs/karpenter PR #2526, ``statenode.go`` ``Capacity``); ``cpu`` / ``memory`` are
    ``maxSize`` times the largest type, by vCPUs and by memory apart, with a warning that they are
    an estimate. A type of unknown size writes neither."""
    sizes = {
        "m5.large": InstanceTypeInfo("m5.large", vcpus=2, memory_mib=8192, architecture="x86_64"),
        "c5.xlarge": InstanceTypeInfo("c5.xlarge", vcpus=4, memory_mib=8192, architecture="x86_64"),
        "r5.large": InstanceTypeInfo("r5.large", vcpus=2, memory_mib=16384, architecture="x86_64"),
    }
    mixed = {"name": "mixed", "instanceTypes": ["m5.large", "c5.xlarge", "r5.large"], "maxSize": 10}
    unknown = {"name": "unknown", "instanceTypes": ["m5.large", "x9.huge"], "maxSize": 3}
    result = convert([cluster(mixed, unknown)], sizes=sizes)
    specs = loaded(result.documents)
    assert specs[("NodePool", "mixed")].limits == {"nodes": "10", "cpu": "40", "memory": "160Gi"}
    assert specs[("NodePool", "unknown")].limits == {"nodes": "3"}
    assert (
        "managedNodeGroups/mixed: maxSize: limits cpu 40 and memory 160Gi are an estimate (10 of the "
        "largest type); limits.nodes is exact" in result.warnings
    )
    assert not any(w.startswith("managedNodeGroups/unknown: maxSize") for w in result.warnings)


def test_pre_bootstrap_commands_run_before_the_generated_bootstrap() -> None:
    """The shell script written from ``preBootstrapCommands`` goes into the user data kubespot renders
    (aws/userdata.py ``render_user_data``): AL2023 as a ``text/x-shellscript`` part before the
    generated NodeConfig, AL2 as a part before ``bootstrap.sh`` (Karpenter ``bootstrap/nodeadm.go``
    ``Nodeadm.Script``, ``eksbootstrap.go`` ``EKS.Script``), as eksctl runs them before bootstrapping."""
    commands = ["sysctl -w vm.max_map_count=262144"]
    for eksctl_family, family, generated in (
        ("AmazonLinux2023", AMIFamily.AL2023, "kind: NodeConfig"),
        ("AmazonLinux2", AMIFamily.AL2, "/etc/eks/bootstrap.sh"),
    ):
        group = {"name": "ng", "amiFamily": eksctl_family, "preBootstrapCommands": commands}
        nodeclass = loaded(convert([cluster(group)]).documents)[("EC2NodeClass", "ng")]
        cluster_info = ClusterInfo("c1", "https://api.example", "", "10.100.0.0/16", "10.100.0.10")
        text = render_user_data(family, nodeclass.user_data, cluster_info, nodeclass.kubelet, {}, (), 110)
        assert "text/x-shellscript" in text, family
        assert text.index(commands[0]) < text.index(generated), family


@pytest.mark.parametrize("name", ["production.yaml", "spot-managed.yaml", "spot-self-managed.yaml"])
def test_converted_objects_fit_the_charts_crd_schemas(name: str) -> None:
    """Karpenter's v1 CRDs as the chart ships them (``karpenter.sh_nodepools.yaml``,
    ``karpenter.k8s.aws_ec2nodeclasses.yaml``): nothing a real API server would refuse or prune
    (apiextensions-apiserver structural schemas and pruning)."""
    for doc in convert(fixture(name)).documents:
        assert schema_problems(doc, crd_schema(doc["kind"])) == [], doc["metadata"]["name"]
