"""The informer over HTTP against kubesim: LIST then WATCH, re-lists with deletions applied, faults.

Upstream: k8s.io/client-go ``tools/cache/reflector.go`` (``ListAndWatch``: list, then watch from the
list's resourceVersion with ``AllowWatchBookmarks``; ``watchHandler`` moves the version on with
every event and bookmark; a watch that ends is resumed from it; ``Expired``/410 and a broken watch
go back to ``list``), ``tools/cache/delta_fifo.go`` (``Replace``: an object missing from a re-list
is deleted, ``DeletedFinalStateUnknown``), ``tools/cache/shared_informer.go`` (``HasSynced`` after
the first list; ``OnAdd``/``OnUpdate``/``OnDelete`` handlers). kubesim serves the watch cache's
410 as an ``ERROR`` event (apiserver ``cacher.go`` ``Watch``) and API Priority and Fairness' 429.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from kubespot.config.kube import KubeSettings
from kubespot.kube import KubeClient, connect
from kubespot.kube.informer import Informer, Informers
from kubespot.observability.health import silence
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import node, pod, until

QUIET = ControllerConfig(scheduler=False, kubelet=False, workloads=False)
NODES = "api/v1/nodes"


@asynccontextmanager
async def cluster(*objects: dict[str, Any], **sim: Any) -> AsyncIterator[tuple[KubeSim, KubeClient]]:
    async with KubeSim(objects=list(objects), controllers=QUIET, **sim) as s:
        settings = KubeSettings(kubeconfig=str(s.kubeconfig_path), retry_attempts=2)
        kube = connect(settings, http="aiohttp")
        try:
            yield s, kube
        finally:
            await kube.close()


@asynccontextmanager
async def informing(kube: KubeClient, path: str = NODES) -> AsyncIterator[Informer]:
    informer = Informer(kube, path)
    informer.start()
    try:
        yield informer
    finally:
        await informer.stop()


def store_create(sim: KubeSim, plural: str, obj: dict[str, Any]) -> None:
    rt = sim.store.registry.lookup("", "v1", plural)
    assert rt is not None
    sim.store.create(rt, copy.deepcopy(obj), namespace=obj["metadata"].get("namespace"))


def store_delete(sim: KubeSim, plural: str, name: str, namespace: str | None = None) -> None:
    rt = sim.store.registry.lookup("", "v1", plural)
    assert rt is not None
    sim.store.delete(rt, namespace, name, grace_period_seconds=0)


def names(informer: Informer) -> set[str]:
    return {o["metadata"]["name"] for o in informer.items()}


async def _true(value: bool) -> bool:
    return value


async def test_lists_then_follows_adds_updates_and_deletes_and_tells_the_handlers() -> None:
    """reflector.go ListAndWatch + shared_informer.go: synced after the first LIST; every change
    after it reaches the cache and the handlers (ADDED, MODIFIED, DELETED), keyed namespace/name."""
    async with cluster(node("n1"), node("n2"), pod("p1", node="n1")) as (sim, kube):
        seen: list[tuple[str, str]] = []
        async with informing(kube) as nodes, informing(kube, "api/v1/pods") as pods:
            nodes.subscribe(lambda op, obj: seen.append((op, obj["metadata"]["name"])))
            await asyncio.wait_for(nodes.synced.wait(), 2)
            await asyncio.wait_for(pods.synced.wait(), 2)
            assert names(nodes) == {"n1", "n2"} and pods.get("default/p1") is not None
            first = nodes.items()
            assert nodes.items() is first  # no copy per read while nothing changed
            store_create(sim, "nodes", node("n3"))
            await kube.set_labels("n1", {"team": "a"})
            store_delete(sim, "nodes", "n2")
            await until(lambda: _true(names(nodes) == {"n1", "n3"}), within=2.0, interval=0.01)
            n1 = nodes.get("n1")
            assert n1 is not None and n1["metadata"]["labels"]["team"] == "a"
            assert ("ADDED", "n3") in seen and ("MODIFIED", "n1") in seen and ("DELETED", "n2") in seen
            assert nodes.lists == 1  # the watch carried it all


async def test_a_watch_resumed_past_compaction_re_lists_and_applies_the_deletions_it_missed() -> None:
    """reflector.go: a resumed watch answered 410 Expired goes back to a LIST; delta_fifo.go
    Replace: what the LIST lacks was deleted meanwhile (DELETED to the handlers), what it brings
    new is added."""
    async with cluster(node("n1"), node("n2")) as (sim, kube):
        deleted: list[str] = []
        async with informing(kube) as nodes:

            def gone(op: str, obj: dict[str, Any]) -> None:
                if op == "DELETED":
                    deleted.append(obj["metadata"]["name"])

            nodes.subscribe(gone)
            await asyncio.wait_for(nodes.synced.wait(), 2)
            # In one step, with no await between: the watch ends, n2 goes, n3 comes and the history
            # is forgotten; the resumed watch gets 410 and only a LIST can tell.
            sim.store.drop_watches()
            store_delete(sim, "nodes", "n2")
            store_create(sim, "nodes", node("n3"))
            sim.store.compact()
            await until(lambda: _true(names(nodes) == {"n1", "n3"}), within=2.0, interval=0.01)
            assert nodes.lists == 2 and deleted == ["n2"]


async def test_a_broken_watch_re_lists_once_the_server_answers_again() -> None:
    """reflector.go: a watch that cannot be re-opened (here 500s) is a broken one; the reflector
    lists again, with backoff, and the change made meanwhile is in the cache."""
    async with cluster(node("n1")) as (sim, kube), informing(kube) as nodes:
        await asyncio.wait_for(nodes.synced.wait(), 2)
        sim.faults.add(verb="watch", resource="nodes", error_rate=1.0, error_code=500, remaining=2)
        sim.store.drop_watches()
        store_create(sim, "nodes", node("n2"))
        await until(lambda: _true(names(nodes) == {"n1", "n2"}), within=3.0, interval=0.01)
        assert nodes.lists >= 2


async def test_bookmarks_keep_the_version_fresh_so_a_resume_needs_no_re_list() -> None:
    """reflector.go watchHandler: a BOOKMARK moves the resourceVersion on without an object; a
    watch resumed after other resources moved the version and the history was compacted resumes
    from the bookmark's version (no 410, no LIST), and still sees what comes next."""
    async with cluster(node("n1"), bookmark_interval=0.05) as (sim, kube), informing(kube) as nodes:
        await asyncio.wait_for(nodes.synced.wait(), 2)
        for i in range(5):  # other resources move the global version on
            store_create(sim, "pods", pod(f"p{i}", node="n1"))
        await asyncio.sleep(0.3)  # several bookmarks carry the new version to the informer
        sim.store.drop_watches()
        sim.store.compact()
        await asyncio.sleep(0.2)
        store_create(sim, "nodes", node("n2"))
        await until(lambda: _true(names(nodes) == {"n1", "n2"}), within=2.0, interval=0.01)
        assert nodes.lists == 1


