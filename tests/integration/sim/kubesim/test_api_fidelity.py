"""kubesim's API server as strict as a real one, over HTTP: validation, create strategies, admission
defaults, patch preconditions, watch/list resourceVersion semantics and DeleteOptions.

Each test names the upstream (Kubernetes 1.32) source it follows.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest

from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.store import parse_rfc3339
from kubespot.sim.kubesim.testing import node, pdb, pod
from support.kubesim_http import call

MERGE = {"Content-Type": "application/merge-patch+json"}
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
JSONPATCH = {"Content-Type": "application/json-patch+json"}
PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"


# -- 1. validation ------------------------------------------------------------------------------


async def test_invalid_taints_are_422_with_causes_on_create_update_and_patch(
    http: aiohttp.ClientSession,
) -> None:
    """pkg/apis/core/validation/validation.go ValidateNode/validateNodeTaints through
    pkg/registry/core/node/strategy.go Validate and ValidateUpdate; errors.NewInvalid's Status."""
    bad = node("n1", taints=[{"key": "k", "effect": "Maybe"}])
    status, body = await call(http, "POST", "/api/v1/nodes", bad)
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == (
        'Node "n1" is invalid: spec.taints[0].effect: Unsupported value: "Maybe": supported values: '
        '"NoSchedule", "PreferNoSchedule", "NoExecute"'
    )
    [cause] = body["details"]["causes"]
    assert cause["reason"] == "FieldValueNotSupported" and cause["field"] == "spec.taints[0].effect"
    assert cause["message"] == body["message"].split("spec.taints[0].effect: ", 1)[1]
    status, created = await call(http, "POST", "/api/v1/nodes", node("n1"))
    assert status == 201
    dup = {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule"}]}}
    status, body = await call(http, "PATCH", "/api/v1/nodes/n1", dup, MERGE)
    assert status == 422 and body["details"]["causes"][0]["reason"] == "FieldValueDuplicate"
    assert body["details"]["causes"][0]["field"] == "spec.taints[1]"
    created["spec"]["taints"] = [{"key": "bad key", "effect": "NoSchedule"}]
    status, body = await call(http, "PUT", "/api/v1/nodes/n1", created)
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.taints[0].key"
    status, body = await call(
        http, "PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"ok": "x" * 64}}}, MERGE
    )
    assert status == 422
    assert body["message"].startswith('Node "n1" is invalid: metadata.labels: Invalid value: "xxxx')
    assert body["message"].endswith(": must be no more than 63 characters")


async def test_wrong_json_types_are_400_on_create_and_422_patch_on_patch(http: aiohttp.ClientSession) -> None:
    """k8s.io/apiserver pkg/endpoints/handlers/rest.go transformDecodeError (400 BadRequest) and
    patch.go jsonPatcher.applyPatchToCurrentObject (field `patch`, empty kind and name)."""
    bad = node("n2")
    bad["spec"]["unschedulable"] = "yes"
    status, body = await call(http, "POST", "/api/v1/nodes", bad)
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"] == (
        'Node in version "v1" cannot be handled as a Node: json: cannot unmarshal string into Go struct '
        "field NodeSpec.spec.unschedulable of type bool"
    )
    await call(http, "POST", "/api/v1/nodes", node("n2"))
    status, body = await call(http, "PATCH", "/api/v1/nodes/n2", {"spec": {"unschedulable": "yes"}}, MERGE)
    assert status == 422 and body["details"]["causes"][0]["field"] == "patch"
    assert body["message"].startswith(' "" is invalid: patch: Invalid value: ')
    status, body = await call(
        http, "PATCH", "/api/v1/nodes/n2", {"metadata": {"annotations": {"a": 5}}}, STRATEGIC
    )
    assert status == 422 and "ObjectMeta.metadata.annotations of type string" in body["message"]


