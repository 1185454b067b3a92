"""kubesim's HTTP front end: URL routing, verbs, content negotiation, watch streams, control API.

Everything a client sends is parsed here into a call on the ``Store`` (or the eviction and binding
subresources); every failure becomes an upstream-style ``Status`` body. Nothing here may raise out of
a handler: an unexpected exception is logged and answered 500, never a crash.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import orjson
from aiohttp import web

from . import deleteoptions, errors, listoptions
from .controllers import ControllerManager
from .controllers.kubelet import kubelet_of
from .controllers.pacing import Pacer
from .errors import ApiError
from .eviction import evict
from .faults import Faults, rule_from_dict
from .protobuf import ProtobufError, decode_object
from .resources import ResourceType
from .selectors import SelectorError, parse_field_selector, parse_label_selector
from .store import POD_KEY, Obj, Store, Watcher, rfc3339
from .tables import to_table

log = logging.getLogger("kubespot.sim.kubesim")

JSON = "application/json"
SERVER_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-kubesim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-11-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_SNAPSHOTS = 32
#: Lists longer than this are streamed in chunks of ``_STREAM_CHUNK`` items.
_STREAM_OVER = 5000
_STREAM_CHUNK = 1000


@dataclass
class Route:
    """A parsed resource URL."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type=JSON)


def _error(exc: ApiError) -> web.Response:
    if exc.plain_text:
        # Go's http.Error: text/plain, nosniff, the message and a newline.
        resp = web.Response(text=exc.message + "\n", status=exc.code, content_type="text/plain")
        resp.headers["X-Content-Type-Options"] = "nosniff"
    else:
        resp = _json(exc.status(), exc.code)
    if exc.retry_after is not None:
        resp.headers["Retry-After"] = str(exc.retry_after)
    return resp


