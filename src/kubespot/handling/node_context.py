"""The node one ``NodeHandler`` works on, and what its parts share about it.

The handler is composed of parts (intake, fence, drain run, timeline steps); each holds this one
context instead of its own copy of the handler's clients, so the node's reported phase and its
Kubernetes events go through one place, and a write retried through an API outage is retried the
same way whichever part makes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, TypeVar

from kubespot.kube import EventRecorder, KubeClient, KubeError, NodeView
from kubespot.model import Clock, Kind
from kubespot.observability.metrics import Metrics

log = logging.getLogger("kubespot.handling")

T = TypeVar("T")


class NodeContext:
    """The node, the clients its handler works with, its phase, and the side tasks it started."""

    def __init__(
        self,
        *,
        node: str,
        identity: str,
        kube: KubeClient,
        clock: Clock,
        metrics: Metrics,
        recorder: EventRecorder | None,
        node_hint: Callable[[], NodeView | None],
        retry_cap: float,
    ) -> None:
        self.node = node
        #: Who is working on the node, as written in its state (see ``NodeState.holder``).
        self.identity = identity
        self.kube = kube
        self.clock = clock
        self.metrics = metrics
        self.recorder = recorder
        #: A recent copy of the node (the controller's watch), saving a GET before a write or a look.
        self.node_hint = node_hint
        self.retry_cap = retry_cap
        self.phase = "none"
        self._side: set[asyncio.Task[None]] = set()
        metrics.set_node_phase(self.phase)

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self.metrics.set_node_phase(phase)

    def node_event(self, reason: str, message: str, *, warning: bool = False) -> None:
        """Record a node event in the background: events must never delay fencing or draining."""
        if self.recorder is not None:
            self.spawn(self.recorder.node(self.node, reason, message, warning=warning))

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` beside the work (events, an undo), keeping a reference until it ends."""
        task = asyncio.create_task(coro)
        self._side.add(task)
        task.add_done_callback(self._side.discard)

    async def cancel_side(self) -> None:
        """Stop what ``spawn`` started and wait for it to end (at shutdown)."""
        for task in list(self._side):
            task.cancel()
        if self._side:
            await asyncio.wait(self._side)

    async def persist(
        self,
        action: str,
        call: Callable[[], Coroutine[Any, Any, T]],
        *,
        deadline: datetime | None,
        kind: Kind | None,
    ) -> T | None:
        """Run ``call`` until it succeeds, backing off, for as long as the instance is expected to live
        (``deadline``; None: until it succeeds or the work is cancelled).

        The Kubernetes client already retries transient failures; this outer loop is for outages
        longer than that (an API server restart): an interruption is never dropped while there is
        time to act on it. Giving up at the deadline counts a deadline miss for ``kind``.
        """
        delay = 0.5
        while True:
            try:
                return await call()
            except KubeError as err:
                self.metrics.action(action, "failure")
                left = None if deadline is None else (deadline - self.clock.now()).total_seconds()
                if left is not None and left <= 0:
                    log.error("%s failed and the deadline has passed: %s", action, err)
                    if kind is not None:
                        self.metrics.deadline_miss(kind.value)
                    return None
                log.warning("%s failed (%s); retrying in %.1fs", action, err, delay)
                await self.clock.sleep(delay if left is None else min(delay, left))
                delay = min(self.retry_cap, delay * 2)

    async def sleep_until(self, when: datetime) -> None:
        # Re-checked after each sleep: a long sleep may end early or late on a loaded host.
        while (left := (when - self.clock.now()).total_seconds()) > 0:
            await self.clock.sleep(min(left, 60.0))
