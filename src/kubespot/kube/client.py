"""The Kubernetes client kubespot uses: lightkube underneath, typed operations on top.

Every call goes through one client-side token bucket and one retry policy, so the whole process keeps
to its API budget (``KubeSettings.qps``/``burst``) and rides out API-server hiccups (409 on plain
patches, 429 throttling, 5xx, dropped connections) with bounded, jittered retries. The one exception
is deliberate: an eviction's 429 comes back at once as ``EvictionOutcome.BLOCKED``, because it is how
a PodDisruptionBudget says "not now" and the drain engine owns that decision.

Node writes that replace a list (taints) are compare-and-set on ``metadata.resourceVersion`` and
re-read the node on 409, so a concurrent writer's taint is never lost.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx2
from lightkube import ApiError, AsyncClient, ConfigError, KubeConfig
from lightkube.config.kubeconfig import SingleConfig
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import DeleteOptions, ObjectMeta, Preconditions
from lightkube.resources.core_v1 import Event, Node, Pod
from lightkube.types import PatchType

from ..config.kube import KubeSettings
from .podwatch import SharedPodWatch
from .priority import PriorityGate, is_fencing
from .ratelimit import TokenBucket
from .retry import TRANSIENT_STATUSES, full_jitter
from .views import (
    DEFAULT_GRACE_SECONDS,
    EvictionOutcome,
    EvictionResult,
    NodeEvent,
    NodeList,
    NodeView,
    PodEvent,
    PodEventType,
    PodList,
    PodView,
    Taint,
)

log = logging.getLogger("kubespot.kube")

T = TypeVar("T")
V = TypeVar("V")
L = TypeVar("L")

#: Compare-and-set rounds for one node write before giving up (each one re-reads the node).
CONFLICT_ATTEMPTS = 10


class KubeError(Exception):
    """An API call failed for good (after retries). ``code`` is the HTTP status, 0 for transport errors."""

    def __init__(self, code: int, message: str, *, reason: str = "") -> None:
        super().__init__(f"{code} {reason}: {message}" if reason else f"{code}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


def load_config(settings: KubeSettings) -> SingleConfig:
    """The cluster and credentials: the kubeconfig named in settings, else in-cluster, else $KUBECONFIG.

    Raises ``KubeError`` (code 0) naming what is missing when none of them is usable.
    """
    try:
        config = KubeConfig.from_file(settings.kubeconfig) if settings.kubeconfig else KubeConfig.from_env()
        single = config.get(context_name=settings.context or None)
    except (ConfigError, OSError, ValueError) as err:
        where = f"kubeconfig {settings.kubeconfig}" if settings.kubeconfig else "in-cluster or $KUBECONFIG"
        raise KubeError(0, f"no usable cluster configuration ({where}): {err}") from None
    if single is None:  # pragma: no cover - lightkube raises before returning None without a default
        raise KubeError(0, f"no context {settings.context!r} in the kubeconfig")
    return single


def connect(
    settings: KubeSettings,
    *,
    config: SingleConfig | KubeConfig | None = None,
    on_error: Callable[[int], None] | None = None,
) -> KubeClient:
    """A ready client for ``settings`` (``config`` overrides where the cluster is; ``on_error`` is told
    the status of every failed call, 0 for transport errors)."""
    api = AsyncClient(
        config=config if config is not None else load_config(settings),
        timeout=httpx2.Timeout(settings.request_timeout),
        field_manager="kubespot",
    )
    return KubeClient(
        api,
        limiter=TokenBucket(qps=settings.qps, burst=settings.burst),
        attempts=settings.retry_attempts,
        on_error=on_error,
    )


def _retry_after(err: ApiError) -> float | None:
    raw = err.response.headers.get("Retry-After") if err.response is not None else None
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def _owner(meta: ObjectMeta) -> tuple[str | None, str | None]:
    for ref in meta.ownerReferences or ():
        if ref.controller:
            return ref.kind, ref.name
    return None, None


def pod_view(pod: Pod) -> PodView:
    meta = pod.metadata or ObjectMeta()
    spec, status = pod.spec, pod.status
    kind, owner = _owner(meta)
    grace = spec.terminationGracePeriodSeconds if spec is not None else None
    return PodView(
        namespace=meta.namespace or "",
        name=meta.name or "",
        uid=meta.uid or "",
        node_name=spec.nodeName if spec is not None else None,
        phase=status.phase if status is not None else None,
        controller_kind=kind,
        controller_name=owner,
        priority_class_name=spec.priorityClassName if spec is not None else None,
        priority=spec.priority if spec is not None else None,
        grace_period_seconds=DEFAULT_GRACE_SECONDS if grace is None else int(grace),
        deletion_timestamp=meta.deletionTimestamp,
        has_empty_dir=any(v.emptyDir is not None for v in (spec.volumes or ()))
        if spec is not None
        else False,
        resource_version=meta.resourceVersion or "",
        labels=dict(meta.labels or {}),
        annotations=dict(meta.annotations or {}),
    )


def node_view(node: Node) -> NodeView:
    meta = node.metadata or ObjectMeta()
    spec = node.spec
    taints = tuple(
        Taint(key=t.key, effect=t.effect, value=t.value) for t in ((spec.taints or ()) if spec else ())
    )
    return NodeView(
        name=meta.name or "",
        uid=meta.uid or "",
        resource_version=meta.resourceVersion or "",
        unschedulable=bool(spec.unschedulable) if spec is not None else False,
        taints=taints,
        labels=dict(meta.labels or {}),
        annotations=dict(meta.annotations or {}),
        provider_id=(spec.providerID or "") if spec is not None else "",
        ready=_ready(node),
    )


def _ready(node: Node) -> bool | None:
    for cond in (node.status.conditions or ()) if node.status is not None else ():
        if cond.type == "Ready":
            return {"True": True, "False": False}.get(cond.status)
    return None


#: Seconds after which the API server ends a pod watch (it is then resumed from its resourceVersion).
WATCH_SERVER_TIMEOUT = 60


class KubeClient:
    """Typed, rate-limited, retrying operations on the cluster. Build with :func:`connect`."""

    def __init__(
        self,
        api: AsyncClient,
        *,
        limiter: TokenBucket,
        attempts: int = 5,
        backoff_base: float = 0.1,
        backoff_cap: float = 2.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        on_error: Callable[[int], None] | None = None,
    ) -> None:
        self.api = api
        #: Fencing calls go ahead of the others (see ``priority``).
        self.gate = PriorityGate()
        #: Set by ``share_pod_watch()``: one watch of all pods for every drain of the process.
        self.pod_watch: SharedPodWatch | None = None
        #: When the API server last answered a call (any answer but a transport error): for /healthz.
        self.last_contact: datetime | None = None
        #: Told the status of every failed attempt (0 for transport errors): for metrics.
        self.on_error = on_error
        self.limiter = limiter
        self.attempts = max(1, attempts)
        self._base, self._cap = backoff_base, backoff_cap
        self._sleep = sleep
        self._rng = rng or random.Random()

    def share_pod_watch(self) -> None:
        """Serve ``watch_pods_on_node`` from one cluster-wide pod watch (for processes that drain many
        nodes at once: the controller)."""
        if self.pod_watch is None:
            self.pod_watch = SharedPodWatch(self)

    async def close(self) -> None:
        if self.pod_watch is not None:
            await self.pod_watch.aclose()
        await self.api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the one place calls go through ----------------------------------------------------------

    async def _call(
        self, op: str, fn: Callable[[], Awaitable[T]], *, retry: frozenset[int] = TRANSIENT_STATUSES
    ) -> T:
        """Run ``fn`` under the rate limit, retrying ``retry`` statuses and transport errors.

        Calls made while fencing (``priority.fencing()``) go ahead: others wait until none is pending.
        """
        if is_fencing():
            with self.gate.priority():
                return await self._attempts(op, fn, retry, urgent=True)
        return await self._attempts(op, fn, retry, urgent=False)

    async def _attempts(
        self, op: str, fn: Callable[[], Awaitable[T]], retry: frozenset[int], *, urgent: bool
    ) -> T:
        for attempt in range(self.attempts):
            if urgent:
                await self.limiter.acquire()
            else:
                await self.limiter.acquire_ordinary(self.gate.wait_clear)
            last = attempt == self.attempts - 1
            try:
                result = await fn()
            except ApiError as err:
                code = int(err.status.code or (err.response.status_code if err.response is not None else 0))
                self._answered(code)
                if code not in retry or last:
                    raise KubeError(
                        code, err.status.message or str(err), reason=err.status.reason or ""
                    ) from err
                wait = _retry_after(err)
                log.debug("%s: %s, retrying (attempt %d)", op, code, attempt + 1)
            except httpx2.TransportError as err:
                self._failed(0)
                if last:
                    raise KubeError(0, f"{type(err).__name__}: {err}") from err
                wait = None
                log.debug("%s: %s, retrying (attempt %d)", op, type(err).__name__, attempt + 1)
            else:
                self._answered(200)
                return result
            backoff = full_jitter(attempt, base=self._base, cap=self._cap, rng=self._rng)
            # A server's Retry-After is honoured, but within our cap: a drain cannot wait 10 s blindly.
            await self._sleep(min(self._cap, wait) if wait is not None else backoff)
        raise AssertionError("unreachable")  # pragma: no cover

    def _answered(self, code: int) -> None:
        if code < 500:  # a 5xx means the server is there but not working: not a sign of health
            self.last_contact = datetime.now(tz=UTC)
        # 404/409/429 are answers callers expect (gone, conflict, a PodDisruptionBudget saying no);
        # server errors and refused credentials are what an operator must hear about.
        if code >= 500 or code in (401, 403):
            self._failed(code)

    def _failed(self, code: int) -> None:
        if self.on_error is not None:
            try:
                self.on_error(code)
            except Exception:  # a metrics hook must never break an API call
                log.exception("on_error hook failed")

    # -- pods ------------------------------------------------------------------------------------

    async def list_pods_on_node(self, node: str) -> PodList:
        async def run() -> PodList:
            it = self.api.list(Pod, namespace="*", fields={"spec.nodeName": node})
            pods = [pod_view(p) async for p in it]
            try:
                rv = it.resourceVersion
            except Exception:  # an empty answer may carry no version; watch from "now" then
                rv = ""
            return PodList(tuple(pods), rv)

        return await self._call("list pods", run)

    async def get_pod(self, namespace: str, name: str) -> PodView | None:
        try:
            pod = await self._call("get pod", lambda: self.api.get(Pod, name, namespace=namespace))
        except KubeError as err:
            if err.code == 404:
                return None
            raise
        return pod_view(pod)

    async def watch_pods_on_node(self, node: str, *, resource_version: str) -> AsyncIterator[PodEvent]:
        """Changes to the pods on ``node`` from ``resource_version``, for as long as the caller reads.

        A broken or expired watch is restarted from a fresh list, delivered as one ``RESYNC`` event,
        so deletions that happened meanwhile are never missed. After ``share_pod_watch()`` the events
        come from one cluster-wide watch instead (see ``podwatch``).
        """
        if self.pod_watch is not None:
            async for event in self.pod_watch.subscribe(node):
                yield event
            return
        async for op, view, listing in self._watch(
            Pod,
            f"pods on {node}",
            dict(namespace="*", fields={"spec.nodeName": node}),
            pod_view,
            lambda: self.list_pods_on_node(node),
            resource_version,
        ):
            if listing is not None:
                yield PodEvent(PodEventType.RESYNC, pods=listing.pods)
            else:
                yield PodEvent(PodEventType(op), view)

    async def list_nodes(self) -> NodeList:
        async def run() -> NodeList:
            it = self.api.list(Node)
            nodes = [node_view(n) async for n in it]
            try:
                rv = it.resourceVersion
            except Exception:  # an empty answer may carry no version; watch from "now" then
                rv = ""
            return NodeList(tuple(nodes), rv)

        return await self._call("list nodes", run)

    async def watch_nodes(self, *, resource_version: str) -> AsyncIterator[NodeEvent]:
        """Changes to every node from ``resource_version``; re-listed (``RESYNC``) after any failure."""
        async for op, view, listing in self._watch(
            Node, "nodes", {}, node_view, self.list_nodes, resource_version
        ):
            if listing is not None:
                yield NodeEvent(PodEventType.RESYNC, nodes=listing.nodes)
            else:
                yield NodeEvent(PodEventType(op), view)

    async def _watch(
        self,
        resource: Any,
        what: str,
        selection: Mapping[str, Any],
        view: Callable[[Any], V],
        relist: Callable[[], Awaitable[L]],
        resource_version: str,
    ) -> AsyncIterator[tuple[str, V | None, L | None]]:
        """(op, view, None) per change; (RESYNC, None, listing) after a broken watch was re-listed."""
        rv: str | None = resource_version or None
        failures = 0
        while True:
            try:
                await self.limiter.acquire()
                # The server ends the watch after server_timeout, so a connection that died silently
                # (no FIN, no data) is replaced within a minute instead of leaving the caller blind.
                async for op, obj in self.api.watch(
                    resource, resource_version=rv, server_timeout=WATCH_SERVER_TIMEOUT, **selection
                ):
                    failures = 0
                    if op not in ("ADDED", "MODIFIED", "DELETED"):
                        continue  # bookmarks
                    seen = view(obj)
                    rv = getattr(seen, "resource_version", "") or rv
                    yield op, seen, None
            except Exception as err:  # any failure (API, transport, a garbled line): re-list, never die
                failures += 1
                log.warning("watch of %s broke (%s: %s); re-listing", what, type(err).__name__, err)
                await self._sleep(full_jitter(failures, base=self._base, cap=self._cap, rng=self._rng))
                try:
                    listing = await relist()
                except KubeError as list_err:
                    log.warning("re-list of %s failed: %s", what, list_err)
                    continue
                rv = getattr(listing, "resource_version", "") or None
                yield PodEventType.RESYNC.value, None, listing

    async def evict_pod(
        self,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> EvictionResult:
        """Ask the policy/v1 Eviction API to remove a pod; never raises for API answers.

        ``uid`` makes the eviction apply to that pod only, not a namesake created since.
        """
        options = None
        if uid is not None or grace_period_seconds is not None:
            options = DeleteOptions(
                gracePeriodSeconds=grace_period_seconds,
                preconditions=Preconditions(uid=uid) if uid else None,
            )
        body = Pod.Eviction(metadata=ObjectMeta(name=name, namespace=namespace), deleteOptions=options)
        try:
            await self._call(
                "evict",
                lambda: self.api.create(body, name, namespace=namespace, dry_run=dry_run),
                retry=TRANSIENT_STATUSES - {429},
            )
        except KubeError as err:
            if err.code == 429:
                return EvictionResult(EvictionOutcome.BLOCKED, 429, err.message, _retry_after_of(err))
            if err.code == 404:
                return EvictionResult(EvictionOutcome.NOT_FOUND, err.code, err.message)
            if err.code == 409 and await self._replaced(namespace, name, uid):
                return EvictionResult(EvictionOutcome.NOT_FOUND, err.code, err.message)
            # Any other 409 (e.g. the budget's status update conflicted under concurrent evictions)
            # leaves the pod running: an error the drain retries, never "gone".
            return EvictionResult(EvictionOutcome.ERROR, err.code, err.message)
        return EvictionResult(EvictionOutcome.EVICTED, 201)

    async def _replaced(self, namespace: str, name: str, uid: str | None) -> bool:
        """Whether the pod an eviction meant is gone (absent, or a namesake with another uid)."""
        try:
            current = await self.get_pod(namespace, name)
        except KubeError:
            return False  # unknown: let the caller retry rather than assume the pod left
        return current is None or (uid is not None and current.uid != uid)

    async def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None, dry_run: bool = False
    ) -> bool:
        """Delete a pod gracefully (``grace_period_seconds`` None: its own). False if it was gone."""
        try:
            await self._call(
                "delete pod",
                lambda: self.api.delete(
                    Pod, name, namespace=namespace, grace_period=grace_period_seconds, dry_run=dry_run
                ),
            )
        except KubeError as err:
            if err.code == 404:
                return False
            raise
        return True

    # -- nodes -----------------------------------------------------------------------------------

    async def get_node(self, name: str) -> NodeView | None:
        try:
            node = await self._call("get node", lambda: self.api.get(Node, name))
        except KubeError as err:
            if err.code == 404:
                return None
            raise
        return node_view(node)

    async def _require_node(self, name: str) -> NodeView:
        node = await self.get_node(name)
        if node is None:
            raise KubeError(404, f'nodes "{name}" not found', reason="NotFound")
        return node

    async def patch_node(self, name: str, patch: Mapping[str, Any], *, dry_run: bool = False) -> NodeView:
        """A JSON merge patch on the node; a 409 (a conflict the server could not resolve) is retried."""
        node = await self._call(
            "patch node",
            lambda: self.api.patch(Node, name, dict(patch), patch_type=PatchType.MERGE, dry_run=dry_run),
            retry=TRANSIENT_STATUSES | {409},
        )
        return node_view(node)

    async def update_node(
        self,
        name: str,
        change: Callable[[NodeView], Mapping[str, Any] | None],
        *,
        dry_run: bool = False,
        current: NodeView | None = None,
    ) -> NodeView:
        """Compare-and-set: ``change(node)`` returns a merge patch computed from the node as read (None:
        nothing to do); it is sent with that read's resourceVersion, and on 409 the node is read again
        and ``change`` recomputed, so writes based on a stale copy never overwrite a concurrent one.

        ``current``: a copy of the node the caller already has (e.g. from a watch), used for the first
        attempt instead of a GET; if it is stale the 409 costs what the GET would have.
        """
        for attempt in range(CONFLICT_ATTEMPTS):
            node = current if attempt == 0 and current is not None else await self._require_node(name)
            patch = change(node)
            if patch is None:
                return node
            body = dict(patch)
            body["metadata"] = {**dict(body.get("metadata") or {}), "resourceVersion": node.resource_version}
            try:
                updated = await self._call(
                    "patch node",
                    lambda body=body: self.api.patch(  # type: ignore[misc]
                        Node, name, body, patch_type=PatchType.MERGE, dry_run=dry_run
                    ),
                )
            except KubeError as err:
                if err.code != 409:
                    raise
                log.info("node %s changed under us (409), re-reading (attempt %d)", name, attempt + 1)
                await self._sleep(full_jitter(attempt, base=self._base / 2, cap=self._cap, rng=self._rng))
                continue
            return node_view(updated)
        raise KubeError(409, f"node {name} kept changing: {CONFLICT_ATTEMPTS} conflicting writes")

    async def cordon(self, name: str, *, dry_run: bool = False) -> NodeView:
        return await self.patch_node(name, {"spec": {"unschedulable": True}}, dry_run=dry_run)

    async def uncordon(self, name: str, *, dry_run: bool = False) -> NodeView:
        return await self.patch_node(name, {"spec": {"unschedulable": None}}, dry_run=dry_run)

    async def add_taint(self, name: str, taint: Taint, *, dry_run: bool = False) -> NodeView:
        """Add (or update the value of) a taint, keeping every other taint."""

        def change(node: NodeView) -> Mapping[str, Any] | None:
            if taint in node.taints:
                return None
            others = [t for t in node.taints if (t.key, t.effect) != (taint.key, taint.effect)]
            return {"spec": {"taints": [t.to_dict() for t in (*others, taint)]}}

        return await self.update_node(name, change, dry_run=dry_run)

    async def remove_taint(
        self, name: str, key: str, effect: str | None = None, *, dry_run: bool = False
    ) -> NodeView:
        def change(node: NodeView) -> Mapping[str, Any] | None:
            if not node.has_taint(key, effect):
                return None
            keep = [t for t in node.taints if not (t.key == key and (effect is None or t.effect == effect))]
            return {"spec": {"taints": [t.to_dict() for t in keep]}}

        return await self.update_node(name, change, dry_run=dry_run)

    async def set_labels(
        self, name: str, labels: Mapping[str, str | None], *, dry_run: bool = False
    ) -> NodeView:
        """Set labels (None removes one). Merge patches are per key, so no compare-and-set is needed."""
        return await self.patch_node(name, {"metadata": {"labels": dict(labels)}}, dry_run=dry_run)

    async def set_annotations(
        self, name: str, annotations: Mapping[str, str | None], *, dry_run: bool = False
    ) -> NodeView:
        return await self.patch_node(name, {"metadata": {"annotations": dict(annotations)}}, dry_run=dry_run)

    # -- events (used by EventRecorder) ----------------------------------------------------------

    async def create_event(
        self,
        *,
        namespace: str,
        name: str,
        involved: ObjectRef,
        reason: str,
        message: str,
        type_: str,
        component: str,
        host: str | None,
        at: datetime,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        event = Event(
            metadata=ObjectMeta(name=name, namespace=namespace, annotations=dict(annotations or {}) or None),
            involvedObject=ObjectReference(
                kind=involved.kind,
                name=involved.name,
                namespace=involved.namespace,
                uid=involved.uid,
                apiVersion="v1",
            ),
            reason=reason,
            message=message,
            type=type_,
            count=1,
            firstTimestamp=at,
            lastTimestamp=at,
            source=EventSource(component=component, host=host),
            reportingComponent=component,
            reportingInstance=host or component,
        )
        await self._call("create event", lambda: self.api.create(event), retry=TRANSIENT_STATUSES)

    async def bump_event(self, *, namespace: str, name: str, count: int, at: datetime) -> None:
        patch = {"count": count, "lastTimestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ")}
        await self._call(
            "patch event",
            lambda: self.api.patch(Event, name, patch, namespace=namespace, patch_type=PatchType.MERGE),
        )


class ObjectRef:
    """What an event is about."""

    __slots__ = ("kind", "name", "namespace", "uid")

    def __init__(self, kind: str, name: str, namespace: str | None = None, uid: str | None = None) -> None:
        self.kind, self.name, self.namespace, self.uid = kind, name, namespace, uid

    def key(self) -> tuple[str, str, str | None, str | None]:
        return (self.kind, self.name, self.namespace, self.uid)


def _retry_after_of(err: KubeError) -> float | None:
    cause = err.__cause__
    return _retry_after(cause) if isinstance(cause, ApiError) else None
