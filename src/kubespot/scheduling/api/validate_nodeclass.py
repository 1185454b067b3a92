"""Karpenter's validation rules for an EC2NodeClass, as its ``ValidationSucceeded`` condition.

The rules of aws/karpenter-provider-aws ``pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml`` (CEL
and OpenAPI: selector terms, aliases, role xor instanceProfile, metadata options, block devices,
restricted tags, the typed kubelet block) and the reasons of ``pkg/controllers/nodeclass/validation.go``
(``TagValidationFailed``, ``InvalidKubeletConfiguration``); ``NodeClassValidationFailed`` is
kubespot's reason for the rules the API server enforces (Karpenter never sees such an object).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .conditions import Condition, Problem, validation_condition
from .fields import Obj
from .nodeclass import (
    ALIAS_FAMILIES,
    KUBELET_REASON,
    NODECLASS_REASON,
    TAG_REASON,
    EC2NodeClassSpec,
    SelectorTerm,
    parse_nodeclass,
)
from .validate import quantity_errors

MAX_TERMS = 30
MAX_TERM_TAGS = 20
MAX_BLOCK_DEVICES = 50
AMI_FAMILIES = ("AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025")
RESERVED_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pid")
EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)
_RESTRICTED_TAGS = (
    "eks:eks-cluster-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
)


def _tag_map_errors(tags: Mapping[str, str] | None, path: str) -> list[str]:
    if tags is None:
        return []
    if not tags or any(not k or not v for k, v in tags.items()):
        return [f"{path}: empty tag keys or values aren't supported"]
    if len(tags) > MAX_TERM_TAGS:
        return [f"{path}: at most {MAX_TERM_TAGS} tags per term, got {len(tags)}"]
    return []


def _term_errors(
    terms: tuple[SelectorTerm, ...],
    key: str,
    allowed: tuple[str, ...],
    exclusive: tuple[str, ...],
    id_prefix: str,
    required: tuple[str, ...] | None = None,
) -> list[str]:
    """A selector's terms: 1 to 30, each sets one of ``required`` (default: any of ``allowed``),
    an ``exclusive`` field stands alone."""
    required = allowed if required is None else required
    path = f"spec.{key}"
    if not terms:
        return [f"{path}: {key} cannot be empty"]
    errors: list[str] = []
    if len(terms) > MAX_TERMS:
        errors.append(f"{path}: at most {MAX_TERMS} terms, got {len(terms)}")
    for i, term in enumerate(terms):
        p = f"{path}[{i}]"
        fields = term.fields()
        unknown = fields - set(allowed)
        if unknown:
            errors.append(f"{p}: {sorted(unknown)} not supported in {key}")
        if not fields & set(required):
            errors.append(f"{p}: expected at least one, got none, {list(required)}")
        for only in exclusive:
            if only in fields and len(fields) > 1:
                errors.append(
                    f"{p}: '{only}' is mutually exclusive, cannot be set with a combination of other fields"
                )
        errors += _tag_map_errors(term.tags, f"{p}.tags")
        if term.id is not None and not re.fullmatch(id_prefix + r"-[0-9a-z]+", term.id):
            errors.append(f"{p}.id: {term.id!r} is not an id of the form {id_prefix}-…")
    return errors


def _ami_errors(spec: EC2NodeClassSpec) -> list[str]:
    terms = spec.ami_selector_terms
    errors = _term_errors(
        terms,
        "amiSelectorTerms",
        ("alias", "tags", "id", "name", "owner", "ssmParameter"),
        ("id", "alias"),
        "ami",
        # The CRD's rule leaves ``owner`` out: it narrows a name or tags; alone it would select
        # every image of that owner.
        required=("tags", "id", "name", "alias", "ssmParameter"),
    )
    aliases = [t.alias for t in terms if t.alias is not None]
    if aliases and len(terms) != 1:
        errors.append(
            "spec.amiSelectorTerms: 'alias' is mutually exclusive, "
            "cannot be set with a combination of other amiSelectorTerms"
        )
    for alias in aliases:
        family, at, version = alias.partition("@")
        if len(alias) > 30 or not at or not family.isalnum() or not version:
            errors.append(
                f"spec.amiSelectorTerms: alias {alias!r} is improperly formatted, "
                "must match the format 'family@version'"
            )
            continue
        if family not in ALIAS_FAMILIES:
            errors.append(
                f"spec.amiSelectorTerms: alias family {family!r} is not supported, "
                f"must be one of {list(ALIAS_FAMILIES)}"
            )
            continue
        if family.startswith("windows") and version != "latest":
            errors.append("spec.amiSelectorTerms: windows families may only specify version 'latest'")
        declared = spec.ami_family
        if declared is not None and declared not in ("Custom", ALIAS_FAMILIES[family].value):
            errors.append(
                f"spec.amiFamily: if set, amiFamily must be '{ALIAS_FAMILIES[family].value}' or 'Custom' "
                f"when using an {ALIAS_FAMILIES[family].value} alias, got {declared!r}"
            )
    if spec.ami_family is not None and spec.ami_family not in AMI_FAMILIES:
        errors.append(f"spec.amiFamily: {spec.ami_family!r} is not one of {list(AMI_FAMILIES)}")
    if not aliases and spec.ami_family is None:
        errors.append("spec.amiFamily: must specify amiFamily if amiSelectorTerms does not contain an alias")
    return errors


def _kubelet_errors(spec: EC2NodeClassSpec) -> list[str]:
    k = spec.kubelet
    if k is None:
        return []
    p = "spec.kubelet"
    errors: list[str] = []
    for name, reserved in (("systemReserved", k.system_reserved), ("kubeReserved", k.kube_reserved)):
        for key, value in reserved.items():
            if key not in RESERVED_RESOURCES:
                errors.append(f"{p}.{name}: {key!r} is not one of {list(RESERVED_RESOURCES)}")
            if value.startswith("-"):
                errors.append(f"{p}.{name}.{key}: may not be negative")
        errors += quantity_errors(
            {k2: v for k2, v in reserved.items() if not v.startswith("-")}, f"{p}.{name}"
        )
    for name, signals in (
        ("evictionHard", k.eviction_hard),
        ("evictionSoft", k.eviction_soft),
        ("evictionSoftGracePeriod", k.eviction_soft_grace_period),
    ):
        errors += [
            f"{p}.{name}: {s!r} is not one of {list(EVICTION_SIGNALS)}"
            for s in signals
            if s not in EVICTION_SIGNALS
        ]
    for signal in k.eviction_soft:
        if signal not in k.eviction_soft_grace_period:
            errors.append(f"{p}.evictionSoft: {signal} does not have a matching evictionSoftGracePeriod")
    for signal in k.eviction_soft_grace_period:
        if signal not in k.eviction_soft:
            errors.append(f"{p}.evictionSoftGracePeriod: {signal} does not have a matching evictionSoft")
    high, low = k.image_gc_high_threshold_percent, k.image_gc_low_threshold_percent
    for name, pct in (("imageGCHighThresholdPercent", high), ("imageGCLowThresholdPercent", low)):
        if pct is not None and not 0 <= pct <= 100:
            errors.append(f"{p}.{name}: must be between 0 and 100, got {pct}")
    if high is not None and low is not None and high <= low:
        errors.append(f"{p}: imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent")
    for name, n in (
        ("maxPods", k.max_pods),
        ("podsPerCore", k.pods_per_core),
        ("evictionMaxPodGracePeriod", k.eviction_max_pod_grace_period),
    ):
        if n is not None and n < 0:
            errors.append(f"{p}.{name}: may not be negative, got {n}")
    return errors


def _tags_errors(spec: EC2NodeClassSpec) -> list[str]:
    errors: list[str] = []
    for key in spec.tags:
        if not key:
            errors.append("spec.tags: empty tag keys aren't supported")
        elif key in _RESTRICTED_TAGS or key.startswith("kubernetes.io/cluster"):
            errors.append(f"spec.tags: tag contains a restricted tag matching {key}")
    return errors


def _shape_errors(spec: EC2NodeClassSpec) -> list[str]:
    errors: list[str] = []
    if not spec.name:
        errors.append("metadata.name may not be empty")
    errors += _term_errors(
        spec.subnet_selector_terms, "subnetSelectorTerms", ("tags", "id"), ("id",), "subnet"
    )
    errors += _term_errors(
        spec.security_group_selector_terms,
        "securityGroupSelectorTerms",
        ("tags", "id", "name"),
        ("id", "name"),
        "sg",
    )
    errors += _ami_errors(spec)
    if (spec.role is None) == (spec.instance_profile is None):
        errors.append("spec: must specify exactly one of ['role', 'instanceProfile']")
    for name, value in (("role", spec.role), ("instanceProfile", spec.instance_profile)):
        if value == "":
            errors.append(f"spec.{name}: {name} cannot be empty")
    md = spec.metadata_options
    for name, value, allowed in (
        ("httpEndpoint", md.http_endpoint, ("enabled", "disabled")),
        ("httpProtocolIPv6", md.http_protocol_ipv6, ("enabled", "disabled")),
        ("httpTokens", md.http_tokens, ("required", "optional")),
    ):
        if value not in allowed:
            errors.append(f"spec.metadataOptions.{name}: {value!r} is not one of {list(allowed)}")
    if not 1 <= md.http_put_response_hop_limit <= 64:
        errors.append("spec.metadataOptions.httpPutResponseHopLimit: must be between 1 and 64")
    devices = spec.block_device_mappings
    if len(devices) > MAX_BLOCK_DEVICES:
        errors.append(f"spec.blockDeviceMappings: at most {MAX_BLOCK_DEVICES}, got {len(devices)}")
    if sum(d.root_volume for d in devices) > 1:
        errors.append("spec.blockDeviceMappings: must have only one blockDeviceMappings with rootVolume")
    for i, d in enumerate(devices):
        if d.ebs and "snapshotID" not in d.ebs and "volumeSize" not in d.ebs:
            errors.append(f"spec.blockDeviceMappings[{i}].ebs: snapshotID or volumeSize must be defined")
    if spec.instance_store_policy is not None and spec.instance_store_policy != "RAID0":
        errors.append(f"spec.instanceStorePolicy: {spec.instance_store_policy!r} is not one of ['RAID0']")
    return errors


def nodeclass_problems(spec: EC2NodeClassSpec) -> list[Problem]:
    return [
        *(Problem(NODECLASS_REASON, e) for e in _shape_errors(spec)),
        *(Problem(TAG_REASON, e) for e in _tags_errors(spec)),
        *(Problem(KUBELET_REASON, e) for e in _kubelet_errors(spec)),
    ]


def validate_nodeclass(obj: Obj) -> tuple[EC2NodeClassSpec, Condition]:
    """The EC2NodeClass's spec and its ``ValidationSucceeded`` condition: reason
    ``NodeClassValidationFailed`` for the rules the CRD enforces, ``TagValidationFailed`` and
    ``InvalidKubeletConfiguration`` for those Karpenter's controller reports under those names."""
    parsed = parse_nodeclass(obj)
    return parsed.spec, validation_condition([*parsed.problems, *nodeclass_problems(parsed.spec)])
