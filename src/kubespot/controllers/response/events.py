"""Kubernetes events on the Node for the response actions, sent in the background: an event never
delays an action, and the API server being slow to take one must not cost the drain time."""

from __future__ import annotations

import asyncio
from typing import Protocol

from kubespot.kube import NodeView


class Recorder(Protocol):
    """``kubespot.kube.EventRecorder``'s node events."""

    async def node(
        self, node: str | NodeView, reason: str, message: str, *, warning: bool = False
    ) -> None: ...


class NodeEvents:
    """Sends node events through ``recorder`` (None: events are not recorded)."""

    def __init__(self, recorder: Recorder | None) -> None:
        self._recorder = recorder
        self._sending: set[asyncio.Task[None]] = set()

    def emit(self, node: NodeView, reason: str, message: str, *, warning: bool = False) -> None:
        if self._recorder is None:
            return
        task = asyncio.create_task(self._recorder.node(node, reason, message, warning=warning))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def aclose(self) -> None:
        """Give the events still being sent a moment (on shutdown)."""
        tasks = list(self._sending)
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)
