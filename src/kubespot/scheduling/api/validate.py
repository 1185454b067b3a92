"""Karpenter's validation rules for NodePool, NodeClaim and EC2NodeClass, as one status condition.

Each rule is one Karpenter enforces, either in the CRD (CEL and OpenAPI rules the API server checks
at ``kubectl apply``) or at runtime (kubernetes-sigs/karpenter ``pkg/apis/v1/nodepool_validation.go``
``RuntimeValidate`` and ``nodeclaim_validation.go``; aws/karpenter-provider-aws
``pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml`` and ``pkg/controllers/nodeclass/validation.go``).
They are all checked again here because an object can reach kubespot without our CRDs having seen
it (kubesim, files given to ``plan -f``, a cluster running Karpenter's own CRDs). The result is the
``ValidationSucceeded`` condition Karpenter would set; nothing here raises on a malformed object.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from kubespot.model.quantity import QuantityError, quantity

from ..labels import CAPACITY_TYPE, CAPACITY_TYPES, NODEPOOL, NORMALIZED_LABELS
from ..requirements import OPERATORS
from ..taints import EFFECTS, Taint
from .conditions import Condition, Problem, validation_condition
from .fields import Obj
from .nodeclaim import NODECLAIM_REASON, NodeClaimSpec, parse_nodeclaim
from .nodeclass import (
    ALIAS_FAMILIES,
    KUBELET_REASON,
    NODECLASS_REASON,
    TAG_REASON,
    EC2NodeClassSpec,
    SelectorTerm,
    parse_nodeclass,
)
from .nodepool import NODEPOOL_REASON, NodePoolSpec, parse_nodepool
from .restricted import label_value_errors, qualified_name_errors, restricted_reason
from .template import RequirementSpec, TemplateSpec

_DURATION = re.compile(r"([0-9]+(s|m|h))+")
_BUDGET_NODES = re.compile(r"((100|[0-9]{1,2})%|[0-9]+)")
_BUDGET_DURATION = re.compile(r"(([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?")
_CRON_MACRO = re.compile(r"@(annually|yearly|monthly|weekly|daily|midnight|hourly)")
_CRON_FIELDS = 5
#: ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
_NON_NEGATIVE = re.compile(r"[0-9]+")
CONSOLIDATION_POLICIES = ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced")
BUDGET_REASONS = ("Underutilized", "Empty", "Drifted")
_BOUNDED = ("Gt", "Lt", "Gte", "Lte")
MAX_REQUIREMENTS = 100
MAX_LABELS = 100
MAX_MIN_VALUES = 50
MAX_BUDGETS = 50
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


def _is_duration(text: str, *, never: bool) -> bool:
    return (never and text == "Never") or _DURATION.fullmatch(text) is not None


# --- the template (NodePool and NodeClaim) ---------------------------------------------------------


def requirement_errors(
    req: RequirementSpec, path: str, *, legacy_domains: bool = False, nodeclaim: bool = False
) -> list[str]:
    """Why one requirement is invalid (``ValidateRequirement`` and the CRD's requirement rules).

    A NodeClaim may require ``karpenter.sh/nodepool`` (Karpenter writes it there); a NodePool may not.
    """
    key = NORMALIZED_LABELS.get(req.key, req.key)
    errors: list[str] = []
    if req.operator not in OPERATORS:
        errors.append(
            f"{path}: key {key} has an unsupported operator {req.operator} not in {list(OPERATORS)}"
        )
    if key == NODEPOOL:
        if not nodeclaim:
            errors.append(f'{path}: invalid key "{key}" in requirements, restricted')
    else:
        why = restricted_reason(key, legacy_domains=legacy_domains)
        if why:
            errors.append(f"{path}: {why}")
    errors += [f"{path}: key {key} is not a qualified name, {e}" for e in qualified_name_errors(key)]
    for value in req.values:
        errors += [f"{path}: invalid value {value} for key {key}, {e}" for e in label_value_errors(value)]
    if req.operator == "In" and not req.values:
        errors.append(f"{path}: key {key} with operator In must have a value defined")
    if req.operator in _BOUNDED:
        ok = len(req.values) == 1 and _NON_NEGATIVE.fullmatch(req.values[0]) is not None
        if not ok:
            errors.append(
                f"{path}: key {key} with operator {req.operator} must have a single positive integer value"
            )
    if req.min_values is not None:
        if not 1 <= req.min_values <= MAX_MIN_VALUES:
            errors.append(f"{path}: minValues must be between 1 and {MAX_MIN_VALUES}, got {req.min_values}")
        elif req.operator == "In" and len(req.values) < req.min_values:
            errors.append(
                f"{path}: key {key} with operator In must have at least minimum number of values "
                f"defined in 'values' field ({len(req.values)} < minValues {req.min_values})"
            )
    if key == CAPACITY_TYPE and req.operator == "In" and req.values:
        known = [v for v in req.values if v in CAPACITY_TYPES]
        if not known:
            errors.append(
                f"{path}: no valid values found in {list(req.values)} for {key}, "
                f"expected one of: {sorted(CAPACITY_TYPES)}"
            )
        elif req.min_values is not None and len(known) < req.min_values:
            errors.append(f"{path}: not enough valid values found in {list(req.values)} for {key}")
    return errors


def taint_errors(taints: Iterable[tuple[str, Taint]]) -> list[str]:
    """Taint keys, values and effects, and no key+effect twice across taints and startupTaints."""
    errors: list[str] = []
    seen: set[tuple[str, str]] = set()
    for path, taint in taints:
        if not taint.key:
            errors.append(f"{path}: taint key may not be empty")
        else:
            errors += [
                f"{path}: invalid taint key {taint.key!r}, {e}" for e in qualified_name_errors(taint.key)
            ]
        if taint.value:
            errors += [
                f"{path}: invalid taint value {taint.value!r}, {e}"
                for e in qualified_name_errors(taint.value)
            ]
        if taint.effect not in EFFECTS:
            errors.append(f"{path}: invalid taint effect {taint.effect!r}, expected one of {list(EFFECTS)}")
        pair = (taint.key, taint.effect)
        if pair in seen:
            errors.append(f"{path}: duplicate taint Key/Effect pair {taint.key}={taint.effect}")
        seen.add(pair)
    return errors


def template_errors(
    spec: TemplateSpec, path: str, *, legacy_domains: bool = False, nodeclaim: bool = False
) -> list[str]:
    errors: list[str] = []
    if len(spec.requirements) > MAX_REQUIREMENTS:
        errors.append(
            f"{path}.requirements: at most {MAX_REQUIREMENTS} requirements, got {len(spec.requirements)}"
        )
    for i, req in enumerate(spec.requirements):
        errors += requirement_errors(
            req, f"{path}.requirements[{i}]", legacy_domains=legacy_domains, nodeclaim=nodeclaim
        )
    errors += taint_errors(
        [(f"{path}.taints[{i}]", t) for i, t in enumerate(spec.taints)]
        + [(f"{path}.startupTaints[{i}]", t) for i, t in enumerate(spec.startup_taints)]
    )
    ref = spec.node_class_ref
    for name, value in (("group", ref.group), ("kind", ref.kind), ("name", ref.name)):
        if not value:
            errors.append(f"{path}.nodeClassRef.{name} may not be empty")
    if not _is_duration(spec.expire_after, never=True):
        errors.append(f"{path}.expireAfter: {spec.expire_after!r} is not a duration (720h, 1h30m) or Never")
    tgp = spec.termination_grace_period
    if tgp is not None and not _is_duration(tgp, never=False):
        errors.append(f"{path}.terminationGracePeriod: {tgp!r} is not a duration (48h, 30m)")
    return errors


def _label_errors(labels: Mapping[str, str], path: str, *, legacy_domains: bool) -> list[str]:
    errors: list[str] = []
    if len(labels) > MAX_LABELS:
        errors.append(f"{path}: at most {MAX_LABELS} labels, got {len(labels)}")
    for key, value in labels.items():
        if key == NODEPOOL:
            errors.append(f'{path}: invalid key name "{key}" in labels, restricted')
        else:
            why = restricted_reason(key, legacy_domains=legacy_domains)
            if why:
                errors.append(f'{path}: invalid key name "{key}" in labels, {why}')
        errors += [f'{path}: invalid key name "{key}" in labels, {e}' for e in qualified_name_errors(key)]
        errors += [f"{path}: invalid value: {value} for label[{key}], {e}" for e in label_value_errors(value)]
    return errors


def _quantity_errors(resources: Mapping[str, str], path: str) -> list[str]:
    errors: list[str] = []
    for name, text in resources.items():
        try:
            quantity(text)
        except (QuantityError, ArithmeticError):  # decimal refuses exponents beyond its range
            errors.append(f"{path}.{name}: {text!r} is not a quantity")
    return errors


# --- NodePool ---------------------------------------------------------------------------------------


def _budget_errors(spec: NodePoolSpec) -> list[str]:
    errors: list[str] = []
    d = spec.disruption
    if d.consolidation_policy not in CONSOLIDATION_POLICIES:
        errors.append(
            f"spec.disruption.consolidationPolicy: {d.consolidation_policy!r} "
            f"is not one of {list(CONSOLIDATION_POLICIES)}"
        )
    if not _is_duration(d.consolidate_after, never=True):
        errors.append(f"spec.disruption.consolidateAfter: {d.consolidate_after!r} is not a duration or Never")
    if len(d.budgets) > MAX_BUDGETS:
        errors.append(f"spec.disruption.budgets: at most {MAX_BUDGETS} budgets, got {len(d.budgets)}")
    for i, b in enumerate(d.budgets):
        p = f"spec.disruption.budgets[{i}]"
        if not _BUDGET_NODES.fullmatch(b.nodes):
            errors.append(f"{p}.nodes: {b.nodes!r} is neither a percentage (0-100%) nor a number of nodes")
        if (b.schedule is None) != (b.duration is None):
            errors.append(f"{p}: 'schedule' must be set with 'duration'")
        if b.schedule is not None and not (
            _CRON_MACRO.fullmatch(b.schedule) or len(b.schedule.split()) == _CRON_FIELDS
        ):
            errors.append(
                f"{p}.schedule: {b.schedule!r} is not a 5-field cron expression or @daily-style macro"
            )
        if b.duration is not None and not _BUDGET_DURATION.fullmatch(b.duration):
            errors.append(f"{p}.duration: {b.duration!r} is not a duration in hours and minutes (10m, 1h30m)")
        for reason in b.reasons or ():
            if reason not in BUDGET_REASONS:
                errors.append(f"{p}.reasons: {reason!r} is not one of {list(BUDGET_REASONS)}")
    return errors


def nodepool_errors(spec: NodePoolSpec, *, legacy_domains: bool = False) -> list[str]:
    errors: list[str] = []
    if not spec.name:
        errors.append("metadata.name may not be empty")
    errors += _label_errors(spec.labels, "spec.template.metadata.labels", legacy_domains=legacy_domains)
    errors += template_errors(spec.template, "spec.template.spec", legacy_domains=legacy_domains)
    errors += _budget_errors(spec)
    errors += _quantity_errors(spec.limits, "spec.limits")
    if spec.weight is not None and not 1 <= spec.weight <= 100:
        errors.append(f"spec.weight: must be between 1 and 100, got {spec.weight}")
    if spec.replicas is not None:
        if spec.replicas < 0:
            errors.append(f"spec.replicas: must be at least 0, got {spec.replicas}")
        if set(spec.limits) - {"nodes"}:
            errors.append("spec.limits: only 'limits.nodes' is supported on static NodePools")
        if spec.weight is not None:
            errors.append("spec.weight: 'weight' is not supported on static NodePools")
    return errors


def validate_nodepool(obj: Obj, *, legacy_domains: bool = False) -> tuple[NodePoolSpec, Condition]:
    """The NodePool's spec and its ``ValidationSucceeded`` condition (reason
    ``NodePoolValidationFailed`` when False). ``legacy_domains``: the v1.0 to v1.8 label rule."""
    parsed = parse_nodepool(obj)
    problems = list(parsed.problems)
    problems += [
        Problem(NODEPOOL_REASON, e) for e in nodepool_errors(parsed.spec, legacy_domains=legacy_domains)
    ]
    return parsed.spec, validation_condition(problems)


# --- NodeClaim --------------------------------------------------------------------------------------


def validate_nodeclaim(obj: Obj) -> tuple[NodeClaimSpec, Condition]:
    parsed = parse_nodeclaim(obj)
    spec = parsed.spec
    errors = [] if spec.name else ["metadata.name may not be empty"]
    errors += template_errors(spec.template, "spec", nodeclaim=True)
    errors += _quantity_errors(spec.requests, "spec.resources.requests")
    problems = [*parsed.problems, *(Problem(NODECLAIM_REASON, e) for e in errors)]
    return spec, validation_condition(problems)


# --- EC2NodeClass -----------------------------------------------------------------------------------


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
) -> list[str]:
    """A selector's terms: 1 to 30, each sets one of ``allowed``, an ``exclusive`` field stands alone."""
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
        if not fields & set(allowed):
            errors.append(f"{p}: expected at least one, got none, {list(allowed)}")
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
    )
    # ``owner`` narrows a name or tags; alone it selects nothing.
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
        errors += _quantity_errors(
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
