"""A half-open node watch in the real controller process: /healthz turns red and names the watch
while every reopened connection goes silent, and green again once the connection works.

kubesim's ``stall_watch_after_s`` serves what a half-open connection looks like to a client (the
watch answered, then no byte and no end: client-go#374, kubernetes#65012). The controller's node
index and shared pod watch used to stay frozen on such a connection with /healthz green; each watch
now has an idle bound (``KUBESPOT_KUBE_WATCH_IDLE_TIMEOUT``, like kopf's
``settings.watching.inactivity_timeout``) and /healthz reports one silent for twice that bound.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
from controller_world import controller_world

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until
from support.kubespot_process import free_port

pytestmark = pytest.mark.slow


async def healthz(port: int) -> tuple[int, dict[str, Any]]:
    def get() -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
                return answer.status, bytes(answer.read())
        except urllib.error.HTTPError as err:
            return err.code, bytes(err.read())

    status, body = await asyncio.to_thread(get)
    return status, orjson.loads(body)


def watches(body: dict[str, Any]) -> dict[str, Any]:
    return next(check for check in body["checks"] if check["name"] == "watches")


async def test_healthz_names_the_node_watch_while_it_is_stuck_silent(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, tmp=tmp_path, instances=1) as world:
        rule = world.kubesim.faults.add(resource="nodes", stall_watch_after_s=0)
        port = free_port()
        await world.start_controller(
            KUBESPOT_KUBE_WATCH_IDLE_TIMEOUT="2",
            KUBESPOT_OBSERVABILITY_ENABLE_PROBES_SERVER="true",
            KUBESPOT_OBSERVABILITY_PROBES_SERVER_PORT=str(port),
        )

        async def red() -> dict[str, Any]:
            status, body = await healthz(port)
            return body if status != 200 and not watches(body)["ok"] else {}

        body = await until(red, within=20)
        assert "nodes silent for" in watches(body)["detail"], body
        assert [c["name"] for c in body["checks"] if not c["ok"]] == ["watches"], body
        assert "watch of nodes broke" in world.log_text(), "the silence was taken as a break"

        world.kubesim.faults.remove(rule.id)

        async def green() -> bool:
            status, body = await healthz(port)
            return status == 200 and bool(watches(body)["ok"])

        await until(green, within=20)
