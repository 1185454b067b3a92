"""``scheduling.api.convert``: old Karpenter manifests to v1, round-trip tested (convert, parse,
validate: no errors, and the fields carried over compare equal).

Sources: aws/karpenter-provider-aws ``website/content/en/v1.0/upgrading/v1beta1-migration.md``
(Provisioner → NodePool, AWSNodeTemplate → EC2NodeClass, ttlSecondsAfterEmpty / consolidation /
ttlSecondsUntilExpired, selectors, launchTemplate removed) and ``v1-migration.md`` (kubelet moved to
the EC2NodeClass, nodeClassRef.group, expireAfter into the template, WhenUnderutilized renamed,
hop limit default 2 → 1); v0.31.4 ``pkg/apis/v1alpha5/provisioner.go`` ``SetDefaults`` (the default
requirements) and ``pkg/utils/nodeclass/nodeclass.go`` ``NewAMISelectorTerms`` (comma-separated
selector values as one term per combination).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubespot.model.capacity import KubeletConfig
from kubespot.scheduling.api.convert import convert, duration
from kubespot.scheduling.api.load import load
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec, SelectorTerm
from kubespot.scheduling.api.nodepool import Budget, NodePoolSpec
from kubespot.scheduling.api.template import RequirementSpec
from kubespot.scheduling.taints import Taint

DATA = Path(__file__).resolve().parents[2] / "data" / "karpenter"


def docs(folder: str, name: str | None = None) -> list[Any]:
    paths = [DATA / folder / name] if name else sorted((DATA / folder).glob("*.yaml"))
    return [d for p in paths for d in yaml.safe_load_all(p.read_text()) if d]


def loaded(documents: tuple[dict[str, Any], ...]) -> dict[tuple[str, str], Any]:
    """Every converted document parsed and validated: each must be ValidationSucceeded True."""
    out = {}
    for doc in documents:
        result = load(doc)
        assert result.valid, (doc["kind"], doc["metadata"]["name"], result.condition)
        out[(result.kind, result.name)] = result.spec
    return out


def test_provisioner_with_provider_ref_round_trip() -> None:
    result = convert(docs("old", "provisioner-v1alpha5.yaml"))
    specs = loaded(result.documents)
    pool, nodeclass = specs[("NodePool", "default")], specs[("EC2NodeClass", "default")]
    assert isinstance(pool, NodePoolSpec) and isinstance(nodeclass, EC2NodeClassSpec)
    # Carried over as written.
    assert pool.labels == {"team": "web"} and pool.annotations == {"example.com/owner": "web-team"}
    assert pool.template.taints == (Taint("example.com/web", "NoSchedule"),)
    assert pool.template.startup_taints == (Taint("example.com/cni-not-ready", "NoExecute"),)
    assert pool.limits == {"cpu": "1000", "memory": "1000Gi"} and pool.weight == 20
    assert pool.template.requirements[:2] == (
        RequirementSpec("karpenter.sh/capacity-type", "In", ("spot", "on-demand")),
        RequirementSpec("karpenter.k8s.aws/instance-family", "In", ("m5", "c5", "r5")),
    )
    # Renamed: ttlSecondsAfterEmpty → WhenEmpty after 30s; ttlSecondsUntilExpired → expireAfter.
    assert (pool.disruption.consolidation_policy, pool.disruption.consolidate_after) == ("WhenEmpty", "30s")
    assert pool.template.expire_after == "720h"
    assert pool.template.node_class_ref.name == "default"
    # The v1alpha5 defaults for the keys the Provisioner left out (os, arch), not for family.
    keys = [r.key for r in pool.template.requirements]
    assert keys == [
        "karpenter.sh/capacity-type",
        "karpenter.k8s.aws/instance-family",
        "kubernetes.io/os",
        "kubernetes.io/arch",
    ]
    # The kubelet block moved to the node class; containerRuntime has no v1 equivalent.
    assert nodeclass.kubelet is not None
    assert nodeclass.kubelet.capacity() == KubeletConfig(
        max_pods=58,
        system_reserved={"cpu": "100m", "memory": "100Mi"},
        eviction_hard={"memory.available": "5%"},
    )
    assert (
        nodeclass.instance_profile == "KarpenterNodeInstanceProfile-demo-cluster" and nodeclass.role is None
    )
    assert nodeclass.user_data == '#!/bin/bash\necho "hello from user data"\n'
    assert nodeclass.tags == {"team": "web"} and nodeclass.detailed_monitoring is True
    assert nodeclass.block_device_mappings[0].ebs == {
        "volumeSize": "50Gi",
        "volumeType": "gp3",
        "encrypted": True,
    }
    assert nodeclass.subnet_selector_terms == (SelectorTerm(tags={"karpenter.sh/discovery": "demo-cluster"}),)
    assert nodeclass.security_group_selector_terms == (
        SelectorTerm(id="sg-0a1b2c"),
        SelectorTerm(id="sg-3d4e5f"),
    )
    assert {(t.name, t.owner) for t in nodeclass.ami_selector_terms} == {
        ("eks-node-1.27-*", "123456789012"),
        ("eks-node-gpu-1.27-*", "123456789012"),
        ("eks-node-1.27-*", "amazon"),
        ("eks-node-gpu-1.27-*", "amazon"),
    }
    # The old hop-limit default (2) kept; the tokens setting carried over.
    assert (
        nodeclass.metadata_options.http_put_response_hop_limit,
        nodeclass.metadata_options.http_tokens,
    ) == (
        2,
        "required",
    )
    assert result.warnings == (
        "Provisioner/default: kubelet.containerRuntime: has no v1 equivalent "
        "(containerd is the only runtime); dropped",
        "AWSNodeTemplate/default: launchTemplate: unmanaged launch templates were removed in v1beta1; "
        "dropped",
    )


def test_inline_provider_becomes_a_generated_nodeclass() -> None:
    result = convert(docs("old", "provisioner-inline-provider.yaml"))
    assert [(d["kind"], d["metadata"]["name"]) for d in result.documents] == [
        ("NodePool", "inline"),
        ("EC2NodeClass", "inline"),
    ]
    specs = loaded(result.documents)
    pool, nodeclass = specs[("NodePool", "inline")], specs[("EC2NodeClass", "inline")]
    assert isinstance(pool, NodePoolSpec) and isinstance(nodeclass, EC2NodeClassSpec)
    assert pool.template.node_class_ref.name == "inline"
    # consolidation.enabled → WhenEmptyOrUnderutilized at once; no ttlSecondsUntilExpired → never expire.
    assert (pool.disruption.consolidation_policy, pool.disruption.consolidate_after) == (
        "WhenEmptyOrUnderutilized",
        "0s",
    )
    assert pool.template.expire_after == "Never"
    # No requirements at all: every v1alpha5 default written out.
    assert {(r.key, r.operator, r.values) for r in pool.template.requirements} == {
        ("kubernetes.io/os", "In", ("linux",)),
        ("kubernetes.io/arch", "In", ("amd64",)),
        ("karpenter.sh/capacity-type", "In", ("on-demand",)),
        ("karpenter.k8s.aws/instance-category", "In", ("c", "m", "r")),
        ("karpenter.k8s.aws/instance-generation", "Gt", ("2",)),
    }
    assert nodeclass.kubelet is not None and nodeclass.kubelet.max_pods == 110
    assert nodeclass.subnet_selector_terms == (
        SelectorTerm(id="subnet-0123abcd"),
        SelectorTerm(id="subnet-4567ef01"),
    )
    assert nodeclass.ami_selector_terms == (SelectorTerm(alias="bottlerocket@latest"),)
    assert nodeclass.tags == {"environment": "dev"}
    assert result.warnings == ()


def test_v1beta1_round_trip() -> None:
    result = convert(docs("old", "v1beta1.yaml"))
    specs = loaded(result.documents)
    pool, nodeclass = specs[("NodePool", "beta")], specs[("EC2NodeClass", "beta")]
    assert isinstance(pool, NodePoolSpec) and isinstance(nodeclass, EC2NodeClassSpec)
    assert pool.template.requirements == (
        RequirementSpec("karpenter.k8s.aws/instance-category", "In", ("c", "m"), 2),
        RequirementSpec("karpenter.sh/capacity-type", "In", ("spot",)),
    )
    assert pool.template.node_class_ref.group == "karpenter.k8s.aws"
    assert pool.template.expire_after == "168h"  # moved from disruption into the template
    assert pool.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert pool.disruption.budgets == (Budget("20%"),)
    assert pool.labels == {"tier": "batch"} and pool.limits == {"cpu": "200"}
    assert nodeclass.kubelet is not None
    assert (nodeclass.kubelet.max_pods, nodeclass.kubelet.image_gc_high_threshold_percent) == (30, 80)
    assert nodeclass.ami_selector_terms == (SelectorTerm(alias="al2023@latest"),)
    assert nodeclass.metadata_options.http_put_response_hop_limit == 1  # written: kept
    assert nodeclass.role == "KarpenterNodeRole-demo-cluster"
    assert result.warnings == ()


def test_v1_documents_and_other_kinds_pass_through_unchanged() -> None:
    v1 = docs("v1")
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}
    result = convert([*v1, other])
    assert list(result.documents) == [*v1, other] and result.warnings == ()


@pytest.mark.parametrize(
    ("old", "warning"),
    [
        (
            {
                "kind": "AWSNodeTemplate",
                "spec": {"instanceProfile": "p", "subnetSelector": {"aws::ids": "s-1", "N": "x"}},
            },
            "subnetSelector: ids are selected alone in v1",
        ),
        (
            {"kind": "AWSNodeTemplate", "spec": {"instanceProfile": "p", "amiFamily": "Ubuntu"}},
            "amiFamily: Ubuntu was removed in v1.0",
        ),
        ({"kind": "AWSNodeTemplate", "spec": {}}, "instanceProfile: unset: it came from the global"),
        (
            {"kind": "AWSNodeTemplate", "spec": {"instanceProfile": "p", "launchTemplate": "lt"}},
            "launchTemplate: unmanaged launch templates",
        ),
        (
            {"kind": "Provisioner", "spec": {"providerRef": {"name": "a"}, "extra": 1}},
            "spec.extra: has no v1 equivalent",
        ),
        ({"kind": "Provisioner", "spec": {}}, "spec.providerRef: missing"),
        (
            {
                "kind": "Provisioner",
                "spec": {"providerRef": {"name": "nc"}, "kubeletConfiguration": {"maxPods": 5}},
            },
            "kubelet: moves to EC2NodeClass nc in v1, which is not in the input",
        ),
        ({"kind": "Machine", "spec": {}}, "created by Karpenter, not by users; not converted"),
        (
            {"kind": "NodePool", "spec": {"template": {"spec": {"resources": {"requests": {"cpu": "1"}}}}}},
            "spec.template.spec.resources: has no v1 equivalent",
        ),
    ],
)
def test_one_warning_per_field_without_a_v1_equivalent(old: dict[str, Any], warning: str) -> None:
    api = {
        "AWSNodeTemplate": "karpenter.k8s.aws/v1alpha1",
        "Provisioner": "karpenter.sh/v1alpha5",
        "Machine": "karpenter.sh/v1alpha5",
        "NodePool": "karpenter.sh/v1beta1",
    }[old["kind"]]
    result = convert([{"apiVersion": api, "metadata": {"name": "n"}, **old}])
    assert len(result.warnings) == 1 and warning in result.warnings[0], result.warnings


def test_two_pools_with_different_kubelets_on_one_class_keep_the_first() -> None:
    pool = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner"}
    ref = {"providerRef": {"name": "c"}}
    nodeclass_c = {
        "apiVersion": "karpenter.k8s.aws/v1alpha1",
        "kind": "AWSNodeTemplate",
        "metadata": {"name": "c"},
    }
    result = convert(
        [
            {**pool, "metadata": {"name": "a"}, "spec": {**ref, "kubeletConfiguration": {"maxPods": 10}}},
            {**pool, "metadata": {"name": "b"}, "spec": {**ref, "kubeletConfiguration": {"maxPods": 20}}},
            {**nodeclass_c, "spec": {"instanceProfile": "p"}},
        ]
    )
    nodeclass = next(d for d in result.documents if d["kind"] == "EC2NodeClass")
    assert nodeclass["spec"]["kubelet"] == {"maxPods": 10}
    assert len(result.warnings) == 1 and "differs from NodePool a's" in result.warnings[0]


def test_a_kubectl_list_is_read_item_by_item_and_server_fields_dropped() -> None:
    """``kubectl get provisioners,awsnodetemplates -o yaml`` prints a ``v1`` ``List``."""
    items = docs("old", "provisioner-v1alpha5.yaml")
    items[0]["metadata"].update(uid="1234", resourceVersion="99", creationTimestamp="2023-01-01T00:00:00Z")
    items[0]["status"] = {"resources": {"cpu": "4"}}
    result = convert([{"apiVersion": "v1", "kind": "List", "items": items}])
    assert [(d["kind"], d["metadata"]) for d in result.documents] == [
        ("NodePool", {"name": "default"}),
        ("EC2NodeClass", {"name": "default"}),
    ]
    assert "status" not in result.documents[0]


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (30, "30s"), (90, "1m30s"), (3600, "1h"), (2592000, "720h")]
)
def test_durations(seconds: int, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.parametrize(
    "junk", [None, "text", 3, [], {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "spec": "x"}]
)
def test_malformed_input_never_raises(junk: Any) -> None:
    convert([junk])
