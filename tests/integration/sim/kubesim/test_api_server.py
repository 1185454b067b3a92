"""kubesim's API server over real HTTP: verbs, status codes and bodies, paging, watch, CRDs, faults.

Upstream references for the behaviours checked here:
- API concepts (https://kubernetes.io/docs/reference/using-api/api-concepts/): list chunking with
  limit/continue and remainingItemCount; watch from a resourceVersion, 410 Gone "too old resource
  version" once compacted; BOOKMARK events on allowWatchBookmarks; sendInitialEvents ending in a
  bookmark annotated k8s.io/initial-events-end.
- Optimistic concurrency: an update or patch carrying a stale metadata.resourceVersion is refused
  with 409 Conflict "the object has been modified; please apply your changes to the latest version
  and try again".
- Graceful deletion (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination):
  a scheduled pod gets deletionTimestamp and deletionGracePeriodSeconds and stays until its kubelet
  confirms; an unscheduled pod is removed at once; objects with finalizers stay until they clear.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest

from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import condition, pod, until
from support.kubesim_http import call

QUIET = ControllerConfig(scheduler=False, kubelet=False, workloads=False)
MERGE = {"Content-Type": "application/merge-patch+json"}
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
JSONPATCH = {"Content-Type": "application/json-patch+json"}


async def test_discovery_lists_resources_and_subresources(http: aiohttp.ClientSession) -> None:
    status, core = await call(http, "GET", "/api/v1")
    assert status == 200
    names = {r["name"]: r for r in core["resources"]}
    for needed in (
        "pods",
        "pods/eviction",
        "pods/status",
        "pods/binding",
        "nodes",
        "nodes/status",
        "events",
        "configmaps",
        "secrets",
        "services",
        "serviceaccounts",
        "namespaces",
    ):
        assert needed in names, needed
    assert names["pods/eviction"]["verbs"] == ["create"]
    assert names["pods/eviction"]["group"] == "policy"
    assert "po" in names["pods"]["shortNames"]
    _, groups = await call(http, "GET", "/apis")
    group_names = {g["name"] for g in groups["groups"]}
    assert {"apps", "policy", "coordination.k8s.io", "events.k8s.io", "apiextensions.k8s.io"} <= group_names
    _, apps = await call(http, "GET", "/apis/apps/v1")
    assert {"deployments", "replicasets", "daemonsets", "statefulsets"} <= {
        r["name"] for r in apps["resources"]
    }
    status, version = await call(http, "GET", "/version")
    assert status == 200 and version["major"] == "1"


async def test_get_unknown_object_is_upstream_404_status(http: aiohttp.ClientSession) -> None:
    status, body = await call(http, "GET", "/api/v1/namespaces/default/pods/nope")
    assert status == 404
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "pods"},
        "code": 404,
    }
    status, body = await call(http, "GET", "/apis/apps/v1/namespaces/default/deployments/nope")
    assert body["message"] == 'deployments.apps "nope" not found' and body["details"]["group"] == "apps"
    status, _ = await call(http, "GET", "/api/v1/frobs")
    assert status == 404


async def test_create_conflicts_and_namespace_must_exist(http: aiohttp.ClientSession) -> None:
    status, created = await call(http, "POST", "/api/v1/namespaces/default/pods", pod("a"))
    assert status == 201
    assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"]
    assert created["status"]["phase"] == "Pending"
    assert created["spec"]["terminationGracePeriodSeconds"] == 30
    status, body = await call(http, "POST", "/api/v1/namespaces/default/pods", pod("a"))
    assert status == 409 and body["reason"] == "AlreadyExists"
    status, body = await call(http, "POST", "/api/v1/namespaces/missing/pods", pod("a", namespace=None))
    assert status == 404 and body["message"] == 'namespaces "missing" not found'
    status, body = await call(http, "POST", "/api/v1/namespaces/default/pods", pod("Bad_Name"))
    assert status == 422 and body["reason"] == "Invalid"
    status, gen = await call(
        http,
        "POST",
        "/api/v1/namespaces/default/pods",
        {"metadata": {"generateName": "web-"}, "spec": {"containers": [{"name": "app", "image": "nginx:1"}]}},
    )
    assert status == 201 and gen["metadata"]["name"].startswith("web-")


async def test_update_with_stale_resource_version_is_409(http: aiohttp.ClientSession) -> None:
    _, cm = await call(
        http, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}, "data": {"a": "1"}}
    )
    cm["data"]["a"] = "2"
    status, updated = await call(http, "PUT", "/api/v1/namespaces/default/configmaps/c", cm)
    assert status == 200 and updated["data"]["a"] == "2"
    assert int(updated["metadata"]["resourceVersion"]) > int(cm["metadata"]["resourceVersion"])
    cm["data"]["a"] = "3"  # cm still carries the old resourceVersion
    status, body = await call(http, "PUT", "/api/v1/namespaces/default/configmaps/c", cm)
    assert status == 409 and body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]


async def test_patch_types_and_resource_version_precondition(
    http: aiohttp.ClientSession, sim: KubeSim
) -> None:
    node = {"metadata": {"name": "n1", "labels": {"a": "1"}}, "spec": {}}
    _, created = await call(http, "POST", "/api/v1/nodes", node)
    status, p1 = await call(http, "PATCH", "/api/v1/nodes/n1", {"spec": {"unschedulable": True}}, STRATEGIC)
    assert status == 200 and p1["spec"]["unschedulable"] is True
    status, p2 = await call(
        http, "PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"a": None, "b": "2"}}}, MERGE
    )
    assert p2["metadata"]["labels"] == {"b": "2"}
    status, p3 = await call(
        http,
        "PATCH",
        "/api/v1/nodes/n1",
        [{"op": "add", "path": "/spec/taints", "value": [{"key": "k", "effect": "NoSchedule"}]}],
        JSONPATCH,
    )
    assert status == 200 and p3["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]
    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"], "labels": {"c": "3"}}}
    status, body = await call(http, "PATCH", "/api/v1/nodes/n1", stale, MERGE)
    assert status == 409 and body["reason"] == "Conflict"
    status, _ = await call(
        http, "PATCH", "/api/v1/nodes/n1", [{"op": "test", "path": "/spec/x", "value": 1}], JSONPATCH
    )
    assert status == 422
    status, _ = await call(http, "PATCH", "/api/v1/nodes/n1", b"{not json", MERGE)
    assert status == 400
    status, _body = await call(http, "PATCH", "/api/v1/nodes/n1", {"a": 1}, {"Content-Type": "text/plain"})
    assert status == 415


async def test_status_subresource_separates_spec_and_status(http: aiohttp.ClientSession) -> None:
    await call(http, "POST", "/api/v1/nodes", {"metadata": {"name": "n2"}, "spec": {}})
    _, n = await call(
        http, "PATCH", "/api/v1/nodes/n2", {"status": {"phase": "x"}, "spec": {"podCIDR": "10/8"}}, MERGE
    )
    assert "phase" not in n.get("status", {}) and n["spec"]["podCIDR"] == "10/8"
    _, n = await call(
        http, "PATCH", "/api/v1/nodes/n2/status", {"status": {"phase": "y"}, "spec": {"podCIDR": "z"}}, MERGE
    )
    assert n["status"]["phase"] == "y" and n["spec"]["podCIDR"] == "10/8"


async def test_selectors_filter_lists(http: aiohttp.ClientSession) -> None:
    for i, (node, app) in enumerate([("n1", "web"), ("n1", "db"), ("n2", "web")]):
        await call(
            http, "POST", "/api/v1/namespaces/default/pods", pod(f"p{i}", node=node, labels={"app": app})
        )
    _, by_node = await call(http, "GET", "/api/v1/pods", fieldSelector="spec.nodeName=n1")
    assert sorted(p["metadata"]["name"] for p in by_node["items"]) == ["p0", "p1"]
    _, web_not_n1 = await call(
        http,
        "GET",
        "/api/v1/namespaces/default/pods",
        labelSelector="app in (web)",
        fieldSelector="spec.nodeName!=n1",
    )
    assert [p["metadata"]["name"] for p in web_not_n1["items"]] == ["p2"]
    status, body = await call(http, "GET", "/api/v1/pods", labelSelector="app in (web")
    assert status == 400 and body["reason"] == "BadRequest"
    status, body = await call(http, "GET", "/api/v1/pods", fieldSelector="spec.bogus=1")
    assert status == 400


async def test_list_chunking_is_consistent_across_pages(http: aiohttp.ClientSession) -> None:
    for i in range(7):
        await call(http, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": f"c{i}"}})
    _, page = await call(http, "GET", "/api/v1/namespaces/default/configmaps", limit="3")
    names = [c["metadata"]["name"] for c in page["items"]]
    assert len(names) == 3 and page["metadata"]["remainingItemCount"] == 4
    # A write between pages does not change what the continued list returns.
    await call(http, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c99"}})
    token = page["metadata"]["continue"]
    while token:
        _, page = await call(
            http, "GET", "/api/v1/namespaces/default/configmaps", limit="3", **{"continue": token}
        )
        names += [c["metadata"]["name"] for c in page["items"]]
        token = page["metadata"].get("continue")
    assert names == sorted(f"c{i}" for i in range(7))
    status, _body = await call(http, "GET", "/api/v1/configmaps", **{"continue": "!!!"})
    assert status == 400


async def test_a_list_at_resource_version_0_ignores_the_limit(http: aiohttp.ClientSession) -> None:
    """staging/src/k8s.io/apiserver/pkg/storage/cacher/delegator.go shouldDelegateList (1.32): a
    paginated list at resourceVersion "0" is served from the watch cache, which does not page: every
    item, no continue token; with resourceVersionMatch=NotOlderThan too."""
    for i in range(4):
        await call(http, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": f"c{i}"}})
    for extra in ({}, {"resourceVersionMatch": "NotOlderThan"}):
        _, body = await call(
            http, "GET", "/api/v1/namespaces/default/configmaps", limit="2", resourceVersion="0", **extra
        )
        assert [c["metadata"]["name"] for c in body["items"]] == [f"c{i}" for i in range(4)]
        assert "continue" not in body["metadata"] and "remainingItemCount" not in body["metadata"]
    _, body = await call(http, "GET", "/api/v1/namespaces/default/configmaps", limit="2")
    assert len(body["items"]) == 2 and body["metadata"]["continue"]  # from etcd: paged


async def _watch(
    http: aiohttp.ClientSession, path: str, n: int, wait_s: float = 5, **params: str
) -> list[Any]:
    out: list[Any] = []
    async with http.get(path, params={"watch": "true", **params}) as resp:
        assert resp.status == 200, await resp.text()
        async with asyncio.timeout(wait_s):
            async for line in resp.content:
                out.append(orjson.loads(line))
                if len(out) >= n:
                    break
    return out


async def test_watch_from_resource_version_sees_changes_in_order(http: aiohttp.ClientSession) -> None:
    _, created = await call(http, "POST", "/api/v1/namespaces/default/pods", pod("w", node="n1"))
    rv = created["metadata"]["resourceVersion"]
    task = asyncio.create_task(_watch(http, "/api/v1/namespaces/default/pods", 3, resourceVersion=rv))
    await asyncio.sleep(0.05)
    await call(
        http, "PATCH", "/api/v1/namespaces/default/pods/w", {"metadata": {"labels": {"x": "1"}}}, MERGE
    )
    await call(http, "DELETE", "/api/v1/namespaces/default/pods/w", gracePeriodSeconds="0")
    await call(http, "POST", "/api/v1/namespaces/default/pods", pod("w2"))
    events = await task
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED", "ADDED"]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


async def test_watch_label_selector_turns_leaving_into_deleted(http: aiohttp.ClientSession) -> None:
    _, created = await call(http, "POST", "/api/v1/namespaces/default/pods", pod("s", labels={"app": "web"}))
    rv = created["metadata"]["resourceVersion"]
    task = asyncio.create_task(_watch(http, "/api/v1/pods", 1, resourceVersion=rv, labelSelector="app=web"))
    await asyncio.sleep(0.05)
    await call(
        http, "PATCH", "/api/v1/namespaces/default/pods/s", {"metadata": {"labels": {"app": "db"}}}, MERGE
    )
    [event] = await task
    assert event["type"] == "DELETED" and event["object"]["metadata"]["name"] == "s"


async def test_watch_from_compacted_version_is_410_gone(http: aiohttp.ClientSession, sim: KubeSim) -> None:
    _, created = await call(
        http, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "old"}}
    )
    await call(http, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "new"}})
    status, _ = await call(http, "POST", "/kubesim/v1/compact")
    assert status == 200
    status, body = await call(
        http,
        "GET",
        "/api/v1/configmaps",
        watch="true",
        resourceVersion=created["metadata"]["resourceVersion"],
    )
    # The watch cache answers a too-old version with HTTP 200 and one ERROR event carrying the 410
    # Status (staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go Watch, newErrWatcher).
    assert status == 200
    [event] = [orjson.loads(line) for line in body.splitlines()] if isinstance(body, str) else [body]
    assert event["type"] == "ERROR" and event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"
    assert event["object"]["message"].startswith("too old resource version")


async def test_watch_bookmarks_and_initial_events(http: aiohttp.ClientSession) -> None:
    await call(http, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "b1"}})
    events = await _watch(
        http,
        "/api/v1/namespaces/default/configmaps",
        2,
        sendInitialEvents="true",
        allowWatchBookmarks="true",
        resourceVersionMatch="NotOlderThan",
    )
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "b1"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    _, lst = await call(http, "GET", "/api/v1/namespaces/default/configmaps")
    periodic = await _watch(
        http,
        "/api/v1/namespaces/default/configmaps",
        1,
        allowWatchBookmarks="true",
        resourceVersion=lst["metadata"]["resourceVersion"],
    )
    assert periodic[0]["type"] == "BOOKMARK" and periodic[0]["object"]["kind"] == "ConfigMap"


async def test_delete_options_come_from_the_body_when_there_is_one(http: aiohttp.ClientSession) -> None:
    # k8s.io/apiserver pkg/endpoints/handlers/delete.go (DeleteResource): a non-empty body is decoded
    # as the DeleteOptions and the query parameters are then not read at all; only an empty body
    # lets gracePeriodSeconds and dryRun come from the query.
    await call(http, "POST", "/api/v1/namespaces/default/pods", pod("b", node="n1", grace=60))
    await call(http, "DELETE", "/api/v1/namespaces/default/pods/b", {"preconditions": {}}, dryRun="All")
    status, now = await call(http, "GET", "/api/v1/namespaces/default/pods/b")
    assert status == 200 and now["metadata"].get("deletionTimestamp"), "the query's dryRun is ignored"
    ignored = await call(
        http, "DELETE", "/api/v1/namespaces/default/pods/b", {"preconditions": {}}, gracePeriodSeconds="1"
    )
    assert ignored[1]["metadata"]["deletionGracePeriodSeconds"] == 60, "the query's grace is ignored"
    _, from_body = await call(http, "DELETE", "/api/v1/namespaces/default/pods/b", {"gracePeriodSeconds": 2})
    assert from_body["metadata"]["deletionGracePeriodSeconds"] == 2


async def test_graceful_pod_deletion(http: aiohttp.ClientSession) -> None:
    await call(http, "POST", "/api/v1/namespaces/default/pods", pod("g", node="n1", grace=60))
    status, deleting = await call(http, "DELETE", "/api/v1/namespaces/default/pods/g")
    assert status == 200
    assert (
        deleting["metadata"]["deletionGracePeriodSeconds"] == 60 and deleting["metadata"]["deletionTimestamp"]
    )
    status, _ = await call(http, "GET", "/api/v1/namespaces/default/pods/g")
    assert status == 200  # still there until the kubelet (disabled here) confirms
    _, shorter = await call(http, "DELETE", "/api/v1/namespaces/default/pods/g", {"gracePeriodSeconds": 5})
    assert shorter["metadata"]["deletionGracePeriodSeconds"] == 5
    _, longer = await call(http, "DELETE", "/api/v1/namespaces/default/pods/g", {"gracePeriodSeconds": 50})
    assert longer["metadata"]["deletionGracePeriodSeconds"] == 5  # never extended
    await call(http, "DELETE", "/api/v1/namespaces/default/pods/g", gracePeriodSeconds="0")
    status, _ = await call(http, "GET", "/api/v1/namespaces/default/pods/g")
    assert status == 404
    # Unscheduled pods go at once.
    await call(http, "POST", "/api/v1/namespaces/default/pods", pod("u"))
    await call(http, "DELETE", "/api/v1/namespaces/default/pods/u")
    status, _ = await call(http, "GET", "/api/v1/namespaces/default/pods/u")
    assert status == 404


async def test_finalizers_hold_deletion_and_preconditions(http: aiohttp.ClientSession) -> None:
    _, _cm = await call(
        http,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        {"metadata": {"name": "f", "finalizers": ["kubespot.io/hold"]}},
    )
    status, body = await call(
        http, "DELETE", "/api/v1/namespaces/default/configmaps/f", {"preconditions": {"uid": "not-the-uid"}}
    )
    assert status == 409 and "Precondition failed" in body["message"]
    _, held = await call(http, "DELETE", "/api/v1/namespaces/default/configmaps/f")
    assert held["metadata"]["deletionTimestamp"]
    status, _ = await call(http, "GET", "/api/v1/namespaces/default/configmaps/f")
    assert status == 200
    await call(
        http, "PATCH", "/api/v1/namespaces/default/configmaps/f", {"metadata": {"finalizers": None}}, MERGE
    )
    status, _ = await call(http, "GET", "/api/v1/namespaces/default/configmaps/f")
    assert status == 404


async def test_deletecollection_with_selector(http: aiohttp.ClientSession) -> None:
    for i, app in enumerate(["a", "a", "b"]):
        await call(
            http,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            {"metadata": {"name": f"d{i}", "labels": {"app": app}}},
        )
    status, deleted = await call(
        http, "DELETE", "/api/v1/namespaces/default/configmaps", labelSelector="app=a"
    )
    assert status == 200 and len(deleted["items"]) == 2
    _, left = await call(http, "GET", "/api/v1/namespaces/default/configmaps")
    assert [c["metadata"]["name"] for c in left["items"]] == ["d2"]


async def test_custom_resources_from_a_crd(http: aiohttp.ClientSession) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "nodepools.karpenter.sh"},
        "spec": {
            "group": "karpenter.sh",
            "names": {
                "plural": "nodepools",
                "singular": "nodepool",
                "kind": "NodePool",
                "shortNames": ["np"],
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }
    status, created = await call(http, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert status == 201
    assert any(c["type"] == "Established" and c["status"] == "True" for c in created["status"]["conditions"])
    _, res = await call(http, "GET", "/apis/karpenter.sh/v1")
    assert res["resources"][0]["name"] == "nodepools" and res["resources"][0]["namespaced"] is False
    status, np = await call(
        http,
        "POST",
        "/apis/karpenter.sh/v1/nodepools",
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"weight": 1},
        },
    )
    assert status == 201 and np["metadata"]["generation"] == 1
    _, np2 = await call(
        http, "PATCH", "/apis/karpenter.sh/v1/nodepools/default", {"spec": {"weight": 2}}, MERGE
    )
    assert np2["metadata"]["generation"] == 2
    status, _ = await call(http, "PATCH", "/apis/karpenter.sh/v1/nodepools/default", {"spec": {}}, STRATEGIC)
    assert status == 415  # upstream refuses strategic merge patch on custom resources
    await call(
        http, "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodepools.karpenter.sh"
    )
    status, _ = await call(http, "GET", "/apis/karpenter.sh/v1/nodepools")
    assert status == 404


async def test_table_output_for_kubectl(http: aiohttp.ClientSession) -> None:
    await call(http, "POST", "/api/v1/nodes", {"metadata": {"name": "t1"}, "spec": {"unschedulable": True}})
    status, table = await call(
        http,
        "GET",
        "/api/v1/nodes",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
    )
    assert status == 200 and table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]][:2] == ["Name", "Status"]
    assert table["rows"][0]["cells"][0] == "t1"


async def test_faults_errors_latency_qps_and_dropped_watches(
    http: aiohttp.ClientSession, sim: KubeSim
) -> None:
    status, _added = await call(
        http,
        "POST",
        "/kubesim/v1/faults",
        {"verb": "patch", "resource": "nodes", "error_rate": 1.0, "error_code": 503, "remaining": 2},
    )
    assert status == 201
    await call(http, "POST", "/api/v1/nodes", {"metadata": {"name": "f1"}, "spec": {}})
    codes = [
        (await call(http, "PATCH", "/api/v1/nodes/f1", {"metadata": {"labels": {"x": str(i)}}}, MERGE))[0]
        for i in range(3)
    ]
    assert codes == [503, 503, 200]  # the rule expired after two matches
    sim.faults.set_qps(2, 2)
    codes = [(await call(http, "GET", "/api/v1/nodes"))[0] for _ in range(6)]
    assert codes.count(429) >= 3
    sim.faults.clear()
    sim.faults.add(resource="configmaps", drop_watch_after_s=0.2)
    async with http.get("/api/v1/configmaps", params={"watch": "true"}) as resp:
        async with asyncio.timeout(3):
            await resp.read()  # the server ends the stream: a dropped watch
    sim.faults.clear()
    status, body = await call(http, "POST", "/kubesim/v1/faults", {"verb": "explode"})
    assert status == 400 and "unknown verb" in body["message"]


async def test_throttling_429s_are_plain_text_with_retry_after_as_upstream(
    http: aiohttp.ClientSession, sim: KubeSim
) -> None:
    """The QPS limit and injected 429s answer as API Priority and Fairness does.

    k8s.io/apiserver pkg/server/filters priority-and-fairness.go ``tooManyRequests``: a Retry-After
    header and ``http.Error(w, "Too many requests, please try again later.", 429)`` — text, not a
    ``Status``, so never the ``DisruptionBudget`` cause a budget's refusal carries (eviction.go).
    """
    sim.faults.set_qps(1, 1)
    answers = []
    for _ in range(3):
        async with http.get("/api/v1/nodes") as resp:
            answers.append(
                (resp.status, resp.headers.get("Retry-After"), resp.content_type, await resp.text())
            )
    sim.faults.clear()
    sim.faults.add("verb=create,resource=pods/eviction,rate=1,code=429,count=1")
    async with http.post("/api/v1/namespaces/default/pods/p/eviction", json={}) as resp:
        answers.append((resp.status, resp.headers.get("Retry-After"), resp.content_type, await resp.text()))
    throttled = [a for a in answers if a[0] == 429]
    assert len(throttled) >= 2
    assert all(
        a[1:] == ("1", "text/plain", "Too many requests, please try again later.\n") for a in throttled
    )


async def test_malformed_requests_never_crash_the_server(http: aiohttp.ClientSession) -> None:
    status, _ = await call(http, "POST", "/api/v1/namespaces/default/pods", b"\x00\xff garbage")
    assert status == 400
    status, _ = await call(http, "POST", "/api/v1/namespaces/default/pods", [1, 2, 3])
    assert status == 400
    status, _ = await call(http, "POST", "/api/v1/namespaces/default/pods", {"metadata": "nope"})
    assert status == 400
    status, _ = await call(http, "GET", "/api/v1/pods", limit="ten")
    assert status == 400
    status, _ = await call(http, "GET", "/api/v1/namespaces/default/pods/x/nosuchsub")
    assert status == 404
    status, _ = await call(http, "PUT", "/api/v1/namespaces/default/pods", pod("x"))
    assert status == 405
    status, _ = await call(http, "GET", "/version")
    assert status == 200


async def test_stopping_a_kubelet_over_http_makes_its_node_unknown() -> None:
    """An instance vanishing (spot reclaim): heartbeats stop and, after the node-monitor grace period,
    the node controller sets Ready=Unknown with reason NodeStatusUnknown, as upstream's does."""
    config = ControllerConfig(
        lease_renew_seconds=0.1, node_status_seconds=0.1, node_monitor_grace_seconds=0.5
    )
    async with (
        KubeSim(nodes=2, pods_per_node=1, controllers=config) as live,
        aiohttp.ClientSession(base_url=live.url) as http,
    ):
        _, nodes = await call(http, "GET", "/api/v1/nodes")
        name = nodes["items"][0]["metadata"]["name"]
        status, body = await call(http, "PUT", f"/kubesim/v1/nodes/{name}/kubelet", {"running": False})
        assert status == 200 and body == {"node": name, "running": False}

        async def ready_is(want: str) -> bool:
            _, node = await call(http, "GET", f"/api/v1/nodes/{name}")
            return (condition(node, "Ready") or {}).get("status") == want

        await until(lambda: ready_is("Unknown"), within=10, interval=0.1)
        status, _ = await call(http, "PUT", f"/kubesim/v1/nodes/{name}/kubelet", {"running": "no"})
        assert status == 400
        await call(http, "PUT", f"/kubesim/v1/nodes/{name}/kubelet", {"running": True})
        await until(lambda: ready_is("True"), within=10, interval=0.1)


