"""What the API server refuses to store: upstream's Validate / ValidateUpdate rules, per resource.

Each rule returns the ``FieldError`` list upstream's function returns; ``validate_create`` and
``validate_update`` run the rules of the object's resource and raise the 422 ``Status``. Sources:
- object metadata: k8s.io/apimachinery pkg/api/validation/objectmeta.go ValidateObjectMeta
  (labels: meta/v1/validation ValidateLabels; annotations: ValidateAnnotations, 256 KiB in all),
  with the name and value rules of ``names``;
- nodes: pkg/apis/core/validation/validation.go ValidateNode, validateNodeTaints;
- pods: ValidatePodCreate (validateContainers, validateTolerations) and ValidatePodUpdate;
- workload templates: ValidatePodTemplateSpec (containers of the template);
- PodDisruptionBudgets: pkg/apis/policy/validation ValidatePodDisruptionBudgetSpec.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .fielderrors import (
    FieldError,
    GoValue,
    forbidden,
    invalid,
    invalid_status,
    not_supported,
    required,
)
from .names import dns1123_label_errors, label_value_errors, qualified_name_errors
from .resources import ResourceType
from .selectors import EVERYTHING, SelectorError, label_selector_from_dict

Obj = dict[str, Any]
Errors = list[FieldError]

#: ValidateAnnotations' TotalAnnotationSizeLimitB.
_ANNOTATIONS_LIMIT = 256 * 1024

# -- object metadata --------------------------------------------------------------------------


def validate_labels(labels: Any, path: str) -> Errors:
    errs: Errors = []
    for key, value in (labels or {}).items():
        bad_key, bad_value = qualified_name_errors(key), label_value_errors(value)
        if bad_key or bad_value:
            errs.extend(invalid(path, key, m) for m in bad_key)
            errs.extend(invalid(path, value, m) for m in bad_value)
    return errs


def validate_annotations(annotations: Any, path: str) -> Errors:
    errs: Errors = []
    size = 0
    for key, value in (annotations or {}).items():
        # Keys are qualified names in any case (upstream lowercases before checking).
        bad_key = qualified_name_errors(key.lower())
        if bad_key:
            errs.extend(invalid(path, key, m) for m in bad_key)
        size += len(key) + len(value)
    # A character is at most 4 bytes in UTF-8: only a big map needs its bytes counted.
    if size * 4 > _ANNOTATIONS_LIMIT and _bytes(annotations) > _ANNOTATIONS_LIMIT:
        errs.append(FieldError("too_long", path, "", f"may not be more than {_ANNOTATIONS_LIMIT} bytes"))
    return errs


def _bytes(annotations: dict[str, str]) -> int:
    """The annotations' size in bytes, as Go counts a string (UTF-8)."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())


def validate_meta(meta: Obj, path: str = "metadata") -> Errors:
    labels, annotations = meta.get("labels"), meta.get("annotations")
    errs = validate_labels(labels, f"{path}.labels") if labels else []
    if annotations:
        errs.extend(validate_annotations(annotations, f"{path}.annotations"))
    return errs


# -- nodes ------------------------------------------------------------------------------------

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _effect(effect: Any, path: str, *, allow_empty: bool) -> Errors:
    if not effect:
        return [] if allow_empty else [required(path)]
    if effect not in TAINT_EFFECTS:
        return [not_supported(path, effect, TAINT_EFFECTS)]
    return []


def _taint_text(t: Obj) -> GoValue:
    # Go's %#v of the internal core.Taint, which has no String method.
    return GoValue(
        f'core.Taint{{Key:"{t.get("key", "")}", Value:"{t.get("value", "")}", '
        f'Effect:"{t.get("effect", "")}", TimeAdded:<nil>}}'
    )


_UNIQUE_TAINTS = "taints must be unique by key and effect pair"


def validate_taints(taints: list[Obj], path: str) -> Errors:
    """validateNodeTaints: key a qualified name, value a label value, a known effect, and unique by
    key and effect."""
    errs: Errors = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        at = f"{path}[{i}]"
        key = str(taint.get("key") or "")
        errs.extend(invalid(f"{at}.key", key, m) for m in qualified_name_errors(key))
        value = str(taint.get("value") or "")
        if msgs := label_value_errors(value):
            errs.append(invalid(f"{at}.value", value, ";".join(msgs)))
        errs.extend(_effect(taint.get("effect"), f"{at}.effect", allow_empty=False))
        pair = (key, str(taint.get("effect") or ""))
        if pair in seen:
            errs.append(
                FieldError(
                    "duplicate", at, _taint_text(taint), "taints must be unique by key and effect pair"
                )
            )
            continue
        seen.add(pair)
    return errs


