"""Karpenter's validation rules for NodePool and NodeClaim, as one status condition (the
EC2NodeClass's are ``validate_nodeclass``).

Each rule is one Karpenter enforces, either in the CRD (CEL and OpenAPI rules the API server checks
at ``kubectl apply``: kubernetes-sigs/karpenter ``pkg/apis/crds/karpenter.sh_nodepools.yaml``, with
the AWS provider's label additions) or at runtime (``pkg/apis/v1/nodepool_validation.go``
``RuntimeValidate`` and ``nodeclaim_validation.go``). They are all checked again here because an
object can reach kubespot without our CRDs having seen it (kubesim, files given to ``plan -f``, a
cluster running Karpenter's own CRDs). The result is the ``ValidationSucceeded`` condition Karpenter
would set; nothing here raises on a malformed object.
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


def quantity_errors(resources: Mapping[str, str], path: str) -> list[str]:
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
    errors += quantity_errors(spec.limits, "spec.limits")
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
    errors += quantity_errors(spec.requests, "spec.resources.requests")
    problems = [*parsed.problems, *(Problem(NODECLAIM_REASON, e) for e in errors)]
    return spec, validation_condition(problems)
