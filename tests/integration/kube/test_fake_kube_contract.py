"""The unit tests' ``FakeKube`` (tests/support/fake_kube.py) keeps to what the real ``KubeClient``
does against an API server: every case runs three times, on the fake and on a ``KubeClient`` talking
HTTP to kubesim over each of its transports (the agent's httpx, the operator's aiohttp), from the
same objects, so a divergence fails here rather than passing in the unit tests.

The upstream behaviour each case follows (kubesim's own tests check kubesim against the same):

- merge patch: RFC 7386 (``application/merge-patch+json``, apiserver ``handlers/patch.go``): a key
  set to null is removed, a list (``spec.taints``) is replaced whole; every write moves the
  object's ``metadata.resourceVersion`` on ("API Concepts", resource versions);
- compare-and-set: a ``metadata.resourceVersion`` in a patch is a precondition, a stale one is
  409 Conflict "the object has been modified" (apiserver ``registry/generic/registry/store.go``
  ``Update``, optimistic concurrency); ``update_node`` re-reads and recomputes its patch then;
- a missing object: GET 404 (None), PATCH 404, DELETE 404 (False);
- pods listed with ``fieldSelector=spec.nodeName=<node>`` are that node's only; a watch from a
  list's resourceVersion shows what happened after it ("API Concepts", efficient detection of
  changes);
- the Eviction subresource (``pkg/registry/core/pod/storage/eviction.go``): 404 for a pod that is
  not there; 409 when ``deleteOptions.preconditions.uid`` names another pod (the client takes both
  as NOT_FOUND); 429 TooManyRequests with a ``DisruptionBudget`` cause and upstream's message when
  the pod's budget allows no disruption (``checkAndDecrement``); 201 otherwise, and the pod is
  deleted with the request's grace period (0: at once);
- DELETE with ``preconditions.uid`` of another pod: 409 "Precondition failed: UID in precondition"
  (apiserver ``storage.Preconditions``), which the client reports as gone (False);
- events: POST of a name that exists is 409 AlreadyExists; a merge patch of a missing one is 404.

Where the fake is simpler, the case says how: a pod that goes (eviction or deletion) is gone at
once, with no terminating phase and no DisruptionTarget condition (kubesim's kubelet is off here,
so graceful deletions stay terminating there), and its watch shows only the DELETED.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from kubespot.config.kube import KubeSettings
from kubespot.kube import EvictionOutcome, EvictionResult, KubeError, PodEvent, PodEventType, PodView, Taint
from kubespot.kube.client import ObjectRef, connect, node_view, pod_view
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import node, pdb, pod
from support.fake_kube import BUDGET_REFUSAL, FakeKube

Obj = dict[str, Any]
#: Only the API: no scheduler, kubelet or workload controller writes while a case runs.
QUIET = ControllerConfig(scheduler=False, kubelet=False, workloads=False)
GUARDED = {"app": "guarded"}


def objects() -> list[Obj]:
    """Two nodes, three running pods, a budget that lets none of the guarded pods go (its status as
    upstream's disruption controller computes it). Fresh each time: kubesim adopts what it loads."""
    budget = pdb(
        "guarded",
        namespace="default",
        selector={"matchLabels": GUARDED},
        min_available=1,
        status={
            "observedGeneration": 1,
            "disruptionsAllowed": 0,
            "currentHealthy": 1,
            "desiredHealthy": 1,
            "expectedPods": 1,
        },
    )
    budget["metadata"]["generation"] = 1
    taint = {"key": "dedicated", "value": "web", "effect": "NoSchedule"}
    return [
        node("n1", labels={"team": "web"}, taints=[taint], ready=True),
        node("n2", ready=True),
        pod("web-0", node="n1", labels={"app": "web"}, grace=30, phase="Running", ready=True),
        pod("guarded-0", node="n1", labels=GUARDED, phase="Running", ready=True),
        pod("other-0", node="n2", labels={"app": "other"}, phase="Running", ready=True),
        budget,
    ]


def fake_cluster() -> FakeKube:
    """The same objects in the fake: decoded as the client decodes them, with the uids the API
    server would give; the budget becomes the gate that refuses the pods it selects."""
    loaded = objects()
    nodes = [dataclasses.replace(node_view(o), uid=str(uuid.uuid4())) for o in loaded[:2]]
    pods = [dataclasses.replace(pod_view(o), uid=str(uuid.uuid4())) for o in loaded[2:5]]
    kube = FakeKube(*nodes, pods=pods)

    async def budget(pod: PodView) -> EvictionResult | None:
        return BUDGET_REFUSAL if GUARDED.items() <= pod.labels.items() else None

    kube.eviction_gate = budget
    return kube


@pytest.fixture(params=["fake", "kubesim-httpx", "kubesim-aiohttp"])
async def kube(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """The fake, or a ``KubeClient`` on kubesim over HTTP (the agent's httpx transport or the
    operator's aiohttp one, ``kube.transport``): the same surface, the same objects."""
    if request.param == "fake":
        yield fake_cluster()
        return
    http = "aiohttp" if request.param.endswith("aiohttp") else "httpx"
    async with KubeSim(objects=objects(), controllers=QUIET) as sim:
        client = connect(KubeSettings(kubeconfig=str(sim.kubeconfig_path)), http=http)
        try:
            yield client
        finally:
            await client.close()


async def until_deleted(watch: AsyncIterator[PodEvent], name: str) -> list[PodEventType]:
    """The types of the watch's events up to the DELETED of ``name`` (every one of them about it)."""
    seen: list[PodEventType] = []
    while not seen or seen[-1] is not PodEventType.DELETED:
        event = await asyncio.wait_for(anext(watch), 5)
        assert event.pod is not None and event.pod.name == name, event
        seen.append(event.type)
    return seen


# -- nodes -------------------------------------------------------------------------------------------


def _users(taints: tuple[Taint, ...]) -> tuple[Taint, ...]:
    """The taints but the cordon's: on kubesim, as on a real cluster, the node lifecycle controller
    adds node.kubernetes.io/unschedulable:NoSchedule right after a cordon (doNoScheduleTaintingPass);
    the fake has no controller."""
    return tuple(t for t in taints if t.key != "node.kubernetes.io/unschedulable")


async def test_a_merge_patch_sets_removes_and_replaces(kube: Any) -> None:
    before = await kube.get_node("n1")
    assert before is not None and before.taints == (Taint("dedicated", "NoSchedule", "web"),)
    patch = {
        "metadata": {"labels": {"team": None, "zone": "a"}, "annotations": {"kubespot.io/x": "1"}},
        "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoExecute", "value": "v"}]},
    }
    after = await kube.patch_node("n1", patch)
    assert after.labels == {"kubernetes.io/hostname": "n1", "zone": "a"}
    assert after.annotations == {"kubespot.io/x": "1"}
    assert after.taints == (Taint("k", "NoExecute", "v"),), "a list is replaced, not merged"
    assert after.unschedulable and after.uid == before.uid
    assert after.resource_version != before.resource_version
    again = await kube.get_node("n1")
    assert again is not None and replace(again, resource_version="", taints=_users(again.taints)) == replace(
        after, resource_version=""
    )

    undone = await kube.set_annotations("n1", {"kubespot.io/x": None})
    assert undone.annotations == {} and undone.resource_version != after.resource_version
    opened = await kube.patch_node("n1", {"spec": {"unschedulable": None, "taints": None}})
    assert not opened.unschedulable and opened.taints == ()