async def test_json_null_in_maps_and_lists_decodes_to_the_go_zero_value(http: aiohttp.ClientSession) -> None:
    """encoding/json (sigs.k8s.io/json) Unmarshal: null in a map[string]string is "", a null item
    of []v1.Container an empty Container, which validateContainers then refuses (422, never 500)."""
    for field in ("labels", "annotations"):
        body = {"metadata": {"name": f"c-{field}", field: {"a": None}}}
        status, created = await call(http, "POST", "/api/v1/namespaces/default/configmaps", body)
        assert status == 201 and created["metadata"][field]["a"] == ""
    status, body = await call(
        http,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/c-labels",
        [{"op": "add", "path": "/metadata/labels/b", "value": None}],
        JSONPATCH,
    )
    assert status == 200 and body["metadata"]["labels"] == {"a": "", "b": ""}
    status, body = await call(http, "POST", PODS, {"metadata": {"name": "n"}, "spec": {"containers": [None]}})
    assert status == 422
    assert body["message"] == (
        'Pod "n" is invalid: [spec.containers[0].name: Required value, '
        "spec.containers[0].image: Required value]"
    )


async def test_pods_without_containers_and_pdbs_with_both_bounds_are_invalid(
    http: aiohttp.ClientSession,
) -> None:
    """pkg/apis/core/validation/validation.go validateContainers; pkg/apis/policy/validation
    ValidatePodDisruptionBudgetSpec (message kind qualified with the group: PodDisruptionBudget.policy)."""
    status, body = await call(http, "POST", PODS, {"metadata": {"name": "empty"}, "spec": {}})
    assert status == 422 and body["message"] == 'Pod "empty" is invalid: spec.containers: Required value'
    both = pdb("b", min_available=1, selector={"matchLabels": {"app": "x"}}, namespace="default")
    both["spec"]["maxUnavailable"] = 1
    status, body = await call(http, "POST", PDBS, both)
    assert status == 422
    assert body["message"].startswith('PodDisruptionBudget.policy "b" is invalid: spec: Invalid value: ')
    assert body["message"].endswith("minAvailable and maxUnavailable cannot be both set")
    assert body["details"]["group"] == "policy" and body["details"]["kind"] == "PodDisruptionBudget"


async def test_pod_spec_is_immutable_but_binding_still_assigns_a_node(http: aiohttp.ClientSession) -> None:
    """pkg/apis/core/validation/validation.go ValidatePodUpdate (a patch of spec.nodeName is refused);
    pkg/registry/core/pod/storage/storage.go BindingREST (pods/binding sets it)."""
    await call(http, "POST", PODS, pod("p"))
    status, body = await call(http, "PATCH", f"{PODS}/p", {"spec": {"nodeName": "n1"}}, MERGE)
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec"
    assert body["message"].startswith(
        'Pod "p" is invalid: spec: Forbidden: pod updates may not change fields other than '
        "`spec.containers[*].image`,"
    )
    status, _ = await call(
        http, "PATCH", f"{PODS}/p", {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}, STRATEGIC
    )
    assert status == 200
    status, body = await call(
        http,
        "POST",
        f"{PODS}/p/binding",
        {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}},
    )
    assert status == 201 and body["status"] == "Success"
    status, got = await call(http, "GET", f"{PODS}/p")
    assert got["spec"]["nodeName"] == "n1" and got["spec"]["containers"][0]["image"] == "nginx:2"


