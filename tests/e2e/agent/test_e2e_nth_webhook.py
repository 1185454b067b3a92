"""NTH IMDS e2e: the webhook (WEBHOOK_URL, WEBHOOK_TEMPLATE, WEBHOOK_HEADERS, WEBHOOK_PROXY).

The reference handler's ``webhook-test``, ``webhook-http-proxy-test`` and ``webhook-secret-test``:
one POST per interruption with the Slack-style default body or a custom template, the configured
headers, through a proxy when one is set; the URL (a credential) never appears in the agent's log,
whose start-up configuration shows it redacted; and in dry run nothing is sent.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from agent_world import INSTANCE, NODE, AgentProcess, World, agent_world, web
from nth_support import (
    ForwardProxy,
    WebhookReceiver,
    check,
    moved_to_spares,
    node_events,
    phase,
    spot_event_id,
    spot_itn,
    stays_false,
    untouched,
)

from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow

#: Looks like a Slack webhook URL: the last path segment is the secret.
SECRET = "XXXXsekritWEBHOOKtoken42"


def effective_configuration(agent: AgentProcess) -> dict[str, object]:
    """The configuration the agent printed at start-up."""
    prefix = "effective configuration: "
    for line in agent.lines():
        message = str(line.get("message", ""))
        if message.startswith(prefix):
            return dict(orjson.loads(message[len(prefix) :]))
    raise AssertionError("no effective configuration line in the log")


async def drained(world: World, replicas: int) -> None:
    await until(
        check(lambda: moved_to_spares(world, "web", replicas) and phase(world) == "drained"), within=20
    )


async def test_webhook_default_template(tmp_path: Path) -> None:
    async with WebhookReceiver() as receiver, agent_world(web("web", 2), tmp=tmp_path) as world:
        url = receiver.url(f"/services/T0000/B0000/{SECRET}")
        agent = await world.start_agent(WEBHOOK_URL=url)
        itn = spot_itn(world, lead_seconds=15)

        await drained(world, 2)
        await until(check(lambda: len(receiver.posts()) == 1), within=10)
        await stays_false(lambda: len(receiver.posts()) > 1, during=0.5)

        post = receiver.posts()[0]
        assert post.target == f"/services/T0000/B0000/{SECRET}"
        headers = {k.lower(): v for k, v in post.headers.items()}
        assert headers.get("content-type") == "application/json"
        text = post.json()["text"]
        assert text.startswith("[NTH][Instance Interruption] ")
        for part in (
            f"EventID: {spot_event_id(itn)}",
            "Kind: SPOT_ITN",
            f"Instance: {INSTANCE}",
            f"Node: {NODE}",
            "Description: ",
            "Start Time: ",
        ):
            assert part in text, (part, text)

        webhook = effective_configuration(agent)["webhook"]
        assert isinstance(webhook, dict) and webhook["url"] == "<redacted>", webhook
        log = agent.text()
        assert url not in log and SECRET not in log


async def test_webhook_custom_template_and_headers(tmp_path: Path) -> None:
    template = (
        '{"id":"{{ .EventID }}","kind":"{{ .Kind }}","node":"{{ .NodeName }}","instance":"{{ .InstanceID }}"}'
    )
    headers = {"Content-type": "application/json", "X-Api-Key": "hdr-sekrit-123"}
    async with WebhookReceiver() as receiver, agent_world(web("web", 2), tmp=tmp_path) as world:
        url = receiver.url(f"/hook/{SECRET}")
        agent = await world.start_agent(
            WEBHOOK_URL=url, WEBHOOK_TEMPLATE=template, WEBHOOK_HEADERS=orjson.dumps(headers).decode()
        )
        itn = spot_itn(world, lead_seconds=15)

        await until(check(lambda: len(receiver.posts()) == 1), within=20)
        await drained(world, 2)
        await stays_false(lambda: len(receiver.posts()) > 1, during=0.3)

        post = receiver.posts()[0]
        assert post.json() == {
            "id": spot_event_id(itn),
            "kind": "SPOT_ITN",
            "node": NODE,
            "instance": INSTANCE,
        }
        got = {k.lower(): v for k, v in post.headers.items()}
        assert got.get("x-api-key") == "hdr-sekrit-123"
        assert got.get("content-type") == "application/json"
        log = agent.text()
        assert url not in log and SECRET not in log and "hdr-sekrit-123" not in log
        assert "<redacted>" in log


async def test_webhook_dry_run_sends_nothing(tmp_path: Path) -> None:
    async with WebhookReceiver() as receiver, agent_world(web("web", 2), tmp=tmp_path) as world:
        url = receiver.url(f"/hook/{SECRET}")
        agent = await world.start_agent(WEBHOOK_URL=url, DRY_RUN="true")
        spot_itn(world, lead_seconds=15)

        await until(check(lambda: len(node_events(world, "DryRun")) >= 2), within=15)
        await stays_false(lambda: bool(receiver.requests), during=1.0)
        assert untouched(world)
        log = agent.text()
        assert url not in log and SECRET not in log
        # DRY_RUN logs what would be done, the webhook included (its documented contract).
        said = [str(x.get("message", "")) for x in agent.lines()]
        assert any("dry run" in m.lower() and "webhook" in m.lower() for m in said), [
            m for m in said if "dry run" in m.lower()
        ]


async def test_webhook_through_proxy(tmp_path: Path) -> None:
    async with (
        WebhookReceiver() as receiver,
        ForwardProxy() as proxy,
        agent_world(web("web", 2), tmp=tmp_path) as world,
    ):
        url = receiver.url(f"/hook/{SECRET}")
        agent = await world.start_agent(WEBHOOK_URL=url, WEBHOOK_PROXY=proxy.url(""))
        itn = spot_itn(world, lead_seconds=15)

        await until(check(lambda: len(receiver.posts()) == 1), within=20)
        # The proxy saw the request in absolute form, and passed it on unchanged.
        assert [(r.method, r.target) for r in proxy.requests] == [("POST", url)]
        assert proxy.requests[0].body == receiver.posts()[0].body
        assert f"EventID: {spot_event_id(itn)}" in receiver.posts()[0].json()["text"]

        webhook = effective_configuration(agent)["webhook"]
        assert isinstance(webhook, dict) and webhook["proxy"] == "<redacted>", webhook
        log = agent.text()
        assert url not in log and proxy.url("") not in log
