"""The Kubernetes client kubespot uses: lightkube underneath, typed operations on top.

lightkube reads the configuration and credentials and serves the rarer calls (events, leases); pods
and nodes, nearly all of the traffic, are raw JSON through a ``RawHttp`` (``transport``), decoded
straight into views.

Every call goes through one client-side token bucket and one retry policy, so the whole process keeps
to its API budget (``KubeSettings.qps``/``burst``) and rides out API-server hiccups (409 on plain
patches, 429 throttling, 5xx, dropped connections) with bounded, jittered retries. The one exception
is deliberate: an eviction's 429 comes back at once, because it is how a PodDisruptionBudget says
"not now" (``EvictionOutcome.BLOCKED``) and the drain engine owns that decision; a 429 from the API
server's throttling comes back as ``EvictionOutcome.THROTTLED``, so the engine waits its Retry-After
without taking it for a budget's refusal.

Node writes that replace a list (taints) are compare-and-set on ``metadata.resourceVersion`` and
re-read the node on 409, so a concurrent writer's taint is never lost.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import httpx2
import orjson
from lightkube import ApiError, AsyncClient, ConfigError, KubeConfig
from lightkube.config.client_adapter import user_auth, verify_cluster
from lightkube.config.kubeconfig import SingleConfig
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event
from lightkube.types import PatchType

from ..config.kube import KubeSettings
from ..model.backoff import full_jitter
from .inflight import InFlight
from .podwatch import SharedPodWatch
from .priority import PriorityGate, is_fencing
from .ratelimit import TokenBucket
from .retry import TRANSIENT_STATUSES
from .transport import ApiStatus, HttpxRaw, LinkError, RawHttp, api_status
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
from .watchhealth import DEFAULT_IDLE_TIMEOUT, Watches, server_timeout

log = logging.getLogger("kubespot.kube")

T = TypeVar("T")
V = TypeVar("V")
L = TypeVar("L")

#: Compare-and-set rounds for one node write before giving up (each one re-reads the node).
CONFLICT_ATTEMPTS = 10
#: API calls in flight at once (see ``inflight``); the others wait their turn in the client, fencing
#: calls first. At the API's usual 10-30 ms per call that is 1 000-3 000 calls/s, above any sensible
#: QPS setting. More buys nothing but idle connections, and httpcore probes every idle connection's
#: socket on every request and response (it was a tenth of the controller's CPU with 64).
MAX_IN_FLIGHT = 16
#: The same on aiohttp (the controller), which has no such per-connection cost: when the API server
#: answers slower under load, more calls in flight keep its throughput (1 000 drains at once: 16 →
#: 32 took the last first eviction from 17.4 to 16.0 s, docs/PERFORMANCE.md).
AIOHTTP_IN_FLIGHT = 32
#: HTTP connections kept open between calls: every call in flight plus the long-running watches, so a
#: burst never closes and reopens connections (httpx keeps only 20 by default).
KEEPALIVE_CONNECTIONS = MAX_IN_FLIGHT + 8


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
    http: Literal["httpx", "aiohttp"] = "httpx",
) -> KubeClient:
    """A ready client for ``settings`` (``config`` overrides where the cluster is; ``on_error`` is told
    the status of every failed call, 0 for transport errors).

    ``http``: the stack of the pod and node calls (see ``transport``): "aiohttp" needs the
    ``kubespot[controller]`` install; everything else always goes through lightkube's httpx client.
    """
    given = config if config is not None else load_config(settings)
    single = given.get() if isinstance(given, KubeConfig) else given
    if single is None or single.user is None:
        raise KubeError(0, "no usable cluster configuration: no current context or no user")
    # Calls are capped by the client (MAX_IN_FLIGHT) and watches are few, so the pool itself needs no
    # cap; it must keep every connection alive, or a busy client would reconnect for most calls.
    # lightkube has no setting for that: the transport is built here, with lightkube's TLS setup.
    tls = verify_cluster(single.cluster, single.user, single.abs_file)
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=KEEPALIVE_CONNECTIONS)
    transport = httpx2.AsyncHTTPTransport(verify=tls, limits=limits)
    api = AsyncClient(
        config=single,
        timeout=httpx2.Timeout(settings.request_timeout),
        field_manager="kubespot",
        transport=transport,
    )
    raw: RawHttp | None = None
    if http == "aiohttp":
        from .aiohttp_transport import AiohttpRaw  # only the controller: the agent never loads aiohttp

        raw = AiohttpRaw(
            single.cluster.server,
            tls=tls,
            auth=user_auth(single.user),
            timeout=settings.request_timeout,
        )
    return KubeClient(
        api,
        raw=raw,
        limiter=TokenBucket(qps=settings.qps, burst=settings.burst),
        attempts=settings.retry_attempts,
        watch_idle_timeout=settings.watch_idle_timeout,
        on_error=on_error,
        max_in_flight=AIOHTTP_IN_FLIGHT if raw is not None else MAX_IN_FLIGHT,
    )


def _plain_status(response: httpx2.Response) -> ApiStatus:
    """The error of an answer lightkube did not decode (not JSON)."""
    try:
        body = response.content
    except httpx2.ResponseNotRead:  # a stream (a watch) whose body nobody read
        body = b""
    return api_status(
        response.status_code,
        body,
        content_type=response.headers.get("Content-Type", ""),
        retry_after=response.headers.get("Retry-After"),
    )


def _retry_after(err: ApiError) -> float | None:
    raw = err.response.headers.get("Retry-After") if err.response is not None else None
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def pod_view(pod: Mapping[str, Any]) -> PodView:
    """The view of a pod as decoded from the API's JSON (no lightkube model: pods are the hot path,
    thousands of watch events and list items a second in a burst, and the view needs a dozen fields)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    kind = owner = None
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            kind, owner = ref.get("kind"), ref.get("name")
            break
    grace = spec.get("terminationGracePeriodSeconds")
    deleted = meta.get("deletionTimestamp")
    return PodView(
        namespace=meta.get("namespace") or "",
        name=meta.get("name") or "",
        uid=meta.get("uid") or "",
        node_name=spec.get("nodeName"),
        phase=status.get("phase"),
        controller_kind=kind,
        controller_name=owner,
        priority_class_name=spec.get("priorityClassName"),
        priority=spec.get("priority"),
        grace_period_seconds=DEFAULT_GRACE_SECONDS if grace is None else int(grace),
        deletion_timestamp=datetime.fromisoformat(deleted) if deleted else None,
        has_empty_dir=any(v.get("emptyDir") is not None for v in spec.get("volumes") or ()),
        resource_version=meta.get("resourceVersion") or "",
        # Freshly decoded and owned by nobody else: no copy needed.
        labels=meta.get("labels") or {},
        annotations=meta.get("annotations") or {},
        ip=status.get("podIP") or None,
    )