def validate_node(obj: Obj) -> Errors:
    return validate_taints((obj.get("spec") or {}).get("taints") or [], "spec.taints")


# -- pods -------------------------------------------------------------------------------------

_OPERATORS = ("Equal", "Exists")
_EMPTY_KEY = 'operator must be Exists when `key` is empty, which means "match all values and all keys"'
_SECONDS_EFFECT = "effect must be 'NoExecute' when `tolerationSeconds` is set"
_EXISTS_VALUE = "value must be empty when `operator` is 'Exists'"


def validate_containers(containers: list[Obj], path: str) -> Errors:
    if not containers:
        return [required(path)]
    errs: Errors = []
    names: set[str] = set()
    for i, c in enumerate(containers):
        at = f"{path}[{i}]"
        name = str(c.get("name") or "")
        if not name:
            errs.append(required(f"{at}.name"))
        else:
            errs.extend(invalid(f"{at}.name", name, m) for m in dns1123_label_errors(name))
            if name in names:
                errs.append(FieldError("duplicate", f"{at}.name", name))
            names.add(name)
        if not c.get("image"):
            errs.append(required(f"{at}.image"))
    return errs


def validate_tolerations(tolerations: list[Obj], path: str) -> Errors:
    """validateTolerations: key, operator, effect, and tolerationSeconds only with NoExecute."""
    errs: Errors = []
    for i, t in enumerate(tolerations):
        at = f"{path}[{i}]"
        key, op = str(t.get("key") or ""), t.get("operator") or "Equal"
        if key:
            errs.extend(invalid(f"{at}.key", key, m) for m in qualified_name_errors(key))
        if not key and op != "Exists":
            errs.append(invalid(f"{at}.operator", op, _EMPTY_KEY))
        if t.get("tolerationSeconds") is not None and t.get("effect") != "NoExecute":
            errs.append(invalid(f"{at}.effect", t.get("effect") or "", _SECONDS_EFFECT))
        if op == "Exists" and t.get("value"):
            errs.append(invalid(f"{at}.operator", t.get("value"), _EXISTS_VALUE))
        elif op not in _OPERATORS:
            errs.append(not_supported(f"{at}.operator", op, _OPERATORS))
        errs.extend(_effect(t.get("effect"), f"{at}.effect", allow_empty=True))
    return errs


def validate_pod_spec(spec: Obj, path: str) -> Errors:
    errs = validate_containers(spec.get("containers") or [], f"{path}.containers")
    if spec.get("initContainers"):
        errs.extend(validate_containers(spec["initContainers"], f"{path}.initContainers"))
    if spec.get("tolerations"):
        errs.extend(validate_tolerations(spec["tolerations"], f"{path}.tolerations"))
    return errs


def validate_pod(obj: Obj) -> Errors:
    return validate_pod_spec(obj.get("spec") or {}, "spec")


def validate_template(obj: Obj) -> Errors:
    template = (obj.get("spec") or {}).get("template") or {}
    errs = validate_meta(template.get("metadata") or {}, "spec.template.metadata")
    return errs + validate_pod_spec(template.get("spec") or {}, "spec.template.spec")


def _go_map(labels: dict[str, str]) -> GoValue:
    """Go's ``%#v`` of a ``map[string]string`` (keys sorted, as fmt prints maps)."""
    inner = ", ".join(f'"{k}":"{labels[k]}"' for k in sorted(labels))
    return GoValue(f"map[string]string{{{inner}}}")


def _go_selector(selector: Any) -> GoValue:
    sel = selector if isinstance(selector, dict) else {}
    labels = sel.get("matchLabels") or {}
    shown = _go_map(labels) if labels else "map[string]string(nil)"
    return GoValue(
        f"v1.LabelSelector{{MatchLabels:{shown}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}}"
    )


