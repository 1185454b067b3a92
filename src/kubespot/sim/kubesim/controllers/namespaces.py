"""Namespace controller: empties a terminating namespace, then removes it.

Upstream's namespace lifecycle: deleting a Namespace sets its ``deletionTimestamp`` and phase
``Terminating`` (``Store.delete`` does this and holds it with a finalizer); the namespace controller
then deletes every namespaced object in it through the normal delete path (so pods terminate
gracefully through their kubelet and objects with finalizers wait for them) and, once nothing is
left, removes the namespace (``Store.finish_namespace``). Pods whose kubelet is gone stay Terminating
and keep the namespace Terminating, as upstream.

Cost: the namespace is scanned once when it starts terminating; after that the controller counts the
namespace's DELETED events down and re-scans only when the count reaches zero.
"""

from __future__ import annotations

import asyncio
import logging

from .. import errors
from ..resources import ResourceType
from ..store import NAMESPACE_KEY, Store, WatchEvent
from . import Controller, ControllerConfig

log = logging.getLogger("kubespot.sim.kubesim.namespaces")


class NamespaceController(Controller):
    """See the module docstring."""

    name = "namespaces"

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        super().__init__(store, config)
        self.ns_rt = self.rt("", "v1", "namespaces")
        self._remaining: dict[str, int] = {}  # terminating namespace -> objects left (estimate)
        self._todo: set[str] = set()
        self._wake = asyncio.Event()

    def start(self) -> None:
        super().start()
        for ns in self.store.iter_objects(self.ns_rt):
            if ns["metadata"].get("deletionTimestamp"):
                self._todo.add(ns["metadata"]["name"])
        self.spawn(self._worker())
        if self._todo:
            self._wake.set()

    def on_event(self, ev: WatchEvent) -> None:
        if ev.rkey == NAMESPACE_KEY:
            name = ev.obj["metadata"]["name"]
            if ev.type == "DELETED":
                self._remaining.pop(name, None)
            elif ev.obj["metadata"].get("deletionTimestamp") and name not in self._remaining:
                self._remaining[name] = -1  # not counted yet
                self._todo.add(name)
                self._wake.set()
            return
        if ev.type != "DELETED" or not self._remaining:
            return
        ns = ev.obj["metadata"].get("namespace")
        left = self._remaining.get(ns) if ns else None
        if left is not None and left > 0:
            self._remaining[ns] = left - 1
            if left - 1 == 0:
                self._todo.add(ns)
                self._wake.set()

    async def _worker(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            todo, self._todo = self._todo, set()
            for name in sorted(todo):
                try:
                    await self._sweep(name)
                except Exception:
                    log.exception("namespaces: sweeping %s failed", name)

    def _types(self) -> list[ResourceType]:
        seen: dict[tuple[str, str], ResourceType] = {}
        for rt in self.store.registry.all_types():
            if rt.namespaced and rt.key not in seen:
                seen[rt.key] = rt
        return list(seen.values())

    async def _sweep(self, name: str) -> None:
        """Delete what is left in ``name``; finish the namespace when nothing is."""
        ns = self.store.find(self.ns_rt, None, name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            self._remaining.pop(name, None)
            return
        self._remaining[name] = -1  # deletions during the sweep are accounted for by the recount below
        left_keys: list[tuple[ResourceType, str]] = []
        pacer = self.pacer
        started = pacer.clock()
        for rt in self._types():
            for obj in list(self.store.iter_objects(rt, name)):
                meta = obj["metadata"]
                if pacer.due(started):
                    started = await pacer.pause(started)
                left_keys.append((rt, meta["name"]))
                if meta.get("deletionTimestamp"):
                    continue  # already on its way out (a terminating pod, or finalizers pending)
                try:
                    self.store.delete(rt, name, meta["name"])
                except errors.ApiError as exc:
                    if exc.code != 404:
                        log.debug(
                            "namespaces: deleting %s %s/%s failed: %s",
                            rt.kind,
                            name,
                            meta["name"],
                            exc.message,
                        )
        pacer.charge(started)
        # No await from here on: the count and the DELETED events that decrement it stay consistent.
        left = sum(1 for rt, obj_name in left_keys if self.store.find(rt, name, obj_name) is not None)
        if left == 0:
            self._remaining.pop(name, None)
            self.store.finish_namespace(name)
            log.info("namespaces: %s removed", name)
        else:
            self._remaining[name] = left
