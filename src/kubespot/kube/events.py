"""Kubernetes Events (core/v1) on Nodes and Pods: what kubespot did, visible in `kubectl describe`.

Repeats of the same (object, reason, message, type) are aggregated into one Event whose ``count``
and ``lastTimestamp`` grow, as the kubelet's recorder does, so a PDB-blocked pod retried twenty times
is one line, not twenty objects. Recording never raises into the caller: an event is worth a log
line when it fails, never a failed drain.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from kubespot.config.observability import ObservabilitySettings

from .client import KubeClient, KubeError, ObjectRef
from .views import NodeView, PodView

log = logging.getLogger("kubespot.kube.events")

#: Node events live in "default", as the kubelet's and the reference handler's do.
NODE_EVENT_NAMESPACE = "default"


@dataclass
class _Seen:
    namespace: str
    name: str
    count: int


class EventRecorder:
    """Records events through ``kube``; ``component`` and ``host`` fill the event's source."""

    def __init__(
        self,
        *,
        kube: KubeClient,
        component: str = "kubespot",
        host: str | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(tz=UTC),
        max_remembered: int = 4096,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        self._kube = kube
        #: Added to every event (KUBERNETES_EVENTS_EXTRA_ANNOTATIONS), e.g. for routing in an event exporter.
        self.annotations = dict(annotations or {})
        self.component = component
        self.host = host
        self._now = now
        self._seen: dict[tuple[object, ...], _Seen] = {}
        self._locks: dict[tuple[object, ...], asyncio.Lock] = {}
        self._max = max_remembered
        self._node_uids: dict[str, str] = {}

    async def node(self, node: str | NodeView, reason: str, message: str, *, warning: bool = False) -> None:
        name, uid = (node, None) if isinstance(node, str) else (node.name, node.uid or None)
        if uid is None:
            # `kubectl describe node` selects events by the node's uid: look it up once.
            uid = self._node_uids.get(name)
            if uid is None:
                try:
                    view = await self._kube.get_node(name)
                except Exception as err:
                    log.debug("no uid for node %s: %s", name, err)
                    view = None
                if view is not None and view.uid:
                    uid = self._node_uids[name] = view.uid
        await self.record(ObjectRef("Node", name, None, uid), reason, message, warning=warning)

    async def pod(self, pod: PodView, reason: str, message: str, *, warning: bool = False) -> None:
        await self.record(
            ObjectRef("Pod", pod.name, pod.namespace, pod.uid), reason, message, warning=warning
        )

    async def record(self, obj: ObjectRef, reason: str, message: str, *, warning: bool = False) -> None:
        type_ = "Warning" if warning else "Normal"
        key = (*obj.key(), reason, message, type_)
        lock = self._locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                await self._record(obj, key, reason, message, type_)
        except Exception as err:  # never into the caller, whatever went wrong
            log.warning(
                "could not record event %s on %s %s: %s", reason, obj.kind, obj.name, err, exc_info=False
            )
        finally:
            # Locks live as long as their entry in _seen (pruned with it); a key whose event never got
            # written (e.g. no RBAC for events) must not keep one, or failures would grow memory.
            if key not in self._seen and not lock.locked():
                self._locks.pop(key, None)

    async def _record(
        self, obj: ObjectRef, key: tuple[object, ...], reason: str, message: str, type_: str
    ) -> None:
        now = self._now()
        seen = self._seen.get(key)
        if seen is not None:
            try:
                await self._kube.bump_event(
                    namespace=seen.namespace, name=seen.name, count=seen.count + 1, at=now
                )
                seen.count += 1
                return
            except KubeError as err:
                if err.code != 404:
                    raise
                # The event expired (events have a TTL, an hour by default): start a new one.
        namespace = obj.namespace or NODE_EVENT_NAMESPACE
        name = f"{obj.name}.{int(now.timestamp() * 1e9):x}{os.urandom(2).hex()}"
        await self._kube.create_event(
            namespace=namespace,
            name=name,
            involved=obj,
            reason=reason,
            message=message,
            type_=type_,
            component=self.component,
            host=self.host,
            at=now,
            annotations=self.annotations,
        )
        if len(self._seen) >= self._max:
            # Forget the oldest half: dicts keep insertion order.
            for old in list(self._seen)[: self._max // 2]:
                self._seen.pop(old, None)
                self._locks.pop(old, None)
        self._seen[key] = _Seen(namespace, name, 1)


def recorder_for(
    kube: KubeClient, settings: ObservabilitySettings, *, component: str, host: str | None
) -> EventRecorder | None:
    """The process's event recorder, or None when ``emit_kubernetes_events`` is off."""
    if not settings.emit_kubernetes_events:
        return None
    return EventRecorder(
        kube=kube,
        component=component,
        host=host,
        annotations=dict(settings.kubernetes_events_extra_annotations),
    )