def _workload_rule(what: str, *, replicas: bool = True, selector_required: bool = True) -> Rule:
    """ValidateDeploymentSpec / ValidateReplicaSetSpec / ValidateStatefulSetSpec /
    ValidateDaemonSetSpec (pkg/apis/apps/validation): replicas not negative, a non-empty selector
    that matches the template's labels (ValidatePodTemplateSpecForReplicaSet), restartPolicy Always,
    and the template itself."""

    def rule(obj: Obj) -> Errors:
        spec = obj.get("spec") or {}
        errs: Errors = []
        count = spec.get("replicas")
        if replicas and isinstance(count, int) and count < 0:
            errs.append(invalid("spec.replicas", count, "must be greater than or equal to 0"))
        selector = spec.get("selector")
        template = spec.get("template") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        if selector is None:
            if selector_required:
                errs.append(required("spec.selector"))
        elif not (selector.get("matchLabels") or selector.get("matchExpressions")):
            errs.append(
                invalid("spec.selector", _go_selector(selector), f"empty selector is invalid for {what}")
            )
        try:
            # A nil selector selects nothing (LabelSelectorAsSelector), so it matches no template.
            chosen = label_selector_from_dict(selector)
        except SelectorError:
            errs.append(invalid("spec.selector", _go_selector(selector), "invalid label selector"))
        else:
            if chosen is not EVERYTHING and not chosen.matches(labels):
                errs.append(
                    invalid(
                        "spec.template.metadata.labels",
                        _go_map(labels),
                        "`selector` does not match template `labels`",
                    )
                )
        policy = (template.get("spec") or {}).get("restartPolicy", "Always")
        if policy != "Always":
            errs.append(not_supported("spec.template.spec.restartPolicy", policy, ("Always",)))
        return errs + validate_template(obj)

    return rule


#: ValidatePodUpdate's message: the spec fields an update may change (features of 1.32 by default).
POD_UPDATABLE = (
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
)


def _tolerations_only_added(new: list[Obj], old: list[Obj]) -> bool:
    """validateOnlyAddedTolerations: every old toleration is still there (a NoExecute one may only
    shorten its tolerationSeconds)."""
    if new[: len(old)] == old:
        return True  # the usual case, checked without the pairwise search
    for o in old:
        same = [
            n
            for n in new
            if {k: v for k, v in n.items() if k != "tolerationSeconds"}
            == {k: v for k, v in o.items() if k != "tolerationSeconds"}
        ]
        if not same:
            return False
        if o.get("tolerationSeconds") is not None and not any(
            n.get("tolerationSeconds") is not None and n["tolerationSeconds"] <= o["tolerationSeconds"]
            for n in same
        ):
            return False
    return True


def _with_image(new: Obj, old: Obj) -> Obj:
    out = dict(new)
    if "image" in old:
        out["image"] = old["image"]
    else:
        out.pop("image", None)
    return out


def _munged_spec(new: Obj, old: Obj) -> Obj:
    """The new spec with every change an update may make put back to the old value."""
    munged = dict(new)
    for part in ("containers", "initContainers"):
        new_c, old_c = new.get(part) or [], old.get(part) or []
        if new_c and len(new_c) == len(old_c):
            munged[part] = [_with_image(n, o) for n, o in zip(new_c, old_c, strict=True)]
    deadline, old_deadline = new.get("activeDeadlineSeconds"), old.get("activeDeadlineSeconds")
    if deadline is not None and deadline > 0 and (old_deadline is None or deadline <= old_deadline):
        munged["activeDeadlineSeconds"] = old_deadline
        if old_deadline is None:
            munged.pop("activeDeadlineSeconds")
    old_grace = old.get("terminationGracePeriodSeconds")
    if old_grace is not None and old_grace < 0 and new.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    if _tolerations_only_added(new.get("tolerations") or [], old.get("tolerations") or []):
        if "tolerations" in old:
            munged["tolerations"] = old["tolerations"]
        else:
            munged.pop("tolerations", None)
    # Scheduling gates may be removed, never added (ValidatePodUpdate, validateSchedulingGates: the
    # gates are put back to the old ones once only deletions are found; an addition is its own error).
    gates, old_gates = _gate_names(new), _gate_names(old)
    if gates <= old_gates:
        if "schedulingGates" in old:
            munged["schedulingGates"] = old["schedulingGates"]
        else:
            munged.pop("schedulingGates", None)
    return munged


def _gate_names(spec: Obj) -> set[str]:
    return {str(g.get("name")) for g in spec.get("schedulingGates") or () if isinstance(g, dict)}


