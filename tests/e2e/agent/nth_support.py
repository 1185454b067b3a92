"""Helpers for the NTH scenario suites (``test_e2e_nth_*.py``) on top of ``agent_world``.

Kept out of ``agent_world.py`` (which other suites edit) so neither set of helpers can clobber the
other. Everything here observes the cluster, IMDS and the agent from outside, as the reference
handler's e2e scripts do: Node taints and labels, Pods, Events, a webhook receiver, /metrics.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from agent_world import INSTANCE, NODE, Obj, World, bare_pod, web
from aiohttp import web as aioweb
from prometheus_client.parser import text_string_to_metric_families

from kubespot.model import Kind, event_id
from kubespot.sim.imdssim import ScheduledEvent, SpotInterruption
from kubespot.sim.kubesim import conventions, testing
from kubespot.sim.kubesim.testing import is_ready

KUBESPOT_TAINT_PREFIX = "kubespot.io/"
NTH_TAINT_PREFIX = "aws-node-termination-handler/"
AGENT_COMPONENT = "kubespot-agent"


# --- workloads -------------------------------------------------------------------------------------


def daemonset(name: str, *, namespace: str = "kube-system", shutdown: float = 0.2) -> Obj:
    """A DaemonSet (one pod per node; a drain with IGNORE_DAEMON_SETS leaves its pods alone)."""
    return testing.daemonset(
        name,
        namespace=namespace,
        image="busybox:1",
        annotations={conventions.SHUTDOWN_SECONDS: str(shutdown)},
    )


#: What the reference handler's scenarios run on the node: a Deployment (its pods move to the spares),
#: a DaemonSet (left alone) and a bare pod (deleted, with an event), each drained differently.
MIXED_WORKLOADS = (web("web", 3), daemonset("node-agent"), bare_pod("lonely"))


# --- signals ---------------------------------------------------------------------------------------


def spot_itn(world: World, lead_seconds: float = 120.0) -> SpotInterruption:
    """Fire a spot interruption notice now and return it (its body gives the event id)."""
    return world.imds.fleet.fire_spot_itn(INSTANCE, lead_seconds=lead_seconds)


def spot_event_id(itn: SpotInterruption) -> str:
    """The id the agent gives a spot notice: the model's id function over the IMDS body."""
    return event_id(Kind.SPOT_INTERRUPTION, INSTANCE, itn.instance_action())


def schedule_event(world: World, *, not_before_in: float, code: str = "system-reboot") -> ScheduledEvent:
    """A scheduled maintenance event, visible now, NotBefore ``not_before_in`` seconds away.

    NotBefore is rounded up to a whole second, because IMDS renders it with whole seconds
    (``21 Nov 2026 09:00:00 GMT``): ``event.not_before`` is then exactly the instant the agent reads.
    """
    not_before = float(math.ceil(world.imds.fleet.clock() + not_before_in))
    return world.imds.fleet.add_scheduled_event(INSTANCE, code, not_before=not_before)  # type: ignore[arg-type]


def set_scheduled_state(world: World, event: ScheduledEvent, state: str) -> None:
    """From now on the scheduled event shows ``state`` (canceled, completed)."""
    world.imds.fleet.set_scheduled_state(INSTANCE, event.event_id, state)  # type: ignore[arg-type]


# --- what the cluster shows ------------------------------------------------------------------------


def taint_map(world: World, name: str = NODE) -> dict[str, Obj]:
    """The node's taints by key."""
    return {t["key"]: t for t in (world.node(name).get("spec") or {}).get("taints") or ()}


def agent_events(world: World, reason: str | None = None) -> list[Obj]:
    """Events recorded by the agent (source component ``kubespot-agent``)."""
    return [
        e
        for e in world.events(reason)
        if (e.get("source") or {}).get("component") == AGENT_COMPONENT
        or e.get("reportingComponent") == AGENT_COMPONENT
    ]


def node_events(world: World, reason: str | None = None) -> list[Obj]:
    """Agent events about the Node (not its pods)."""
    return [e for e in agent_events(world, reason) if (e.get("involvedObject") or {}).get("kind") == "Node"]


def pod_events(world: World, pod_name: str, reason: str | None = None) -> list[Obj]:
    """Agent events about the Pod ``pod_name``."""
    return [
        e
        for e in agent_events(world, reason)
        if (e.get("involvedObject") or {}).get("kind") == "Pod"
        and (e.get("involvedObject") or {}).get("name") == pod_name
    ]


def is_running(p: Obj) -> bool:
    return (p.get("status") or {}).get("phase") == "Running" and is_ready(p)


def app_pods(world: World, app: str) -> list[Obj]:
    """Pods labelled ``app`` that are not terminating, wherever they run."""
    return [
        p
        for p in world.pods(None)
        if (p["metadata"].get("labels") or {}).get("app") == app
        and not p["metadata"].get("deletionTimestamp")
    ]


def moved_to_spares(world: World, app: str, replicas: int) -> bool:
    """All ``replicas`` pods of ``app`` Running and Ready on the spare (od-*) nodes."""
    pods = app_pods(world, app)
    return len(pods) == replicas and all(
        is_running(p) and str(p["spec"].get("nodeName", "")).startswith("od-") for p in pods
    )


