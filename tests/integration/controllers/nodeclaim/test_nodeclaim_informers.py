"""The NodeClaim controller on the process's shared informers, over HTTP against kubesim: the
lifecycle loop, the garbage collector and the provisioner read one LIST and one WATCH of NodeClaims
and of Nodes; a re-list's changes reach the loop; a cache being listed again collects nothing.

Sources: kubernetes-sigs/karpenter ``pkg/operator/operator.go`` (one controller-runtime manager,
whose cache every controller reads), ``pkg/controllers/nodeclaim/lifecycle/controller.go``
(NodeClaims and Nodes watched through that cache), ``pkg/controllers/nodeclaim/garbagecollection/
controller.go`` and aws ``pkg/controllers/nodeclaim/garbagecollection/controller.go`` ``Reconcile``
(the claims listed through the manager's cached client); client-go ``tools/cache/reflector.go``
(410 → re-list) and ``delta_fifo.go`` ``Replace`` (what a re-list lacks was deleted).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from nodeclaim_world import CLAIM, Env, Obj, gone, is_, nodeclaim, ready_claim, running, stop_informers

from kubespot.controllers.nodeclaim.objects import NODECLAIMS, NODES
from kubespot.sim.kubesim.testing import until


def _store(env: Env, plural: str) -> Any:
    group = "karpenter.sh" if plural == "nodeclaims" else ""
    rt = env.sim.store.registry.lookup(group, "v1", plural)
    assert rt is not None
    return rt


async def _true(value: bool) -> bool:
    return value


async def test_a_re_list_brings_the_loop_what_the_broken_watch_missed() -> None:
    """reflector.go: a watch resumed past compaction (410) lists again; delta_fifo.go Replace hands
    every listed object on. Changed while no watch ran, a claim created is launched and a claim
    deleted (its finalizer holding it) is terminated: its instance goes and so does it; the
    claim already launched is not launched again."""
    async with running() as env:
        first, _node = await ready_claim(env)
        claims = env.loop.informers.get(NODECLAIMS)
        assert claims.lists == 1
        # In one step, with no await between: the watches end, a claim comes, the launched one is
        # deleted, the history is forgotten: only a LIST can tell the loop.
        env.sim.store.drop_watches()
        env.sim.store.create(_store(env, "nodeclaims"), copy.deepcopy(nodeclaim("general-new")))
        env.sim.store.delete(_store(env, "nodeclaims"), None, "general-abc")
        env.sim.store.compact()
        launched = await env.until(f"/{NODECLAIMS}/general-new", is_("Launched", "True"))
        assert launched is not None
        await env.until(CLAIM, gone)
        assert first["status"]["providerID"] not in env.cloud.launched
        assert claims.lists == 2
        assert env.cloud.create_calls.count("general-abc") == 1
        await until(lambda: _true("general-abc" not in env.loop.claims), within=1.0, interval=0.01)


async def test_a_cache_listing_again_collects_nothing() -> None:
    """aws garbagecollection Reconcile collects only from a complete read (a LIST error returns
    before collecting); controller-runtime's cache is read once synced. With the informers dropped
    (the lease lost) and their LIST slow to come back, the collector's passes wait: the running
    instance of a live claim is not taken for an orphan, and the lifecycle loop keeps the claim."""
    async with running(gc_min_age=0.05) as env:
        claim, _node = await ready_claim(env)
        pid = claim["status"]["providerID"]
        passes = env.gc.passes
        await until(lambda: _true(env.gc.passes > passes + 1), within=2.0, interval=0.01)
        env.sim.faults.add(verb="list", resource="nodeclaims", latency_ms=300)
        await stop_informers(env.loop.informers)
        cache = env.loop.informers.get(NODECLAIMS)
        await asyncio.sleep(0.2)  # two GC intervals while the LIST is on its way
        assert not cache.synced.is_set()
        assert pid in env.cloud.launched and "general-abc" in env.loop.claims
        passes = env.gc.passes
        await asyncio.wait_for(cache.synced.wait(), 2.0)
        await until(lambda: _true(env.gc.passes > passes + 1), within=2.0, interval=0.01)
        assert pid in env.cloud.launched
        got: Obj | None = await env.get(CLAIM)
        assert got is not None and not got["metadata"].get("deletionTimestamp")


async def test_the_loop_and_the_collector_share_one_list_and_watch_per_kind() -> None:
    """operator.go: every controller reads the manager's one cache. Through a claim's launch,
    registration and initialization and three collector passes (0.1 s apart), the API server serves
    one LIST and one WATCH of NodeClaims and of Nodes: the informers', none of the loop's or the
    collector's own."""
    async with running() as env:
        await ready_claim(env)
        passes = env.gc.passes
        await until(lambda: _true(env.gc.passes >= passes + 3), within=2.0, interval=0.01)
        requests = env.sim.server.requests
        for kind in ("nodeclaims", "nodes"):
            assert (requests[f"list {kind}"], requests[f"watch {kind}"]) == (1, 1), dict(requests)
        assert env.loop.informers.get(NODES).lists == 1
