"""Watching the cluster over the Kubernetes API, the way an operator would, and recording what happened.

Owns four watches (Nodes, Pods, ReplicaSets, core/v1 Events) over plain HTTP (httpx2; the product's
``KubeClient`` has no watches of Nodes or Events), the cluster state they maintain, and the per-node
``ScenarioRecord`` they fill: taint, cordon and annotation changes (the controller's load-balancer
step in ``kubespot.io/actions`` too), pods leaving, replacements turning Ready elsewhere, and the
agent's Events. Nothing here reads agent logs or simulator internals: the verdict rests on what the
API showed. Each noteworthy change is also handed to ``emit`` as a ``TimelineEntry`` for the live
view.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2
import orjson

from .summary import OwnerTrack, PodTrack, ScenarioRecord

log = logging.getLogger("kubespot.sandbox.observer")

Obj = dict[str, Any]
STATE_ANNOTATION = "kubespot.io/interruption"
#: The controller's record of its AWS actions (docs/controller.md, "Response actions").
ACTIONS_ANNOTATION = "kubespot.io/actions"
#: Node event reasons the agent records (and the reference handler's names for them).
NODE_REASONS = frozenset(
    {
        "SpotInterruption",
        "RebalanceRecommendation",
        "ScheduledEvent",
        "Cordon",
        "CordonAndDrain",
        "DrainStarted",
        "DrainCompleted",
        "DrainIncomplete",
        "Uncordon",
    }
)


@dataclass(frozen=True)
class TimelineEntry:
    at: float
    node: str
    text: str
    #: rich style: "" (plain), "dim", "green", "yellow", "red", "bold"
    style: str = ""


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _controller(obj: Obj) -> Obj | None:
    for ref in _meta(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return dict(ref)
    return None


def is_daemon_pod(pod: Obj) -> bool:
    ref = _controller(pod)
    return ref is not None and ref.get("kind") == "DaemonSet"


def owner_key(pod: Obj) -> str | None:
    ref = _controller(pod)
    if ref is None:
        return None
    return f"{_meta(pod).get('namespace')}/{ref.get('kind')}/{ref.get('name')}"


def pod_ready(pod: Obj) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def is_terminating(obj: Obj) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def short(name: str, keep: int = 26) -> str:
    return name if len(name) <= keep else name[: keep - 1] + "…"


class Observer:
    """Cluster state from the watches, and the records of the nodes under a scenario."""

    def __init__(
        self, url: str, emit: Callable[[TimelineEntry], None], *, clock: Callable[[], float] = time.time
    ):
        self.url = url
        self.emit = emit
        self.clock = clock
        self.nodes: dict[str, Obj] = {}
        self.pods: dict[str, Obj] = {}  # uid -> pod
        self.replicasets: dict[str, Obj] = {}  # "ns/ReplicaSet/name" -> rs
        self.records: dict[str, ScenarioRecord] = {}  # node name -> record
        self.synced: dict[str, asyncio.Event] = {}
        self.changed = asyncio.Event()
        self._event_counts: dict[str, int] = {}  # event uid -> count seen
        self._tasks: list[asyncio.Task[None]] = []
        self._client: httpx2.AsyncClient | None = None
        self.watch_errors = 0

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        self._client = httpx2.AsyncClient(
            base_url=self.url,
            headers={"Authorization": "Bearer kubesim"},
            timeout=httpx2.Timeout(10.0, read=None),
        )
        for path, handler in (
            ("/apis/apps/v1/replicasets", self._on_replicaset),
            ("/api/v1/nodes", self._on_node),
            ("/api/v1/pods", self._on_pod),
            ("/api/v1/events", self._on_event),
        ):
            self.synced[path] = asyncio.Event()
            self._tasks.append(asyncio.create_task(self._watch(path, handler), name=f"watch {path}"))
        # Everything that existed when the watches started has been delivered.
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in self.synced.values())), 30)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def request(self, method: str, path: str, body: Obj | None = None) -> httpx2.Response:
        """A plain API call (the sandbox's own writes: create a pod, delete a terminated node)."""
        assert self._client is not None
        return await self._client.request(
            method,
            path,
            content=orjson.dumps(body) if body is not None else None,
            headers={"Content-Type": "application/json"},
        )

    async def _watch(self, path: str, handler: Callable[[str, Obj], None]) -> None:
        assert self._client is not None
        rv: str | None = None
        while True:
            params = {"watch": "1", "allowWatchBookmarks": "true"}
            if rv is None:
                # sendInitialEvents: the current objects arrive first, then the bookmark says "synced".
                params["sendInitialEvents"] = "true"
                params["resourceVersionMatch"] = "NotOlderThan"
            else:
                params["resourceVersion"] = rv
            try:
                async with self._client.stream("GET", path, params=params) as resp:
                    if resp.status_code == 410:
                        rv = None
                        continue
                    resp.raise_for_status()
                    async for line in resp.aiter_lines():
                        if not line.strip():
                            continue
                        ev = orjson.loads(line)
                        kind, obj = ev.get("type"), ev.get("object") or {}
                        if kind == "ERROR":
                            if obj.get("code") == 410:
                                rv = None
                            break
                        rv = _meta(obj).get("resourceVersion") or rv
                        if kind == "BOOKMARK":
                            if (_meta(obj).get("annotations") or {}).get("k8s.io/initial-events-end"):
                                self.synced[path].set()
                            continue
                        handler(str(kind), obj)
                        self.changed.set()
            except asyncio.CancelledError:
                raise
            except (httpx2.HTTPError, orjson.JSONDecodeError) as err:
                self.watch_errors += 1
                log.debug("watch %s: %s; reconnecting", path, err)
                await asyncio.sleep(0.2)

    # -- scenario bookkeeping -------------------------------------------------------------------

    def track(self, rec: ScenarioRecord) -> None:
        """Start recording ``rec.node``: from now on pods on it count, and changes are timed."""
        self.records[rec.node] = rec
        for pod in list(self.pods.values()):
            self._consider_pod(rec, pod)
        self._update_owners()

    def pods_on(self, node: str) -> list[Obj]:
        return [p for p in self.pods.values() if (p.get("spec") or {}).get("nodeName") == node]

    def settled(self) -> str | None:
        """None when every workload is fully Ready and nothing is pending; else what is not."""
        for key, rs in self.replicasets.items():
            want = int((rs.get("spec") or {}).get("replicas") or 0)
            ready = sum(
                1
                for p in self.pods.values()
                if owner_key(p) == key and pod_ready(p) and not is_terminating(p)
            )
            if ready < want:
                return f"{key}: {ready}/{want} ready"
        for pod in self.pods.values():
            if not pod_ready(pod) and not is_terminating(pod):
                return f"pod {_meta(pod).get('namespace')}/{_meta(pod).get('name')} not ready"
        for name, node in self.nodes.items():
            if _ready(node) != "True":
                return f"node {name} not ready"
        return None

    # -- nodes ----------------------------------------------------------------------------------

    def _on_node(self, kind: str, node: Obj) -> None:
        name = str(_meta(node).get("name"))
        old = self.nodes.get(name)
        if kind == "DELETED":
            self.nodes.pop(name, None)
        else:
            self.nodes[name] = node
        rec = self.records.get(name)
        if rec is None or old is None:
            return
        now = self.clock()
        if kind == "DELETED":
            self.emit(TimelineEntry(now, name, "Node deleted (instance gone)", "dim"))
            return
        changes: list[str] = []
        was_tainted, tainted = _has_taint(old, rec.taint_key), _has_taint(node, rec.taint_key)
        was_cordoned, cordoned = _cordoned(old), _cordoned(node)
        if tainted and not was_tainted:
            rec.tainted_at = rec.tainted_at or now
            changes.append(f"tainted {rec.taint_key}")
        if cordoned and not was_cordoned:
            rec.cordoned_at = rec.cordoned_at or now
            changes.append("cordoned")
        old_state, state = _state(old), _state(node)
        if state is not None and state.get("phase") != (old_state or {}).get("phase"):
            rec.annotated_at = rec.annotated_at or now
            rec.phases.append((now, str(state.get("phase"))))
            changes.append(f"phase {state.get('phase')}")
        # Undoing counts only once the agent's own fence was seen (not a cordon from before the notice).
        if was_cordoned and not cordoned and rec.cordoned_at is not None and rec.uncordoned_at is None:
            rec.uncordoned_at = now
            changes.append("uncordoned")
        if was_tainted and not tainted and rec.tainted_at is not None and rec.untainted_at is None:
            rec.untainted_at = now
            changes.append("taint removed")
        if old_state is not None and state is None and rec.unannotated_at is None:
            rec.unannotated_at = now
            changes.append(f"annotation {STATE_ANNOTATION} removed")
        if _ready(old) != _ready(node):
            changes.append(f"Ready={_ready(node)}")
        self._on_actions(rec, node, now)
        if changes:
            style = "green" if any(c in ("uncordoned", "taint removed") for c in changes) else "bold"
            self.emit(TimelineEntry(now, name, ", ".join(changes), style))

    def _on_actions(self, rec: ScenarioRecord, node: Obj, now: float) -> None:
        """The controller's load-balancer step, when its state changes (it is written a few times)."""
        step = (_json_annotation(node, ACTIONS_ANNOTATION) or {}).get("loadbalancer")
        if not isinstance(step, dict):
            return
        before = rec.deregistration or {}
        rec.deregistration = step
        state = str(step.get("state"))
        if state == before.get("state"):
            return
        targets = step.get("targets") or []
        held = (
            "every pod (the node is a target)"
            if step.get("node")
            else f"{len(step.get('pods') or [])} pod(s)"
        )
        if state == "pending":
            text, style = (
                f"controller: deregistering {len(targets)} target(s); the drain holds {held}",
                "cyan",
            )
        elif state in ("draining", "done"):
            rec.deregistered_at = rec.deregistered_at or now
            what = f"{len(targets)} target(s) draining" if state == "draining" else "no target registered"
            text, style = (
                f"controller: {what} (settle {step.get('settle', 0)}s) in {ACTIONS_ANNOTATION}",
                "cyan",
            )
        else:
            text, style = f"controller: deregistration {state}: {step.get('error', '')}", "red"
        self.emit(TimelineEntry(now, rec.node, text, style))

    # -- pods -----------------------------------------------------------------------------------

    def _on_pod(self, kind: str, pod: Obj) -> None:
        uid = str(_meta(pod).get("uid"))
        old = self.pods.get(uid)
        if kind == "DELETED":
            self.pods.pop(uid, None)
        else:
            self.pods[uid] = pod
        now = self.clock()
        node = (pod.get("spec") or {}).get("nodeName")
        rec = self.records.get(node) if node else None
        if rec is not None:
            self._consider_pod(rec, pod)
            track = rec.pods.get(uid)
            if track is not None and not track.daemon:
                if (
                    is_terminating(pod)
                    and (old is None or not is_terminating(old))
                    and track.terminating_at is None
                ):
                    track.terminating_at = now
                    wait = track.pdb_wait
                    note = f" (PDB waited {wait:.1f}s)" if wait is not None else ""
                    what = "deleted" if track.owner is None else "evicted"
                    self.emit(TimelineEntry(now, rec.node, f"  {short(track.name)} {what}{note}", ""))
                if kind == "DELETED" and track.gone_at is None:
                    track.gone_at = now
                    left = [p for p in rec.evictable() if p.gone_at is None]
                    if not left:
                        self._update_owners()
                        owned = [p for p in rec.evictable() if p.owner is not None]
                        ok = sum(1 for o in rec.owners.values() if o.restored_at is not None)
                        self.emit(
                            TimelineEntry(
                                now,
                                rec.node,
                                f"all {len(rec.evictable())} pods gone; {len(owned)} owned by "
                                f"{len(rec.owners)} workloads, {ok}/{len(rec.owners)} whole elsewhere",
                                "bold",
                            )
                        )
        self._update_owners()

    def _consider_pod(self, rec: ScenarioRecord, pod: Obj) -> None:
        meta = _meta(pod)
        uid = str(meta.get("uid"))
        if (pod.get("spec") or {}).get("nodeName") != rec.node or uid in rec.pods:
            return
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or is_terminating(pod):
            return
        if rec.deadline is not None and self.clock() > rec.deadline:
            return  # the instance is gone: pods bound to it now are the sandbox's business, not the drain's
        owner = owner_key(pod)
        track = PodTrack(
            namespace=str(meta.get("namespace")),
            name=str(meta.get("name")),
            uid=uid,
            owner=owner,
            daemon=is_daemon_pod(pod),
            seen_at=self.clock(),
        )
        rec.pods[uid] = track
        if owner is not None and not track.daemon and owner not in rec.owners:
            rs = self.replicasets.get(owner)
            desired = int(((rs or {}).get("spec") or {}).get("replicas") or 1)
            rec.owners[owner] = OwnerTrack(owner, desired)

    def _update_owners(self) -> None:
        if not self.records:
            return
        now = self.clock()
        for rec in self.records.values():
            for owner in rec.owners.values():
                if owner.restored_at is not None:
                    continue
                owner.ready_elsewhere = sum(
                    1
                    for p in self.pods.values()
                    if owner_key(p) == owner.key
                    and (p.get("spec") or {}).get("nodeName") != rec.node
                    and pod_ready(p)
                    and not is_terminating(p)
                )
                if owner.ready_elsewhere >= owner.desired:
                    owner.restored_at = now

    # -- replicasets ----------------------------------------------------------------------------

    def _on_replicaset(self, kind: str, rs: Obj) -> None:
        meta = _meta(rs)
        key = f"{meta.get('namespace')}/ReplicaSet/{meta.get('name')}"
        if kind == "DELETED":
            self.replicasets.pop(key, None)
        else:
            self.replicasets[key] = rs

    # -- events ---------------------------------------------------------------------------------

    def _on_event(self, kind: str, ev: Obj) -> None:
        if kind == "DELETED":
            return
        uid = str(_meta(ev).get("uid"))
        count = int(ev.get("count") or 1)
        delta = count - self._event_counts.get(uid, 0)
        self._event_counts[uid] = count
        if delta <= 0:
            return
        involved = ev.get("involvedObject") or {}
        reason = str(ev.get("reason") or "")
        message = str(ev.get("message") or "")
        now = self.clock()
        if involved.get("kind") == "Node":
            rec = self.records.get(str(involved.get("name")))
            if rec is None:
                return
            rec.node_events[reason] = rec.node_events.get(reason, 0) + delta
            if reason == "DrainStarted":
                rec.drain_started_at = rec.drain_started_at or now
            if reason in ("DrainCompleted", "DrainIncomplete"):
                rec.drain_done_at = now
                rec.drain_done_reason = reason
            style = "red" if ev.get("type") == "Warning" else "cyan"
            self.emit(TimelineEntry(now, rec.node, f"event {reason}: {message}", style))
            return
        if involved.get("kind") != "Pod":
            return
        pod_uid = str(involved.get("uid") or "")
        for rec in self.records.values():
            track = rec.pods.get(pod_uid) or next(
                (
                    p
                    for p in rec.pods.values()
                    if p.namespace == involved.get("namespace") and p.name == involved.get("name")
                ),
                None,
            )
            if track is None:
                continue
            if reason == "EvictionBlocked":
                first = track.first_blocked_at is None
                track.blocked += delta
                if first:
                    track.first_blocked_at = now
                    self.emit(
                        TimelineEntry(
                            now,
                            rec.node,
                            f"  {short(track.name)} eviction refused by its PDB (429)",
                            "yellow",
                        )
                    )
            else:
                track.outcome = reason
                if reason not in ("Evicted",):
                    style = "red" if ev.get("type") == "Warning" else "yellow"
                    self.emit(
                        TimelineEntry(now, rec.node, f"  {short(track.name)} {reason}: {message}", style)
                    )
            return


def _has_taint(node: Obj, key: str) -> bool:
    return any(t.get("key") == key for t in (node.get("spec") or {}).get("taints") or ())


def _cordoned(node: Obj) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def _json_annotation(node: Obj, key: str) -> Obj | None:
    raw = (_meta(node).get("annotations") or {}).get(key)
    if not raw:
        return None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"phase": "unreadable"}
    return data if isinstance(data, dict) else {"phase": "unreadable"}


def _state(node: Obj) -> Obj | None:
    return _json_annotation(node, STATE_ANNOTATION)


def _ready(node: Obj) -> str:
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return str(cond.get("status"))
    return "Unknown"