@pytest.mark.parametrize("code", [500, 429])
async def test_a_failing_list_is_retried_with_backoff_and_reported_until_it_comes(code: int) -> None:
    """reflector.go ListAndWatch: a LIST refused by a 5xx or by API Priority and Fairness' 429 is
    retried with backoff (the client's own retries, then the informer's), never raised; meanwhile
    the cache is not synced and /healthz's informers check names it once past the limit."""
    async with cluster(node("n1")) as (sim, kube):
        rule = sim.faults.add(verb="list", resource="nodes", error_rate=1.0, error_code=code)
        informers = Informers(kube)
        nodes = informers.get(NODES)
        task = asyncio.create_task(informers.run())
        try:
            await asyncio.sleep(0.3)
            assert not nodes.synced.is_set()
            check = silence("informers", informers.behind(), now=datetime.now(tz=UTC), limit=0.2)
            assert not check.ok and NODES in check.detail
            sim.faults.remove(rule.id)
            await asyncio.wait_for(nodes.synced.wait(), 3)
            assert names(nodes) == {"n1"}
            check = silence("informers", informers.behind(), now=datetime.now(tz=UTC), limit=0.2)
            assert check.ok
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        # Cancelled with its runner: no informer left running (a replica that stops leading), and
        # none reads as synced until it lists again.
        assert nodes._task is None and not nodes.synced.is_set()


