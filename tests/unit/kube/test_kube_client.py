"""KubeClient's retry policy and compare-and-set, against a scripted HTTP server.

Every test runs twice: with the pod and node calls on lightkube's httpx client (the agent's stack)
and on aiohttp (the controller's, ``kube/aiohttp_transport.py``) talking to a real local server that
answers what the same script says.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import httpx2
import pytest
from aiohttp import web
from lightkube import AsyncClient, KubeConfig
from lightkube.config.kubeconfig import Cluster, User
from lightkube.resources.core_v1 import Namespace

from kubespot.kube import EvictionOutcome, KubeClient, KubeError, PodEventType, PodList, Taint, TokenBucket
from kubespot.kube.aiohttp_transport import AiohttpRaw
from kubespot.kube.podwatch import nodes_in_line
from support.http_receiver import serving

Handler = Callable[[httpx2.Request], httpx2.Response]

#: The stack under test and, for aiohttp, the local server's URL and its current script.
_STACK: dict[str, object] = {}


@pytest.fixture(autouse=True, params=["httpx", "aiohttp"])
async def stack(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    _STACK.clear()
    _STACK["name"] = request.param
    if request.param == "httpx":
        yield request.param
        return

    async def serve(req: web.Request) -> web.StreamResponse:
        handler = _STACK["handler"]
        assert callable(handler)
        body = await req.read()
        scripted = httpx2.Request(req.method, str(req.url), headers=dict(req.headers), content=body)
        answer: httpx2.Response = handler(scripted)
        headers = {k: v for k, v in answer.headers.items() if k.lower() in ("content-type", "retry-after")}
        return web.Response(status=answer.status_code, body=answer.content, headers=headers)

    async with serving(serve, access_log=None) as url:
        _STACK["url"] = url
        try:
            yield request.param
        finally:
            for kube in _STACK.get("clients", []):  # type: ignore[attr-defined]
                await kube.close()


def status(code: int, reason: str, message: str = "") -> httpx2.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason}
    body["message"] = message or reason
    return httpx2.Response(code, json=body)


def client(handler: Handler) -> KubeClient:
    config = KubeConfig.from_one(cluster=Cluster(server="http://kube.test"), user=User(token="t"))
    api = AsyncClient(config=config, transport=httpx2.MockTransport(handler))

    async def no_sleep(_: float) -> None:
        return None

    raw = None
    if _STACK["name"] == "aiohttp":
        _STACK["handler"] = handler
        raw = AiohttpRaw(str(_STACK["url"]), tls=None, auth=httpx2.BasicAuth("u", "p"), timeout=10)
    kube = KubeClient(api, raw=raw, limiter=TokenBucket(qps=0, burst=1), attempts=4, sleep=no_sleep)
    _STACK.setdefault("clients", []).append(kube)  # type: ignore[attr-defined]
    return kube


def node_json(rv: str, taints: list[dict[str, str]]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "uid": "u1", "resourceVersion": rv},
        "spec": {"taints": taints},
    }


async def test_eviction_429_is_returned_at_once_not_retried() -> None:
    calls = 0

    def handler(req: httpx2.Request) -> httpx2.Response:
        nonlocal calls
        calls += 1
        return status(
            429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget."
        )

    kube = client(handler)
    result = await kube.evict_pod("ns", "p", uid="abc", grace_period_seconds=3)
    assert result.outcome is EvictionOutcome.BLOCKED and "disruption budget" in result.message
    assert calls == 1


async def test_eviction_throttled_by_priority_and_fairness_is_not_a_budget_refusal() -> None:
    """APF's 429 is text with Retry-After (k8s.io/apiserver filters ``tooManyRequests``); a budget's
    is a Status with the DisruptionBudget cause (eviction.go ``checkAndDecrement``)."""

    def handler(req: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            429,
            text="Too many requests, please try again later.\n",
            headers={"Content-Type": "text/plain; charset=utf-8", "Retry-After": "3"},
        )

    result = await client(handler).evict_pod("ns", "p", uid="abc")
    assert result.outcome is EvictionOutcome.THROTTLED and result.retry_after == 3.0


async def test_lightkube_calls_retry_a_text_429() -> None:
    """lightkube hands an answer that is not JSON over as a bare HTTPStatusError: still retried."""
    calls = 0

    def handler(req: httpx2.Request) -> httpx2.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            return httpx2.Response(429, text="Too many requests, please try again later.\n")
        return httpx2.Response(200, json={"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "x"}})

    kube = client(handler)
    ns = await kube.call("get namespace", lambda: kube.api.get(Namespace, "x"))
    assert ns.metadata is not None and ns.metadata.name == "x" and calls == 2


async def test_delete_sends_the_uid_precondition_and_a_conflict_means_replaced() -> None:
    bodies: list[object] = []
    queries: list[str] = []

    def handler(req: httpx2.Request) -> httpx2.Response:
        if req.method == "DELETE":
            bodies.append(json.loads(req.content))
            queries.append(req.url.query.decode() if isinstance(req.url.query, bytes) else str(req.url.query))
            return status(
                409, "Conflict", "Precondition failed: UID in precondition: abc, UID in object meta: new"
            )
        return httpx2.Response(200, json=_pod_json("new"))

    assert await client(handler).delete_pod("ns", "p", uid="abc", grace_period_seconds=1) is False
    # With a body the API server reads every option from it and ignores the query
    # (apiserver handlers/delete.go), so the grace period rides in the body.
    assert bodies and bodies[0] == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "abc"},
        "gracePeriodSeconds": 1,
    }
    assert "gracePeriodSeconds" not in queries[0]


async def test_eviction_sends_uid_precondition_and_grace_and_retries_503() -> None:
    bodies: list[dict[str, object]] = []

    def handler(req: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(req.content))
        if len(bodies) < 3:
            return status(503, "ServiceUnavailable")
        return httpx2.Response(
            201, json={"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}
        )

    kube = client(handler)
    result = await kube.evict_pod("ns", "p", uid="abc", grace_period_seconds=3)
    assert result.outcome is EvictionOutcome.EVICTED
    assert len(bodies) == 3
    options = bodies[-1]["deleteOptions"]
    assert isinstance(options, dict)
    assert options["gracePeriodSeconds"] == 3 and options["preconditions"] == {"uid": "abc"}


def _pod_json(uid: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": uid},
        "spec": {"containers": [{"name": "c", "image": "x"}], "nodeName": "n1"},
    }


def _evict_409_then(get: httpx2.Response) -> Callable[[httpx2.Request], httpx2.Response]:
    def handler(req: httpx2.Request) -> httpx2.Response:
        if req.method == "POST":
            return status(409, "Conflict", "the UID in the precondition does not match")
        return get

    return handler


async def test_eviction_of_a_replaced_pod_is_not_found() -> None:
    replaced = client(_evict_409_then(httpx2.Response(200, json=_pod_json("new"))))
    assert (await replaced.evict_pod("ns", "p", uid="old")).outcome is EvictionOutcome.NOT_FOUND
    gone = client(_evict_409_then(status(404, "NotFound")))
    assert (await gone.evict_pod("ns", "p", uid="old")).outcome is EvictionOutcome.NOT_FOUND


async def test_a_409_while_the_same_pod_still_runs_is_an_error_to_retry_not_gone() -> None:
    """The Eviction API also answers 409 when its budget status update conflicts (many concurrent
    evictions against one PDB): the pod is still there and must not be reported gone."""
    kube = client(_evict_409_then(httpx2.Response(200, json=_pod_json("old"))))
    assert (await kube.evict_pod("ns", "p", uid="old")).outcome is EvictionOutcome.ERROR


async def test_500s_are_retried_a_bounded_number_of_times() -> None:
    calls = 0

    def handler(req: httpx2.Request) -> httpx2.Response:
        nonlocal calls
        calls += 1
        return status(500, "InternalError")

    kube = client(handler)
    with pytest.raises(KubeError) as err:
        await kube.get_node("n1")
    assert err.value.code == 500 and calls == 4


async def test_add_taint_rereads_the_node_on_conflict_and_keeps_the_other_writers_taint() -> None:
    other = {"key": "other", "effect": "NoSchedule"}
    state = {"rv": "1", "taints": [], "patches": []}

    def handler(req: httpx2.Request) -> httpx2.Response:
        if req.method == "GET":
            # Someone else added a taint after our first read.
            if state["patches"]:
                return httpx2.Response(200, json=node_json("2", [other]))
            return httpx2.Response(200, json=node_json("1", []))
        patch = json.loads(req.content)
        state["patches"].append(patch)  # type: ignore[attr-defined]
        if patch["metadata"]["resourceVersion"] != "2":
            return status(409, "Conflict")
        return httpx2.Response(200, json=node_json("3", patch["spec"]["taints"]))

    kube = client(handler)
    node = await kube.add_taint("n1", Taint("kubespot.io/spot-itn", "NoSchedule", "e1"))
    assert node.has_taint("other") and node.has_taint("kubespot.io/spot-itn")
    assert len(state["patches"]) == 2  # type: ignore[arg-type]


async def test_a_garbled_watch_line_is_followed_by_a_relist_not_a_dead_watch() -> None:
    """Whatever breaks a watch (here a line that is not JSON), the caller gets a RESYNC re-list."""
    pod = _pod_json("u1")

    def handler(req: httpx2.Request) -> httpx2.Response:
        if req.url.params.get("watch"):
            return httpx2.Response(200, content=b"{not json\n")
        return httpx2.Response(
            200,
            json={
                "kind": "PodList",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": "7"},
                "items": [pod],
            },
        )

    kube = client(handler)
    stream = kube.watch_pods_on_node("n1", resource_version="5")
    first = await asyncio.wait_for(anext(stream), 10)
    assert first.type is PodEventType.RESYNC and [p.uid for p in first.pods] == ["u1"]
    await stream.aclose()


def _full_pod(name: str, node: str, rv: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": rv,
            "labels": {"app": "web"},
            "annotations": {"kubernetes.io/config.mirror": "x"},
            "deletionTimestamp": "2026-11-22T03:00:05Z",
            "ownerReferences": [
                {"kind": "Node", "name": node, "uid": "n"},
                {"kind": "ReplicaSet", "name": "web-1", "uid": "rs", "controller": True},
            ],
        },
        "spec": {
            "nodeName": node,
            "priority": 7,
            "priorityClassName": "low",
            "terminationGracePeriodSeconds": 12,
            "volumes": [{"name": "a", "configMap": {"name": "c"}}, {"name": "b", "emptyDir": {}}],
        },
        "status": {"phase": "Running"},
    }


async def test_pods_are_read_from_the_raw_json_into_views() -> None:
    def handler(req: httpx2.Request) -> httpx2.Response:
        assert req.url.params["fieldSelector"] == "spec.nodeName=n1"
        body = {"kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": [_full_pod("p", "n1", "8")]}
        return httpx2.Response(200, json=body)

    listing = await client(handler).list_pods_on_node("n1")
    assert listing.resource_version == "9"
    (pod,) = listing.pods
    assert (pod.namespace, pod.name, pod.uid, pod.node_name, pod.phase) == (
        "ns",
        "p",
        "uid-p",
        "n1",
        "Running",
    )
    assert (pod.controller_kind, pod.controller_name) == ("ReplicaSet", "web-1")
    assert (pod.priority, pod.priority_class_name, pod.grace_period_seconds) == (7, "low", 12)
    assert pod.has_empty_dir and pod.is_mirror and pod.is_terminating and pod.resource_version == "8"
    assert pod.deletion_timestamp is not None and pod.deletion_timestamp.tzinfo is not None
    assert pod.labels == {"app": "web"}


async def test_a_filtered_watch_skips_lines_it_does_not_want_but_resumes_after_them() -> None:
    """The shared pod watch decodes only the lines of nodes it follows; a resumed watch still starts
    from the last version seen, skipped lines included."""
    watches: list[str | None] = []

    def line(op: str, name: str, node: str, rv: str) -> bytes:
        return json.dumps({"type": op, "object": _full_pod(name, node, rv)}).encode() + b"\n"

    def handler(req: httpx2.Request) -> httpx2.Response:
        watches.append(req.url.params.get("resourceVersion"))
        if len(watches) == 1:
            body = line("MODIFIED", "a", "n1", "11") + line("DELETED", "b", "n2", "12")
        else:
            body = line("DELETED", "c", "n1", "13")
        return httpx2.Response(200, content=body)

    kube = client(handler)
    wanted = {b"n1"}

    async def relist() -> PodList:
        raise AssertionError("no re-list expected")

    stream = kube.watch_pods(
        "all pods", {}, relist, "10", wanted=lambda raw: any(n in wanted for n in nodes_in_line(raw))
    )
    first, second = await anext(stream), await anext(stream)
    await stream.aclose()
    assert [(e.type, e.pod and e.pod.name) for e in (first, second)] == [
        (PodEventType.MODIFIED, "a"),
        (PodEventType.DELETED, "c"),
    ]
    assert watches == ["10", "12"], "resumed after the skipped line of n2"


def test_node_names_are_found_in_raw_lines_whatever_the_spacing() -> None:
    spaced = b'{"type": "ADDED", "object": {"spec": {"nodeName" :  "n1"}}}'
    assert nodes_in_line(spaced) == [b"n1"]
    # Inside a string a quote is escaped, so an annotation holding JSON never matches.
    decoy = b'{"metadata":{"annotations":{"a":"{\\"nodeName\\":\\"n9\\"}"}},"spec":{"nodeName":"n2"}}'
    assert nodes_in_line(decoy) == [b"n2"]
    assert nodes_in_line(b'{"spec":{}}') == []
