"""One watch over every pod of the cluster, shared by all the drains of a process.

A drain follows its node's pods with a watch. The agent drains one node and opens one; the
controller may drain a thousand at once, and a watch per node would hold a thousand connections
(more than the client's pool: the calls starve) and as many streams. ``SharedPodWatch`` opens one
watch on all pods and hands each event to the subscribers of the pod's node.

The watch carries every pod change of the cluster (a burst of evictions sets off several per pod:
the deletion, the replacement's creation, binding and start), most of them on nodes nobody drains.
Those lines are recognised from their raw bytes (``nodes_in_line``) and never decoded.

A drain lists its node's pods, then follows them from the list's version. Here the list (``list``)
already subscribes, before it is sent: the events from then on are kept for the ``subscribe`` that
follows with that version, so no change after the list is missed and no second list is needed. A
subscriber without such a list first gets a ``RESYNC`` from a fresh list of its node. Events older
than a subscriber's list may follow it, which is harmless to the drain's tracker (it only ever learns
that a pod is gone). If the shared watch breaks, every subscriber gets a fresh ``RESYNC`` of its
node. All of this relies on the watch starting from a version no newer than the lists: it is read
before them.

A node whose re-list fails after a break (its own calls throttled or refused while the others
pass) would miss every change that fell in the gap, a pod's deletion among them, and its drain
would wait for that pod until its deadline: such nodes are re-listed again, with backoff, until
the list comes or nobody follows the node any more, and get their ``RESYNC`` then.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ..model.backoff import equal_jitter
from .views import PodEvent, PodEventType, PodList

if TYPE_CHECKING:
    from .client import KubeClient

log = logging.getLogger("kubespot.kube.podwatch")

#: A node name no node can have (a slash): listing its pods is a cheap way to learn the current
#: resourceVersion of the pod collection, to start the shared watch from "now".
_NO_NODE = "kubespot.invalid/none"
#: In a raw watch line: the value of every "nodeName" key, whatever the JSON spacing (inside a JSON
#: string a quote is always escaped, so the contents of strings never match).
_NODE_IN_LINE = re.compile(rb'"nodeName"\s*:\s*"([^"\\]*)"')
#: Seconds the events after a ``list`` are kept for a ``subscribe`` that has not come (a drain
#: subscribes right after its list; anything else that lists does not subscribe at all).
UNCLAIMED_SECONDS = 30.0
#: Backoff between rounds of re-lists of the nodes whose re-list failed after a break (seconds;
#: each round is already a call with the client's own retries).
CATCH_UP_BASE = 0.5
CATCH_UP_CAP = 10.0


def nodes_in_line(line: bytes) -> list[bytes]:
    """Every ``nodeName`` value in a raw pod watch line. The pod's ``spec.nodeName`` is one of them
    (a label or annotation named so would add another), so a line that names none of the wanted
    nodes is about a pod nobody follows and need not be decoded."""
    return _NODE_IN_LINE.findall(line)


Queue = asyncio.Queue[PodEvent]


class SharedPodWatch:
    """Fan-out of one cluster-wide pod watch; started on the first list or subscription."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._subscribers: dict[str, set[Queue]] = {}
        #: The subscribed node names as they appear in raw watch lines.
        self._wanted: set[bytes] = set()
        #: Queues filled since a ``list``, by (node, the list's version), until a subscriber claims them.
        self._unclaimed: dict[tuple[str, str], tuple[Queue, asyncio.TimerHandle]] = {}
        self._task: asyncio.Task[None] | None = None
        #: Subscribed nodes that a break left without their ``RESYNC`` yet (their re-list failed).
        self._behind: set[str] = set()
        self._catch_up: asyncio.Task[None] | None = None
        #: Set once the watch's starting version is known: lists made after it miss nothing.
        self._started = asyncio.Event()

    @property
    def subscribers(self) -> int:
        return sum(len(s) for s in self._subscribers.values())

    async def list(self, node: str) -> PodList:
        """``node``'s pods, the events after them kept for a ``subscribe`` with their version."""
        await self._start()
        queue: Queue = asyncio.Queue()
        self._add(node, queue)
        try:
            listing = await self._client._list_pods_on_node(node)
        except BaseException:
            self._remove(node, queue)
            raise
        key = (node, listing.resource_version)
        self._drop_unclaimed(key)  # a repeated list at the same version (nothing changed)
        expiry = asyncio.get_running_loop().call_later(UNCLAIMED_SECONDS, self._drop_unclaimed, key)
        self._unclaimed[key] = (queue, expiry)
        return listing

    async def subscribe(self, node: str, resource_version: str = "") -> AsyncIterator[PodEvent]:
        """The events of ``node``'s pods after ``resource_version`` (the version of a ``list``), or
        without such a list, starting with a ``RESYNC`` of them; until the caller stops."""
        claimed = self._unclaimed.pop((node, resource_version), None) if resource_version else None
        if claimed is not None:
            queue, expiry = claimed
            expiry.cancel()
        else:
            queue = asyncio.Queue()
            self._add(node, queue)
        try:
            if claimed is None:
                await self._start()
                listing = await self._client._list_pods_on_node(node)
                yield PodEvent(PodEventType.RESYNC, pods=listing.pods)
            while True:
                yield await queue.get()
        finally:
            self._remove(node, queue)

    async def aclose(self) -> None:
        for _queue, expiry in self._unclaimed.values():
            expiry.cancel()
        self._unclaimed.clear()
        for task in (self._catch_up, self._task):
            if task is not None:
                task.cancel()
                await asyncio.wait({task})

    def _add(self, node: str, queue: Queue) -> None:
        self._subscribers.setdefault(node, set()).add(queue)
        self._wanted.add(node.encode())

    def _remove(self, node: str, queue: Queue) -> None:
        subs = self._subscribers.get(node)
        if subs is not None:
            subs.discard(queue)
            if not subs:
                del self._subscribers[node]
                self._wanted.discard(node.encode())

    def _drop_unclaimed(self, key: tuple[str, str]) -> None:
        found = self._unclaimed.pop(key, None)
        if found is not None:
            found[1].cancel()
            self._remove(key[0], found[0])

    async def _start(self) -> None:
        if self._task is None or self._task.done():
            self._started.clear()
            self._task = asyncio.create_task(self._run(), name="shared-pod-watch")
        await self._started.wait()

    def _is_wanted(self, line: bytes) -> bool:
        wanted = self._wanted
        return bool(wanted) and any(name in wanted for name in nodes_in_line(line))

    async def _run(self) -> None:
        while True:
            try:
                start = await self._client._list_pods_on_node(_NO_NODE)
                break
            except Exception as err:  # the API server is not reachable yet: subscribers wait
                log.warning("cannot start the shared pod watch yet: %s", err)
                await asyncio.sleep(1.0)
        self._started.set()
        async for event in self._client.watch_pods(
            "all pods", {}, self._resync_all, start.resource_version, wanted=self._is_wanted
        ):
            if event.type is PodEventType.RESYNC or event.pod is None:
                continue  # subscribers were re-listed by _resync_all
            for queue in self._subscribers.get(event.pod.node_name or "", ()):
                queue.put_nowait(event)

    async def _resync_all(self) -> PodList:
        """After a broken watch: the watch restarts from now, and every subscriber gets its node
        re-listed after that point (so no change falls between the two)."""
        start = await self._client._list_pods_on_node(_NO_NODE)
        self._behind.update(self._subscribers)
        await self._relist_behind()
        if self._behind and (self._catch_up is None or self._catch_up.done()):
            self._catch_up = asyncio.create_task(self._catch_up_loop(), name="shared-pod-watch-catch-up")
        return start

    async def _relist_behind(self) -> None:
        """Re-list every node left behind and hand its subscribers the ``RESYNC``; the nodes whose
        list fails stay behind."""
        for node in list(self._behind):
            if node not in self._subscribers:
                self._behind.discard(node)  # nobody follows it any more
                continue
            try:
                listing = await self._client._list_pods_on_node(node)
            except Exception as err:
                log.warning("re-list of pods on %s failed (retrying): %s", node, err)
                continue
            self._behind.discard(node)
            for queue in self._subscribers.get(node, ()):
                queue.put_nowait(PodEvent(PodEventType.RESYNC, pods=listing.pods))

    async def _catch_up_loop(self) -> None:
        """Retry the nodes left behind until none is: their drains must see what the gap hid."""
        attempt = 0
        while self._behind:
            await asyncio.sleep(equal_jitter(attempt, base=CATCH_UP_BASE, cap=CATCH_UP_CAP))
            attempt += 1
            await self._relist_behind()