async def test_an_unserved_resource_reads_empty_until_its_crd_comes() -> None:
    """A resource the server does not serve (404: a CRD not installed) reads as empty and synced
    (controller-runtime would fail to start its informer; the provisioner plans without claims), and
    is listed again until it is served."""
    async with cluster() as (_sim, kube):
        informer = Informer(kube, "apis/karpenter.sh/v1/nodeclaims", unserved_retry=0.05)
        informer.start()
        try:
            await asyncio.wait_for(informer.synced.wait(), 2)
            assert informer.items() == () and informer.lists >= 1
            assert informer.served is False  # "none" and "not served" told apart (the NodeClaim GC)
            await asyncio.sleep(0.2)
            assert informer.lists >= 2
        finally:
            await informer.stop()


async def test_a_garbled_re_list_is_retried_and_reported_not_the_end_of_the_informer() -> None:
    """review 15c #3: client-go ``reflector.go`` ``Run`` wraps ``ListAndWatch`` in
    ``wait.BackoffUntil``, so any list error (here a body that is not JSON) is retried and never
    ends the reflector; meanwhile the cache is out of step and /healthz's informers check says so,
    and once the LIST answers again the change made meanwhile is in the cache."""
    async with cluster(node("n1")) as (sim, kube):
        informers = Informers(kube)
        nodes = informers.get(NODES)
        task = asyncio.create_task(informers.run())
        try:
            await asyncio.wait_for(nodes.synced.wait(), 2)
            real = kube.list_versioned

            async def garbled(path: str, **kw: Any) -> Any:
                raise ValueError("unexpected character: line 1 column 1")

            kube.list_versioned = garbled  # type: ignore[method-assign]
            sim.faults.add(verb="watch", resource="nodes", error_rate=1.0, error_code=500, remaining=1)
            sim.store.drop_watches()
            store_create(sim, "nodes", node("n2"))
            sim.store.compact()  # the watch cannot resume (410): only a LIST brings n2
            await until(lambda: _true(nodes.behind_since is not None), within=2.0, interval=0.01)
            await asyncio.sleep(0.3)
            check = silence("informers", informers.behind(), now=datetime.now(tz=UTC), limit=0.2)
            assert not check.ok and NODES in check.detail
            assert nodes._task is not None and not nodes._task.done()
            kube.list_versioned = real  # type: ignore[method-assign]
            await until(lambda: _true(names(nodes) == {"n1", "n2"}), within=3.0, interval=0.01)
            assert nodes.behind_since is None
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_a_replica_that_stops_leading_keeps_no_cache() -> None:
    """review 15c #7: the informers are a leader-only runnable; cancelled (the lease lost), they
    drop what they hold, as a stopped controller-runtime cache goes with its manager
    (``pkg/cache/informer_cache.go``), and a new term lists afresh."""
    async with cluster(node("n1"), node("n2")) as (_sim, kube):
        informers = Informers(kube)
        nodes = informers.get(NODES)
        task = asyncio.create_task(informers.run())
        await asyncio.wait_for(nodes.synced.wait(), 2)
        assert names(nodes) == {"n1", "n2"}
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert len(nodes) == 0 and nodes.items() == () and nodes.get("n1") is None
        await nodes.wait_synced()  # leading again: a fresh LIST
        try:
            assert names(nodes) == {"n1", "n2"} and nodes.lists == 2
        finally:
            await nodes.stop()
