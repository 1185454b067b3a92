"""kubesim's validation rules as pure functions, against upstream's rules and messages."""

from __future__ import annotations

import pytest

from kubespot.sim.kubesim import validation as v
from kubespot.sim.kubesim.decoding import check_body, check_patched
from kubespot.sim.kubesim.errors import ApiError
from kubespot.sim.kubesim.fielderrors import aggregate, invalid_status, required
from kubespot.sim.kubesim.names import label_value_errors, qualified_name_errors
from kubespot.sim.kubesim.resources import BUILTIN

RT = {rt.plural: rt for rt in BUILTIN}


def test_qualified_names_and_label_values_follow_apimachinery() -> None:
    """k8s.io/apimachinery pkg/util/validation/validation.go IsQualifiedName, IsValidLabelValue."""
    assert qualified_name_errors("kubernetes.io/hostname") == ()
    assert qualified_name_errors("a/b/c")[0].startswith("a qualified name must consist of alphanumeric")
    assert qualified_name_errors("/x") == ("prefix part must be non-empty",)
    assert qualified_name_errors("x" * 64) == ("name part must be no more than 63 characters",)
    [msg] = qualified_name_errors("-bad")
    assert msg == (
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
        "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
        "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    )
    assert label_value_errors("") == ()
    assert label_value_errors("x" * 64) == ("must be no more than 63 characters",)
    assert qualified_name_errors("Bad_Prefix/x")[0].startswith("prefix part a lowercase RFC 1123 subdomain")


def test_annotations_are_limited_to_256_kib_in_all() -> None:
    """k8s.io/apimachinery pkg/api/validation/objectmeta.go ValidateAnnotations (256 KiB in all)."""
    assert v.validate_annotations({"a": "x" * (256 * 1024 - 1)}, "metadata.annotations") == []
    [err] = v.validate_annotations({"a": "x" * (256 * 1024)}, "metadata.annotations")
    assert str(err) == "metadata.annotations: Too long: may not be more than 262144 bytes"
    # Keys are checked lowercased: upper case is allowed in annotation keys.
    assert v.validate_annotations({"Example.com/Key": "v"}, "metadata.annotations") == []


def test_taints_need_a_known_effect_and_are_unique_by_key_and_effect() -> None:
    """pkg/apis/core/validation/validation.go validateNodeTaints, validateTaintEffect."""
    errs = v.validate_taints(
        [
            {"key": "a", "effect": "NoSchedule"},
            {"key": "a", "effect": "NoExecute"},
            {"key": "a", "effect": "NoSchedule"},
            {"key": "b", "effect": "Sometimes"},
            {"key": "c"},
        ],
        "spec.taints",
    )
    texts = [str(e) for e in errs]
    assert texts[0].startswith("spec.taints[2]: Duplicate value: core.Taint{")
    assert texts[0].endswith(": taints must be unique by key and effect pair")
    assert texts[1] == (
        'spec.taints[3].effect: Unsupported value: "Sometimes": supported values: '
        '"NoSchedule", "PreferNoSchedule", "NoExecute"'
    )
    assert texts[2] == "spec.taints[4].effect: Required value"
    assert len(errs) == 3


def test_pods_need_containers_with_names_and_images() -> None:
    """pkg/apis/core/validation/validation.go validateContainers (Required on an empty list)."""
    assert [str(e) for e in v.validate_pod({"spec": {}})] == ["spec.containers: Required value"]
    errs = v.validate_pod({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "a"}]}})
    assert [str(e) for e in errs] == [
        'spec.containers[1].name: Duplicate value: "a"',
        "spec.containers[1].image: Required value",
    ]


