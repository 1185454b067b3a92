"""Karpenter's validation rules, one table row each, as the ``ValidationSucceeded`` condition.

Sources (the row's comment names the rule):
- NodePool: kubernetes-sigs/karpenter ``pkg/apis/v1/nodepool_validation.go`` ``RuntimeValidate``
  (labels, taints, ``ValidateRequirement``, ``validateWellKnownValues``) and the CEL / OpenAPI rules of
  ``pkg/apis/crds/karpenter.sh_nodepools.yaml`` (budgets, nodeClassRef, weight, static pools);
  ``pkg/controllers/nodepool/validation/controller.go`` for the reason ``NodePoolValidationFailed``.
- Restricted label domains: ``pkg/apis/v1/labels.go`` ``IsRestrictedLabel``, before and after v1.9
  (core PR #2586); the AWS provider's ``pkg/apis/v1/labels.go``.
- EC2NodeClass: aws/karpenter-provider-aws ``pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml``
  (selector terms, alias, role xor instanceProfile, tags, kubelet) and
  ``pkg/controllers/nodeclass/validation.go`` (reasons ``TagValidationFailed``,
  ``InvalidKubeletConfiguration``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kubespot.scheduling.api.load import load
from kubespot.scheduling.api.restricted import restricted_reason
from kubespot.scheduling.api.validate import validate_nodeclaim, validate_nodepool
from kubespot.scheduling.api.validate_nodeclass import validate_nodeclass

Obj = dict[str, Any]


def nodepool() -> Obj:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {
            "template": {
                "spec": {
                    "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"},
                }
            }
        },
    }


def nodeclass() -> Obj:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "c"},
        "spec": {
            "role": "NodeRole",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        },
    }


def tspec(o: Obj) -> Obj:
    spec: Obj = o["spec"]["template"]["spec"]
    return spec


def req(key: str, op: str, *values: str, min_values: int | None = None) -> Callable[[Obj], None]:
    def change(o: Obj) -> None:
        r: Obj = {"key": key, "operator": op}
        if values:
            r["values"] = list(values)
        if min_values is not None:
            r["minValues"] = min_values
        tspec(o)["requirements"] = [r]

    return change


def label(key: str, value: str = "x") -> Callable[[Obj], None]:
    def change(o: Obj) -> None:
        o["spec"]["template"]["metadata"] = {"labels": {key: value}}

    return change


def setp(path: str, value: Any) -> Callable[[Obj], None]:
    """Set ``a.b.c`` (creating objects on the way)."""

    def change(o: Obj) -> None:
        *parents, last = path.split(".")
        node = o
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value

    return change


def unset(path: str) -> Callable[[Obj], None]:
    def change(o: Obj) -> None:
        *parents, last = path.split(".")
        node = o
        for p in parents:
            node = node[p]
        del node[last]

    return change


def taints(taint_list: list[Obj], startup: list[Obj] | None = None) -> Callable[[Obj], None]:
    def change(o: Obj) -> None:
        tspec(o)["taints"] = taint_list
        if startup is not None:
            tspec(o)["startupTaints"] = startup

    return change


T = "spec.template.spec"
NODEPOOL_RULES: list[tuple[str, Callable[[Obj], None], str]] = [
    # requirement operators (ValidateRequirement, SupportedNodeSelectorOps)
    ("unknown operator", req("kubernetes.io/arch", "Matches", "amd64"), "unsupported operator Matches"),
    ("In needs values", req("kubernetes.io/arch", "In"), "with operator In must have a value defined"),
    ("Gt needs one value", req("karpenter.k8s.aws/instance-cpu", "Gt", "2", "4"), "single positive integer"),
    ("Gt needs an integer", req("karpenter.k8s.aws/instance-cpu", "Gt", "two"), "single positive integer"),
    ("Lt non-negative", req("karpenter.k8s.aws/instance-cpu", "Lt", "-1"), "single positive integer"),
    ("Gte needs a value", req("karpenter.k8s.aws/instance-cpu", "Gte"), "single positive integer"),
    ("Lte decimal", req("karpenter.k8s.aws/instance-cpu", "Lte", "1.5"), "single positive integer"),
    ("Gt superscript digit", req("karpenter.k8s.aws/instance-cpu", "Gt", "²"), "single positive integer"),
    # minValues (CRD: 1..50, and In's values must be at least minValues)
    (
        "minValues above values",
        req("karpenter.k8s.aws/instance-family", "In", "m5", min_values=2),
        "minValues 2",
    ),
    (
        "minValues above 50",
        req("node.kubernetes.io/instance-type", "Exists", min_values=51),
        "between 1 and 50",
    ),
    ("minValues zero", req("node.kubernetes.io/instance-type", "Exists", min_values=0), "between 1 and 50"),
    # well-known values (validateWellKnownValues)
    (
        "capacity type unknown",
        req("karpenter.sh/capacity-type", "In", "preemptible"),
        "no valid values found",
    ),
    # restricted keys (IsRestrictedLabel, validateRequirementsNodePoolKeyDoesNotExist)
    ("requirement on nodepool", req("karpenter.sh/nodepool", "In", "p"), "karpenter.sh/nodepool"),
    ("requirement on hostname", req("kubernetes.io/hostname", "In", "n1"), "kubernetes.io/hostname"),
    (
        "karpenter.sh domain",
        req("karpenter.sh/custom", "Exists"),
        'label domain "karpenter.sh" is restricted',
    ),
    (
        "karpenter.sh subdomain",
        req("x.karpenter.sh/a", "Exists"),
        'label domain "karpenter.sh" is restricted',
    ),
    ("karpenter.k8s.aws domain", req("karpenter.k8s.aws/instance-pods", "Exists"), '"karpenter.k8s.aws"'),
    ("requirement key not qualified", req("bad key", "Exists"), "not a qualified name"),
    ("requirement value not a label value", req("team", "In", "a b"), "invalid value a b"),
    # template labels (validateLabels)
    ("label nodepool", label("karpenter.sh/nodepool"), 'invalid key name "karpenter.sh/nodepool"'),
    ("label hostname", label("kubernetes.io/hostname"), "kubernetes.io/hostname is restricted"),
    ("label karpenter.sh", label("karpenter.sh/team"), 'label domain "karpenter.sh"'),
    ("label value too long", label("team", "x" * 64), "no more than 63 characters"),
    ("label key bad prefix", label("Example.com/team"), "prefix part"),
    # taints (validateTaints)
    ("taint effect", taints([{"key": "a", "effect": "NoWhere"}]), "invalid taint effect 'NoWhere'"),
    ("taint effect missing", taints([{"key": "a"}]), "invalid taint effect ''"),
    ("taint key empty", taints([{"key": "", "effect": "NoSchedule"}]), "taint key may not be empty"),
    (
        "duplicate taint key+effect",
        taints(
            [
                {"key": "a", "value": "1", "effect": "NoSchedule"},
                {"key": "a", "value": "2", "effect": "NoSchedule"},
            ]
        ),
        "duplicate taint Key/Effect pair a=NoSchedule",
    ),
    (
        "duplicate across startupTaints",
        taints([{"key": "a", "effect": "NoExecute"}], [{"key": "a", "effect": "NoExecute"}]),
        "duplicate taint Key/Effect pair a=NoExecute",
    ),
    # nodeClassRef (CEL: group, kind, name may not be empty)
    ("nodeClassRef name", setp(f"{T}.nodeClassRef.name", ""), "nodeClassRef.name may not be empty"),
    ("nodeClassRef missing", unset(f"{T}.nodeClassRef"), "nodeClassRef.group may not be empty"),
    # durations (CRD patterns)
    ("expireAfter", setp(f"{T}.expireAfter", "30d"), "expireAfter: '30d'"),
    ("terminationGracePeriod Never", setp(f"{T}.terminationGracePeriod", "Never"), "terminationGracePeriod"),
    ("consolidateAfter", setp("spec.disruption.consolidateAfter", "soon"), "consolidateAfter: 'soon'"),
    (
        "consolidationPolicy",
        setp("spec.disruption.consolidationPolicy", "WhenUnderutilized"),
        "consolidationPolicy",
    ),
    # budgets (CRD: nodes pattern, schedule with duration, reasons enum)
    ("budget nodes percent", setp("spec.disruption.budgets", [{"nodes": "101%"}]), "neither a percentage"),
    ("budget nodes text", setp("spec.disruption.budgets", [{"nodes": "ten"}]), "neither a percentage"),
    (
        "schedule without duration",
        setp("spec.disruption.budgets", [{"nodes": "0", "schedule": "@daily"}]),
        "'schedule' must be set with 'duration'",
    ),
    (
        "duration without schedule",
        setp("spec.disruption.budgets", [{"nodes": "0", "duration": "1h"}]),
        "'schedule' must be set with 'duration'",
    ),
    (
        "schedule fields",
        setp("spec.disruption.budgets", [{"nodes": "0", "schedule": "* * *", "duration": "1h"}]),
        "5-field cron",
    ),
    (
        "duration seconds",
        setp("spec.disruption.budgets", [{"nodes": "0", "schedule": "@daily", "duration": "30s"}]),
        "hours and minutes",
    ),
    (
        "budget reason",
        setp("spec.disruption.budgets", [{"nodes": "1", "reasons": ["Expired"]}]),
        "'Expired' is not one of",
    ),
    # weight, limits, static pools
    ("limit exponent overflow", setp("spec.limits", {"cpu": "1e99999999999999999999"}), "is not a quantity"),
    ("weight 0", setp("spec.weight", 0), "between 1 and 100"),
    ("weight 101", setp("spec.weight", 101), "between 1 and 100"),
    (
        "limit not a quantity",
        setp("spec.limits", {"cpu": "lots"}),
        "spec.limits.cpu: 'lots' is not a quantity",
    ),
    (
        "static with cpu limit",
        lambda o: o["spec"].update(replicas=2, limits={"cpu": "4"}),
        "only 'limits.nodes'",
    ),
    (
        "static with weight",
        lambda o: o["spec"].update(replicas=2, weight=5),
        "'weight' is not supported on static",
    ),
    # malformed shapes: a condition, never an exception
    ("requirements not a list", setp(f"{T}.requirements", "arch=amd64"), "expected a list"),
    ("requirement item not an object", setp(f"{T}.requirements", ["arch"]), "expected an object"),
    (
        "values not strings",
        setp(f"{T}.requirements", [{"key": "a", "operator": "In", "values": [1]}]),
        "a list of strings",
    ),
    ("weight a string", setp("spec.weight", "10"), "spec.weight: expected an integer"),
    ("spec not an object", setp("spec", ["x"]), "spec: expected an object"),
    ("label value a number", label("team", 5), "expected a string"),  # type: ignore[arg-type]
    ("taints an object", setp(f"{T}.taints", {"key": "a"}), "taints: expected a list"),
]


@pytest.mark.parametrize(("rule", "change", "message"), NODEPOOL_RULES, ids=[r[0] for r in NODEPOOL_RULES])
def test_nodepool_rule(rule: str, change: Callable[[Obj], None], message: str) -> None:
    obj = nodepool()
    _, ok = validate_nodepool(obj)
    assert ok.is_true, ok  # the base object is valid: the row's change is what breaks it
    change(obj)
    _, cond = validate_nodepool(obj)
    assert (cond.type, cond.status, cond.reason) == (
        "ValidationSucceeded",
        "False",
        "NodePoolValidationFailed",
    )
    assert message in cond.message


@pytest.mark.parametrize(
    ("key", "v1_9", "before_v1_9"),
    [
        ("example.com/team", True, True),
        ("topology.kubernetes.io/zone", True, True),
        ("failure-domain.beta.kubernetes.io/zone", True, True),
        ("node.kubernetes.io/instance-type", True, True),
        ("node.kubernetes.io/lifecycle", True, True),  # node.kubernetes.io: an exception before v1.9
        ("node-restriction.kubernetes.io/team", True, True),
        ("kops.k8s.io/instancegroup", True, True),
        ("kubernetes.io/team", True, False),  # restricted until v1.9 (core PR #2586)
        ("custom.kubernetes.io/x", True, False),
        ("k8s.io/team", True, False),
        ("eks.k8s.io/x", True, False),
        ("kubernetes.io/hostname", False, False),
        ("karpenter.sh/capacity-type", True, True),
        ("karpenter.sh/nodepool", False, False),
        ("karpenter.sh/custom", False, False),
        ("karpenter.k8s.aws/instance-family", True, True),
        ("karpenter.k8s.aws/custom", False, False),
        ("topology.k8s.aws/zone-id", True, True),
    ],
)
def test_restricted_label_domains_before_and_after_v1_9(key: str, v1_9: bool, before_v1_9: bool) -> None:
    assert (restricted_reason(key) is None) is v1_9
    assert (restricted_reason(key, legacy_domains=True) is None) is before_v1_9
    obj = nodepool()
    label(key)(obj)
    _, cond = validate_nodepool(obj, legacy_domains=True)
    assert cond.is_true is before_v1_9


def test_problems_are_all_reported_in_one_message() -> None:
    obj = nodepool()
    req("kubernetes.io/arch", "In")(obj)
    setp("spec.weight", 0)(obj)
    _, cond = validate_nodepool(obj)
    assert "must have a value defined" in cond.message and "between 1 and 100" in cond.message
    assert "; " in cond.message


def test_nodeclaim_may_require_its_nodepool_but_keeps_the_other_rules() -> None:
    """The NodeClaim CRD allows ``karpenter.sh/nodepool`` in requirements (Karpenter writes it)."""
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "c1"},
        "spec": {
            "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["p"]}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"},
            "resources": {"requests": {"cpu": "1"}},
        },
    }
    assert validate_nodeclaim(claim)[1].is_true
    claim["spec"]["resources"]["requests"]["cpu"] = "one"
    _, cond = validate_nodeclaim(claim)
    assert cond.reason == "NodeClaimValidationFailed" and "'one' is not a quantity" in cond.message


S = "spec"
NODECLASS_RULES: list[tuple[str, Callable[[Obj], None], str, str]] = [
    # role xor instanceProfile (CEL on the spec)
    (
        "neither role nor profile",
        unset("spec.role"),
        "NodeClassValidationFailed",
        "exactly one of ['role', 'instanceProfile']",
    ),
    (
        "both role and profile",
        setp("spec.instanceProfile", "Profile"),
        "NodeClassValidationFailed",
        "exactly one of",
    ),
    ("empty role", setp("spec.role", ""), "NodeClassValidationFailed", "role cannot be empty"),
    # selector terms
    (
        "no subnet terms",
        setp("spec.subnetSelectorTerms", []),
        "NodeClassValidationFailed",
        "subnetSelectorTerms cannot be empty",
    ),
    (
        "subnet tags and id",
        setp("spec.subnetSelectorTerms", [{"tags": {"a": "b"}, "id": "subnet-1"}]),
        "NodeClassValidationFailed",
        "'id' is mutually exclusive",
    ),
    (
        "subnet empty term",
        setp("spec.subnetSelectorTerms", [{}]),
        "NodeClassValidationFailed",
        "expected at least one",
    ),
    (
        "subnet name unsupported",
        setp("spec.subnetSelectorTerms", [{"name": "x"}]),
        "NodeClassValidationFailed",
        "['name'] not supported",
    ),
    (
        "subnet id pattern",
        setp("spec.subnetSelectorTerms", [{"id": "sg-123"}]),
        "NodeClassValidationFailed",
        "subnet-",
    ),
    (
        "empty tag value",
        setp("spec.subnetSelectorTerms", [{"tags": {"a": ""}}]),
        "NodeClassValidationFailed",
        "empty tag keys or values",
    ),
    (
        "21 tags in a term",
        setp("spec.subnetSelectorTerms", [{"tags": {f"k{i}": "v" for i in range(21)}}]),
        "NodeClassValidationFailed",
        "at most 20 tags per term",
    ),
    (
        "31 subnet terms",
        setp("spec.subnetSelectorTerms", [{"id": f"subnet-{i}"} for i in range(31)]),
        "NodeClassValidationFailed",
        "at most 30 terms",
    ),
    (
        "sg name and tags",
        setp("spec.securityGroupSelectorTerms", [{"name": "x", "tags": {"a": "b"}}]),
        "NodeClassValidationFailed",
        "'name' is mutually exclusive",
    ),
    (
        "no sg terms",
        unset("spec.securityGroupSelectorTerms"),
        "NodeClassValidationFailed",
        "securityGroupSelectorTerms cannot be empty",
    ),
    # AMI terms: alias alone, family match, format
    (
        "no ami terms",
        unset("spec.amiSelectorTerms"),
        "NodeClassValidationFailed",
        "amiSelectorTerms cannot be empty",
    ),
    (
        "alias with another term",
        setp("spec.amiSelectorTerms", [{"alias": "al2023@latest"}, {"id": "ami-1"}]),
        "NodeClassValidationFailed",
        "'alias' is mutually exclusive",
    ),
    (
        "alias with tags",
        setp("spec.amiSelectorTerms", [{"alias": "al2023@latest", "tags": {"a": "b"}}]),
        "NodeClassValidationFailed",
        "'alias' is mutually exclusive",
    ),
    (
        "ami id with name",
        setp("spec.amiSelectorTerms", [{"id": "ami-1", "name": "x"}]),
        "NodeClassValidationFailed",
        "'id' is mutually exclusive",
    ),
    (
        "alias format",
        setp("spec.amiSelectorTerms", [{"alias": "al2023"}]),
        "NodeClassValidationFailed",
        "family@version",
    ),
    (
        "alias family",
        setp("spec.amiSelectorTerms", [{"alias": "ubuntu@latest"}]),
        "NodeClassValidationFailed",
        "'ubuntu' is not supported",
    ),
    (
        "windows pinned",
        setp("spec.amiSelectorTerms", [{"alias": "windows2022@v2024"}]),
        "NodeClassValidationFailed",
        "only specify version 'latest'",
    ),
    (
        "family mismatch",
        setp("spec.amiFamily", "Bottlerocket"),
        "NodeClassValidationFailed",
        "must be 'AL2023' or 'Custom'",
    ),
    (
        "no alias needs family",
        setp("spec.amiSelectorTerms", [{"id": "ami-0abc"}]),
        "NodeClassValidationFailed",
        "must specify amiFamily",
    ),
    (
        "unknown family",
        lambda o: o["spec"].update(amiFamily="Ubuntu", amiSelectorTerms=[{"id": "ami-1"}]),
        "NodeClassValidationFailed",
        "'Ubuntu' is not one of",
    ),
    # tags (CEL, reported by the controller as TagValidationFailed)
    (
        "cluster tag",
        setp("spec.tags", {"kubernetes.io/cluster/demo": "owned"}),
        "TagValidationFailed",
        "restricted tag",
    ),
    (
        "nodepool tag",
        setp("spec.tags", {"karpenter.sh/nodepool": "p"}),
        "TagValidationFailed",
        "restricted tag matching karpenter.sh/nodepool",
    ),
    (
        "eks tag",
        setp("spec.tags", {"eks:eks-cluster-name": "demo"}),
        "TagValidationFailed",
        "eks:eks-cluster-name",
    ),
    # kubelet (typed block's CEL; InvalidKubeletConfiguration)
    (
        "reserved key",
        setp("spec.kubelet", {"kubeReserved": {"gpu": "1"}}),
        "InvalidKubeletConfiguration",
        "'gpu' is not one of",
    ),
    (
        "reserved negative",
        setp("spec.kubelet", {"systemReserved": {"cpu": "-1"}}),
        "InvalidKubeletConfiguration",
        "may not be negative",
    ),
    (
        "eviction signal",
        setp("spec.kubelet", {"evictionHard": {"memory.free": "5%"}}),
        "InvalidKubeletConfiguration",
        "'memory.free'",
    ),
    (
        "soft without grace",
        setp("spec.kubelet", {"evictionSoft": {"memory.available": "1Gi"}}),
        "InvalidKubeletConfiguration",
        "matching evictionSoftGracePeriod",
    ),
    (
        "image gc order",
        setp("spec.kubelet", {"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}),
        "InvalidKubeletConfiguration",
        "must be greater than",
    ),
    # metadata options and block devices
    (
        "hop limit",
        setp("spec.metadataOptions", {"httpPutResponseHopLimit": 65}),
        "NodeClassValidationFailed",
        "between 1 and 64",
    ),
    (
        "http tokens",
        setp("spec.metadataOptions", {"httpTokens": "maybe"}),
        "NodeClassValidationFailed",
        "httpTokens",
    ),
    (
        "two root volumes",
        setp("spec.blockDeviceMappings", [{"rootVolume": True, "ebs": {"volumeSize": "20Gi"}}] * 2),
        "NodeClassValidationFailed",
        "only one blockDeviceMappings with rootVolume",
    ),
    (
        "ebs without size",
        setp("spec.blockDeviceMappings", [{"deviceName": "/dev/xvda", "ebs": {"volumeType": "gp3"}}]),
        "NodeClassValidationFailed",
        "snapshotID or volumeSize",
    ),
    (
        "instance store policy",
        setp("spec.instanceStorePolicy", "RAID1"),
        "NodeClassValidationFailed",
        "RAID0",
    ),
    # malformed shapes
    (
        "terms not a list",
        setp("spec.subnetSelectorTerms", {"tags": {"a": "b"}}),
        "NodeClassValidationFailed",
        "expected a list",
    ),
    (
        "kubelet maxPods text",
        setp("spec.kubelet", {"maxPods": "110"}),
        "NodeClassValidationFailed",
        "expected an integer",
    ),
]


@pytest.mark.parametrize(
    ("rule", "change", "reason", "message"), NODECLASS_RULES, ids=[r[0] for r in NODECLASS_RULES]
)
def test_nodeclass_rule(rule: str, change: Callable[[Obj], None], reason: str, message: str) -> None:
    obj = nodeclass()
    assert validate_nodeclass(obj)[1].is_true
    change(obj)
    _, cond = validate_nodeclass(obj)
    assert (cond.status, cond.reason) == ("False", reason), cond
    assert message in cond.message, cond.message


def test_an_ami_term_with_only_an_owner_is_rejected() -> None:
    """aws/karpenter-provider-aws pkg/apis/v1/ec2nodeclass.go AMISelectorTerms XValidation: each
    term needs one of tags, id, name, alias, ssmParameter; ``owner`` only narrows, so
    ``[{owner: amazon}]`` (every Amazon image) is invalid while ``{name, owner}`` is fine."""
    obj = nodeclass()
    setp("spec.amiFamily", "AL2023")(obj)  # no alias: the family must be named
    setp("spec.amiSelectorTerms", [{"owner": "amazon"}])(obj)
    _, cond = validate_nodeclass(obj)
    assert (cond.status, cond.reason) == ("False", "NodeClassValidationFailed"), cond
    assert "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']" in cond.message
    setp("spec.amiSelectorTerms", [{"name": "my-ami-*", "owner": "amazon"}])(obj)
    assert validate_nodeclass(obj)[1].is_true


@pytest.mark.parametrize(
    "obj",
    [
        None,
        "NodePool",
        42,
        [],
        {"kind": "NodePool"},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": "x"},
    ],
    ids=["none", "text", "number", "list", "no-api", "metadata-text"],
)
def test_malformed_objects_never_raise(obj: Any) -> None:
    loaded = load(copy.deepcopy(obj))
    assert loaded.condition.status == "False" and loaded.condition.reason


def test_old_api_versions_point_at_convert() -> None:
    loaded = load({"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "p"}})
    assert loaded.spec is None and loaded.condition.reason == "UnsupportedObject"
    assert "kubespot convert" in loaded.condition.message


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _replaced(obj: Any, path: tuple[Any, ...], junk: Any) -> Any:
    copied = copy.deepcopy(obj)
    node = copied
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = junk
    return copied


def test_any_field_of_any_type_gives_a_condition_never_an_exception() -> None:
    """Every field of a NodePool and an EC2NodeClass replaced by values of every JSON type: ``load``
    always answers with a condition (Karpenter's controllers never crash on what the API stored)."""
    objs = [nodepool(), nodeclass()]
    req("karpenter.k8s.aws/instance-family", "In", "m5", "c5", min_values=2)(objs[0])
    taints([{"key": "a", "value": "b", "effect": "NoSchedule"}], [{"key": "c", "effect": "NoExecute"}])(
        objs[0]
    )
    objs[0]["spec"]["disruption"] = {"budgets": [{"nodes": "1", "schedule": "@daily", "duration": "1h"}]}
    objs[1]["spec"]["kubelet"] = {
        "maxPods": 10,
        "kubeReserved": {"cpu": "1"},
        "evictionHard": {"memory.available": "1%"},
    }
    objs[1]["spec"]["blockDeviceMappings"] = [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi"}}]
    checked = 0
    for obj in objs:
        assert load(obj).valid
        for path in _paths(obj):
            for junk in (None, 7, -1, 1.5, True, "", "x", [], ["x"], {}, {"k": "v"}):
                result = load(_replaced(obj, path, junk))
                assert result.condition.type == "ValidationSucceeded" and result.condition.reason
                checked += 1
    assert checked > 500
