"""``FakeKube``: one in-memory cluster behind the part of ``KubeClient``'s surface kubespot calls.

The methods take the client's arguments and answer as the client does against an API server;
tests/integration/kube/test_fake_kube_contract.py runs the same cases against this fake and against
kubesim over HTTP, so the two cannot drift apart unnoticed:

- a node write is a JSON merge patch (RFC 7386) and gives the node a new resourceVersion; a patch that
  carries a resourceVersion is applied only to that version (409 Conflict otherwise), and
  ``update_node`` is the client's compare-and-set on it: ``change`` is computed from ``current`` or a
  read, and again from a fresh read after a 409; the client's conveniences on top of those two
  (``set_annotations``, ``set_labels``, ``cordon``, ``uncordon``, ``add_taint``, ``remove_taint``)
  are the client's own code;
- a missing object is None (``get_node``, ``get_pod``), False (``delete_node``, ``delete_pod``), a 404
  ``KubeError`` (node writes, ``bump_event``) or a ``NOT_FOUND`` eviction;
- pods are listed and watched per node, a watch from a listing's resourceVersion on; an eviction or a
  deletion that goes ahead removes the pod at once (a kubelet that stops containers instantly) and
  its watch shows it DELETED; a uid that no longer matches counts as gone, as the client reads the
  API server's 409;
- an event name is created once (409 AlreadyExists after) and bumped by name.

Hooks, so that a test arranges what it needs instead of copying the fake:

- ``failures``: the next so many node writes fail with a 503 (an API server restarting, once the
  client's retries are spent);
- ``faults``: method name -> the ``KubeError`` every call of that method raises (an eviction never
  raises: its answers come from ``eviction_gate``);
- ``eviction_gate``: awaited with the pod before an eviction goes ahead; an ``EvictionResult`` it
  returns is the answer instead (``BUDGET_REFUSAL``, throttling), None lets the eviction go ahead;
- ``on_write``: told each node as a node write through the API stored it;
- ``interrupt_watches()``: every watch re-lists and yields a RESYNC, as the client does after a
  broken watch.

What another writer does, without a call through the API: ``node`` (the first node; None deletes it),
``put_node`` and ``annotate``; these give the node a new resourceVersion and are seen by watches. Changes
made to ``nodes`` or ``pods`` directly are not: they stand for changes a watch missed.

Records: ``reads`` (the caller's ``get_node`` calls), ``writes`` (node writes stored), ``evictions``
and ``deletes`` ((pod name, grace period asked) of every call), ``evicted_at`` ((pod name, seconds
``clock`` had moved since the fake was made) of every eviction call), ``deleted_nodes``, ``created``
(the fields of every event created) and ``bumped`` ((event name, count)).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, TypedDict, Unpack

from kubespot.kube import EvictionOutcome, EvictionResult, KubeClient, KubeError, NodeView, PodView
from kubespot.kube.client import CONFLICT_ATTEMPTS, node_view
from kubespot.kube.views import NodeEvent, NodeList, PodEvent, PodEventType, PodList
from kubespot.model.clock import Clock, SystemClock
from kubespot.sim.kubesim.patch import merge_patch

#: What the client makes of a PodDisruptionBudget's 429 (the message is upstream's, eviction.go).
BUDGET_REFUSAL = EvictionResult(
    EvictionOutcome.BLOCKED, 429, "Cannot evict pod as it would violate the pod's disruption budget."
)

EvictionGate = Callable[[PodView], Awaitable[EvictionResult | None]]
#: What ``update_node`` is given: the merge patch to make of the node as read (None: nothing to do).
Change = Callable[[NodeView], Mapping[str, Any] | None]


class PodCallOptions(TypedDict, total=False):
    """The keyword arguments of ``KubeClient.evict_pod`` and ``KubeClient.delete_pod``."""

    uid: str | None
    grace_period_seconds: int | None
    dry_run: bool


class FakeKube:
    """Nodes (the first one is ``node``), the pods on them, events; see the module's docstring."""

    def __init__(
        self,
        *nodes: NodeView | str,
        pods: Iterable[PodView] = (),
        clock: Clock | None = None,
        faults: Mapping[str, KubeError] | None = None,
    ) -> None:
        self._rv = 0
        self.nodes: dict[str, NodeView] = {}
        for given in nodes:
            node = NodeView(given) if isinstance(given, str) else given
            self.nodes[node.name] = node if node.resource_version else self._stamped(node)
            self._rv = max(self._rv, _number(node.resource_version))
        self._first = next(iter(self.nodes), "")
        self.pods: dict[tuple[str, str], PodView] = {p.key: p for p in pods}
        self.events: dict[tuple[str, str], int] = {}
        self.failures = 0
        self.faults: dict[str, KubeError] = dict(faults or {})
        self.eviction_gate: EvictionGate | None = None
        self.on_write: Callable[[NodeView], None] | None = None
        self.reads = 0
        self.writes = 0
        self.evictions: list[tuple[str, int | None]] = []
        self.evicted_at: list[tuple[str, float]] = []
        self.deletes: list[tuple[str, int | None]] = []
        self.deleted_nodes: list[str] = []
        self.created: list[dict[str, Any]] = []
        self.bumped: list[tuple[str, int]] = []
        self._clock = clock or SystemClock()
        self._start = self._clock.now()
        self._changes: list[tuple[int, PodEvent | NodeEvent]] = []
        self._changed = asyncio.Event()
        self._breaks = 0

    # -- what another writer does -----------------------------------------------------------------

    @property
    def node(self) -> NodeView | None:
        return self.nodes.get(self._first)

    @node.setter
    def node(self, node: NodeView | None) -> None:
        if node is None:
            if self._first in self.nodes:
                self._gone(NodeEvent(PodEventType.DELETED, self.nodes.pop(self._first)))
            return
        assert node.name == self._first, f"the fake's first node is {self._first!r}, not {node.name!r}"
        self.put_node(node)

    def put_node(self, node: NodeView) -> NodeView:
        """Store ``node`` as another writer would, under a new resourceVersion."""
        kind = PodEventType.MODIFIED if node.name in self.nodes else PodEventType.ADDED
        stored = self.nodes[node.name] = self._stamped(node)
        self._emit(NodeEvent(kind, stored))
        return stored

    def annotate(self, key: str, value: str | None, *, node: str | None = None) -> NodeView:
        """Another writer sets (None: removes) an annotation of ``node`` (by default the first)."""
        current = self.nodes[node or self._first]
        notes = {k: v for k, v in current.annotations.items() if k != key}
        if value is not None:
            notes[key] = value
        return self.put_node(dataclasses.replace(current, annotations=notes))

    def interrupt_watches(self) -> None:
        """Break every watch: each one re-lists and yields a RESYNC, as the client does."""
        self._breaks += 1
        self._wake()

    # -- nodes ------------------------------------------------------------------------------------

    async def get_node(self, name: str) -> NodeView | None:
        self.reads += 1
        self._fault("get_node")
        return self.nodes.get(name)

    async def list_nodes(self) -> NodeList:
        self._fault("list_nodes")
        return NodeList(tuple(self.nodes.values()), str(self._rv))

    async def watch_nodes(self, *, resource_version: str) -> AsyncIterator[NodeEvent]:
        async def resync() -> tuple[str, NodeEvent]:
            listing = await self.list_nodes()
            return listing.resource_version, NodeEvent(PodEventType.RESYNC, nodes=listing.nodes)

        async for event in self._follow(resource_version, lambda e: isinstance(e, NodeEvent), resync):
            assert isinstance(event, NodeEvent)
            yield event

    async def patch_node(self, name: str, patch: Mapping[str, Any], *, dry_run: bool = False) -> NodeView:
        self._fault("patch_node")
        return self._write(name, patch, dry_run)

    async def update_node(
        self, name: str, change: Change, *, dry_run: bool = False, current: NodeView | None = None
    ) -> NodeView:
        self._fault("update_node")
        node = current
        for _ in range(CONFLICT_ATTEMPTS):
            if node is None:  # the client's own read: its faults, not the caller's ``reads``
                self._fault("get_node")
                node = self._existing(name)
            patch = change(node)
            if patch is None:
                return node
            meta = {**dict(patch.get("metadata") or {}), "resourceVersion": node.resource_version}
            try:
                return self._write(name, {**patch, "metadata": meta}, dry_run)
            except KubeError as err:
                if err.code != 409:
                    raise
            node = None
        raise KubeError(409, f"node {name} kept changing: {CONFLICT_ATTEMPTS} conflicting writes")

    # The client's own node-write conveniences, on the fake's patch_node and update_node.
    set_annotations = KubeClient.set_annotations
    set_labels = KubeClient.set_labels
    cordon = KubeClient.cordon
    uncordon = KubeClient.uncordon
    add_taint = KubeClient.add_taint
    remove_taint = KubeClient.remove_taint

    async def delete_node(self, name: str, *, dry_run: bool = False) -> bool:
        self._fault("delete_node")
        self.deleted_nodes.append(name)
        if name not in self.nodes:
            return False
        if not dry_run:
            self._gone(NodeEvent(PodEventType.DELETED, self.nodes.pop(name)))
        return True

    # -- pods -------------------------------------------------------------------------------------

    async def list_pods_on_node(self, node: str) -> PodList:
        self._fault("list_pods_on_node")
        return PodList(tuple(p for p in self.pods.values() if p.node_name == node), str(self._rv))

    async def get_pod(self, namespace: str, name: str) -> PodView | None:
        self._fault("get_pod")
        return self.pods.get((namespace, name))

    async def watch_pods_on_node(self, node: str, *, resource_version: str) -> AsyncIterator[PodEvent]:
        async def resync() -> tuple[str, PodEvent]:
            listing = await self.list_pods_on_node(node)
            return listing.resource_version, PodEvent(PodEventType.RESYNC, pods=listing.pods)

        def on_node(event: PodEvent | NodeEvent) -> bool:
            return isinstance(event, PodEvent) and event.pod is not None and event.pod.node_name == node

        async for event in self._follow(resource_version, on_node, resync):
            assert isinstance(event, PodEvent)
            yield event

    async def evict_pod(self, namespace: str, name: str, **options: Unpack[PodCallOptions]) -> EvictionResult:
        grace = options.get("grace_period_seconds")
        self.evictions.append((name, grace))
        self.evicted_at.append((name, (self._clock.now() - self._start).total_seconds()))
        pod = self.pods.get((namespace, name))
        if pod is None:
            return EvictionResult(EvictionOutcome.NOT_FOUND, 404, f'pods "{name}" not found')
        if options.get("uid") not in (None, "", pod.uid):
            return EvictionResult(EvictionOutcome.NOT_FOUND, 409, f"the uid of pod {name} changed")
        refused = await self.eviction_gate(pod) if self.eviction_gate is not None else None
        if refused is not None:
            return refused
        if not options.get("dry_run"):
            self._remove_pod(pod)
        return EvictionResult(EvictionOutcome.EVICTED, 201)

    async def delete_pod(self, namespace: str, name: str, **options: Unpack[PodCallOptions]) -> bool:
        self._fault("delete_pod")
        self.deletes.append((name, options.get("grace_period_seconds")))
        pod = self.pods.get((namespace, name))
        if pod is None or options.get("uid") not in (None, "", pod.uid):
            return False
        if not options.get("dry_run"):
            self._remove_pod(pod)
        return True

    # -- events -----------------------------------------------------------------------------------

    async def create_event(self, **event: Any) -> None:
        self._fault("create_event")
        key = (event["namespace"], event["name"])
        if key in self.events:
            raise KubeError(409, f'events "{key[1]}" already exists', reason="AlreadyExists")
        self.events[key] = 1
        self.created.append(event)

    async def bump_event(self, *, namespace: str, name: str, count: int, at: datetime) -> None:
        self._fault("bump_event")
        if (namespace, name) not in self.events:
            raise KubeError(404, f'events "{name}" not found', reason="NotFound")
        self.events[namespace, name] = count
        self.bumped.append((name, count))

    # -- the API server -----------------------------------------------------------------------------

    def _fault(self, op: str) -> None:
        if op in self.faults:
            raise self.faults[op]

    def _existing(self, name: str) -> NodeView:
        node = self.nodes.get(name)
        if node is None:
            raise KubeError(404, f'nodes "{name}" not found', reason="NotFound")
        return node

    def _write(self, name: str, patch: Mapping[str, Any], dry_run: bool) -> NodeView:
        stored = self._existing(name)
        if self.failures:
            self.failures -= 1
            raise KubeError(503, "apiserver restarting")
        merged = merge_patch(node_json(stored), patch)
        wanted = merged["metadata"].get("resourceVersion")
        if wanted and wanted != stored.resource_version:
            raise KubeError(
                409,
                f'Operation cannot be fulfilled on nodes "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
                reason="Conflict",
            )
        written = node_view(merged)
        if dry_run:
            return written
        self.writes += 1
        self.nodes[name] = written = self._stamped(written)
        self._emit(NodeEvent(PodEventType.MODIFIED, written))
        if self.on_write is not None:
            self.on_write(written)
        return written

    def _stamped(self, node: NodeView) -> NodeView:
        self._rv = max(self._rv, _number(node.resource_version)) + 1
        return dataclasses.replace(node, resource_version=str(self._rv))

    def _remove_pod(self, pod: PodView) -> None:
        del self.pods[pod.key]
        self._gone(PodEvent(PodEventType.DELETED, pod))

    def _gone(self, event: PodEvent | NodeEvent) -> None:
        """A deletion: the change has a resourceVersion of its own, as in the API server."""
        self._rv += 1
        self._emit(event)

    def _emit(self, event: PodEvent | NodeEvent) -> None:
        """A change at the current resourceVersion (``_stamped`` or ``_gone`` moved it on)."""
        self._changes.append((self._rv, event))
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _follow(
        self,
        since: str,
        wanted: Callable[[PodEvent | NodeEvent], bool],
        resync: Callable[[], Awaitable[tuple[str, PodEvent | NodeEvent]]],
    ) -> AsyncIterator[PodEvent | NodeEvent]:
        """The changes after resourceVersion ``since`` that are ``wanted``, for as long as the caller
        reads; after ``interrupt_watches()`` the ``resync()`` event, and the changes after it."""
        seen, breaks, i = _number(since), self._breaks, 0
        while True:
            if breaks != self._breaks:
                breaks = self._breaks
                version, event = await resync()
                seen = _number(version)
                yield event
            elif i < len(self._changes):
                rv, event = self._changes[i]
                i += 1
                if rv > seen and wanted(event):
                    seen = rv
                    yield event
            else:
                await self._changed.wait()


def node_json(node: NodeView) -> dict[str, Any]:
    """``node`` as the API server's JSON, the way ``kubespot.kube.client.node_view`` reads it back."""
    meta: dict[str, Any] = {"name": node.name, "resourceVersion": node.resource_version}
    if node.uid:
        meta["uid"] = node.uid
    if node.labels:
        meta["labels"] = dict(node.labels)
    if node.annotations:
        meta["annotations"] = dict(node.annotations)
    spec: dict[str, Any] = {}
    if node.unschedulable:
        spec["unschedulable"] = True
    if node.taints:
        spec["taints"] = [t.to_dict() for t in node.taints]
    if node.provider_id:
        spec["providerID"] = node.provider_id
    status: dict[str, Any] = {}
    if node.ready is not None:
        ready = {"type": "Ready", "status": "True" if node.ready else "False"}
        if node.ready_since is not None:
            ready["lastTransitionTime"] = node.ready_since.isoformat()
        status["conditions"] = [ready]
    if node.internal_ip:
        status["addresses"] = [{"type": "InternalIP", "address": node.internal_ip}]
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def _number(resource_version: str) -> int:
    return int(resource_version) if resource_version.isdigit() else 0