async def test_toleration_seconds_change_freely_and_a_gated_pod_gains_a_node_selector(
    http: aiohttp.ClientSession,
) -> None:
    """pkg/apis/core/validation/validation.go ValidatePodUpdate: validateOnlyAddedTolerations
    (tolerationSeconds may be raised), validateOnlyDeletedSchedulingGates (the error on the added
    gate's name), and the podIsGated block's validateNodeSelectorMutation (KEP-3838)."""
    body = pod("t1")
    body["spec"]["tolerations"] = [
        {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
    ]
    _, created = await call(http, "POST", PODS, body)
    tolerations = created["spec"]["tolerations"]
    tolerations[0]["tolerationSeconds"] = 120
    status, patched = await call(http, "PATCH", f"{PODS}/t1", {"spec": {"tolerations": tolerations}}, MERGE)
    assert status == 200 and patched["spec"]["tolerations"][0]["tolerationSeconds"] == 120
    tolerations[0]["value"] = "v"
    tolerations[0]["operator"] = "Equal"
    status, body = await call(http, "PATCH", f"{PODS}/t1", {"spec": {"tolerations": tolerations}}, MERGE)
    assert status == 422 and body["message"] == (
        'Pod "t1" is invalid: spec.tolerations: Forbidden: existing toleration can not be modified '
        "except its tolerationSeconds"
    )

    gated = pod("g1")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/gate"}]
    await call(http, "POST", PODS, gated)
    status, patched = await call(
        http, "PATCH", f"{PODS}/g1", {"spec": {"nodeSelector": {"zone": "a"}}}, MERGE
    )
    assert status == 200 and patched["spec"]["nodeSelector"] == {"zone": "a"}
    status, body = await call(http, "PATCH", f"{PODS}/g1", {"spec": {"nodeSelector": {"zone": "b"}}}, MERGE)
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.nodeSelector"
    add_gate = {"spec": {"schedulingGates": [{"name": "example.com/gate"}, {"name": "x"}]}}
    status, body = await call(http, "PATCH", f"{PODS}/g1", add_gate, MERGE)
    assert status == 422 and body["message"] == (
        'Pod "g1" is invalid: spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but '
        "found new scheduling gate 'x'"
    )
    status, _ = await call(http, "PATCH", f"{PODS}/g1", {"spec": {"schedulingGates": None}}, MERGE)
    assert status == 200
    status, body = await call(http, "PATCH", f"{PODS}/g1", {"spec": {"nodeSelector": {"other": "c"}}}, MERGE)
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec"


# -- 2. create strategies ------------------------------------------------------------------------


async def test_create_resets_status_as_each_strategy_does(http: aiohttp.ClientSession) -> None:
    """PrepareForCreate of pkg/registry/core/pod/strategy.go (Pending + QoS class),
    pkg/registry/policy/poddisruptionbudget/strategy.go and pkg/registry/apps/deployment/strategy.go
    (status reset to its zero value), pkg/registry/core/namespace/strategy.go (Active);
    pkg/registry/core/node/strategy.go keeps a node's status (kubelets register with it)."""
    running = pod("r", phase="Running", ready=True, requests={"cpu": "1"})
    status, created = await call(http, "POST", PODS, running)
    assert status == 201 and created["status"] == {"phase": "Pending", "qosClass": "Burstable"}
    _, got = await call(http, "GET", f"{PODS}/r")
    assert got["status"] == {"phase": "Pending", "qosClass": "Burstable"}
    budget = pdb("b", min_available=1, selector={"matchLabels": {"app": "x"}}, namespace="default")
    budget["status"] = {"disruptionsAllowed": 5, "currentHealthy": 5}
    status, created = await call(http, "POST", PDBS, budget)
    assert status == 201 and created["metadata"]["generation"] == 1
    assert created["status"] == {
        "disruptionsAllowed": 0,
        "currentHealthy": 0,
        "desiredHealthy": 0,
        "expectedPods": 0,
    }
    deploy = {
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1"}]},
            },
        },
        "status": {"readyReplicas": 3},
    }
    status, created = await call(http, "POST", "/apis/apps/v1/namespaces/default/deployments", deploy)
    assert status == 201 and created["status"] == {}
    status, created = await call(http, "POST", "/api/v1/nodes", node("n1", ready=True))
    assert status == 201 and created["status"]["conditions"][0]["type"] == "Ready"
    status, created = await call(
        http, "POST", "/api/v1/namespaces", {"metadata": {"name": "x"}, "status": {"phase": "Terminating"}}
    )
    assert status == 201 and created["status"] == {"phase": "Active"}


