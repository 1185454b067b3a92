"""Watches that go silent: a half-open connection is dropped, re-listed and reported, on both HTTP stacks.

A half-open connection is what a watch looks like after a control-plane upgrade or a NAT entry reset
that sent no FIN and no RST: the request was answered and then nothing comes, for ever, whatever
``timeoutSeconds`` asked for (client-go#374, kubernetes#65012). kubesim's ``stall_watch_after_s``
fault serves exactly that. The client's idle bound is the fix kube-rs made (kube-rs#1945: its
watcher times out ``timeoutSeconds`` + 5 s after the last event) and kopf's
``settings.watching.inactivity_timeout`` (70 s, against the ~60 s bookmarks of kubernetes#90560).
Every test runs through kubesim over HTTP with the agent's httpx stack and the controller's aiohttp.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Literal

import pytest

from kubespot.config.kube import KubeSettings
from kubespot.handling.node_index import NodeIndex
from kubespot.kube import KubeClient, connect
from kubespot.kube.views import PodEvent, PodEventType
from kubespot.observability.health import silence
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.testing import node, pod, until

Stack = Literal["httpx", "aiohttp"]
STACKS = pytest.mark.parametrize("stack", ["httpx", "aiohttp"])
#: A short idle bound: the server is asked to end each watch after 1 s (4/5 of it).
IDLE = 2.0


@asynccontextmanager
async def cluster(stack: Stack, *objects: dict[str, Any]) -> AsyncIterator[tuple[KubeSim, KubeClient]]:
    async with KubeSim(objects=list(objects)) as sim:
        settings = KubeSettings(kubeconfig=str(sim.kubeconfig_path), watch_idle_timeout=IDLE)
        kube = connect(settings, http=stack)
        try:
            yield sim, kube
        finally:
            await kube.close()


def create(sim: KubeSim, plural: str, obj: dict[str, Any]) -> None:
    rt = sim.store.registry.lookup("", "v1", plural)
    assert rt is not None
    sim.store.create(rt, copy.deepcopy(obj), namespace=obj["metadata"].get("namespace"))


def delete_at_once(sim: KubeSim, name: str) -> None:
    """Remove a pod of the default namespace now (grace 0), in the store: no request that could race."""
    rt = sim.store.registry.lookup("", "v1", "pods")
    assert rt is not None
    sim.store.delete(rt, "default", name, grace_period_seconds=0)


def watches_check(kube: KubeClient) -> tuple[bool, str]:
    check = silence(
        "watches", kube.watches.silences(), now=datetime.now(tz=UTC), limit=kube.watches.health_limit
    )
    return check.ok, check.detail


@STACKS
async def test_the_node_index_recovers_after_its_watch_goes_silent(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    """A node added while the node watch is half-open shows up once the silence is taken as a break
    and the nodes are re-listed; without the idle bound the index never learns of it."""
    async with cluster(stack, node("n1")) as (sim, kube):
        sim.faults.add(resource="nodes", stall_watch_after_s=0)
        index = NodeIndex(kube)
        task = asyncio.create_task(index.run())
        try:
            await asyncio.wait_for(index.wait_synced(), 5)
            create(sim, "nodes", node("n2"))
            await until(lambda: _true(index.by_name("n2") is not None), within=4 * IDLE)
            # The transport's idle bound broke the watch, not another failure.
            assert any("watch silent for 2s, taken as broken" in r.getMessage() for r in caplog.records)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


@STACKS
@pytest.mark.parametrize("shared", [True, False], ids=["controller-shared", "agent-per-node"])
async def test_a_drains_pod_watch_recovers_after_it_goes_silent(stack: Stack, shared: bool) -> None:
    """A pod deleted while a drain's pod watch is half-open (the controller's cluster-wide one, or
    the agent's watch of its node) reaches the drain (a RESYNC without it) once the silence is taken
    as a break."""
    async with cluster(stack, node("node-a"), pod("p1", node="node-a"), pod("p2", node="node-a")) as (
        sim,
        kube,
    ):
        if shared:
            kube.share_pod_watch()
        sim.faults.add(resource="pods", stall_watch_after_s=0)
        listing = await kube.list_pods_on_node("node-a")
        assert {p.name for p in listing.pods} == {"p1", "p2"}
        events: asyncio.Queue[PodEvent] = asyncio.Queue()
        task = asyncio.create_task(_follow(kube, "node-a", listing.resource_version, events))
        try:
            delete_at_once(sim, "p1")
            assert await asyncio.wait_for(_p1_gone(events), 4 * IDLE)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


@STACKS
async def test_health_names_a_watch_stuck_silent_and_clears_when_it_speaks_again(stack: Stack) -> None:
    """While every reopened node watch goes silent again, the watches check turns red after twice the
    bound and names the watch; once the connection works again it is green (the server's own end of
    a 1 s watch counts as a word)."""
    async with cluster(stack, node("n1")) as (sim, kube):
        rule = sim.faults.add(resource="nodes", stall_watch_after_s=0)
        index = NodeIndex(kube)
        task = asyncio.create_task(index.run())
        try:
            await asyncio.wait_for(index.wait_synced(), 5)
            assert watches_check(kube)[0], "a fresh watch is healthy"
            detail = await until(lambda: _red(kube), within=4 * IDLE)
            assert "nodes silent for" in detail, detail
            sim.faults.remove(rule.id)
            await until(lambda: _true(watches_check(kube)[0]), within=4 * IDLE)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _true(value: bool) -> bool:
    return value


async def _red(kube: KubeClient) -> str:
    """The watches check's detail once it is red ("" while it is green)."""
    ok, detail = watches_check(kube)
    return "" if ok else detail


