"""The timeline around the drain, seen from outside the agent: notifications at each stage, and the
outgoing HTTP calls before and after the drain (docs/notifications.md, docs/agent.md#the-timeline).

A local HTTP receiver stands in for Slack, a monitoring API and a ticketing system. When it gets a
request it notes what the cluster looked like at that moment (how many workload pods were still on
the node, untouched), so "called before the first eviction" and "after the last pod is gone" are
asserted on observable state, not on log lines.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from agent_world import NODE, World, agent_world, node_events_with, running_uids, web
from aiohttp import web as aioweb
from nth_support import check, spot_event_id, spot_itn, stays_false

from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

REPLICAS = 2


@dataclass
class Hit:
    path: str
    body: bytes
    at: float
    #: Workload pods still on the node and not terminating when the request arrived.
    untouched: int
    #: Workload pods on the node at all (terminating ones included).
    on_node: int

    def json(self) -> Any:
        return orjson.loads(self.body)


class Receiver:
    """Answers 200 at once, except under ``/hang`` (never answers); notes the cluster at each request."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.hits: list[Hit] = []
        self.port = 0
        self._runner: aioweb.AppRunner | None = None

    async def _handle(self, request: aioweb.Request) -> aioweb.StreamResponse:
        body = await request.read()
        self.hits.append(
            Hit(
                request.path,
                body,
                time.monotonic(),
                len(running_uids(self.world)),
                len(self.world.workload_pods_on(NODE)),
            )
        )
        if request.path.startswith("/hang"):
            await asyncio.Event().wait()
        return aioweb.Response(text="ok")

    async def __aenter__(self) -> Receiver:
        app = aioweb.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = aioweb.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        await aioweb.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def at(self, path: str) -> list[Hit]:
        return [h for h in self.hits if h.path == path]


def moved(world: World) -> Callable[[], bool]:
    """Every workload pod is gone from the node and the state says drained."""

    def probe() -> bool:
        state = world.state()
        return not world.workload_pods_on(NODE) and state is not None and state.get("phase") == "drained"

    return probe


def notify_env(receiver: Receiver) -> dict[str, str]:
    """A named target in the environment: the built-in JSON format, every stage."""
    return {
        "KUBESPOT_NOTIFY_OPS_URL": receiver.url("/notify"),
        "KUBESPOT_NOTIFY_OPS_FORMAT": "json",
        "KUBESPOT_NOTIFY_OPS_STAGES": "started,finished,failed",
    }


async def test_started_then_finished_with_the_pod_counts(tmp_path: Path) -> None:
    async with agent_world(web("web", REPLICAS), tmp=tmp_path) as world, Receiver(world) as receiver:
        await world.start_agent(**notify_env(receiver))
        itn = spot_itn(world, lead_seconds=20)

        await until(check(moved(world)), within=20)
        await until(check(lambda: len(receiver.at("/notify")) == 2), within=10)
        await stays_false(lambda: len(receiver.at("/notify")) > 2, during=0.5)

        started, finished = (h.json() for h in receiver.at("/notify"))
        assert [started["stage"], finished["stage"]] == ["started", "finished"]
        assert started["event"]["id"] == finished["event"]["id"] == spot_event_id(itn)
        assert started["summary"]["pods"] is None
        # "started" left before any pod did; "finished" once all had.
        assert receiver.at("/notify")[0].untouched == REPLICAS
        assert receiver.at("/notify")[1].on_node == 0
        summary = finished["summary"]
        assert summary["outcome"] == "done" and summary["error"] is None
        assert summary["pods"]["evicted"] == REPLICAS and summary["pods"]["still_running"] == 0
        assert [a["name"] for a in summary["actions"]] == ["drain"]
        assert summary["actions"][0]["result"] == "success"
        # The counts are on the node too, for the controller's published summary.
        state = world.state()
        assert state is not None and state["extra"]["pods"] == {"evicted": REPLICAS}


async def test_a_dry_run_twin_sends_and_calls_nothing(tmp_path: Path) -> None:
    calls = {"mute": {"url": "", "stage": "pre-drain"}}
    async with agent_world(web("web", REPLICAS), tmp=tmp_path) as world, Receiver(world) as receiver:
        calls["mute"]["url"] = receiver.url("/mute")
        calls_file = tmp_path / "calls.json"
        calls_file.write_bytes(orjson.dumps(calls))
        agent = await world.start_agent(
            DRY_RUN="true", KUBESPOT_HTTP_CALLS_FILE=str(calls_file), **notify_env(receiver)
        )
        spot_itn(world, lead_seconds=20)

        await until(check(lambda: len(node_events_with(world, "DryRun")) >= 3), within=15)
        await stays_false(lambda: bool(receiver.hits), during=1.5)
        assert len(running_uids(world)) == REPLICAS and world.state() is None
        said = [str(line.get("message", "")) for line in agent.lines()]
        assert any("would send the finished message to ops" in m for m in said), said
        # The call was rendered and reported as a dry run, not made.
        dry = [e for e in node_events_with(world, "DryRun") if "pre-drain" in str(e.get("message"))]
        assert dry and "http:mute: dry_run" in str(dry[0]["message"])


