"""The runner's loop: every node change the node index reports, one task per node at a time.

Nodes with work left are looked at again every ``SWEEP_SECONDS`` even when they do not change (a
deadline to watch, a record another runner may have abandoned). A change arriving while its node's
task runs starts the node once more when that task is done, so no change is missed and no node is
worked on twice at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Protocol

from kubespot.controllers.response.step import LOGGER, Background
from kubespot.handling.node_changes import NodeChanges
from kubespot.kube import NodeView
from kubespot.model import Clock

log = logging.getLogger(LOGGER)

#: Nodes with work left (a deadline to watch, a record another runner may have abandoned) are looked
#: at this often even when they do not change.
SWEEP_SECONDS = 5.0


class NodeSource(Protocol):
    """What the runner needs of ``kubespot.handling.node_index.NodeIndex``."""

    def by_name(self, name: str) -> NodeView | None: ...

    def nodes(self) -> list[NodeView]: ...

    def subscribe(self, listener: Callable[[str], None]) -> Callable[[], None]: ...

    async def wait_synced(self) -> None: ...


class NodeLoop:
    """Runs ``reconcile(name)`` for the nodes ``interesting`` lets through and, every sweep, for the
    nodes ``watched`` returns."""

    def __init__(
        self,
        nodes: NodeSource,
        *,
        clock: Clock,
        reconcile: Callable[[str], Awaitable[None]],
        interesting: Callable[[str], bool],
        watched: Callable[[], Collection[str]],
    ) -> None:
        self._nodes = nodes
        self._clock = clock
        self._reconcile = reconcile
        self._interesting = interesting
        self._watched = watched
        self._changes = NodeChanges(nodes)
        self._busy: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()

    async def run(self, background: Background) -> None:
        """Every node once the index has synced, then each change; with ``background`` running
        alongside. Until cancelled."""
        helpers = [asyncio.create_task(self._sweep(), name="response-actions-sweep")]
        helpers += [
            asyncio.create_task(work(), name=f"response-actions-{suffix}")
            for suffix, work in background.items()
        ]
        try:
            async with contextlib.aclosing(self._changes.batches()) as batches:
                async for names in batches:
                    for name in names:
                        if self._interesting(name):
                            self._start(name)
        finally:
            pending = [*helpers, *self._busy.values()]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
            self._busy.clear()

    def _start(self, name: str) -> None:
        if name in self._busy:
            self._again.add(name)
            return
        # A fresh context: the work outlives the change that started it.
        task = asyncio.create_task(
            self._guarded(name), name=f"response-actions-{name}", context=contextvars.Context()
        )
        self._busy[name] = task

    async def _guarded(self, name: str) -> None:
        try:
            await self._reconcile(name)
        except asyncio.CancelledError:
            raise
        except Exception:  # one node's trouble must not stop the others
            log.exception("response actions for node %s failed", name)
        finally:
            self._busy.pop(name, None)
            if name in self._again:
                self._again.discard(name)
                self._changes.mark((name,))

    async def _sweep(self) -> None:
        while True:
            await self._clock.sleep(SWEEP_SECONDS)
            self._changes.mark(self._watched())