class KubeSimServer:
    """The aiohttp application around one ``Store``."""

    def __init__(
        self,
        store: Store,
        *,
        faults: Faults | None = None,
        bookmark_interval: float = 5.0,
        controllers: ControllerManager | None = None,
    ) -> None:
        self.store = store
        self.controllers = controllers
        #: Told about every request served, so the simulated control plane lets requests go first.
        self.pacer = controllers.pacer if controllers is not None else Pacer(enabled=False)
        self.faults = faults or Faults()
        self.bookmark_interval = bookmark_interval
        self.requests: Counter[str] = Counter()
        self._snapshots: OrderedDict[str, list[Obj]] = OrderedDict()
        self._watch_tasks: set[Watcher] = set()
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self._dispatch)

    # -- dispatch --------------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        serving = False
        try:
            if path.startswith("/kubesim/"):
                return await self._control(request)
            simple = self._simple(request)
            if simple is not None:
                return simple
            route = self._route(path)
            verb = self._verb(request, route)
            resource = route.rt.plural + (f"/{route.subresource}" if route.subresource else "")
            self.requests[f"{verb} {resource}"] += 1
            fault = await self.faults.before(verb, resource, path, _query_text(request))
            if fault is not None:
                return _error(fault)
            # A request is served ahead of the control plane from here (an injected latency is not
            # work to go first with); a watch is a stream, not a request anyone waits for.
            serving = verb != "watch"
            if serving:
                self.pacer.request_started()
            return await self._serve(request, route, verb)
        except ApiError as exc:
            return _error(exc)
        except (SelectorError, ValueError) as exc:
            return _error(errors.bad_request(str(exc)))
        except asyncio.CancelledError:
            raise
        except ConnectionResetError:
            # The client went away mid-request (it cancelled the call): no bug, and nobody to answer.
            log.debug("kubesim: client gone during %s %s", request.method, path)
            return _error(ApiError(500, "the client closed the connection"))
        except Exception as exc:  # never let a malformed request take the server down
            log.exception("kubesim: unhandled error for %s %s", request.method, path)
            return _error(ApiError(500, f"Internal error occurred: {type(exc).__name__}: {exc}"))
        finally:
            if serving:
                self.pacer.request_finished()

    def _simple(self, request: web.Request) -> web.Response | None:
        path = request.path.rstrip("/") or "/"
        reg = self.store.registry
        if request.method != "GET" and path in ("/version", "/api", "/apis", "/healthz", "/readyz", "/livez"):
            raise errors.method_not_allowed()
        if path == "/version":
            return _json(SERVER_VERSION)
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        if path == "/api":
            return _json(reg.api_versions())
        if path == "/apis":
            return _json(reg.api_group_list())
        if path == "/":
            return _json({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/version"]})
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) == 2:
            if parts[1] != "v1":
                raise ApiError(404, "the server could not find the requested resource")
            return _json(reg.resource_list("", "v1"))
        if parts[0] == "apis" and len(parts) == 2:
            if parts[1] not in reg.groups():
                raise ApiError(404, "the server could not find the requested resource")
            return _json(reg.api_group(parts[1]))
        if parts[0] == "apis" and len(parts) == 3:
            if parts[2] not in reg.versions(parts[1]):
                raise ApiError(404, "the server could not find the requested resource")
            return _json(reg.resource_list(parts[1], parts[2]))
        if parts[0] in ("openapi", "swagger.json"):
            raise ApiError(404, "the server could not find the requested resource")
        return None

    def _route(self, path: str) -> Route:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "the server could not find the requested resource")
        if rest and rest[0] == "watch":
            raise ApiError(404, "the legacy /watch/ path is not served; use ?watch=true")
        reg = self.store.registry
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        rt = reg.lookup(group, version, rest[0])
        if rt is None or len(rest) > 3:
            raise ApiError(404, "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if namespace is not None and not rt.namespaced:
            raise ApiError(404, "the server could not find the requested resource")
        if sub is not None and sub not in rt.subresources:
            raise ApiError(404, "the server could not find the requested resource")
        if name == "":
            raise ApiError(404, "the server could not find the requested resource")
        return Route(rt, namespace, name, sub)

    @staticmethod
    def _verb(request: web.Request, route: Route) -> str:
        method = request.method
        if method == "GET":
            if route.name is None:
                return "watch" if _flag(request.query.get("watch")) else "list"
            return "get"
        if method == "POST":
            return "create"
        if method == "PUT":
            return "update"
        if method == "PATCH":
            return "patch"
        if method == "DELETE":
            return "delete" if route.name else "deletecollection"
        raise errors.method_not_allowed()

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if "protobuf" in (request.content_type or ""):
            try:
                return decode_object(raw)
            except ProtobufError as exc:
                # What an API server answers for a media type it cannot read for this kind.
                raise ApiError(
                    415,
                    f"the body of the request was in an unknown format - accepted media types include: "
                    f"{JSON} ({exc})",
                ) from None
        if not raw:
            raise errors.bad_request("the request body is empty")
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            ctype = request.content_type or ""
            if "yaml" in ctype:
                raise ApiError(415, f"kubesim does not accept {ctype}; send JSON") from None
            raise errors.bad_request("the request body could not be decoded as JSON") from None

    async def _serve(self, request: web.Request, route: Route, verb: str) -> web.StreamResponse:
        store, rt, q = self.store, route.rt, request.query
        ns = route.namespace
        if rt.namespaced and route.name is not None and ns is None:
            raise ApiError(404, "the server could not find the requested resource")
        dry_run = q.get("dryRun") == "All"
        if route.name is None and (verb in ("update", "patch") or route.subresource):
            raise errors.method_not_allowed()
        if route.subresource == "eviction":
            if verb != "create":
                raise errors.method_not_allowed()
            assert route.name is not None
            body = await self._body(request)
            config = self.controllers.config if self.controllers is not None else None
            status = await evict(
                store, ns or "", route.name, body, dry_run=q.getall("dryRun", []), config=config
            )
            return _json(status, 201)
        if route.subresource == "binding":
            if verb != "create":
                raise errors.method_not_allowed()
            assert route.name is not None
            return _json(self._bind(ns or "", route.name, await self._body(request)), 201)
        if route.subresource in ("log", "scale", "finalize", "ephemeralcontainers"):
            return await self._minor_subresource(request, route, verb)
        if verb == "get":
            assert route.name is not None
            obj = store.get(rt, ns, route.name)
            return self._render(request, rt, [obj], single=True)
        if verb == "list":
            return await self._list(request, rt, ns)
        if verb == "watch":
            return await self._watch(request, rt, ns)
        if verb == "create":
            if route.name is not None:
                raise errors.method_not_allowed()
            created = store.create(rt, await self._body(request), namespace=ns, dry_run=dry_run)
            return _json(created, 201)
        if verb == "update":
            assert route.name is not None
            body = await self._body(request)
            return _json(
                store.replace(rt, ns, route.name, body, subresource=route.subresource, dry_run=dry_run)
            )
        if verb == "patch":
            assert route.name is not None
            body = await self._body(request)
            ctype = request.headers.get("Content-Type", "").split(";")[0].strip()
            return _json(
                store.patch(rt, ns, route.name, ctype, body, subresource=route.subresource, dry_run=dry_run)
            )
        if verb == "delete":
            assert route.name is not None
            opts = await self._delete_options(request)
            return self._delete_one(rt, ns, route.name, opts)
        if verb == "deletecollection":
            opts = await self._delete_options(request)
            labels, fields = self._selectors(request, rt)
            deleted = [
                store.delete(
                    rt,
                    o["metadata"].get("namespace"),
                    o["metadata"]["name"],
                    grace_period_seconds=opts.grace_period_seconds,
                    dry_run=opts.dry_run,
                    propagation=opts.policy,
                )
                for o in store.list(rt, ns, labels=labels, fields=fields)
            ]
            return _json(self._list_body(rt, deleted, None, None))
        raise errors.method_not_allowed()

    async def _minor_subresource(self, request: web.Request, route: Route, verb: str) -> web.Response:
        assert route.name is not None
        obj = self.store.get(route.rt, route.namespace, route.name)
        if route.subresource == "log":
            return web.Response(text=f"kubesim: no logs for {route.name}\n")
        if route.subresource == "scale":
            if verb == "get":
                return _json(_scale(obj))
            body = await self._body(request)
            spec = body.get("spec") if isinstance(body, dict) else None
            replicas = spec.get("replicas") if isinstance(spec, dict) else None
            if not isinstance(replicas, int) or replicas < 0:
                raise errors.invalid(route.rt, route.name, "spec.replicas", "Invalid value: must be >= 0")

            def set_replicas(o: Obj) -> None:
                o.setdefault("spec", {})["replicas"] = replicas

            return _json(_scale(self.store.mutate(route.rt, route.namespace, route.name, set_replicas)))
        if route.subresource == "finalize" and verb == "update":
            body = await self._body(request)
            return _json(self.store.replace(route.rt, None, route.name, body, subresource="*"))
        raise errors.method_not_allowed()

    def _bind(self, ns: str, name: str, body: Any) -> dict[str, Any]:
        pod_rt = self.store.registry.lookup("", "v1", "pods")
        assert pod_rt is not None
        # pkg/registry/core/pod/storage/storage.go BindingREST.Create and assignPod.
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request was in an unknown format")
        bound_name = (body.get("metadata") or {}).get("name")
        if bound_name and bound_name != name:
            raise errors.bad_request("name in URL does not match name in Binding object")
        pod = self.store.get(pod_rt, ns, name)
        target_ref = body.get("target") or {}
        target = target_ref.get("name")
        if not target:
            raise errors.invalid(pod_rt, name, "target.name", "Required value")
        if target_ref.get("kind") not in (None, "", "Node"):
            raise errors.invalid(pod_rt, name, "target.kind", "Invalid value: must be empty or 'Node'")
        if pod["metadata"].get("deletionTimestamp"):
            raise errors.conflict(pod_rt, name, f"pod {name} is being deleted, cannot be assigned to a host")
        if (pod.get("spec") or {}).get("nodeName"):
            raise errors.conflict(
                pod_rt, name, f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
            )
        now = rfc3339(self.store.clock())

        def bind(o: Obj) -> None:
            o["spec"]["nodeName"] = target
            conds = [
                c for c in o.setdefault("status", {}).get("conditions", []) if c.get("type") != "PodScheduled"
            ]
            conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": now})
            o["status"]["conditions"] = conds

        self.store.mutate(pod_rt, ns, name, bind)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def _delete_one(
        self, rt: ResourceType, ns: str | None, name: str, opts: deleteoptions.DeleteOptions
    ) -> web.Response:
        result = self.store.delete(
            rt,
            ns,
            name,
            grace_period_seconds=opts.grace_period_seconds,
            preconditions=opts.preconditions,
            dry_run=opts.dry_run,
            propagation=opts.policy,
        )
        meta = result["metadata"]
        if opts.dry_run:
            # Removed at once unless a grace period or a finalizer keeps it (what the write would do).
            gone = meta.get("deletionGracePeriodSeconds") == 0 and not meta.get("finalizers")
            gone = gone and rt.key != ("", "namespaces")
        else:
            stored = self.store.find(rt, ns, name)
            gone = stored is None or stored["metadata"].get("uid") != meta.get("uid")
        body, code = deleteoptions.response(rt, result, gone=gone, opts=opts)
        return _json(body, code)

    async def _delete_options(self, request: web.Request) -> deleteoptions.DeleteOptions:
        """As upstream's ``DeleteResource`` (k8s.io/apiserver pkg/endpoints/handlers/delete.go): a
        non-empty body is the DeleteOptions and the query's parameters are then ignored; only without
        a body are they read from the query."""
        q = request.query
        if request.can_read_body:
            raw = await request.read()
            if raw.strip():
                try:
                    opts = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    raise errors.bad_request("the DeleteOptions body could not be decoded as JSON") from None
                return deleteoptions.from_body(opts)
        return deleteoptions.from_query(
            q.get("gracePeriodSeconds"),
            q.get("propagationPolicy"),
            q.get("orphanDependents"),
            q.getall("dryRun", []),
        )

    # -- reads -----------------------------------------------------------------------------------

    def _selectors(self, request: web.Request, rt: ResourceType) -> tuple[Any, Any]:
        q = request.query
        labels = parse_label_selector(q["labelSelector"]) if q.get("labelSelector") else None
        fields = parse_field_selector(q["fieldSelector"], kind=rt.kind) if q.get("fieldSelector") else None
        return labels, fields

    async def _list(self, request: web.Request, rt: ResourceType, ns: str | None) -> web.StreamResponse:
        q = request.query
        opts = _list_options(request)
        listoptions.validate(opts, watch=False)
        limit = listoptions.page_limit(opts)
        token = q.get("continue")
        if token:
            items, start, rv = self._resume(token)
        else:
            labels, fields = self._selectors(request, rt)
            current = self.store.resource_version
            exact = listoptions.exact_version(opts)
            if exact is not None:
                if exact > current:
                    raise listoptions.too_large(exact, current)
                items, rv = self.store.list_at(rt, ns, exact, labels=labels, fields=fields), exact
            else:
                if opts.resource_version not in ("", "0"):
                    wanted = listoptions.parse_version(opts.resource_version)
                    if wanted > current:  # NotOlderThan a version the store has not reached
                        raise listoptions.too_large(wanted, current)
                items, rv = self.store.list(rt, ns, labels=labels, fields=fields), current
            start = 0
        next_token: str | None = None
        remaining: int | None = None
        if limit > 0 and start + limit < len(items):
            next_token = self._snapshot(items, start + limit, rv)
            remaining = len(items) - start - limit
            page = items[start : start + limit]
        else:
            page = items[start:]
        if len(page) > _STREAM_OVER and not _wants_table(request.headers.get("Accept", "")):
            return await self._stream_list(request, self._list_body(rt, page, next_token, remaining, str(rv)))
        return self._render(
            request, rt, page, single=False, rv=str(rv), continue_token=next_token, remaining=remaining
        )

    def _snapshot(self, items: list[Obj], offset: int, rv: int) -> str:
        """Continue tokens serve the list as it was at its resourceVersion, as upstream does."""
        snap_id = f"{rv}-{id(items)}"
        self._snapshots[snap_id] = items
        self._snapshots.move_to_end(snap_id)
        while len(self._snapshots) > _SNAPSHOTS:
            self._snapshots.popitem(last=False)
        raw = orjson.dumps({"s": snap_id, "o": offset, "rv": rv})
        return base64.urlsafe_b64encode(raw).decode()

    def _resume(self, token: str) -> tuple[list[Obj], int, int]:
        try:
            data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
            snap, offset, rv = str(data["s"]), int(data["o"]), int(data["rv"])
        except (binascii.Error, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            raise errors.bad_request("continue key is not valid: illegal base64 data or malformed") from None
        items = self._snapshots.get(snap)
        if items is None:
            raise errors.gone(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start "
                "a new list without the continue parameter."
            )
        return items, offset, rv

    def _list_body(
        self,
        rt: ResourceType,
        items: list[Obj],
        cont: str | None,
        remaining: int | None,
        rv: str | None = None,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": rv or str(self.store.resource_version)}
        if cont:
            meta["continue"] = cont
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta, "items": items}

    def _render(
        self,
        request: web.Request,
        rt: ResourceType,
        items: list[Obj],
        *,
        single: bool,
        rv: str | None = None,
        continue_token: str | None = None,
        remaining: int | None = None,
    ) -> web.Response:
        if _wants_table(request.headers.get("Accept", "")):
            table = to_table(
                rt.kind,
                items,
                now=datetime.fromtimestamp(self.store.clock(), tz=UTC),
                resource_version=rv or str(self.store.resource_version),
                continue_token=continue_token,
                include_object=request.query.get("includeObject", "Metadata"),
                printer_columns=rt.printer_columns or None,
            )
            if remaining is not None:
                table.setdefault("metadata", {})["remainingItemCount"] = remaining
            return _json(table)
        if single:
            return _json(items[0])
        return _json(self._list_body(rt, items, continue_token, remaining, rv))

    async def _stream_list(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        """Write a big list in chunks: a 100 000-pod list is ~300 MB of JSON, and encoding it in one
        piece would double the server's memory for the length of the response."""
        items: list[Obj] = body.pop("items")
        head = orjson.dumps(body)
        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(head[:-1] + b',"items":[')
        for start in range(0, len(items), _STREAM_CHUNK):
            chunk = orjson.dumps(items[start : start + _STREAM_CHUNK])[1:-1]
            await resp.write(chunk + (b"," if start + _STREAM_CHUNK < len(items) else b""))
        await resp.write(b"]}")
        await resp.write_eof()
        return resp

    async def _watch(self, request: web.Request, rt: ResourceType, ns: str | None) -> web.StreamResponse:
        q = request.query
        labels, fields = self._selectors(request, rt)
        bookmarks = _flag(q.get("allowWatchBookmarks"))
        opts = _list_options(request)
        listoptions.validate(opts, watch=True)
        initial = opts.send_initial_events
        since = q.get("resourceVersion")
        timeout = float(_int(q["timeoutSeconds"], "timeoutSeconds")) if q.get("timeoutSeconds") else 1800.0
        query = _query_text(request)
        cut = self.faults.watch_cut_after(rt.plural, request.path, query)
        if cut is not None:
            timeout = min(timeout, cut)
        stall = self.faults.watch_stall_after(rt.plural, request.path, query)
        stall_at = None if stall is None else time.monotonic() + stall
        try:
            watcher = self.store.watch(rt, ns, labels=labels, fields=fields, since=since, initial=initial)
        except ApiError as exc:
            if exc.code != 410:
                raise
            # Past authorization and a parsed version, a watch fails with an ERROR event, not an HTTP
            # status (cacher.go Watch: newErrWatcher): HTTP 200, one event carrying the 410 Status.
            return await self._error_event(request, exc)
        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        resp.enable_chunked_encoding()
        self._watch_tasks.add(watcher)
        try:
            await resp.prepare(request)
            if stall == 0:
                await self._hold_silent(request, watcher)
                return resp  # a half-open connection is never closed from this end
            if initial and bookmarks:
                await self._send_initial_then_bookmark(resp, watcher, rt)
            end = time.monotonic() + timeout
            await self._pump(resp, watcher, rt, bookmarks, end if stall_at is None else min(end, stall_at))
            if stall_at is not None and time.monotonic() >= stall_at:
                await self._hold_silent(request, watcher)
                return resp
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unwatch(watcher)
            self._watch_tasks.discard(watcher)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await resp.write_eof()
        return resp

    async def _error_event(self, request: web.Request, exc: ApiError) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await resp.write(orjson.dumps({"type": "ERROR", "object": exc.status()}) + b"\n")
            await resp.write_eof()
        return resp

    async def _hold_silent(self, request: web.Request, w: Watcher) -> None:
        """A half-open watch (fault injection): send nothing, swallow the events, never close; return
        only when the client has gone or the server drops its watches (test teardown)."""
        while True:
            transport = request.transport
            if transport is None or transport.is_closing():
                return
            try:
                if await asyncio.wait_for(w.queue.get(), timeout=0.1) is None:
                    return
            except TimeoutError:
                pass

    async def _send_initial_then_bookmark(
        self, resp: web.StreamResponse, w: Watcher, rt: ResourceType
    ) -> None:
        buf: list[bytes] = []
        while not w.queue.empty():
            item = w.queue.get_nowait()
            if item is None:
                break
            buf.append(_event_line(item))
        buf.append(self._bookmark(rt, {"k8s.io/initial-events-end": "true"}))
        await resp.write(b"".join(buf))

    def _bookmark(self, rt: ResourceType, annotations: dict[str, str] | None = None) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(self.store.resource_version)}
        if annotations:
            meta["annotations"] = annotations
        return (
            orjson.dumps(
                {
                    "type": "BOOKMARK",
                    "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta},
                }
            )
            + b"\n"
        )

    async def _pump(
        self, resp: web.StreamResponse, w: Watcher, rt: ResourceType, bookmarks: bool, deadline: float
    ) -> None:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            wait = min(remaining, self.bookmark_interval) if bookmarks else remaining
            try:
                item = await asyncio.wait_for(w.queue.get(), timeout=wait)
            except TimeoutError:
                if bookmarks and time.monotonic() < deadline:
                    await resp.write(self._bookmark(rt))
                continue
            if item is None:
                return
            # Batch what is already queued into one write: a burst of events costs one syscall.
            buf = [_event_line(item)]
            while not w.queue.empty() and len(buf) < 512:
                nxt = w.queue.get_nowait()
                if nxt is None:
                    await resp.write(b"".join(buf))
                    return
                buf.append(_event_line(nxt))
            await resp.write(b"".join(buf))

    # -- control API -----------------------------------------------------------------------------

    async def _control(self, request: web.Request) -> web.Response:
        """``/kubesim/v1/...``: runtime fault injection and simulator introspection for tests."""
        path, method = request.path.rstrip("/"), request.method
        if path == "/kubesim/v1/faults":
            if method == "GET":
                return _json(self.faults.to_dict())
            if method == "POST":
                body = await self._body(request)
                rules = body if isinstance(body, list) else [body]
                added = [self.faults.add(rule_from_dict(r)).to_dict() for r in rules]
                return _json({"added": added}, 201)
            if method == "DELETE":
                self.faults.clear()
                return _json(self.faults.to_dict())
        if path.startswith("/kubesim/v1/faults/") and method == "DELETE":
            found = self.faults.remove(_int(path.rsplit("/", 1)[1], "rule id"))
            return _json({"removed": found}, 200 if found else 404)
        if path == "/kubesim/v1/qps" and method == "PUT":
            body = await self._body(request)
            if not isinstance(body, dict):
                raise errors.bad_request('expected {"qps": N, "burst": M}')
            qps = body.get("qps")
            self.faults.set_qps(
                float(qps) if qps else None, int(body["burst"]) if body.get("burst") else None
            )
            return _json(self.faults.to_dict())
        if path == "/kubesim/v1/drop-watches" and method == "POST":
            return _json({"dropped": self.store.drop_watches()})
        if path == "/kubesim/v1/compact" and method == "POST":
            self.store.compact()
            return _json({"resourceVersion": str(self.store.resource_version)})
        if path.startswith("/kubesim/v1/nodes/") and path.endswith("/kubelet") and method == "PUT":
            return await self._set_kubelet(request, path.split("/")[4])
        if path == "/kubesim/v1/stats" and method == "GET":
            return _json(
                {
                    "requests": dict(self.requests),
                    "resourceVersion": self.store.resource_version,
                    "watches": len(self._watch_tasks),
                    "faultsInjected": self.faults.injected,
                    "pacing": {
                        "apiFirst": self.pacer.enabled,
                        "controlPlaneShare": round(self.pacer.share(), 3),
                        "pauses": self.pacer.pauses,
                    },
                }
            )
        raise ApiError(404, f"unknown kubesim control endpoint {method} {path}")

    async def _set_kubelet(self, request: web.Request, node: str) -> web.Response:
        """Stop or restart a node's simulated kubelet: an instance vanishing (spot reclaim) or coming back."""
        body = await self._body(request)
        running = body.get("running") if isinstance(body, dict) else None
        if not isinstance(running, bool):
            raise errors.bad_request('expected {"running": true|false}')
        if self.controllers is None:
            raise ApiError(409, "kubesim runs without controllers")
        try:
            kubelet = kubelet_of(self.controllers)
        except LookupError as exc:
            raise ApiError(409, str(exc)) from None
        if running:
            kubelet.start_node(node)
        else:
            kubelet.stop_node(node)
        return _json({"node": node, "running": kubelet.is_running(node)})


def _event_line(item: tuple[str, Obj, bytes | None]) -> bytes:
    type_, obj, line = item
    return line if line is not None else orjson.dumps({"type": type_, "object": obj}) + b"\n"


def _list_options(request: web.Request) -> listoptions.ListOptions:
    q = request.query
    initial = q.get("sendInitialEvents")
    return listoptions.ListOptions(
        resource_version=q.get("resourceVersion", ""),
        match=q.get("resourceVersionMatch", ""),
        send_initial_events=None if initial is None else _flag(initial),
        continue_token=q.get("continue", ""),
        limit=_int(q["limit"], "limit") if q.get("limit") else 0,
    )


def _flag(value: str | None) -> bool:
    """Boolean query parameters as Go's strconv.ParseBool reads them (the Python client sends "True")."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def _wants_table(accept: str) -> bool:
    # kubectl lists Table first and plain JSON last; honour the first media type it names.
    first = accept.split(",")[0]
    return "as=Table" in first


def _int(value: Any, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise errors.bad_request(f"invalid value for {what}: {value!r}") from None


def _scale(obj: Obj) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 0)},
        "status": {"replicas": (obj.get("status") or {}).get("replicas", 0)},
    }


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
__all__ = ["POD_KEY", "KubeSimServer", "Route"]


def _query_text(request: web.Request) -> str:
    """The request's query string, decoded, for fault rules to match (``spec.nodeName=node-a``)."""
    # yarl's query_string leaves reserved characters such as "=" inside a value percent-encoded.
    return unquote(request.query_string.replace("+", " "))