async def test_a_gated_pod_is_created_with_its_scheduling_gated_condition(
    http: aiohttp.ClientSession,
) -> None:
    """pkg/registry/core/pod/strategy.go applySchedulingGatedCondition."""
    gated = pod("g")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    _, created = await call(http, "POST", PODS, gated)
    [cond] = created["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("PodScheduled", "False", "SchedulingGated")


# -- 3. admission defaults -------------------------------------------------------------------------


async def test_default_toleration_seconds_unless_already_tolerated(http: aiohttp.ClientSession) -> None:
    """plugin/pkg/admission/defaulttolerationseconds/admission.go Admit: not-ready and unreachable
    NoExecute tolerations of 300 s, skipped for what an existing toleration (empty key or effect
    included) already covers."""
    _, plain = await call(http, "POST", PODS, pod("plain"))
    assert plain["spec"]["tolerations"] == [
        {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    ]
    mine = pod("mine")
    mine["spec"]["tolerations"] = [
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 5,
        }
    ]
    _, created = await call(http, "POST", PODS, mine)
    assert [(t["key"], t["tolerationSeconds"]) for t in created["spec"]["tolerations"]] == [
        ("node.kubernetes.io/unreachable", 5),
        ("node.kubernetes.io/not-ready", 300),
    ]
    everything = pod("everything")
    everything["spec"]["tolerations"] = [{"operator": "Exists"}]
    _, created = await call(http, "POST", PODS, everything)
    assert created["spec"]["tolerations"] == [{"operator": "Exists"}]


async def test_pod_defaults_and_priority_from_its_class(http: aiohttp.ClientSession) -> None:
    """pkg/apis/core/v1/defaults.go SetDefaults_PodSpec / SetDefaults_Container and
    plugin/pkg/admission/priority/admission.go (class value, globalDefault, unknown class 403)."""
    _, created = await call(http, "POST", PODS, pod("d", image="nginx"))
    spec = created["spec"]
    assert (spec["restartPolicy"], spec["dnsPolicy"], spec["schedulerName"]) == (
        "Always",
        "ClusterFirst",
        "default-scheduler",
    )
    assert spec["terminationGracePeriodSeconds"] == 30 and spec["enableServiceLinks"] is True
    assert (spec["priority"], spec["preemptionPolicy"]) == (0, "PreemptLowerPriority")
    container = spec["containers"][0]
    assert container["imagePullPolicy"] == "Always"  # no tag: latest
    assert container["terminationMessagePath"] == "/dev/termination-log"
    critical = pod("c")
    critical["spec"]["priorityClassName"] = "system-node-critical"
    _, created = await call(http, "POST", PODS, critical)
    assert created["spec"]["priority"] == 2_000_001_000
    unknown = pod("u")
    unknown["spec"]["priorityClassName"] = "nope"
    status, body = await call(http, "POST", PODS, unknown)
    assert (
        status == 403
        and body["message"] == 'pods "u" is forbidden: no PriorityClass with name nope was found'
    )
    default_class = {
        "metadata": {"name": "everyone"},
        "value": 7,
        "globalDefault": True,
        "preemptionPolicy": "Never",
    }
    status, _ = await call(http, "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", default_class)
    assert status == 201
    _, created = await call(http, "POST", PODS, pod("g"))
    spec = created["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == ("everyone", 7, "Never")


async def test_replace_of_a_pending_pod_from_its_manifest_runs_the_update_admission(
    http: aiohttp.ClientSession,
) -> None:
    """kubectl replace: plugin/pkg/admission/defaulttolerationseconds/admission.go (Create and
    Update) re-adds the 300 s tolerations; plugin/pkg/admission/priority/admission.go admitPod, on
    Update, keeps the old pod's priority and preemptionPolicy; ValidatePodUpdate then sees no change."""
    never = {"metadata": {"name": "batch"}, "value": 5, "preemptionPolicy": "Never"}
    await call(http, "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", never)

    def manifest(**labels: str) -> dict[str, Any]:
        body = pod("r1", labels=labels)
        body["spec"]["schedulingGates"] = [{"name": "example.com/gate"}]
        body["spec"]["priorityClassName"] = "batch"
        return body

    status, created = await call(http, "POST", PODS, manifest())
    assert status == 201
    status, replaced = await call(http, "PUT", f"{PODS}/r1", manifest(x="y"))
    assert status == 200, replaced
    assert replaced["metadata"]["labels"] == {"x": "y"}
    for field in ("priority", "preemptionPolicy", "tolerations"):
        assert replaced["spec"][field] == created["spec"][field]
    assert (replaced["spec"]["priority"], replaced["spec"]["preemptionPolicy"]) == (5, "Never")
    status, body = await call(http, "PATCH", f"{PODS}/r1", {"spec": {"preemptionPolicy": None}}, MERGE)
    assert status == 200 and body["spec"]["preemptionPolicy"] == "Never"


def _storage_class(name: str, created: str, default: str | None) -> dict[str, Any]:
    annotations = {} if default is None else {"storageclass.kubernetes.io/is-default-class": default}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "creationTimestamp": created, "annotations": annotations},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
    }


