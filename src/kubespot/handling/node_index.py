"""Which node an EC2 instance is: an index of the cluster's nodes kept current by one watch.

The controller learns about instances (from SQS) and acts on nodes. Every node is indexed by its
name and by the instance id in its providerID (``aws:///<zone>/<instance-id>``); a node without a
providerID yet can still be found by name, which on EKS is the instance's private DNS name. One
list plus one watch costs the API server far less than a GET per message, and answers are local.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from kubespot.kube import KubeClient, NodeView
from kubespot.kube.views import PodEventType

log = logging.getLogger("kubespot.handling.nodes")


class NodeIndex:
    """The cluster's nodes by name and by instance id; ``run()`` keeps it current until cancelled."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube
        self._by_name: dict[str, NodeView] = {}
        self._by_instance: dict[str, str] = {}
        self._synced = asyncio.Event()
        self._listeners: list[Callable[[str], None]] = []

    def __len__(self) -> int:
        return len(self._by_name)

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Return once the first full list is in (before that, 'not found' would be a guess)."""
        await self._synced.wait()

    def by_instance(self, instance_id: str) -> NodeView | None:
        name = self._by_instance.get(instance_id)
        return None if name is None else self._by_name.get(name)

    def by_name(self, name: str) -> NodeView | None:
        return self._by_name.get(name)

    def nodes(self) -> list[NodeView]:
        return list(self._by_name.values())

    def subscribe(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call ``listener(name)`` after each change to a node (added, modified, deleted, or in a
        re-list); it must return at once and not raise. Returns the function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _notify(self, names: Iterable[str]) -> None:
        if self._listeners:
            changed = tuple(names)
            for listener in list(self._listeners):
                for name in changed:
                    listener(name)

    async def run(self) -> None:
        """List, then follow the watch (it re-lists by itself after any failure)."""
        while True:
            try:
                listing = await self._kube.list_nodes()
                break
            except Exception as err:  # the API server may be down at start-up: keep trying
                log.warning("cannot list nodes yet: %s", err)
                await asyncio.sleep(2.0)
        self._replace(listing.nodes)
        async for event in self._kube.watch_nodes(resource_version=listing.resource_version):
            if event.type is PodEventType.RESYNC:
                self._replace(event.nodes)
            elif event.node is not None:
                if event.type is PodEventType.DELETED:
                    self._remove(event.node.name)
                else:
                    self._put(event.node)
                self._notify((event.node.name,))

    def _replace(self, nodes: tuple[NodeView, ...]) -> None:
        before = set(self._by_name)
        self._by_name.clear()
        self._by_instance.clear()
        for node in nodes:
            self._put(node)
        if not self._synced.is_set():
            log.info("watching %d nodes", len(nodes))
            self._synced.set()
        self._notify(before | set(self._by_name))

    def _put(self, node: NodeView) -> None:
        self._remove(node.name)
        self._by_name[node.name] = node
        if node.instance_id:
            self._by_instance[node.instance_id] = node.name

    def _remove(self, name: str) -> None:
        old = self._by_name.pop(name, None)
        if old is not None and old.instance_id and self._by_instance.get(old.instance_id) == name:
            del self._by_instance[old.instance_id]