async def test_taints_come_and_go_one_at_a_time(kube: Any) -> None:
    mine = Taint("kubespot.io/spot-itn", "NoExecute")
    tainted = await kube.add_taint("n1", mine)
    assert tainted.taints == (Taint("dedicated", "NoSchedule", "web"), mine), "the other taint stays"
    assert await kube.add_taint("n1", mine) == tainted, "already there: nothing written"
    fenced = await kube.cordon("n1")
    assert fenced.unschedulable and fenced.taints == tainted.taints
    cleared = await kube.remove_taint("n1", mine.key)
    assert _users(cleared.taints) == (Taint("dedicated", "NoSchedule", "web"),)
    assert not (await kube.uncordon("n1")).unschedulable


async def test_compare_and_set_recomputes_from_a_fresh_read_after_a_conflict(kube: Any) -> None:
    stale = await kube.get_node("n1")
    await kube.set_annotations("n1", {"other": "writer"})  # a concurrent writer
    seen: list[str | None] = []

    def change(node: Any) -> dict[str, Any]:
        seen.append(node.annotations.get("other"))
        return {"metadata": {"annotations": {"count": str(len(seen))}}}

    written = await kube.update_node("n1", change, current=stale)
    assert seen == [None, "writer"], "computed on the stale copy (409), then on a fresh read"
    assert dict(written.annotations) == {"other": "writer", "count": "2"}
    assert await kube.get_node("n1") == written

    same = await kube.update_node("n1", lambda node: None)  # nothing to change: nothing is written
    assert same == written

    fresh = await kube.update_node("n1", lambda node: {"metadata": {"labels": {"z": "1"}}}, current=same)
    assert fresh.labels["z"] == "1" and fresh.resource_version != same.resource_version


async def test_a_patch_with_a_stale_resource_version_is_a_conflict(kube: Any) -> None:
    stale = await kube.get_node("n1")
    await kube.set_annotations("n1", {"other": "writer"})
    body = {"metadata": {"resourceVersion": stale.resource_version, "annotations": {"lost": "yes"}}}
    with pytest.raises(KubeError) as conflict:
        await kube.patch_node("n1", body)
    assert conflict.value.code == 409
    current = await kube.get_node("n1")
    assert current is not None and "lost" not in current.annotations


async def test_a_missing_node(kube: Any) -> None:
    assert await kube.get_node("nope") is None
    for write in (
        kube.patch_node("nope", {"metadata": {"labels": {"a": "b"}}}),
        kube.update_node("nope", lambda node: {"metadata": {"labels": {"a": "b"}}}),
    ):
        with pytest.raises(KubeError) as missing:
            await write
        assert missing.value.code == 404
    assert await kube.delete_node("n2") is True
    assert await kube.get_node("n2") is None
    assert await kube.delete_node("n2") is False