async def test_a_claim_without_a_class_gets_the_newest_default_class(
    sim: KubeSim, http: aiohttp.ClientSession
) -> None:
    """plugin/pkg/admission/storage/storageclass/setdefault/admission.go Admit (on create, unless
    pkg/apis/core/helper PersistentVolumeClaimHasClass: the field, "" included, or the beta
    annotation) and pkg/volume/util/storageclass.go GetDefaultClass (newest, then by name)."""
    claims = "/api/v1/namespaces/default/persistentvolumeclaims"

    def claim(name: str, **spec: Any) -> dict[str, Any]:
        resources = {"requests": {"storage": "1Gi"}}
        return {
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": resources, **spec},
        }

    _, created = await call(http, "POST", claims, claim("before"))
    assert "storageClassName" not in created["spec"]  # no default class: left alone
    sim.store.load(
        [
            _storage_class("old", "2024-01-01T00:00:00Z", "true"),
            _storage_class("new-b", "2025-01-01T00:00:00Z", "true"),
            _storage_class("new-a", "2025-01-01T00:00:00Z", "true"),
            _storage_class("newest-not-default", "2026-01-01T00:00:00Z", "false"),
            _storage_class("newest-plain", "2026-01-01T00:00:00Z", None),
        ]
    )
    _, created = await call(http, "POST", claims, claim("data"))
    assert created["spec"]["storageClassName"] == "new-a"
    _, created = await call(http, "POST", claims, claim("none", storageClassName=""))
    assert created["spec"]["storageClassName"] == ""
    beta = claim("beta")
    beta["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "old"}
    _, created = await call(http, "POST", claims, beta)
    assert "storageClassName" not in created["spec"]
    status, patched = await call(
        http, "PATCH", f"{claims}/before", {"metadata": {"labels": {"a": "b"}}}, MERGE
    )
    assert status == 200 and "storageClassName" not in patched["spec"]  # create only


# -- 4. patch preconditions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        ({"metadata": {"resourceVersion": None, "labels": {"a": "1"}}}, MERGE),
        ({"metadata": {"resourceVersion": "", "labels": {"a": "1"}}}, MERGE),
        ({"metadata": {"resourceVersion": "", "labels": {"a": "1"}}}, STRATEGIC),
        (
            [
                {"op": "remove", "path": "/metadata/resourceVersion"},
                {"op": "add", "path": "/metadata/labels", "value": {"a": "1"}},
            ],
            JSONPATCH,
        ),
    ],
    ids=["merge-null", "merge-empty", "strategic-empty", "json-remove"],
)
async def test_a_patch_without_a_resource_version_is_unconditional(
    http: aiohttp.ClientSession, body: Any, headers: dict[str, str]
) -> None:
    """staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go Update: a patched object
    whose resourceVersion the patch cleared is written unconditionally (AllowUnconditionalUpdate);
    a stale one is still 409."""
    _, created = await call(
        http, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}}
    )
    await call(http, "PATCH", "/api/v1/namespaces/default/configmaps/c", {"data": {"x": "1"}}, MERGE)
    status, patched = await call(http, "PATCH", "/api/v1/namespaces/default/configmaps/c", body, headers)
    assert status == 200 and patched["metadata"]["labels"] == {"a": "1"}
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "data": {"y": "2"}}
    status, body = await call(http, "PATCH", "/api/v1/namespaces/default/configmaps/c", stale, MERGE)
    assert status == 409 and body["reason"] == "Conflict"


# -- 5. watch and list -----------------------------------------------------------------------------


async def watch_lines(http: aiohttp.ClientSession, path: str, count: int, **params: str) -> list[Any]:
    """The first ``count`` events of a watch (or all of a watch that ends sooner)."""
    events: list[Any] = []
    async with http.get(path, params={"watch": "true", "timeoutSeconds": "2", **params}) as resp:
        assert resp.status == 200, await resp.text()
        async for line in resp.content:
            if line.strip():
                events.append(orjson.loads(line))
                if len(events) == count:
                    break
    return events


CMS = "/api/v1/namespaces/default/configmaps"


