"""Which nodes changed, in batches: the work queue of a controller that reconciles per node.

A controller that acts on nodes (the interruption controller re-arming scheduled changes, the
response controller's AWS actions) needs every node once the index has synced, then each node the
index reports changed, and now and then nodes it asks for itself (a sweep). Changes that arrive
while the controller works on a batch are coalesced into the next one, so a node that changes ten
times during a slow reconcile is looked at once more, not ten times.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import Protocol

from kubespot.kube import NodeView


class NodeSource(Protocol):
    """What ``NodeChanges`` needs of the node index."""

    def nodes(self) -> list[NodeView]: ...

    def subscribe(self, listener: Callable[[str], None]) -> Callable[[], None]: ...

    async def wait_synced(self) -> None: ...


class NodeChanges:
    """The names of changed nodes, batch by batch (``batches``); ``mark`` adds names by hand."""

    def __init__(self, nodes: NodeSource) -> None:
        self._nodes = nodes
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()

    def mark(self, names: Iterable[str]) -> None:
        """Look at these nodes again in the next batch (a sweep, a retry)."""
        before = len(self._dirty)
        self._dirty.update(names)
        if len(self._dirty) != before:
            self._wake.set()

    def _changed(self, name: str) -> None:
        self._dirty.add(name)
        self._wake.set()

    async def batches(self) -> AsyncGenerator[list[str], None]:
        """Every node once the index has synced, then each batch of changed nodes (sorted), until
        the caller stops; subscribed to the index from the start, so no change is missed."""
        unsubscribe = self._nodes.subscribe(self._changed)
        try:
            await self._nodes.wait_synced()
            self.mark(node.name for node in self._nodes.nodes())
            while True:
                await self._wake.wait()
                self._wake.clear()
                names, self._dirty = self._dirty, set()
                if names:
                    yield sorted(names)
        finally:
            unsubscribe()