def uids_on(world: World, node_name: str = NODE) -> set[str]:
    """Uids of the pods bound to ``node_name`` (equal sets: nothing was evicted or replaced)."""
    return {str(p["metadata"]["uid"]) for p in world.pods(node_name)}


def none_terminating(world: World, node_name: str = NODE) -> bool:
    return not any(p["metadata"].get("deletionTimestamp") for p in world.pods(node_name))


def untouched(world: World, name: str = NODE) -> bool:
    """No kubespot or NTH taint, not cordoned, no state annotation."""
    keys = world.taint_keys(name)
    return (
        not any(k.startswith((KUBESPOT_TAINT_PREFIX, NTH_TAINT_PREFIX)) for k in keys)
        and not world.cordoned(name)
        and world.state(name) is None
    )


def phase(world: World) -> str | None:
    """The phase in the node's state annotation (fenced, draining, drained), None without one."""
    state = world.state()
    return None if state is None else str(state.get("phase"))


def write_uptime(world: World, seconds: float, idle: float = 1.0) -> Path:
    """A file in ``/proc/uptime`` format (for UPTIME_FROM_FILE)."""
    path = world.tmp / "uptime"
    path.write_text(f"{seconds:.2f} {idle:.2f}\n", encoding="ascii")
    return path


# --- waiting ----------------------------------------------------------------------------------------


async def stays_false(probe: Callable[[], bool], *, during: float, interval: float = 0.05) -> None:
    """Assert ``probe()`` stays false for ``during`` seconds (to show something did NOT happen)."""
    end = time.monotonic() + during
    while True:
        assert not probe(), "the condition became true"
        if time.monotonic() >= end:
            return
        await asyncio.sleep(interval)


async def stays_untouched(world: World, before: set[str], *, during: float = 1.0) -> None:
    """Assert for ``during`` seconds that the node stays untouched (no taint, cordon or state) and
    keeps exactly the pods whose uids were ``before`` (a dry run, a signal that is not acted on)."""
    await stays_false(lambda: not untouched(world) or uids_on(world) != before, during=during)


def check(probe: Callable[[], bool]) -> Callable[[], Any]:
    """A synchronous predicate as the async probe ``until`` wants."""

    async def run() -> bool:
        return probe()

    return run


# --- HTTP -------------------------------------------------------------------------------------------


async def http_get(url: str, *, within: float = 5.0) -> tuple[int, str]:
    """(status, body) of a GET."""
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=within)) as session,
        session.get(url) as resp,
    ):
        return resp.status, await resp.text()


def metric(text: str, sample: str, **labels: str) -> float | None:
    """The value of ``sample`` (a sample name: ``x_total``, ``x_count``) over the samples whose labels
    include ``labels``, summed; None when no sample matches. ``text`` is a /metrics body."""
    found: list[float] = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                found.append(float(s.value))
    return sum(found) if found else None


@dataclass
class Received:
    """One request a test server got; ``target`` is the request target as sent (absolute for a proxy)."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


class _RecordingServer:
    """An aiohttp server on a free loopback port that records every request."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.port = 0
        self._runner: aioweb.AppRunner | None = None

    async def _handle(self, request: aioweb.Request) -> aioweb.StreamResponse:
        raise NotImplementedError

    async def _record(self, request: aioweb.Request) -> Received:
        got = Received(request.method, request.raw_path, dict(request.headers), await request.read())
        self.requests.append(got)
        return got

    async def start(self) -> None:
        app = aioweb.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = aioweb.AppRunner(app, access_log=None)
        await self._runner.setup()
        await aioweb.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = int(self._runner.addresses[0][1])

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


class WebhookReceiver(_RecordingServer):
    """Answers 200 to any request, like a Slack incoming webhook, and records it."""

    async def _handle(self, request: aioweb.Request) -> aioweb.StreamResponse:
        await self._record(request)
        return aioweb.Response(text="ok")

    def posts(self) -> list[Received]:
        return [r for r in self.requests if r.method == "POST"]

    async def __aenter__(self) -> WebhookReceiver:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class ForwardProxy(_RecordingServer):
    """A plain HTTP forward proxy: takes absolute-URI requests (``POST http://host/path``), records
    them and forwards them to their target; a request in origin form (not via a proxy) gets 400."""

    async def _handle(self, request: aioweb.Request) -> aioweb.StreamResponse:
        got = await self._record(request)
        if not got.target.startswith(("http://", "https://")):
            return aioweb.Response(status=400, text="not a proxy request")
        hop = {"host", "proxy-connection", "proxy-authorization", "connection", "content-length"}
        headers = {k: v for k, v in got.headers.items() if k.lower() not in hop}
        async with (
            aiohttp.ClientSession() as session,
            session.request(got.method, got.target, headers=headers, data=got.body) as resp,
        ):
            return aioweb.Response(status=resp.status, body=await resp.read())

    async def __aenter__(self) -> ForwardProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