def _spec_diff(new: Obj, old: Obj) -> str:
    """Which spec fields differ, a line each, in the spirit of upstream's cmp.Diff (not its format)."""
    lines = ["  core.PodSpec{"]
    for key in sorted(set(new) | set(old)):
        if new.get(key) != old.get(key):
            lines.append(f"- \t{key}: {old.get(key)!r},")
            lines.append(f"+ \t{key}: {new.get(key)!r},")
    lines.append("  }")
    return "\n".join(lines)


def validate_pod_update(new: Obj, old: Obj) -> Errors:
    errs = validate_pod(new)
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    added = sorted(_gate_names(new_spec) - _gate_names(old_spec))
    if added:
        errs.append(
            forbidden(
                "spec.schedulingGates",
                f"only deletion is allowed, but found new scheduling gate '{added[0]}'",
            )
        )
    munged = _munged_spec(new_spec, old_spec)
    if munged != old_spec and not added:
        errs.append(
            forbidden(
                "spec",
                "pod updates may not change fields other than "
                + ",".join(POD_UPDATABLE)
                + "\n"
                + _spec_diff(munged, old_spec),
            )
        )
    return errs


# -- PodDisruptionBudgets ---------------------------------------------------------------------

_PERCENT = re.compile("[0-9]+%")


def _int_or_percent(value: Any, path: str) -> Errors:
    """ValidatePositiveIntOrPercent and IsNotMoreThan100Percent."""
    if isinstance(value, str):
        if _PERCENT.fullmatch(value) is None:
            return [
                invalid(
                    path,
                    value,
                    "a valid percent string must be a numeric string followed by an ending '%' "
                    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                )
            ]
        if int(value[:-1]) > 100:
            return [invalid(path, value, "must not be greater than 100%")]
        return []
    if isinstance(value, int) and value < 0:
        return [invalid(path, value, "must be greater than or equal to 0")]
    return []


def validate_pdb(obj: Obj) -> Errors:
    spec = obj.get("spec") or {}
    errs: Errors = []
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        shown = GoValue(
            "policy.PodDisruptionBudgetSpec{"
            f"MinAvailable:{min_available!r}, MaxUnavailable:{max_unavailable!r}}}"
        )
        errs.append(invalid("spec", shown, "minAvailable and maxUnavailable cannot be both set"))
    if min_available is not None:
        errs.extend(_int_or_percent(min_available, "spec.minAvailable"))
    if max_unavailable is not None:
        errs.extend(_int_or_percent(max_unavailable, "spec.maxUnavailable"))
    return errs


# -- the tables -------------------------------------------------------------------------------

Rule = Callable[[Obj], Errors]
UpdateRule = Callable[[Obj, Obj], Errors]

CREATE_RULES: dict[tuple[str, str], Rule] = {
    ("", "nodes"): validate_node,
    ("", "pods"): validate_pod,
    # Upstream's ReplicaSet message names a deployment too (pkg/apis/apps/validation).
    ("apps", "deployments"): _workload_rule("deployment"),
    ("apps", "replicasets"): _workload_rule("deployment"),
    ("apps", "daemonsets"): _workload_rule("daemonset", replicas=False, selector_required=False),
    ("apps", "statefulsets"): _workload_rule("statefulset"),
    ("policy", "poddisruptionbudgets"): validate_pdb,
}
#: Update rules beyond the create rules run on the new object.
UPDATE_RULES: dict[tuple[str, str], UpdateRule] = {
    ("", "pods"): validate_pod_update,
}


def _raise(rt: ResourceType, obj: Obj, errs: Errors) -> None:
    if errs:
        raise invalid_status(rt.kind, rt.group, str(obj["metadata"].get("name", "")), errs)


def validate_create(rt: ResourceType, obj: Obj) -> None:
    """The create strategy's Validate: 422 Invalid with every failing field."""
    errs = validate_meta(obj["metadata"])
    rule = CREATE_RULES.get(rt.key)
    if rule is not None:
        errs.extend(rule(obj))
    _raise(rt, obj, errs)


def validate_update(rt: ResourceType, new: Obj, old: Obj) -> None:
    """The update strategy's ValidateUpdate (a PUT or a patch of the main resource)."""
    errs = validate_meta(new["metadata"])
    update_rule = UPDATE_RULES.get(rt.key)
    if update_rule is not None:
        errs.extend(update_rule(new, old))
    else:
        rule = CREATE_RULES.get(rt.key)
        if rule is not None:
            errs.extend(rule(new))
    _raise(rt, new, errs)
