"""One watch over every pod of the cluster, shared by all the drains of a process.

A drain follows its node's pods with a watch. The agent drains one node and opens one; the
controller may drain a thousand at once, and a watch per node would hold a thousand connections
(more than the client's pool: the calls starve) and as many streams. ``SharedPodWatch`` opens one
watch on all pods and hands each event to the subscribers of the pod's node.

A subscriber first gets a ``RESYNC`` from a fresh list of its node, so nothing that happened before
it subscribed is missed; events older than that list may follow, which is harmless to the drain's
tracker (it only ever learns that a pod is gone). If the shared watch breaks, every subscriber gets
a fresh ``RESYNC`` of its node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from lightkube.resources.core_v1 import Pod

from .views import PodEvent, PodEventType, PodList, PodView

if TYPE_CHECKING:
    from .client import KubeClient

log = logging.getLogger("kubespot.kube.podwatch")

#: A node name no node can have (a slash): listing its pods is a cheap way to learn the current
#: resourceVersion of the pod collection, to start the shared watch from "now".
_NO_NODE = "kubespot.invalid/none"


class SharedPodWatch:
    """Fan-out of one cluster-wide pod watch; started on the first subscription."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._subscribers: dict[str, set[asyncio.Queue[PodEvent]]] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def subscribers(self) -> int:
        return sum(len(s) for s in self._subscribers.values())

    async def subscribe(self, node: str) -> AsyncIterator[PodEvent]:
        """The events of ``node``'s pods, starting with a ``RESYNC`` of them, until the caller stops."""
        queue: asyncio.Queue[PodEvent] = asyncio.Queue()
        self._subscribers.setdefault(node, set()).add(queue)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="shared-pod-watch")
        try:
            listing = await self._client.list_pods_on_node(node)
            yield PodEvent(PodEventType.RESYNC, pods=listing.pods)
            while True:
                yield await queue.get()
        finally:
            subs = self._subscribers.get(node)
            if subs is not None:
                subs.discard(queue)
                if not subs:
                    del self._subscribers[node]

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})

    async def _run(self) -> None:
        start = await self._client.list_pods_on_node(_NO_NODE)
        async for op, view, listing in self._client._watch(
            Pod, "all pods", {"namespace": "*"}, self._client_view, self._resync_all, start.resource_version
        ):
            if listing is not None or view is None:
                continue  # subscribers were re-listed by _resync_all
            for queue in self._subscribers.get(view.node_name or "", ()):
                queue.put_nowait(PodEvent(PodEventType(op), view))

    @staticmethod
    def _client_view(pod: Pod) -> PodView:
        from .client import pod_view  # the client imports this module: import back at call time

        return pod_view(pod)

    async def _resync_all(self) -> PodList:
        """After a broken watch: every subscriber gets its node re-listed; the watch restarts from now."""
        for node, queues in list(self._subscribers.items()):
            try:
                listing = await self._client.list_pods_on_node(node)
            except Exception as err:
                log.warning("re-list of pods on %s failed: %s", node, err)
                continue
            for queue in queues:
                queue.put_nowait(PodEvent(PodEventType.RESYNC, pods=listing.pods))
        return await self._client.list_pods_on_node(_NO_NODE)