async def test_big_lists_are_streamed_whole_and_valid() -> None:
    """A list longer than the streaming threshold arrives as one valid JSON List with every item."""
    objects = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i:05d}", "namespace": "default"}}
        for i in range(6200)
    ]
    async with (
        KubeSim(objects=objects, controllers=QUIET) as big,
        aiohttp.ClientSession(base_url=big.url) as http,
    ):
        status, body = await call(http, "GET", "/api/v1/namespaces/default/configmaps")
        assert status == 200 and body["kind"] == "ConfigMapList"
        assert [c["metadata"]["name"] for c in body["items"]] == [f"cm-{i:05d}" for i in range(6200)]
        assert int(body["metadata"]["resourceVersion"]) >= 6200


async def test_protobuf_bodies_kubesim_cannot_read_get_415(http: aiohttp.ClientSession) -> None:
    headers = {"Content-Type": "application/vnd.kubernetes.protobuf"}
    status, body = await call(
        http, "POST", "/apis/apps/v1/namespaces/default/deployments", b"k8s\x00\x0a\xff", headers
    )
    assert status == 415 and body["reason"] == "UnsupportedMediaType"


async def test_a_silenced_watch_is_a_half_open_connection(sim: KubeSim, http: aiohttp.ClientSession) -> None:
    """``stall_watch_after_s``: the watch is answered (200, headers), carries events until the stall,
    then sends nothing (no event, no bookmark, no end at its timeoutSeconds) and stays open, as a
    connection that went half-open does to its client (client-go#374, kubernetes#65012)."""
    sim.faults.add(resource="configmaps", stall_watch_after_s=0.3)
    params = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "1"}
    async with http.get("/api/v1/namespaces/default/configmaps", params=params) as resp:
        assert resp.status == 200
        await call(http, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "before"}})
        first = await asyncio.wait_for(resp.content.readline(), 2)
        assert orjson.loads(first)["type"] == "ADDED"
        await asyncio.sleep(0.4)  # past the stall
        resp.content.read_nowait()  # what came before it (a bookmark)
        await call(http, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "after"}})
        with pytest.raises(TimeoutError):
            # Neither the event, nor a bookmark (every 0.2 s here), nor the end after 1 s comes.
            await asyncio.wait_for(resp.content.readline(), 1.5)
        assert not resp.content.at_eof()