async def test_a_node_watch_shows_the_changes_after_its_list(kube: Any) -> None:
    await kube.set_annotations("n1", {"before": "the list"})  # not shown again by the watch
    listing = await kube.list_nodes()
    assert sorted(n.name for n in listing.nodes) == ["n1", "n2"] and listing.resource_version
    async with aclosing(kube.watch_nodes(resource_version=listing.resource_version)) as watch:
        written = await kube.set_annotations("n2", {"a": "b"})
        event = await asyncio.wait_for(anext(watch), 5)
        assert event.type is PodEventType.MODIFIED and event.node == written
        await kube.delete_node("n2")
        event = await asyncio.wait_for(anext(watch), 5)
        assert event.type is PodEventType.DELETED and event.node is not None and event.node.name == "n2"


# -- pods ---------------------------------------------------------------------------------------------


async def test_pods_are_listed_per_node(kube: Any) -> None:
    listing = await kube.list_pods_on_node("n1")
    assert sorted(p.name for p in listing.pods) == ["guarded-0", "web-0"] and listing.resource_version
    web = next(p for p in listing.pods if p.name == "web-0")
    assert (web.namespace, web.node_name, web.phase, web.grace_period_seconds) == (
        "default",
        "n1",
        "Running",
        30,
    )
    assert web.labels == {"app": "web"} and web.uid
    assert await kube.get_pod("default", "web-0") == web
    assert [p.name for p in (await kube.list_pods_on_node("n2")).pods] == ["other-0"]
    assert (await kube.list_pods_on_node("n3")).pods == ()
    assert await kube.get_pod("default", "ghost") is None


async def test_eviction_answers(kube: Any) -> None:
    listing = await kube.list_pods_on_node("n1")
    web = next(p for p in listing.pods if p.name == "web-0")
    async with aclosing(kube.watch_pods_on_node("n1", resource_version=listing.resource_version)) as watch:
        gone = await kube.evict_pod("default", "ghost")
        assert (gone.outcome, gone.code) == (EvictionOutcome.NOT_FOUND, 404)

        replaced = await kube.evict_pod("default", "web-0", uid=f"not-{web.uid}")
        assert (replaced.outcome, replaced.code) == (EvictionOutcome.NOT_FOUND, 409)
        assert await kube.get_pod("default", "web-0") == web, "another pod's eviction leaves it alone"

        refused = await kube.evict_pod("default", "guarded-0")
        assert (refused.outcome, refused.code) == (EvictionOutcome.BLOCKED, 429)
        assert refused.message == BUDGET_REFUSAL.message
        guarded = await kube.get_pod("default", "guarded-0")
        assert guarded is not None and not guarded.is_terminating

        evicted = await kube.evict_pod("default", "web-0", uid=web.uid, grace_period_seconds=0)
        assert (evicted.outcome, evicted.code) == (EvictionOutcome.EVICTED, 201)
        assert await kube.get_pod("default", "web-0") is None
        # kubesim first shows the DisruptionTarget condition (MODIFIED); the fake only the deletion.
        seen = await until_deleted(watch, "web-0")
        assert set(seen[:-1]) <= {PodEventType.MODIFIED}, seen
    assert [p.name for p in (await kube.list_pods_on_node("n1")).pods] == ["guarded-0"]


async def test_deletion_with_a_uid_precondition(kube: Any) -> None:
    (other,) = (await kube.list_pods_on_node("n2")).pods
    assert await kube.delete_pod("default", "other-0", uid=f"not-{other.uid}") is False
    assert await kube.get_pod("default", "other-0") == other
    assert await kube.delete_pod("default", "other-0", uid=other.uid, grace_period_seconds=0) is True
    assert await kube.get_pod("default", "other-0") is None
    assert await kube.delete_pod("default", "other-0") is False

    # With the pod's own grace period it is gone (the fake) or terminating (no kubelet to end it).
    assert await kube.delete_pod("default", "web-0") is True
    web = await kube.get_pod("default", "web-0")
    assert web is None or web.is_terminating


# -- events -------------------------------------------------------------------------------------------


async def test_an_event_is_created_once_and_bumped_by_name(kube: Any) -> None:
    at = datetime.now(tz=UTC)
    fields: dict[str, Any] = {
        "namespace": "default",
        "name": "n1.contract",
        "involved": ObjectRef("Node", "n1"),
        "reason": "Contract",
        "message": "checked",
        "type_": "Normal",
        "component": "kubespot",
        "host": None,
        "at": at,
    }
    await kube.create_event(**fields)
    with pytest.raises(KubeError) as exists:
        await kube.create_event(**fields)
    assert exists.value.code == 409
    await kube.bump_event(namespace="default", name="n1.contract", count=2, at=at)
    with pytest.raises(KubeError) as missing:
        await kube.bump_event(namespace="default", name="n1.missing", count=2, at=at)
    assert missing.value.code == 404