async def test_pre_drain_call_before_the_first_eviction_post_drain_after_the_last(tmp_path: Path) -> None:
    async with agent_world(web("web", REPLICAS), tmp=tmp_path) as world, Receiver(world) as receiver:
        calls = {
            "mute": {
                "url": receiver.url("/mute") + "/{{ .InstanceID }}",
                "stage": "pre-drain",
                "body": '{"scope": "host:{{ .NodeName }}", "end": {{ add .DeadlineUnix 900 }}}',
            },
            "ticket": {"url": receiver.url("/ticket"), "stage": "post-drain", "method": "PUT"},
        }
        calls_file = tmp_path / "calls.json"
        calls_file.write_bytes(orjson.dumps(calls))
        await world.start_agent(KUBESPOT_HTTP_CALLS_FILE=str(calls_file), **notify_env(receiver))
        spot_itn(world, lead_seconds=20)

        await until(check(moved(world)), within=20)
        await until(check(lambda: len(receiver.at("/notify")) == 2), within=10)

        (mute,) = [h for h in receiver.hits if h.path.startswith("/mute/")]
        (ticket,) = receiver.at("/ticket")
        assert mute.path.endswith("/i-0e2e00000000000001")
        assert mute.json()["scope"] == f"host:{NODE}" and isinstance(mute.json()["end"], int)
        assert mute.untouched == REPLICAS  # nothing evicted yet
        assert ticket.on_node == 0  # every pod gone
        assert receiver.hits.index(mute) < receiver.hits.index(ticket)
        summary = receiver.at("/notify")[1].json()["summary"]
        assert [a["name"] for a in summary["actions"]] == ["http:mute", "drain", "http:ticket"]
        assert {a["result"] for a in summary["actions"]} == {"success"}
        assert node_events_with(world, "PreDrain") and node_events_with(world, "PostDrain")


async def test_a_hung_pre_drain_endpoint_delays_the_drain_only_by_its_budget(tmp_path: Path) -> None:
    async with agent_world(web("web", REPLICAS), tmp=tmp_path) as world, Receiver(world) as receiver:
        # Unbounded, the call would hold the drain 2 x 5 s; with 20 s left its budget is 2 s.
        await world.start_agent(
            KUBESPOT_HTTP_CALL_HUNG_URL=receiver.url("/hang"),
            KUBESPOT_HTTP_CALL_HUNG_TIMEOUT="5",
            KUBESPOT_HTTP_CALL_HUNG_ATTEMPTS="2",
            **notify_env(receiver),
        )
        spot_itn(world, lead_seconds=20)

        await until(check(world.cordoned), within=5, interval=0.02)
        fenced = time.monotonic()
        await until(check(lambda: len(running_uids(world)) < REPLICAS), within=10, interval=0.02)
        first_eviction = time.monotonic()
        assert receiver.at("/hang"), "the call was made"
        assert first_eviction - fenced < 4.0, first_eviction - fenced

        await until(check(moved(world)), within=20)
        await until(check(lambda: len(receiver.at("/notify")) == 2), within=10)
        summary = receiver.at("/notify")[1].json()["summary"]
        hung = summary["actions"][0]
        assert hung["name"] == "http:hung" and hung["result"] == "timeout"
        assert hung["duration"] < 3.0
        assert any("http:hung" in f for f in summary["failures"])
        assert node_events_with(world, "PreDrainError")


async def test_a_bad_target_or_call_stops_the_agent_at_start_naming_each_setting(tmp_path: Path) -> None:
    async with agent_world(tmp=tmp_path, spares=0, settle=False) as world:
        # A target and a call wrong at once: both named in one message.
        code, out = await world.run_agent_to_exit(
            KUBESPOT_NOTIFY_OPS_URL="http://127.0.0.1:9/notify",
            KUBESPOT_NOTIFY_OPS_FORMAT="telegram",
            KUBESPOT_HTTP_CALL_MUTE_URL="http://127.0.0.1:9/mute",
            KUBESPOT_HTTP_CALL_MUTE_BODY="{{ .EventID ",
        )
        assert code == 2, out
        assert "notify.ops.format" in out and "http_calls.mute.body" in out, out
        # A template file that cannot be read, named down to its key. (A template that cannot be used
        # is logged and replaced by the default message instead: test_e2e_nth_webhook_templates.py.)
        code, out = await world.run_agent_to_exit(
            KUBESPOT_NOTIFY_AUTOMATION_URL="http://127.0.0.1:9/auto",
            KUBESPOT_NOTIFY_AUTOMATION_TEMPLATE_FILES='{"finished": "/nonexistent/finished.json"}',
        )
        assert code == 2, out
        assert "notify.automation.template_files[finished]" in out, out
