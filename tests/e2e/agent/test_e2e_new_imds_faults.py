"""IMDS misbehaving: 500s on the spot path and garbage bodies. The agent keeps polling, logs the
failures, counts them in ``kubespot_imds_errors_total``, never crashes, and still handles the notice
as soon as it can read it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from agent_world import (
    INSTANCE,
    NODE,
    AgentProcess,
    World,
    agent_world,
    has_log,
    node_events_with,
    running_uids,
    sample_sum,
    scrape_agent_metrics,
    web,
)
from aiohttp import web as aioweb

from kubespot.sim.imdssim import Fault
from kubespot.sim.kubesim.testing import until
from support.kubespot_process import free_port

pytestmark = pytest.mark.slow

SPOT_PATH = "/latest/meta-data/spot/instance-action"


async def handled(world: World) -> None:
    async def emptied() -> bool:
        state = world.state()
        return (
            world.cordoned()
            and state is not None
            and state["phase"] == "drained"
            and not world.workload_pods_on(NODE)
        )

    await until(emptied, within=15)
    assert "kubespot.io/spot-itn" in world.taint_keys()


async def imds_errors(port: int, path: str = SPOT_PATH) -> float:
    return sample_sum(await scrape_agent_metrics(port), "kubespot_imds_errors_total", path=path)


def poll_failures(agent: AgentProcess) -> list[str]:
    return [
        str(line.get("message"))
        for line in agent.lines()
        if line.get("level") == "warning" and "IMDS poll failed" in str(line.get("message"))
    ]


async def test_spot_path_500s_then_the_notice_is_handled(tmp_path: Path) -> None:
    port = free_port()
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        agent = await world.start_agent(ENABLE_PROMETHEUS_SERVER="true", PROMETHEUS_SERVER_PORT=str(port))
        # Three whole polls fail (three tries each), then one read in three keeps failing.
        faults = world.imds.fleet.faults
        faults.add(Fault(kind="error", status=500, path="/latest/meta-data/spot", count=9))
        faults.add(Fault(kind="error", status=500, path="/latest/meta-data/spot", rate=0.3))
        world.fire_spot_itn()
        await handled(world)
        assert agent.running
        assert any("500" in m for m in poll_failures(agent)), agent.text()[-3000:]
        assert await imds_errors(port) >= 3


async def test_spot_500s_under_dry_run_change_nothing(tmp_path: Path) -> None:
    async with agent_world(web("web", 2), tmp=tmp_path) as world:
        pods = running_uids(world)
        agent = await world.start_agent(DRY_RUN="true")
        world.imds.fleet.faults.add(Fault(kind="error", status=500, path="/latest/meta-data/spot", count=9))
        world.fire_spot_itn()

        async def announced() -> bool:
            return bool(node_events_with(world, "DryRun"))

        await until(announced, within=10)
        assert poll_failures(agent), agent.text()[-3000:]
        await asyncio.sleep(0.5)
        assert not world.cordoned() and world.state() is None and not world.taint_keys()
        assert running_uids(world) == pods
        assert agent.running


class GarbageImds:
    """A minimal IMDS whose spot path answers 200 with invalid JSON ``garbage`` times, then a real
    notice; everything the agent reads besides is served plainly (IMDSv2 token included)."""

    def __init__(self, garbage: int) -> None:
        self.garbage_left = garbage
        self.fired = False
        self.notice: bytes | None = None

    def fire(self) -> None:
        """From now on the spot path has a notice (404 before, as on a healthy instance)."""
        self.fired = True

    async def handle(self, request: aioweb.Request) -> aioweb.StreamResponse:
        path = request.path
        if path == "/latest/api/token" and request.method == "PUT":
            ttl = request.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "21600")
            return aioweb.Response(
                text="garbage-imds-token", headers={"X-aws-ec2-metadata-token-ttl-seconds": ttl}
            )
        if path == "/latest/dynamic/instance-identity/document":
            doc = {
                "instanceId": INSTANCE,
                "instanceType": "m5.large",
                "availabilityZone": "us-east-1a",
                "region": "us-east-1",
                "accountId": "123456789012",
                "privateIp": "10.0.0.10",
            }
            return aioweb.Response(body=orjson.dumps(doc), content_type="application/json")
        if path == "/latest/meta-data/instance-life-cycle":
            return aioweb.Response(text="spot")
        if path == SPOT_PATH and self.fired:
            if self.garbage_left > 0:
                self.garbage_left -= 1
                return aioweb.Response(text='{"action": "terminate", "time": ', content_type="text/plain")
            if self.notice is None:
                deadline = datetime.fromtimestamp(int(time.time()) + 60, tz=UTC)
                doc = {"action": "terminate", "time": deadline.strftime("%Y-%m-%dT%H:%M:%SZ")}
                self.notice = orjson.dumps(doc)
            return aioweb.Response(body=self.notice, content_type="text/plain")
        return aioweb.Response(status=404, text="<title>404 - Not Found</title>", content_type="text/html")


@asynccontextmanager
async def serving(imds: GarbageImds) -> AsyncIterator[str]:
    app = aioweb.Application()
    app.router.add_route("*", "/{tail:.*}", imds.handle)
    runner = aioweb.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    site = aioweb.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_garbage_notice_body_is_logged_counted_and_then_handled(tmp_path: Path) -> None:
    port = free_port()
    imds = GarbageImds(garbage=5)
    async with agent_world(web("web", 2), tmp=tmp_path) as world, serving(imds) as url:
        agent = await world.start_agent(
            KUBESPOT_IMDS_URL=url, ENABLE_PROMETHEUS_SERVER="true", PROMETHEUS_SERVER_PORT=str(port)
        )
        # The notice appears, but its first five reads are garbage (a 200, so no retry helps).
        imds.fire()

        async def garbage_served() -> bool:
            return imds.garbage_left == 0

        await until(garbage_served, within=10)
        await handled(world)
        assert agent.running
        failures = poll_failures(agent)
        assert any("not JSON" in m for m in failures), agent.text()[-3000:]
        assert await imds_errors(port) >= 5
        assert has_log(agent, "spot interruption"), agent.text()[-3000:]
