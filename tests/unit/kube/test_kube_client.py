"""KubeClient's retry policy and compare-and-set, against a scripted HTTP transport."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx2
import pytest
from lightkube import AsyncClient, KubeConfig
from lightkube.config.kubeconfig import Cluster, User

from kubespot.kube import EvictionOutcome, KubeClient, KubeError, PodEventType, Taint, TokenBucket

Handler = Callable[[httpx2.Request], httpx2.Response]


def status(code: int, reason: str, message: str = "") -> httpx2.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason}
    body["message"] = message or reason
    return httpx2.Response(code, json=body)


def client(handler: Handler) -> KubeClient:
    config = KubeConfig.from_one(cluster=Cluster(server="http://kube.test"), user=User(token="t"))
    api = AsyncClient(config=config, transport=httpx2.MockTransport(handler))

    async def no_sleep(_: float) -> None:
        return None

    return KubeClient(api, limiter=TokenBucket(qps=0, burst=1), attempts=4, sleep=no_sleep)


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