async def test_a_too_old_watch_is_one_error_event_and_a_too_old_exact_list_is_410(
    http: aiohttp.ClientSession,
) -> None:
    """staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go Watch (newErrWatcher: an ERROR event
    with the Expired Status, HTTP 200); pkg/storage/etcd3/store.go GetList interpretListError (410
    "The resourceVersion for the provided list is too old.")."""
    _, old = await call(http, "POST", CMS, {"metadata": {"name": "a"}})
    await call(http, "POST", CMS, {"metadata": {"name": "b"}})
    await call(http, "POST", "/kubesim/v1/compact")
    rv = old["metadata"]["resourceVersion"]
    [event] = await watch_lines(http, CMS, 5, resourceVersion=rv)
    assert event["type"] == "ERROR"
    assert event["object"]["kind"] == "Status" and event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"
    status, body = await call(http, "GET", CMS, resourceVersion=rv, resourceVersionMatch="Exact")
    assert status == 410 and body["reason"] == "Expired"
    assert body["message"] == "The resourceVersion for the provided list is too old."


async def test_list_resource_version_semantics(http: aiohttp.ClientSession) -> None:
    """API concepts "Semantics for get and list" and the watch cache: Exact serves the state at that
    version; NotOlderThan and "0" the latest; a future version is 504 Too large
    (staging/src/k8s.io/apiserver/pkg/storage/errors.go NewTooLargeResourceVersionError); the
    combinations ValidateListOptions forbids are 422 on ListOptions.meta.k8s.io."""
    _, a = await call(http, "POST", CMS, {"metadata": {"name": "a"}, "data": {"v": "1"}})
    at = a["metadata"]["resourceVersion"]
    await call(http, "PATCH", f"{CMS}/a", {"data": {"v": "2"}}, MERGE)
    await call(http, "POST", CMS, {"metadata": {"name": "b"}})
    status, past = await call(http, "GET", CMS, resourceVersion=at, resourceVersionMatch="Exact")
    assert status == 200 and past["metadata"]["resourceVersion"] == at
    assert [(o["metadata"]["name"], o["data"]) for o in past["items"]] == [("a", {"v": "1"})]
    for params in (
        {"resourceVersion": at, "resourceVersionMatch": "NotOlderThan"},
        {"resourceVersion": "0"},
        {},
    ):
        _, now = await call(http, "GET", CMS, **params)
        assert [o["metadata"]["name"] for o in now["items"]] == ["a", "b"], params
        assert now["items"][0]["data"] == {"v": "2"}
    future = str(int(at) + 1000)
    status, body = await call(http, "GET", CMS, resourceVersion=future, resourceVersionMatch="NotOlderThan")
    assert status == 504 and body["reason"] == "Timeout"
    assert body["message"].startswith(f"Too large resource version: {future}, current: ")
    status, body = await call(http, "GET", CMS, resourceVersionMatch="Exact")
    assert status == 422 and body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is '
        "forbidden unless resourceVersion is provided"
    )
    status, body = await call(http, "GET", CMS, sendInitialEvents="true")
    assert status == 422 and body["details"]["causes"][0]["field"] == "sendInitialEvents"


