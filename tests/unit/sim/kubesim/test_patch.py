"""Patch semantics checked against the RFCs and upstream strategic merge patch.

References:
* RFC 7386 (JSON merge patch) and RFC 6902 / RFC 6901 (JSON patch, JSON pointer).
* ``k8s.io/apimachinery/pkg/util/strategicpatch/patch.go`` (mergeMap, mergeSlice, directives) and
  ``k8s.io/apimachinery/pkg/util/mergepatch/errors.go``.
* https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/ and
  https://github.com/kubernetes/community/blob/master/contributors/devel/sig-api-machinery/strategic-merge-patch.md
* Struct tags in k8s.io/api core/v1 types.go: ``Taints`` and ``Tolerations`` carry no patchStrategy
  (``+listType=atomic``), ``Containers`` merge on ``name``, ``Ports`` on ``containerPort``,
  ``Conditions`` on ``type``, ``ObjectMeta.Finalizers`` is ``patchStrategy:"merge"`` (primitives),
  ``OwnerReferences`` merge on ``uid``.
* ``k8s.io/apiserver/pkg/endpoints/handlers/patch.go``: JSON patch decode errors -> 400, apply
  errors -> 422; strategicpatch ErrBadJSONDoc/ErrBadPatchFormat* -> 400.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from kubespot.sim.kubesim.patch import (
    CUSTOM_RESOURCE_PATCH_TYPES,
    STRATEGIC_MERGE_KEYS,
    PatchError,
    json_patch,
    merge_patch,
    strategic_merge_patch,
    supports_strategic_merge,
)


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {"app": "web"},
            "annotations": {"a": "1"},
            "finalizers": ["f1", "f2"],
            "ownerReferences": [{"uid": "u1", "name": "rs1", "kind": "ReplicaSet"}],
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "app:1",
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                },
                {"name": "sidecar", "image": "side:1"},
            ],
            "tolerations": [{"key": "t1", "operator": "Exists"}],
            "volumes": [{"name": "v1", "emptyDir": {}}],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "PodScheduled", "status": "True"},
            ],
        },
    }


def _node() -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "labels": {"a": "b"}},
        "spec": {"taints": [{"key": "k1", "effect": "NoSchedule"}, {"key": "k2", "effect": "NoExecute"}]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "MemoryPressure", "status": "False"},
            ],
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": "n1"},
            ],
        },
    }


# ----------------------------------------------------------------------------------- JSON merge patch


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        # The RFC 7386 appendix A examples.
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
        ({"a": {"b": 1}}, {"a": {}}, {"a": {"b": 1}}),
    ],
)
def test_merge_patch_rfc7386(target: dict[str, Any], patch: dict[str, Any], expected: dict[str, Any]) -> None:
    """RFC 7386 section 3 / appendix A test cases (objects only: the API needs an object result)."""
    assert merge_patch(target, patch) == expected


@pytest.mark.parametrize("patch", [None, [1], "x", 3])
def test_merge_patch_non_object_is_400(patch: Any) -> None:
    """evanphx/json-patch MergePatch: a patch that is not an object is ErrBadJSONPatch -> 400."""
    with pytest.raises(PatchError) as exc:
        merge_patch({"a": 1}, patch)
    assert exc.value.code == 400


def test_merge_patch_does_not_mutate_or_alias() -> None:
    target = _pod()
    patch = {"metadata": {"labels": {"x": "y"}}, "spec": {"extra": {"deep": [1]}}}
    snapshot_t, snapshot_p = copy.deepcopy(target), copy.deepcopy(patch)
    out = merge_patch(target, patch)
    assert target == snapshot_t and patch == snapshot_p
    out["spec"]["containers"][0]["name"] = "changed"
    out["spec"]["extra"]["deep"].append(2)
    assert target == snapshot_t and patch == snapshot_p


def test_merge_patch_replaces_lists() -> None:
    """Merge patch has no merge keys: lists are replaced, e.g. containers."""
    out = merge_patch(_pod(), {"spec": {"containers": [{"name": "x"}]}})
    assert out["spec"]["containers"] == [{"name": "x"}]


# ---------------------------------------------------------------------------------- strategic merge


def test_smp_cordon_and_annotations() -> None:
    """kubectl cordon sends {"spec":{"unschedulable":true}}; maps merge, null deletes a key."""
    node = _node()
    out = strategic_merge_patch(node, {"spec": {"unschedulable": True}}, kind="Node")
    assert out["spec"]["unschedulable"] is True
    assert out["spec"]["taints"] == node["spec"]["taints"]
    out = strategic_merge_patch(
        node, {"metadata": {"annotations": {"x": "1"}, "labels": {"a": None}}}, kind="Node"
    )
    assert out["metadata"]["annotations"] == {"x": "1"}
    assert out["metadata"]["labels"] == {}


def test_smp_taints_replaced_as_whole_list() -> None:
    """NodeSpec.Taints has no patchStrategy (+listType=atomic): the list is replaced, not merged."""
    out = strategic_merge_patch(
        _node(), {"spec": {"taints": [{"key": "k3", "effect": "NoSchedule"}]}}, kind="Node"
    )
    assert out["spec"]["taints"] == [{"key": "k3", "effect": "NoSchedule"}]
    out = strategic_merge_patch(_node(), {"spec": {"taints": []}}, kind="Node")
    assert out["spec"]["taints"] == []


def test_smp_tolerations_replaced() -> None:
    """PodSpec.Tolerations has no patchStrategy: replaced wholesale."""
    out = strategic_merge_patch(_pod(), {"spec": {"tolerations": [{"key": "t2"}]}}, kind="Pod")
    assert out["spec"]["tolerations"] == [{"key": "t2"}]


def test_smp_conditions_merged_by_type() -> None:
    """PodStatus.Conditions: patchStrategy=merge, patchMergeKey=type; live-only items are kept.

    Order follows strategicpatch.normalizeElementOrder/mergeSortedSlice: patch items keep patch order,
    live-only items are interleaved only where the live order relates them, so an item new to the
    list lands before the live-only items that follow it."""
    patch = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "DisruptionTarget", "status": "True"},
            ]
        }
    }
    out = strategic_merge_patch(_pod(), patch, kind="Pod")
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "DisruptionTarget", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]


def test_smp_node_conditions_and_addresses_by_type() -> None:
    """NodeStatus.Conditions and NodeStatus.Addresses both merge on type."""
    patch = {
        "status": {
            "conditions": [{"type": "Ready", "status": "Unknown"}],
            "addresses": [{"type": "ExternalIP", "address": "1.2.3.4"}],
        }
    }
    out = strategic_merge_patch(_node(), patch, kind="Node")
    assert [c["status"] for c in out["status"]["conditions"]] == ["Unknown", "False"]
    assert [a["type"] for a in out["status"]["addresses"]] == ["ExternalIP", "InternalIP", "Hostname"]


def test_smp_containers_env_ports_merge() -> None:
    """containers by name, env by name, ports by containerPort; untouched siblings survive."""
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "app:2",
                    "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
                    "ports": [{"containerPort": 80, "name": "http"}],
                }
            ]
        }
    }
    out = strategic_merge_patch(_pod(), patch, kind="Pod")
    app, sidecar = out["spec"]["containers"]
    assert app["image"] == "app:2"
    assert app["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "3"},
        {"name": "C", "value": "4"},
    ]
    assert app["ports"] == [{"containerPort": 80, "protocol": "TCP", "name": "http"}]
    assert sidecar == {"name": "sidecar", "image": "side:1"}


def test_smp_new_container_goes_first_like_kubectl_patch_docs() -> None:
    """The kubernetes.io "Update API Objects in Place Using kubectl patch" task: patching in
    patch-demo-ctr-2 yields containers [patch-demo-ctr-2 (redis), patch-demo-ctr (nginx)]."""
    dep = {"spec": {"template": {"spec": {"containers": [{"name": "patch-demo-ctr", "image": "nginx"}]}}}}
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "patch-demo-ctr-2", "image": "redis"}]}}}}
    out = strategic_merge_patch(dep, patch, kind="Deployment")
    assert [c["name"] for c in out["spec"]["template"]["spec"]["containers"]] == [
        "patch-demo-ctr-2",
        "patch-demo-ctr",
    ]


def test_smp_empty_merge_list_is_noop() -> None:
    """mergeSlice with an empty patch keeps the live list (use $patch: replace to clear it)."""
    out = strategic_merge_patch(_pod(), {"spec": {"containers": []}}, kind="Pod")
    assert len(out["spec"]["containers"]) == 2


def test_smp_patch_delete_list_element() -> None:
    """{"$patch": "delete", <mergeKey>: v} removes the matching element (mergeSliceWithSpecialElements)."""
    patch = {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}
    out = strategic_merge_patch(_pod(), patch, kind="Pod")
    assert [c["name"] for c in out["spec"]["containers"]] == ["app"]
    patch = {"metadata": {"ownerReferences": [{"uid": "u1", "$patch": "delete"}]}}
    assert strategic_merge_patch(_pod(), patch, kind="Pod")["metadata"]["ownerReferences"] == []


def test_smp_patch_delete_without_merge_key_is_422() -> None:
    """mergepatch.ErrNoMergeKey: "map: ... does not contain declared merge key: name"."""
    with pytest.raises(PatchError) as exc:
        strategic_merge_patch(_pod(), {"spec": {"containers": [{"$patch": "delete"}]}}, kind="Pod")
    assert exc.value.code == 422 and "does not contain declared merge key: name" in exc.value.message
    with pytest.raises(PatchError) as exc:
        strategic_merge_patch(_pod(), {"spec": {"containers": [{"image": "x"}]}}, kind="Pod")
    assert exc.value.code == 422


def test_smp_patch_replace_list() -> None:
    """A {"$patch": "replace"} element makes the rest of the patch list the new list."""
    patch = {"spec": {"containers": [{"name": "only", "image": "o:1"}, {"$patch": "replace"}]}}
    out = strategic_merge_patch(_pod(), patch, kind="Pod")
    assert out["spec"]["containers"] == [{"name": "only", "image": "o:1"}]


def test_smp_patch_replace_and_delete_maps() -> None:
    """handleDirectiveInMergeMap: replace -> the patch map itself, delete -> an empty map."""
    out = strategic_merge_patch(_pod(), {"metadata": {"labels": {"$patch": "replace", "z": "1"}}}, kind="Pod")
    assert out["metadata"]["labels"] == {"z": "1"}
    out = strategic_merge_patch(_pod(), {"metadata": {"labels": {"$patch": "delete"}}}, kind="Pod")
    assert out["metadata"]["labels"] == {}


@pytest.mark.parametrize(
    ("patch", "code"),
    [
        ({"metadata": {"labels": {"$patch": "bogus"}}}, 400),
        ({"spec": {"containers": [{"name": "app", "$patch": "merge"}]}}, 422),
        ({"metadata": {"$deleteFromPrimitiveList/finalizers": "f1"}}, 400),
        ({"spec": {"$retainKeys": "x"}}, 400),
        ({"spec": {"$retainKeys": ["containers"], "volumes": []}}, 400),
        ({"spec": {"$setElementOrder/containers": "x"}}, 400),
    ],
)
def test_smp_bad_directives(patch: dict[str, Any], code: int) -> None:
    """Malformed directive content is ErrBadPatchFormat* (400); list-level $patch: merge is refused."""
    with pytest.raises(PatchError) as exc:
        strategic_merge_patch(_pod(), patch, kind="Pod")
    assert exc.value.code == code


@pytest.mark.parametrize("patch", [None, [], "x", 1])
def test_smp_non_object_is_400(patch: Any) -> None:
    """A patch that is not a JSON object is mergepatch.ErrBadJSONDoc -> 400."""
    with pytest.raises(PatchError) as exc:
        strategic_merge_patch(_pod(), patch, kind="Pod")
    assert exc.value.code == 400


def test_smp_finalizers_merge_as_set_and_delete_from_primitive_list() -> None:
    """ObjectMeta.Finalizers is patchStrategy=merge without key: union without duplicates;
    $deleteFromPrimitiveList/finalizers removes values."""
    out = strategic_merge_patch(_pod(), {"metadata": {"finalizers": ["f2", "f3"]}}, kind="Pod")
    assert out["metadata"]["finalizers"] == ["f1", "f2", "f3"]
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"], "finalizers": ["f4"]}}
    out = strategic_merge_patch(_pod(), patch, kind="Pod")
    assert out["metadata"]["finalizers"] == ["f4", "f2"]
    out = strategic_merge_patch(_pod(), {"metadata": {"finalizers": None}}, kind="Pod")
    assert "finalizers" not in out["metadata"]


def test_smp_owner_references_by_uid() -> None:
    patch = {"metadata": {"ownerReferences": [{"uid": "u1", "controller": True}, {"uid": "u2", "name": "x"}]}}
    refs = strategic_merge_patch(_pod(), patch, kind="Pod")["metadata"]["ownerReferences"]
    assert refs == [
        {"uid": "u1", "name": "rs1", "kind": "ReplicaSet", "controller": True},
        {"uid": "u2", "name": "x"},
    ]


def test_smp_set_element_order() -> None:
    """$setElementOrder/<list> fixes the order of the listed items (mergePatchIntoOriginal)."""
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "new"}, {"name": "app"}],
            "containers": [{"name": "new", "image": "n:1"}],
        }
    }
    out = strategic_merge_patch(_pod(), patch, kind="Pod")
    assert [c["name"] for c in out["spec"]["containers"]] == ["sidecar", "new", "app"]
    assert "$setElementOrder/containers" not in out["spec"]


def test_smp_retain_keys() -> None:
    """$retainKeys drops every live key not listed (used for volume sources and Deployment.strategy)."""
    dep = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    out = strategic_merge_patch(dep, patch, kind="Deployment")
    assert out["spec"]["strategy"] == {"type": "Recreate"}


def test_smp_pod_template_paths_in_workloads() -> None:
    """Deployment/ReplicaSet/DaemonSet/StatefulSet embed PodTemplateSpec at spec.template."""
    for kind in ("Deployment", "ReplicaSet", "DaemonSet", "StatefulSet"):
        obj = {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b"}]}}}}
        patch = {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "a:2"}]}}}}
        out = strategic_merge_patch(obj, patch, kind=kind)
        assert out["spec"]["template"]["spec"]["containers"] == [
            {"name": "a", "image": "a:2"},
            {"name": "b"},
        ], kind


def test_smp_service_ports_by_port() -> None:
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}}
    out = strategic_merge_patch(svc, {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}, kind="Service")
    assert out["spec"]["ports"] == [{"port": 80, "targetPort": 9090}, {"port": 443}]


def test_smp_nulls_in_new_subtrees_are_dropped() -> None:
    """The server runs with IgnoreUnmatchedNulls: nulls where nothing exists are discarded."""
    out = strategic_merge_patch(
        _pod(), {"spec": {"affinity": {"nodeAffinity": None, "x": {"y": None}}}}, kind="Pod"
    )
    assert out["spec"]["affinity"] == {"x": {}}


def test_smp_type_change_replaces() -> None:
    out = strategic_merge_patch({"a": {"b": 1}}, {"a": [1]}, kind="ConfigMap")
    assert out == {"a": [1]}


def test_smp_unknown_kind_falls_back_to_merge_patch() -> None:
    """Custom resources have no Go struct tags: upstream serves only JSON/merge/apply patches there."""
    assert not supports_strategic_merge("Widget")
    assert "application/strategic-merge-patch+json" not in CUSTOM_RESOURCE_PATCH_TYPES
    out = strategic_merge_patch(
        {"spec": {"items": [{"name": "a"}]}}, {"spec": {"items": [{"name": "b"}]}}, kind="Widget"
    )
    assert out == {"spec": {"items": [{"name": "b"}]}}


def test_supports_strategic_merge_for_served_kinds() -> None:
    for kind in (
        "Pod",
        "Node",
        "Deployment",
        "ReplicaSet",
        "DaemonSet",
        "StatefulSet",
        "PodDisruptionBudget",
        "Namespace",
        "Service",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "Event",
        "Lease",
    ):
        assert supports_strategic_merge(kind), kind
    assert "spec.taints" not in STRATEGIC_MERGE_KEYS["Node"]
    assert "spec.tolerations" not in STRATEGIC_MERGE_KEYS["Pod"]


def test_smp_does_not_mutate_or_alias() -> None:
    pod = _pod()
    patch = {
        "spec": {"containers": [{"name": "app", "env": [{"name": "Z", "value": "9"}]}]},
        "status": {"new": {"a": [1]}},
    }
    snap_pod, snap_patch = copy.deepcopy(pod), copy.deepcopy(patch)
    out = strategic_merge_patch(pod, patch, kind="Pod")
    out["spec"]["containers"][1]["image"] = "mutated"
    out["metadata"]["labels"]["new"] = "x"
    out["status"]["new"]["a"].append(2)
    assert pod == snap_pod and patch == snap_patch


def test_smp_is_fast_enough() -> None:
    """Hot path: annotation and taint patches on a realistic node, well under 100 us each."""
    node = _node()
    node["status"]["images"] = [{"names": [f"img{i}"], "sizeBytes": i} for i in range(50)]
    node["metadata"]["labels"] = {f"l{i}": "v" for i in range(30)}
    patches = [{"metadata": {"annotations": {"k": str(i)}}} for i in range(500)]
    start = time.perf_counter()
    for p in patches:
        strategic_merge_patch(node, p, kind="Node")
    per_call = (time.perf_counter() - start) / len(patches)
    assert per_call < 300e-6, per_call


# ----------------------------------------------------------------------------------------- JSON patch


@pytest.mark.parametrize(
    ("doc", "ops", "expected"),
    [
        ({"a": 1}, [{"op": "add", "path": "/b", "value": 2}], {"a": 1, "b": 2}),
        ({"a": [1, 2]}, [{"op": "add", "path": "/a/1", "value": 9}], {"a": [1, 9, 2]}),
        ({"a": [1, 2]}, [{"op": "add", "path": "/a/-", "value": 3}], {"a": [1, 2, 3]}),
        ({"a": [1, 2]}, [{"op": "add", "path": "/a/2", "value": 3}], {"a": [1, 2, 3]}),
        ({"a": 1, "b": 2}, [{"op": "remove", "path": "/a"}], {"b": 2}),
        ({"a": [1, 2, 3]}, [{"op": "remove", "path": "/a/0"}], {"a": [2, 3]}),
        ({"a": 1}, [{"op": "replace", "path": "/a", "value": {"x": 1}}], {"a": {"x": 1}}),
        ({"a": {"b": 1}}, [{"op": "move", "from": "/a/b", "path": "/c"}], {"a": {}, "c": 1}),
        ({"a": [1, 2]}, [{"op": "copy", "from": "/a/0", "path": "/a/-"}], {"a": [1, 2, 1]}),
        (
            {"a": 1},
            [{"op": "test", "path": "/a", "value": 1}, {"op": "add", "path": "/t", "value": True}],
            {"a": 1, "t": True},
        ),
        # RFC 6901 escaping: ~1 is "/", ~0 is "~" (annotation keys contain "/").
        (
            {"metadata": {"annotations": {"example.com/x": "1", "a~b": "2"}}},
            [
                {"op": "replace", "path": "/metadata/annotations/example.com~1x", "value": "9"},
                {"op": "remove", "path": "/metadata/annotations/a~0b"},
            ],
            {"metadata": {"annotations": {"example.com/x": "9"}}},
        ),
        ({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}], {"b": 2}),
        ({"a": 1}, [], {"a": 1}),
    ],
)
def test_json_patch_ops(doc: dict[str, Any], ops: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    """RFC 6902 section 4 operations and RFC 6901 pointer escaping."""
    assert json_patch(doc, ops) == expected


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/missing/child", "value": 1}],
        [{"op": "add", "path": "/a/5", "value": 1}],
        [{"op": "add", "path": "/a/01", "value": 1}],
        [{"op": "remove", "path": "/a/-"}],
        [{"op": "test", "path": "/b", "value": 2}],
        [{"op": "test", "path": "/b", "value": True}],  # 1 is not true in JSON
        [{"op": "test", "path": "/missing", "value": None}],
        [{"op": "move", "from": "/missing", "path": "/x"}],
        [{"op": "move", "from": "/c", "path": "/c/d"}],
        [{"op": "copy", "from": "/missing", "path": "/x"}],
        [{"op": "frobnicate", "path": "/a"}],
        [{"op": "add", "path": "/x"}],
        [{"op": "add", "path": "no-slash", "value": 1}],
        [{"op": "replace", "path": "", "value": [1]}],
    ],
)
def test_json_patch_failures_are_422(ops: list[dict[str, Any]]) -> None:
    """Apply failures (missing path, failed test, bad op) are 422 as patch.go's applyJSPatch returns."""
    doc = {"a": [1, 2], "b": 1, "c": {"d": 1}}
    with pytest.raises(PatchError) as exc:
        json_patch(doc, ops)
    assert exc.value.code == 422


