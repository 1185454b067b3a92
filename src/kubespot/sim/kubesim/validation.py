"""What the API server refuses to store: upstream's Validate / ValidateUpdate rules, per resource.

Each rule returns the ``FieldError`` list upstream's function returns; ``validate_create`` and
``validate_update`` run the rules of the object's resource and raise the 422 ``Status``. Sources:
- object metadata: k8s.io/apimachinery pkg/api/validation/objectmeta.go ValidateObjectMeta
  (labels: meta/v1/validation ValidateLabels; annotations: ValidateAnnotations, 256 KiB in all),
  with the name and value rules of ``names``;
- nodes: pkg/apis/core/validation/validation.go ValidateNode, validateNodeTaints;
- pods: ValidatePodCreate (validateContainers, validateTolerations) and ValidatePodUpdate
  (validateOnlyAddedTolerations, validateOnlyDeletedSchedulingGates, and for a gated pod
  validateNodeSelectorMutation and validateNodeAffinityMutation);
- workload templates: ValidatePodTemplateSpec (containers of the template);
- PodDisruptionBudgets: pkg/apis/policy/validation ValidatePodDisruptionBudgetSpec.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

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


_TOLERATION_MODIFIED = "existing toleration can not be modified except its tolerationSeconds"


def _toleration_identity(t: Any) -> tuple[str, ...]:
    """A toleration but its tolerationSeconds, absent fields as Go's zero value ("")."""
    t = t if isinstance(t, dict) else {}
    return tuple(str(t.get(k) or "") for k in ("key", "operator", "value", "effect"))


def validate_only_added_tolerations(new: list[Obj], old: list[Obj], path: str) -> Errors:
    """validateOnlyAddedTolerations: every old toleration is still there, its tolerationSeconds
    changed freely (raised, lowered or removed); one error for the list, however many differ."""
    kept = {_toleration_identity(n) for n in new}
    if all(_toleration_identity(o) in kept for o in old):
        return []
    return [forbidden(path, _TOLERATION_MODIFIED)]


def validate_only_deleted_scheduling_gates(new: list[Any], old: list[Any], path: str) -> Errors:
    """validateOnlyDeletedSchedulingGates: a gate not in the old pod is an error on its name (at the
    index of its last occurrence, as upstream's name-to-index map keeps)."""
    old_names = {g.get("name") for g in old if isinstance(g, dict)}
    added: dict[Any, int] = {}
    for i, g in enumerate(new):
        name = g.get("name") if isinstance(g, dict) else None
        if name not in old_names:
            added[name] = i
    return [
        forbidden(
            f"{path}[{i}].name", f"only deletion is allowed, but found new scheduling gate '{name or ''}'"
        )
        for name, i in sorted(added.items(), key=lambda item: item[1])
    ]


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
    # Tolerations and scheduling gates are checked on their own (validateOnlyAddedTolerations,
    # validateOnlyDeletedSchedulingGates), so they are always put back to the old ones here.
    for part in ("tolerations", "schedulingGates"):
        _put_back(munged, old, part)
    return munged


def _spec_diff(new: Obj, old: Obj) -> str:
    """Which spec fields differ, a line each, in the spirit of upstream's cmp.Diff (not its format)."""
    lines = ["  core.PodSpec{"]
    for key in sorted(set(new) | set(old)):
        if new.get(key) != old.get(key):
            lines.append(f"- \t{key}: {old.get(key)!r},")
            lines.append(f"+ \t{key}: {new.get(key)!r},")
    lines.append("  }")
    return "\n".join(lines)