def test_pod_updates_may_change_only_images_deadlines_and_added_tolerations() -> None:
    """pkg/apis/core/validation/validation.go ValidatePodUpdate."""
    old = {
        "spec": {
            "containers": [{"name": "a", "image": "x:1"}],
            "tolerations": [
                {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
            ],
        }
    }
    fine = {
        "spec": {
            "containers": [{"name": "a", "image": "x:2"}],
            "activeDeadlineSeconds": 30,
            "tolerations": [
                {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
                {"key": "new", "operator": "Exists"},
            ],
        }
    }
    assert v.validate_pod_update(fine, old) == []
    bound = {"spec": {**old["spec"], "nodeName": "node-a"}}
    [err] = v.validate_pod_update(bound, old)
    assert str(err).startswith(
        "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions "
        "to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it "
        "was previously negative)\n"
    )
    assert "nodeName" in str(err)
    removed = {"spec": {**old["spec"], "tolerations": []}}
    assert len(v.validate_pod_update(removed, old)) == 1


def test_scheduling_gates_may_be_removed_never_added() -> None:
    """pkg/apis/core/validation/validation.go ValidatePodUpdate, validateSchedulingGates: a gated
    pod's gates are removed by whoever released it; adding one is refused."""
    container = [{"name": "a", "image": "x:1"}]
    old = {"spec": {"containers": container, "schedulingGates": [{"name": "a"}, {"name": "b"}]}}
    assert (
        v.validate_pod_update({"spec": {"containers": container, "schedulingGates": [{"name": "b"}]}}, old)
        == []
    )
    assert v.validate_pod_update({"spec": {"containers": container}}, old) == []
    added = {"spec": {"containers": container, "schedulingGates": [{"name": "a"}, {"name": "c"}]}}
    [err] = v.validate_pod_update(added, old)
    assert (
        str(err)
        == "spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling "
        "gate 'c'"
    )


TOLERATION = {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
CONTAINERS = [{"name": "a", "image": "x:1"}]


def _spec(**fields: object) -> dict[str, object]:
    return {"spec": {"containers": CONTAINERS, **fields}}


def test_an_existing_toleration_may_change_only_its_toleration_seconds() -> None:
    """pkg/apis/core/validation/validation.go validateOnlyAddedTolerations: the old toleration with
    the new one's tolerationSeconds must be found among the new ones (raise, lower or remove it)."""
    old = _spec(tolerations=[TOLERATION])
    for seconds in (120, 30, None):
        changed = {k: v for k, v in TOLERATION.items() if k != "tolerationSeconds"}
        if seconds is not None:
            changed["tolerationSeconds"] = seconds
        assert v.validate_pod_update(_spec(tolerations=[changed]), old) == []
    modified = {**TOLERATION, "key": "other"}
    assert [str(e) for e in v.validate_pod_update(_spec(tolerations=[modified]), old)] == [
        "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
    ]
    assert len(v.validate_pod_update(_spec(), old)) == 1  # removed: the same one error


GATED = {"schedulingGates": [{"name": "g"}]}
A = {"key": "a", "operator": "In", "values": ["x"]}
B = {"key": "b", "operator": "Exists"}


def _affinity(*terms: list[dict[str, object]]) -> dict[str, object]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
            }
        }
    }


def test_a_gated_pod_may_gain_node_selector_keys_and_narrow_its_node_affinity() -> None:
    """pkg/apis/core/validation/validation.go ValidatePodUpdate (podIsGated block),
    validateNodeSelectorMutation, validateNodeAffinityMutation, validateNodeSelectorTermHasOnlyAdditions
    (KEP-3838: mutable scheduling directives of gated pods)."""
    old = _spec(**GATED, nodeSelector={"a": "b"})
    assert v.validate_pod_update(_spec(**GATED, nodeSelector={"a": "b", "c": "d"}), old) == []
    [err] = v.validate_pod_update(_spec(**GATED, nodeSelector={"c": "d", "a": "z"}), old)
    assert str(err) == (
        'spec.nodeSelector: Invalid value: {"a":"z","c":"d"}: '
        "only additions to spec.nodeSelector are allowed (no mutations or deletions)"
    )
    # Not gated: nodeSelector is immutable.
    [err] = v.validate_pod_update(_spec(nodeSelector={"a": "b", "c": "d"}), _spec(nodeSelector={"a": "b"}))
    assert str(err).startswith("spec: Forbidden: pod updates may not change fields other than")

    assert v.validate_pod_update(_spec(**GATED, affinity=_affinity([A])), _spec(**GATED)) == []
    old = _spec(**GATED, affinity=_affinity([A]))
    assert v.validate_pod_update(_spec(**GATED, affinity=_affinity([A, B])), old) == []
    [err] = v.validate_pod_update(_spec(**GATED, affinity=_affinity([B])), old)
    assert str(err) == (
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: "
        'Invalid value: {"MatchExpressions":[{"Key":"b","Operator":"Exists","Values":null}],'
        '"MatchFields":null}: only additions are allowed (no mutations or deletions)'
    )
    [err] = v.validate_pod_update(_spec(**GATED, affinity=_affinity([A], [B])), old)
    assert str(err).startswith(
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: "
        'Invalid value: [{"MatchExpressions":[{"Key":"a","Operator":"In","Values":["x"]}],'
        '"MatchFields":null},'
    )
    assert str(err).endswith("no additions/deletions to non-empty NodeSelectorTerms list are allowed")
    # Pod affinity stays immutable, gated or not.
    pod_affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}
    changed = _spec(**GATED, affinity={**_affinity([A]), "podAffinity": {"x": 1}})
    [err] = v.validate_pod_update(changed, _spec(**GATED, affinity={**_affinity([A]), **pod_affinity}))
    assert str(err).startswith("spec: Forbidden:")