def test_json_patch_test_failure_message() -> None:
    with pytest.raises(PatchError) as exc:
        json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": 2}])
    assert exc.value.message == "testing value /a failed: test failed"


@pytest.mark.parametrize("ops", [{"op": "add"}, None, "x", [1], [[{"op": "add"}]]])
def test_json_patch_malformed_is_400(ops: Any) -> None:
    """A body that does not decode as an array of operation objects is a 400 (jsonpatch.DecodePatch)."""
    with pytest.raises(PatchError) as exc:
        json_patch({"a": 1}, ops)
    assert exc.value.code == 400


def test_json_patch_is_atomic_and_pure() -> None:
    """A failing operation leaves the input untouched (RFC 6902 section 5: the whole patch fails)."""
    doc = {"a": {"b": [1]}}
    value = {"deep": [1]}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "add", "path": "/a/b/-", "value": 2}, {"op": "remove", "path": "/zz"}])
    assert doc == {"a": {"b": [1]}}
    out = json_patch(doc, [{"op": "add", "path": "/v", "value": value}])
    out["v"]["deep"].append(2)
    out["a"]["b"].append(3)
    assert value == {"deep": [1]} and doc == {"a": {"b": [1]}}


def test_patch_error_defaults() -> None:
    err = PatchError("boom")
    assert err.code == 422 and err.message == "boom" and str(err) == "boom"