def _semantic(value: Any) -> Any:
    """``value`` as apiequality.Semantic.DeepEqual compares it: an empty map or list equals nil."""
    if isinstance(value, dict):
        return {k: _semantic(v) for k, v in value.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


_NODE_SELECTOR_ADDITIONS = "only additions to spec.nodeSelector are allowed (no mutations or deletions)"
_TERMS = "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def validate_node_selector_mutation(path: str, new: Any, old: Any) -> Errors:
    """validateNodeSelectorMutation: a gated pod's nodeSelector may only gain keys."""
    new, old = new or {}, old or {}
    if all(k in new and new[k] == v for k, v in old.items()):
        return []
    return [invalid(path, {k: new[k] for k in sorted(new)}, _NODE_SELECTOR_ADDITIONS)]


def _required_terms(affinity: Any) -> list[Any] | None:
    required_ = (affinity or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    return None if required_ is None else list(required_.get("nodeSelectorTerms") or [])


def _go_terms(value: Any) -> GoValue:
    """JSON of internal core.NodeSelectorTerm values (no json tags: Go's field names, nil as null)."""

    def requirement(r: Any) -> Obj:
        r = r if isinstance(r, dict) else {}
        return {"Key": r.get("key", ""), "Operator": r.get("operator", ""), "Values": r.get("values") or None}

    def term(t: Any) -> Obj:
        t = t if isinstance(t, dict) else {}
        return {
            name: [requirement(r) for r in t[key]] if t.get(key) else None
            for name, key in (("MatchExpressions", "matchExpressions"), ("MatchFields", "matchFields"))
        }

    rendered = [term(t) for t in value] if isinstance(value, list) else term(value)
    return GoValue(orjson.dumps(rendered).decode())


def _term_has_only_additions(new: Any, old: Any) -> bool:
    """validateNodeSelectorTermHasOnlyAdditions: the old requirements are a prefix of the new, and an
    empty old term stays empty."""
    new, old = _semantic(new or {}), _semantic(old or {})
    if not old.get("matchExpressions") and not old.get("matchFields"):
        return not new.get("matchExpressions") and not new.get("matchFields")
    for key in ("matchExpressions", "matchFields"):
        old_reqs, new_reqs = old.get(key) or [], new.get(key) or []
        if new_reqs[: len(old_reqs)] != old_reqs:
            return False
    return True


def validate_node_affinity_mutation(path: str, new: Any, old: Any) -> Errors:
    """validateNodeAffinityMutation: a gated pod's required node affinity may only narrow (the same
    number of terms, each term's requirements only appended to); anything may be set when the old
    pod had none."""
    old_terms = _required_terms(old)
    if old_terms is None:
        return []
    new_terms = _required_terms(new) or []
    if old_terms and len(old_terms) != len(new_terms):
        return [
            invalid(
                f"{path}.{_TERMS}",
                _go_terms(new_terms),
                "no additions/deletions to non-empty NodeSelectorTerms list are allowed",
            )
        ]
    return [
        invalid(
            f"{path}.{_TERMS}[{i}]",
            _go_terms(new_terms[i]),
            "only additions are allowed (no mutations or deletions)",
        )
        for i in range(len(old_terms))
        if not _term_has_only_additions(new_terms[i], old_terms[i])
    ]


def _gated_update(munged: Obj, old: Obj) -> Errors:
    """ValidatePodUpdate's podIsGated block (KEP-3838): nodeSelector additions and a narrowed
    required node affinity are checked here and put back to the old values in ``munged``."""
    errs: Errors = []
    if _semantic(munged.get("nodeSelector")) != _semantic(old.get("nodeSelector")):
        errs.extend(
            validate_node_selector_mutation(
                "spec.nodeSelector", munged.get("nodeSelector"), old.get("nodeSelector")
            )
        )
        _put_back(munged, old, "nodeSelector")
    old_affinity, affinity = old.get("affinity"), munged.get("affinity")
    old_na = (old_affinity or {}).get("nodeAffinity")
    new_na = (affinity or {}).get("nodeAffinity")
    if _semantic(old_na) != _semantic(new_na):
        errs.extend(validate_node_affinity_mutation("spec.affinity.nodeAffinity", new_na, old_na))
        if affinity is None:
            if old_na is not None:
                munged["affinity"] = {"nodeAffinity": old_na}
        elif old_affinity is None and not affinity.get("podAffinity") and not affinity.get("podAntiAffinity"):
            munged.pop("affinity", None)
        else:
            munged["affinity"] = {k: v for k, v in affinity.items() if k != "nodeAffinity"}
            if old_na is not None:
                munged["affinity"]["nodeAffinity"] = old_na
    return errs


def _put_back(munged: Obj, old: Obj, key: str) -> None:
    if key in old:
        munged[key] = old[key]
    else:
        munged.pop(key, None)


def validate_pod_update(new: Obj, old: Obj) -> Errors:
    errs = validate_pod(new)
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errs.extend(
        validate_only_added_tolerations(
            new_spec.get("tolerations") or [], old_spec.get("tolerations") or [], "spec.tolerations"
        )
    )
    errs.extend(
        validate_only_deleted_scheduling_gates(
            new_spec.get("schedulingGates") or [],
            old_spec.get("schedulingGates") or [],
            "spec.schedulingGates",
        )
    )
    munged = _munged_spec(new_spec, old_spec)
    if old_spec.get("schedulingGates"):
        errs.extend(_gated_update(munged, old_spec))
    if _semantic(munged) != _semantic(old_spec):
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