def test_pdb_with_both_min_available_and_max_unavailable_is_invalid() -> None:
    """pkg/apis/policy/validation/validation.go ValidatePodDisruptionBudgetSpec."""
    errs = v.validate_pdb({"spec": {"minAvailable": 1, "maxUnavailable": "150%"}})
    assert [e.field for e in errs] == ["spec", "spec.maxUnavailable"]
    assert errs[0].detail == "minAvailable and maxUnavailable cannot be both set"
    assert errs[1].detail == "must not be greater than 100%"
    assert [str(e) for e in v.validate_pdb({"spec": {"minAvailable": -1}})] == [
        "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"
    ]


def test_invalid_status_is_new_invalid() -> None:
    """k8s.io/apimachinery pkg/api/errors/errors.go NewInvalid; field.ErrorList ToAggregate."""
    one = invalid_status("PodDisruptionBudget", "policy", "b", [required("spec.x")])
    assert one.code == 422 and one.reason == "Invalid"
    assert one.message == 'PodDisruptionBudget.policy "b" is invalid: spec.x: Required value'
    assert one.details == {
        "name": "b",
        "group": "policy",
        "kind": "PodDisruptionBudget",
        "causes": [{"reason": "FieldValueRequired", "message": "Required value", "field": "spec.x"}],
    }
    assert (
        aggregate([required("a"), required("b"), required("a")]) == "[a: Required value, b: Required value]"
    )


def test_wrong_json_types_fail_decoding() -> None:
    """k8s.io/apiserver pkg/endpoints/handlers/rest.go transformDecodeError (create/update) and
    patch.go applyPatchToCurrentObject (a patched object that does not decode: 422 on `patch`)."""
    with pytest.raises(ApiError) as exc:
        check_body(RT["nodes"], {"metadata": {"name": "n"}, "spec": {"unschedulable": "yes"}})
    assert exc.value.code == 400
    assert exc.value.message == (
        'Node in version "v1" cannot be handled as a Node: json: cannot unmarshal string into Go '
        "struct field NodeSpec.spec.unschedulable of type bool"
    )
    with pytest.raises(ApiError) as exc:
        check_body(RT["pods"], {"metadata": {"name": "p", "annotations": {"a": 1}}})
    assert exc.value.message.endswith(
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.annotations of type string"
    )
    with pytest.raises(ApiError) as exc:
        check_patched(RT["nodes"], {"metadata": {"name": "n"}, "spec": {"taints": {}}})
    assert exc.value.code == 422
    assert exc.value.message.startswith(' "" is invalid: patch: Invalid value: "{')
    assert exc.value.message.endswith(
        "json: cannot unmarshal object into Go struct field NodeSpec.spec.taints of type []v1.Taint"
    )
    check_body(RT["nodes"], {"metadata": {"name": "n", "labels": None}, "spec": {"unschedulable": True}})


def test_workloads_need_a_selector_matching_their_template() -> None:
    """pkg/apis/apps/validation/validation.go ValidateDeploymentSpec, ValidateDaemonSetSpec and
    ValidatePodTemplateSpecForReplicaSet."""
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "a", "image": "x"}]}}
    deploy = v.CREATE_RULES[("apps", "deployments")]
    daemon = v.CREATE_RULES[("apps", "daemonsets")]
    assert deploy({"spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template}}) == []
    [err] = deploy({"spec": {"selector": {"matchLabels": {"app": "db"}}, "template": template}})
    assert str(err) == (
        'spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: '
        "`selector` does not match template `labels`"
    )
    assert [e.field for e in deploy({"spec": {"template": template, "replicas": -1}})] == [
        "spec.replicas",
        "spec.selector",
        "spec.template.metadata.labels",
    ]
    [err] = deploy({"spec": {"selector": {}, "template": template}})
    assert err.detail == "empty selector is invalid for deployment"
    [err] = daemon({"spec": {"selector": {}, "template": template}})
    assert err.detail == "empty selector is invalid for daemonset"
    restart = {**template, "spec": {**template["spec"], "restartPolicy": "Never"}}
    [err] = daemon({"spec": {"selector": {"matchLabels": {"app": "web"}}, "template": restart}})
    assert (
        str(err) == 'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"'
    )