def pod_list(body: bytes) -> PodList:
    """A PodList response body as views and its resourceVersion."""
    data = orjson.loads(body)
    items = data.get("items") or ()
    return PodList(
        tuple(pod_view(p) for p in items), (data.get("metadata") or {}).get("resourceVersion") or ""
    )


def node_view(node: Mapping[str, Any]) -> NodeView:
    """The view of a node as decoded from the API's JSON."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    ready = ready_since = internal_ip = None
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Ready":
            ready = {"True": True, "False": False}.get(cond.get("status"))
            since = cond.get("lastTransitionTime")
            ready_since = datetime.fromisoformat(since) if since else None
            break
    for address in status.get("addresses") or ():
        if address.get("type") == "InternalIP":
            internal_ip = address.get("address")
            break
    return NodeView(
        name=meta.get("name") or "",
        uid=meta.get("uid") or "",
        resource_version=meta.get("resourceVersion") or "",
        unschedulable=bool(spec.get("unschedulable")),
        taints=tuple(
            Taint(
                key=t.get("key") or "",
                effect=t.get("effect") or "",
                value=t.get("value"),
                time_added=t.get("timeAdded"),
            )
            for t in spec.get("taints") or ()
        ),
        labels=meta.get("labels") or {},
        annotations=meta.get("annotations") or {},
        provider_id=spec.get("providerID") or "",
        ready=ready,
        ready_since=ready_since,
        internal_ip=internal_ip,
    )


#: In a raw watch line: the value of every "resourceVersion" key, whatever the JSON spacing (inside a
#: JSON string a quote is always escaped, so the contents of strings never match).
_RV_IN_LINE = re.compile(rb'"resourceVersion"\s*:\s*"([^"\\]*)"')


def _watch_event(line: bytes) -> tuple[str, dict[str, Any]]:
    event = orjson.loads(line)
    op, obj = event.get("type"), event.get("object") or {}
    if op == "ERROR":  # e.g. 410 Gone: the version to resume from is too old; the caller re-lists
        raise KubeError(
            int(obj.get("code") or 0), str(obj.get("message") or ""), reason=obj.get("reason") or ""
        )
    return str(op), obj


class KubeClient:
    """Typed, rate-limited, retrying operations on the cluster. Build with :func:`connect`."""

    def __init__(
        self,
        api: AsyncClient,
        *,
        raw: RawHttp | None = None,
        limiter: TokenBucket,
        attempts: int = 5,
        backoff_base: float = 0.1,
        backoff_cap: float = 2.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        on_error: Callable[[int], None] | None = None,
        max_in_flight: int = MAX_IN_FLIGHT,
        watch_idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        self.api = api
        #: Where the pod and node calls go, as raw JSON (see ``transport``): by default lightkube's
        #: httpx client (base URL, credentials, TLS, timeouts, connections), shared with every call.
        self.raw: RawHttp = raw if raw is not None else HttpxRaw(api._client._client)
        #: Calls waiting for an answer (see ``inflight``).
        self.in_flight = InFlight(max_in_flight)
        #: Fencing calls go ahead of the others (see ``priority``).
        self.gate = PriorityGate()
        #: Set by ``share_pod_watch()``: one watch of all pods for every drain of the process.
        self.pod_watch: SharedPodWatch | None = None
        #: When the API server last answered a call (any answer but a transport error): for /healthz.
        self.last_contact: datetime | None = None
        #: The running watches and how long each has been silent (see ``watchhealth``): for /healthz.
        self.watches = Watches(watch_idle_timeout)
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
        await self.raw.aclose()
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
                async with self.in_flight.slot(urgent=urgent):
                    result = await fn()
            except (ApiStatus, httpx2.HTTPStatusError) as err:
                if isinstance(err, ApiStatus):
                    code, message, reason, wait = err.code, err.message, err.reason, err.retry_after
                elif isinstance(err, ApiError):
                    answer = err.response.status_code if err.response is not None else 0
                    code = int(err.status.code or answer)
                    message, reason = err.status.message or str(err), err.status.reason or ""
                    wait = _retry_after(err)
                else:
                    # lightkube passes on an answer that is not JSON as it is: API Priority and
                    # Fairness rejects with a text 429 (see ``_budget_refusal``).
                    status = _plain_status(err.response)
                    code, message, reason, wait = status.code, status.message, "", status.retry_after
                self._answered(code)
                if code not in retry or last:
                    raise KubeError(code, message, reason=reason) from err
                log.debug("%s: %s, retrying (attempt %d)", op, code, attempt + 1)
            except (LinkError, httpx2.TransportError) as err:
                self._failed(0)
                if last:
                    raise KubeError(0, str(err) if isinstance(err, LinkError) else _link(err)) from err
                wait = None
                log.debug("%s: %s, retrying (attempt %d)", op, err, attempt + 1)
            else:
                self._answered(200)
                return result
            backoff = full_jitter(attempt, base=self._base, cap=self._cap, rng=self._rng.random)
            # A server's Retry-After is honoured, but within our cap: a drain cannot wait 10 s blindly.
            await self._sleep(min(self._cap, wait) if wait is not None else backoff)
        raise AssertionError("unreachable")  # pragma: no cover

    async def call(
        self, op: str, fn: Callable[[], Awaitable[T]], *, retry: frozenset[int] = TRANSIENT_STATUSES
    ) -> T:
        """``fn`` (a call on ``self.api``) under this client's rate limit, retries and error hook.

        For the adapters of other resource types in this package (``leases``); everything outside
        ``kubespot.kube`` uses the typed operations.
        """
        return await self._call(op, fn, retry=retry)

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

    # -- pods and nodes ----------------------------------------------------------------------------

    # Pods and nodes are read, written and watched as raw JSON (see ``transport``), not through
    # lightkube's models: in a burst they are nearly all of the controller's traffic, and the views
    # need a few fields each.

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> bytes:
        """One request; the body of a 2xx answer. Raises ``ApiStatus`` or ``LinkError``."""
        return await self.raw.request(
            method,
            path,
            params=params,
            body=orjson.dumps(body) if body is not None else None,
            content_type=content_type,
        )

    async def list_pods_on_node(self, node: str) -> PodList:
        """The pods on ``node`` and the version to watch them from. After ``share_pod_watch()`` the
        shared watch keeps the changes after the list for ``watch_pods_on_node`` (see ``podwatch``)."""
        if self.pod_watch is not None:
            return await self.pod_watch.list(node)
        return await self._list_pods_on_node(node)

    async def _list_pods_on_node(self, node: str) -> PodList:
        params = {"fieldSelector": f"spec.nodeName={node}"}
        return await self._call("list pods", lambda: self._list_pods(params))

    async def _list_pods(self, params: Mapping[str, str]) -> PodList:
        return pod_list(await self._send("GET", "api/v1/pods", params=params))

    async def get_pod(self, namespace: str, name: str) -> PodView | None:
        try:
            body = await self._call(
                "get pod", lambda: self._send("GET", f"api/v1/namespaces/{namespace}/pods/{name}")
            )
        except KubeError as err:
            if err.code == 404:
                return None
            raise
        return pod_view(orjson.loads(body))

    async def watch_pods_on_node(self, node: str, *, resource_version: str) -> AsyncIterator[PodEvent]:
        """Changes to the pods on ``node`` from ``resource_version``, for as long as the caller reads.

        A broken or expired watch is restarted from a fresh list, delivered as one ``RESYNC`` event,
        so deletions that happened meanwhile are never missed. After ``share_pod_watch()`` the events
        come from one cluster-wide watch instead (see ``podwatch``).
        """
        if self.pod_watch is not None:
            async for event in self.pod_watch.subscribe(node, resource_version):
                yield event
            return
        async for event in self.watch_pods(
            f"pods on {node}",
            {"fieldSelector": f"spec.nodeName={node}"},
            lambda: self.list_pods_on_node(node),
            resource_version,
        ):
            yield event

    async def watch_pods(
        self,
        what: str,
        params: Mapping[str, str],
        relist: Callable[[], Awaitable[PodList]],
        resource_version: str,
        *,
        wanted: Callable[[bytes], bool] | None = None,
    ) -> AsyncIterator[PodEvent]:
        """Pod events from ``resource_version`` (``params``: the selectors); after any failure a
        ``RESYNC`` from ``relist()`` and the watch goes on from there, ended watches are resumed.

        ``wanted(line)``: a cheap test of the raw event line; the lines it rejects are not decoded
        (their resourceVersion is still followed, so a resumed watch does not replay them).
        """
        async for op, view, listing in self._watch(
            what, "api/v1/pods", params, pod_view, relist, resource_version, wanted=wanted
        ):
            if listing is not None:
                yield PodEvent(PodEventType.RESYNC, pods=listing.pods)
            elif view is not None:
                yield PodEvent(PodEventType(op), view)

    async def _watch(
        self,
        what: str,
        path: str,
        params: Mapping[str, str],
        view: Callable[[Mapping[str, Any]], V],
        relist: Callable[[], Awaitable[L]],
        resource_version: str,
        *,
        wanted: Callable[[bytes], bool] | None = None,
    ) -> AsyncIterator[tuple[str, V | None, L | None]]:
        """(op, view, None) per change; (RESYNC, None, listing) after a broken watch was re-listed.

        The server ends each watch after ``server_timeout`` and it is resumed from the last version
        seen; bookmarks keep that version fresh. A watch that hears nothing (no event, no bookmark,
        no end) for ``watches.idle_timeout`` is silent, not alive: a half-open connection, dropped and
        re-listed like any broken watch (see ``watchhealth``).
        """
        rv = resource_version or None
        failures = 0

        async def backed_off_relist() -> L | None:
            """One re-list after the backoff of ``failures`` (counted here); None when it failed."""
            nonlocal failures
            failures += 1
            await self._sleep(full_jitter(failures, base=self._base, cap=self._cap, rng=self._rng.random))
            try:
                return await relist()
            except Exception as list_err:  # any failure, as client-go's reflector
                # A garbled body (a JSON or decoding error) as much as a refused LIST: the
                # reflector retries every list error with backoff (reflector.go ``Run``:
                # ``wait.BackoffUntil``); ending here would freeze the caller's cache.
                kind = type(list_err).__name__
                log.warning("re-list of %s failed (%s: %s); retrying", what, kind, list_err)
                return None

        idle = self.watches.idle_timeout
        base = {**params, "watch": "true", "allowWatchBookmarks": "true"}
        base["timeoutSeconds"] = str(server_timeout(idle))
        with self.watches.running(what) as watch:
            while True:
                try:
                    await self.limiter.acquire()
                    query = dict(base)
                    if rv:
                        query["resourceVersion"] = rv
                    async with self.raw.stream(path, query, idle_timeout=idle) as lines:
                        async for line in lines:
                            watch.hear()
                            failures = 0
                            accepted = wanted is None or wanted(line)
                            if not accepted:
                                found = _RV_IN_LINE.findall(line)
                                if len(found) == 1:
                                    rv = found[0].decode() or rv
                                    continue
                                # Several versions in the line (a label named so): decode it to be sure.
                            op, obj = _watch_event(line)
                            if not accepted or op not in ("ADDED", "MODIFIED", "DELETED"):  # or a bookmark
                                rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                                continue
                            rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                            yield op, view(obj), None
                    # The server ended the watch (its timeout): it is there; resume where it stopped.
                    watch.hear()
                except Exception as err:  # any failure (API, transport, a garbled line): re-list, never die
                    log.warning("watch of %s broke (%s: %s); re-listing", what, type(err).__name__, err)
                    listing = await backed_off_relist()
                    if listing is None:
                        continue
                    rv = getattr(listing, "resource_version", "") or None
                    yield PodEventType.RESYNC.value, None, listing
                    # A re-list answered 404 (``ObjectList.served`` False) has no version to watch
                    # from: a watch without one starts "now" and misses what happened meanwhile.
                    # client-go's reflector never watches before a successful LIST
                    # (reflector.go ``ListAndWatch``): list again, backed off, until one is served.
                    while getattr(listing, "served", True) is False:
                        # The server answered (404: a CRD not installed): no stuck watch for
                        # /healthz, whose restart would install no CRD (see ``Informer``).
                        watch.hear()
                        again = await backed_off_relist()
                        if again is None:
                            continue
                        listing = again
                        rv = getattr(listing, "resource_version", "") or None
                        yield PodEventType.RESYNC.value, None, listing

    async def list_nodes(self) -> NodeList:
        async def run() -> NodeList:
            data = orjson.loads(await self._send("GET", "api/v1/nodes"))
            nodes = tuple(node_view(n) for n in data.get("items") or ())
            # An empty answer may carry no version: the watch then starts from "now".
            return NodeList(nodes, (data.get("metadata") or {}).get("resourceVersion") or "")

        return await self._call("list nodes", run)

    async def list_objects(self, path: str, *, limit: int = 500) -> list[dict[str, Any]]:
        """Every object at ``path`` (``api/v1/pods``, ``apis/karpenter.sh/v1/nodepools``), read in
        pages of ``limit``; an empty list when the server does not serve the resource (404: a CRD
        not installed). For commands that read a cluster once (``kubespot plan``)."""
        listed = await self.list_versioned(path, limit=limit)
        return [] if listed is None else listed[0]

    async def list_versioned(self, path: str, *, limit: int = 500) -> tuple[list[dict[str, Any]], str] | None:
        """Every object at ``path`` and the list's ``resourceVersion`` (what a watch continues
        from: the first page's, which every later page shares: the API server serves all pages
        of a list from one snapshot), read in pages of ``limit``; None when the server does not
        serve the resource (404: a CRD not installed). A continue token that expired (410) lists
        again from the start, at most three times."""
        items: list[dict[str, Any]] = []
        params = {"limit": str(limit)}
        restarts = 0
        version = ""
        while True:
            try:
                body = await self._call(
                    f"list {path}", functools.partial(self._send, "GET", path, params=params)
                )
            except KubeError as err:
                if err.code == 404:
                    return None
                if err.code == 410 and "continue" in params and restarts < 3:
                    # The continue token expired (the snapshot was compacted): list again.
                    items, params, restarts = [], {"limit": str(limit)}, restarts + 1
                    continue
                raise
            data = orjson.loads(body)
            meta = data.get("metadata") or {}
            if "continue" not in params:
                version = meta.get("resourceVersion") or ""
            items.extend(data.get("items") or ())
            token = meta.get("continue")
            if not token:
                return items, version
            params = {"limit": str(limit), "continue": token}

    async def watch_nodes(self, *, resource_version: str) -> AsyncIterator[NodeEvent]:
        """Changes to every node from ``resource_version``; re-listed (``RESYNC``) after any failure."""
        async for op, view, listing in self._watch(
            "nodes", "api/v1/nodes", {}, node_view, self.list_nodes, resource_version
        ):
            if listing is not None:
                yield NodeEvent(PodEventType.RESYNC, nodes=listing.nodes)
            else:
                yield NodeEvent(PodEventType(op), view)

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
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if uid is not None or grace_period_seconds is not None:
            options: dict[str, Any] = {}
            body["deleteOptions"] = options
            if grace_period_seconds is not None:
                options["gracePeriodSeconds"] = grace_period_seconds
            if uid:
                options["preconditions"] = {"uid": uid}
        path = f"api/v1/namespaces/{namespace}/pods/{name}/eviction"
        params = _dry_run(dry_run)
        try:
            await self._call(
                "evict",
                lambda: self._send("POST", path, params=params, body=body),
                retry=TRANSIENT_STATUSES - {429},
            )
        except KubeError as err:
            if err.code == 429:
                outcome = EvictionOutcome.BLOCKED if _budget_refusal(err) else EvictionOutcome.THROTTLED
                return EvictionResult(outcome, 429, err.message, _retry_after_of(err))
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
        self,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> bool:
        """Delete a pod gracefully (``grace_period_seconds`` None: its own). False if it was gone.

        ``uid`` deletes that pod only (``DeleteOptions.preconditions.uid``): the API server answers
        409 Conflict when the name now belongs to another pod, which then counts as gone.
        """
        # With a body the API server reads the options from it alone and ignores the query
        # (apiserver handlers/delete.go: the query is decoded only when the body is empty).
        params: dict[str, str] = {}
        body: dict[str, Any] | None = None
        if uid:
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
            if grace_period_seconds is not None:
                body["gracePeriodSeconds"] = grace_period_seconds
            if dry_run:
                body["dryRun"] = ["All"]
        else:
            params = _dry_run(dry_run)
            if grace_period_seconds is not None:
                params["gracePeriodSeconds"] = str(grace_period_seconds)
        path = f"api/v1/namespaces/{namespace}/pods/{name}"
        try:
            await self._call("delete pod", lambda: self._send("DELETE", path, params=params, body=body))
        except KubeError as err:
            if err.code == 404:
                return False
            if err.code == 409 and await self._replaced(namespace, name, uid):
                return False
            raise
        return True

    async def get_node(self, name: str) -> NodeView | None:
        try:
            body = await self._call("get node", lambda: self._send("GET", f"api/v1/nodes/{name}"))
        except KubeError as err:
            if err.code == 404:
                return None
            raise
        return node_view(orjson.loads(body))

    async def _require_node(self, name: str) -> NodeView:
        node = await self.get_node(name)
        if node is None:
            raise KubeError(404, f'nodes "{name}" not found', reason="NotFound")
        return node

    async def patch_node(self, name: str, patch: Mapping[str, Any], *, dry_run: bool = False) -> NodeView:
        """A JSON merge patch on the node; a 409 (a conflict the server could not resolve) is retried."""
        body = await self._call(
            "patch node",
            lambda: self._merge_patch_node(name, patch, dry_run),
            retry=TRANSIENT_STATUSES | {409},
        )
        return node_view(orjson.loads(body))

    async def _merge_patch_node(self, name: str, patch: Mapping[str, Any], dry_run: bool) -> bytes:
        return await self._send(
            "PATCH", f"api/v1/nodes/{name}", params=_dry_run(dry_run), body=patch, content_type=MERGE_PATCH
        )

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
                    lambda body=body: self._merge_patch_node(name, body, dry_run),  # type: ignore[misc]
                )
            except KubeError as err:
                if err.code != 409:
                    raise
                log.info("node %s changed under us (409), re-reading (attempt %d)", name, attempt + 1)
                await self._sleep(
                    full_jitter(attempt, base=self._base / 2, cap=self._cap, rng=self._rng.random)
                )
                continue
            return node_view(orjson.loads(updated))
        raise KubeError(409, f"node {name} kept changing: {CONFLICT_ATTEMPTS} conflicting writes")

    async def delete_node(self, name: str, *, dry_run: bool = False) -> bool:
        """Delete the Node object (not the instance). False if it was already gone."""
        try:
            path = f"api/v1/nodes/{name}"
            await self._call("delete node", lambda: self._send("DELETE", path, params=_dry_run(dry_run)))
        except KubeError as err:
            if err.code == 404:
                return False
            raise
        return True

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
                apiVersion=involved.api_version,
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

    __slots__ = ("api_version", "kind", "name", "namespace", "uid")

    def __init__(
        self,
        kind: str,
        name: str,
        namespace: str | None = None,
        uid: str | None = None,
        api_version: str = "v1",
    ) -> None:
        self.kind, self.name, self.namespace, self.uid = kind, name, namespace, uid
        #: ``karpenter.sh/v1`` for a NodeClaim: `kubectl describe` matches events on it.
        self.api_version = api_version

    def key(self) -> tuple[str, str, str | None, str | None]:
        return (self.kind, self.name, self.namespace, self.uid)


#: The content type of a JSON merge patch (RFC 7386).
MERGE_PATCH = "application/merge-patch+json"


def _dry_run(dry_run: bool) -> dict[str, str]:
    return {"dryRun": "All"} if dry_run else {}


def _link(err: httpx2.TransportError) -> str:
    return f"{type(err).__name__}: {err}"


def _retry_after_of(err: KubeError) -> float | None:
    cause = err.__cause__
    if isinstance(cause, ApiStatus):
        return cause.retry_after
    return _retry_after(cause) if isinstance(cause, ApiError) else None


#: Upstream ``policyv1.DisruptionBudgetCause``: the cause a budget's refusal names.
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"


def _budget_refusal(err: KubeError) -> bool:
    """Whether an eviction's 429 is a PodDisruptionBudget's refusal rather than throttling.

    A budget refuses from the eviction handler with a ``Status`` (reason ``TooManyRequests``, a
    ``DisruptionBudget`` cause; kubernetes pkg/registry/core/pod/storage/eviction.go
    ``checkAndDecrement`` and ``createTooManyRequestsError``). API Priority and Fairness and the
    max-in-flight limit reject before any handler with a text body and a Retry-After header
    (k8s.io/apiserver pkg/server/filters ``tooManyRequests``): no ``Status``, so no reason. The raw
    transports report the Status's reason but not its causes, so that is what is read there.
    """
    cause = err.__cause__
    if isinstance(cause, ApiError):
        details = cause.status.details
        causes = (details.causes or []) if details is not None else []
        return any(c.reason == DISRUPTION_BUDGET_CAUSE for c in causes)
    return err.reason == "TooManyRequests"