async def _follow(kube: KubeClient, node_name: str, rv: str, into: asyncio.Queue[PodEvent]) -> None:
    async for event in kube.watch_pods_on_node(node_name, resource_version=rv):
        into.put_nowait(event)


async def _p1_gone(events: asyncio.Queue[PodEvent]) -> bool:
    while True:
        event = await events.get()
        if event.type is PodEventType.RESYNC and "p1" not in {p.name for p in event.pods}:
            return True
        if event.type is PodEventType.DELETED and event.pod is not None and event.pod.name == "p1":
            return True


@STACKS
async def test_a_failed_re_list_of_one_node_is_retried_so_its_drain_sees_the_deletion(stack: Stack) -> None:
    """The shared pod watch breaks (its reopen answered 500); the re-list of every subscribed node
    follows, and node-a's fails for good (its five attempts answered 500) while the others pass.
    A pod deleted in the gap must still reach node-a's subscriber: its re-list is retried until it
    comes, instead of node-a being skipped and its drain left waiting for a pod already gone."""
    async with cluster(stack, node("node-a"), pod("p1", node="node-a"), pod("p2", node="node-a")) as (
        sim,
        kube,
    ):
        kube.share_pod_watch()
        # The first shared watch fails after 0.3 s: the drain's own list below answers before it.
        sim.faults.add(
            verb="watch", resource="pods", error_rate=1.0, error_code=500, latency_ms=300, remaining=1
        )
        listing = await kube.list_pods_on_node("node-a")
        events: asyncio.Queue[PodEvent] = asyncio.Queue()
        task = asyncio.create_task(_follow(kube, "node-a", listing.resource_version, events))
        try:
            # In the gap: node-a's re-list will fail (every attempt), and p1 goes away unseen.
            attempts = KubeSettings().retry_attempts
            query = "spec.nodeName=node-a"
            sim.faults.add(verb="list", resource="pods", query=query, error_rate=1.0, remaining=attempts)
            delete_at_once(sim, "p1")
            assert await asyncio.wait_for(_p1_gone(events), 15)
            assert not sim.faults.rules, "node-a's re-list failed at least once"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