async def test_send_initial_events_validates_and_sends_full_state_from_a_version(
    http: aiohttp.ClientSession,
) -> None:
    """k8s.io/apimachinery pkg/apis/meta/internalversion/validation validateWatchOptions (422 unless
    resourceVersionMatch=NotOlderThan) and the watch-list contract (KEP-3157, cacher.go Watch): the
    full current state, then the initial-events-end bookmark, even from a resourceVersion."""
    status, body = await call(http, "GET", CMS, watch="true", sendInitialEvents="true")
    assert status == 422 and body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires '
        "setting resourceVersionMatch to NotOlderThan"
    )
    status, body = await call(http, "GET", CMS, watch="true", resourceVersionMatch="NotOlderThan")
    assert status == 422 and "unless sendInitialEvents is provided" in body["message"]
    await call(http, "POST", CMS, {"metadata": {"name": "a"}})
    _, b = await call(http, "POST", CMS, {"metadata": {"name": "b"}})
    events = await watch_lines(
        http,
        CMS,
        3,
        sendInitialEvents="true",
        resourceVersionMatch="NotOlderThan",
        allowWatchBookmarks="true",
        resourceVersion=b["metadata"]["resourceVersion"],
    )
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events[:2]] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]
    assert events[2]["type"] == "BOOKMARK"
    assert events[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_leaving_a_selector_is_deleted_with_the_previous_object(http: aiohttp.ClientSession) -> None:
    """staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go convertToWatchEvent: an object
    that no longer matches is a DELETED carrying its previous state at the event's version."""
    _, created = await call(http, "POST", CMS, {"metadata": {"name": "s", "labels": {"app": "web"}}})
    rv = created["metadata"]["resourceVersion"]
    await call(http, "PATCH", f"{CMS}/s", {"metadata": {"labels": {"app": "db"}}}, MERGE)
    [event] = await watch_lines(http, CMS, 1, resourceVersion=rv, labelSelector="app=web")
    assert event["type"] == "DELETED"
    assert event["object"]["metadata"]["labels"] == {"app": "web"}
    assert int(event["object"]["metadata"]["resourceVersion"]) > int(rv)


# -- 6. delete -------------------------------------------------------------------------------------


async def test_delete_answers_status_or_object_as_the_registry_does(http: aiohttp.ClientSession) -> None:
    """staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go finalizeDelete (Status
    Success with name, group, resource as kind and uid, unless ReturnDeletedObject as for pods);
    handlers/delete.go (202 when orphanDependents=false leaves the object waiting)."""
    _, cm = await call(http, "POST", CMS, {"metadata": {"name": "c"}})
    status, body = await call(http, "DELETE", f"{CMS}/c")
    assert status == 200
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "c", "kind": "configmaps", "uid": cm["metadata"]["uid"]},
    }
    deploy = {
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1"}]},
            },
        },
    }
    await call(http, "POST", "/apis/apps/v1/namespaces/default/deployments", deploy)
    status, body = await call(http, "DELETE", "/apis/apps/v1/namespaces/default/deployments/d")
    assert status == 200 and body["details"]["group"] == "apps" and body["details"]["kind"] == "deployments"
    await call(http, "POST", PODS, pod("p"))
    status, body = await call(http, "DELETE", f"{PODS}/p")
    assert status == 200 and body["kind"] == "Pod" and body["metadata"]["name"] == "p"
    await call(http, "POST", CMS, {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
    status, body = await call(http, "DELETE", f"{CMS}/held", {"orphanDependents": False})
    assert status == 202 and body["kind"] == "ConfigMap" and body["metadata"]["deletionTimestamp"]


async def test_delete_options_propagation_dry_run_and_validation(http: aiohttp.ClientSession) -> None:
    """registry/generic/registry/store.go deletionFinalizersForGarbageCollection (Orphan adds the
    `orphan` finalizer, Foreground `foregroundDeletion`); apimachinery
    pkg/apis/meta/v1/validation ValidateDeleteOptions (422 on DeleteOptions.meta.k8s.io)."""
    await call(http, "POST", CMS, {"metadata": {"name": "o"}})
    status, body = await call(http, "DELETE", f"{CMS}/o", {"propagationPolicy": "Orphan", "dryRun": ["All"]})
    assert status == 200 and body["metadata"]["finalizers"] == ["orphan"]
    status, _ = await call(http, "GET", f"{CMS}/o")
    assert status == 200 and "finalizers" not in _["metadata"]  # dry run: nothing written
    status, body = await call(http, "DELETE", f"{CMS}/o", propagationPolicy="Foreground")
    assert status == 200 and body["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert body["metadata"]["deletionTimestamp"]
    status, body = await call(http, "DELETE", f"{CMS}/o", {"propagationPolicy": "Sometimes"})
    assert status == 422 and body["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sometimes": '
        'supported values: "Foreground", "Background", "Orphan", "nil"'
    )
    status, body = await call(
        http, "DELETE", f"{CMS}/o", {"orphanDependents": True, "propagationPolicy": "Orphan"}
    )
    assert status == 422 and body["details"]["causes"][0]["field"] == "propagationPolicy"
    status, body = await call(http, "DELETE", f"{CMS}/o", {"dryRun": ["Some"]})
    assert status == 422 and body["details"]["causes"][0]["field"] == "dryRun"


async def test_failed_delete_preconditions_are_409_with_the_storage_error(
    http: aiohttp.ClientSession,
) -> None:
    """staging/src/k8s.io/apiserver/pkg/storage/interfaces.go Preconditions.Check, reported through
    storage.NewInvalidObjError and interpretStorageError as 409 Conflict."""
    _, cm = await call(http, "POST", CMS, {"metadata": {"name": "c"}})
    status, body = await call(http, "DELETE", f"{CMS}/c", {"preconditions": {"uid": "other"}})
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on configmaps "c": StorageError: invalid object, Code: 4, '
        "Key: /registry/configmaps/default/c, ResourceVersion: 0, AdditionalErrorMsg: Precondition "
        f"failed: UID in precondition: other, UID in object meta: {cm['metadata']['uid']}"
    )
    status, body = await call(http, "DELETE", f"{CMS}/c", {"preconditions": {"resourceVersion": "1"}})
    assert (
        status == 409
        and "ResourceVersion in precondition: 1, ResourceVersion in object meta: " in body["message"]
    )


async def test_a_second_delete_only_shortens_the_grace_moving_the_deadline_earlier(
    http: aiohttp.ClientSession,
) -> None:
    """staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go BeforeDelete: a shorter grace period
    moves deletionTimestamp earlier by the difference; a longer one changes nothing."""
    await call(http, "POST", PODS, pod("g", node="n1", grace=30))
    _, first = await call(http, "DELETE", f"{PODS}/g")
    assert first["metadata"]["deletionGracePeriodSeconds"] == 30
    _, second = await call(http, "DELETE", f"{PODS}/g", {"gracePeriodSeconds": 10})
    assert second["metadata"]["deletionGracePeriodSeconds"] == 10
    moved = parse_rfc3339(first["metadata"]["deletionTimestamp"]) - parse_rfc3339(
        second["metadata"]["deletionTimestamp"]
    )
    assert moved == 20
    _, third = await call(http, "DELETE", f"{PODS}/g", {"gracePeriodSeconds": 20})
    assert third["metadata"] == second["metadata"]


async def test_binding_refuses_a_terminating_pod_and_a_foreign_target(http: aiohttp.ClientSession) -> None:
    """pkg/registry/core/pod/storage/storage.go BindingREST.Create / assignPod: 409 for a pod being
    deleted or already bound, 400 for a name that is not the URL's."""
    held = pod("t")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    await call(http, "POST", PODS, held)
    await call(http, "DELETE", f"{PODS}/t")
    binding = {"metadata": {"name": "t"}, "target": {"kind": "Node", "name": "n1"}}
    status, body = await call(http, "POST", f"{PODS}/t/binding", binding)
    assert status == 409 and body["message"].endswith("pod t is being deleted, cannot be assigned to a host")
    await call(http, "POST", PODS, pod("b"))
    status, body = await call(http, "POST", f"{PODS}/b/binding", binding)
    assert status == 400 and body["message"] == "name in URL does not match name in Binding object"
    binding["metadata"]["name"] = "b"
    status, _ = await call(http, "POST", f"{PODS}/b/binding", binding)
    assert status == 201
    status, body = await call(http, "POST", f"{PODS}/b/binding", binding)
    assert status == 409 and body["message"].endswith('pod b is already assigned to node "n1"')


async def test_workload_selectors_and_object_names_are_validated(http: aiohttp.ClientSession) -> None:
    """pkg/apis/apps/validation ValidateDeploymentSpec (the kind in the message carries its group);
    apimachinery ValidateObjectMeta with ValidateNamespaceName (a DNS-1123 label: no dots)."""
    deploy = {
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "other"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1"}]},
            },
        },
    }
    status, body = await call(http, "POST", "/apis/apps/v1/namespaces/default/deployments", deploy)
    assert status == 422 and body["message"] == (
        'Deployment.apps "d" is invalid: spec.template.metadata.labels: Invalid value: '
        'map[string]string{"app":"d"}: `selector` does not match template `labels`'
    )
    status, body = await call(http, "POST", "/api/v1/namespaces", {"metadata": {"name": "a.b"}})
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.name"
    assert "a lowercase RFC 1123 label must consist of" in body["message"]
    status, _ = await call(http, "POST", CMS, {"metadata": {"name": "a.b"}})
    assert status == 201  # other kinds take a DNS-1123 subdomain
