"""Every v1 manifest in tests/data/karpenter/v1 loads unchanged, with Karpenter's defaults applied.

Sources: kubernetes-sigs/karpenter ``pkg/apis/v1/nodepool.go`` and
``pkg/apis/crds/karpenter.sh_nodepools.yaml`` (defaults: ``expireAfter: 720h``,
``consolidationPolicy: WhenEmptyOrUnderutilized``, v1.1+ ``consolidateAfter: 0s`` (core PR #1662),
``budgets: [{nodes: 10%}]``); aws/karpenter-provider-aws ``pkg/apis/v1/ec2nodeclass.go``
(``metadataOptions`` defaults, the family an alias implies).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubespot.model.capacity import AMIFamily, KubeletConfig
from kubespot.scheduling.api.load import load
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec, MetadataOptions
from kubespot.scheduling.api.nodepool import Budget, NodePoolSpec
from kubespot.scheduling.labels import NODEPOOL
from kubespot.scheduling.nodepool import NodePool, usable_pools

DATA = Path(__file__).resolve().parents[2] / "data" / "karpenter"


def documents(folder: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((DATA / folder).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((f"{path.name}:{doc['metadata']['name']}", doc))
    return out


V1 = documents("v1")


def example(kind: str, name: str) -> dict[str, Any]:
    return next(doc for _, doc in V1 if doc["kind"] == kind and doc["metadata"]["name"] == name)


@pytest.mark.parametrize(("ident", "doc"), V1, ids=[i for i, _ in V1])
def test_every_v1_example_loads_unchanged(ident: str, doc: dict[str, Any]) -> None:
    loaded = load(doc)
    assert loaded.spec is not None and loaded.kind == doc["kind"]
    assert loaded.condition.to_dict() == {
        "type": "ValidationSucceeded",
        "status": "True",
        "reason": "ValidationSucceeded",
        "message": "",
    }, ident


def test_the_examples_cover_every_kind() -> None:
    assert {doc["kind"] for _, doc in V1} == {"NodePool", "NodeClaim", "EC2NodeClass"}


def test_nodepool_defaults_as_v1_1_and_later() -> None:
    """An unset disruption block is v1.1's default (core PR #1662), expireAfter the CRD's 720h."""
    spec = load(example("NodePool", "minimal")).spec
    assert isinstance(spec, NodePoolSpec)
    assert spec.template.expire_after == "720h"
    assert spec.template.termination_grace_period is None
    assert spec.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert spec.disruption.consolidate_after == "0s"
    assert spec.disruption.budgets == (Budget(nodes="10%"),)
    assert spec.weight is None and spec.replicas is None and not spec.is_static


def test_nodepool_fields_are_read_as_written() -> None:
    spec = load(example("NodePool", "every-field")).spec
    assert isinstance(spec, NodePoolSpec)
    assert spec.labels == {"team": "payments", "example.com/tier": "backend"}
    assert [str(t) for t in spec.template.taints] == ["example.com/dedicated=payments:NoSchedule"]
    assert [str(t) for t in spec.template.startup_taints] == ["example.com/agent-not-ready:NoSchedule"]
    assert spec.template.expire_after == "360h" and spec.template.termination_grace_period == "48h"
    assert spec.template.requirements[0].min_values == 2
    assert spec.disruption.budgets[3] == Budget("0", "0 9 * * mon-fri", "8h", ("Underutilized", "Drifted"))
    assert spec.limits == {"cpu": "1000", "memory": "1000Gi", "nvidia.com/gpu": "2", "nodes": "50"}
    assert spec.weight == 10


def test_scheduling_nodepool_is_built_from_the_parsed_spec() -> None:
    """scheduling.nodepool keeps its public names; labels become In requirements (Karpenter's
    ``NewNodeClaimTemplate``), Gte/Lte keep their inclusive bounds, limits are counted."""
    pool = NodePool.of(example("NodePool", "every-field"))
    assert pool.name == "every-field" and pool.weight == 10 and pool.node_class == "general"
    assert pool.requirements[NODEPOOL].has("every-field")
    assert pool.requirements["team"].has("payments")
    assert pool.requirements["karpenter.k8s.aws/instance-generation"].gte == 3
    assert pool.requirements["karpenter.k8s.aws/instance-cpu"].lte == 64
    assert pool.requirements["karpenter.k8s.aws/instance-memory"].lte == 262143
    assert pool.limits == {"cpu": 1_000_000, "memory": 1000 * 1024**3, "nvidia.com/gpu": 2, "nodes": 50}


def test_nodeclass_defaults_and_alias_family() -> None:
    spec = load(example("EC2NodeClass", "general")).spec
    assert isinstance(spec, EC2NodeClassSpec)
    assert spec.metadata_options == MetadataOptions("enabled", "disabled", 1, "required")
    assert spec.ami_family is None and spec.family is AMIFamily.AL2023
    bottlerocket = load(example("EC2NodeClass", "bottlerocket")).spec
    assert isinstance(bottlerocket, EC2NodeClassSpec) and bottlerocket.family is AMIFamily.BOTTLEROCKET
    custom = load(example("EC2NodeClass", "custom-with-alias")).spec
    assert isinstance(custom, EC2NodeClassSpec) and custom.family is AMIFamily.CUSTOM


def test_nodeclass_kubelet_block_feeds_the_capacity_model() -> None:
    spec = load(example("EC2NodeClass", "every-field")).spec
    assert isinstance(spec, EC2NodeClassSpec) and spec.kubelet is not None
    assert spec.kubelet.capacity() == KubeletConfig(
        max_pods=110,
        pods_per_core=4,
        kube_reserved={"cpu": "200m", "memory": "100Mi", "ephemeral-storage": "3Gi", "pid": "1000"},
        system_reserved={"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"},
        eviction_hard={"memory.available": "5%", "nodefs.available": "10%", "nodefs.inodesFree": "10%"},
    )
    assert spec.kubelet.cluster_dns == ("10.0.1.100",) and spec.kubelet.cpu_cfs_quota is True
    assert spec.metadata_options.http_put_response_hop_limit == 2


def test_only_valid_pools_reach_scheduling_and_the_others_say_why() -> None:
    """Karpenter's provisioner schedules with Ready NodePools only (core
    ``pkg/controllers/provisioning/provisioner.go`` ``NewScheduler``); Ready needs ValidationSucceeded."""
    good = example("NodePool", "general")
    bad = {**example("NodePool", "minimal"), "metadata": {"name": "bad"}}
    bad["spec"] = {**bad["spec"], "weight": 0}
    pools, conditions = usable_pools([good, bad])
    assert [p.name for p in pools] == ["general"]
    assert conditions["general"].is_true
    assert (
        conditions["bad"].reason == "NodePoolValidationFailed" and "spec.weight" in conditions["bad"].message
    )


def test_nodeclass_fields_added_after_v1_0_are_kept_as_written() -> None:
    """aws/karpenter-provider-aws v1.14.1 ``pkg/apis/v1/ec2nodeclass.go``: capacity reservations,
    placement groups, network interfaces and the rest load (kubespot does not use them yet)."""
    doc = example("EC2NodeClass", "late-fields")
    spec = load(doc).spec
    assert isinstance(spec, EC2NodeClassSpec)
    assert set(spec.extra) == {
        "capacityReservationSelectorTerms",
        "placementGroupSelector",
        "networkInterfaces",
        "connectionTracking",
        "ipPrefixCount",
        "cpuOptions",
    }
    assert spec.extra["ipPrefixCount"] == 1
