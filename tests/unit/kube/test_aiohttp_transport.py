"""The controller's aiohttp stack for pod and node calls: credentials, errors, content types.

The retry and compare-and-set behaviour is shared with the httpx stack and tested for both in
``test_kube_client.py``; here is what only this transport does itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from aiohttp import web
from lightkube import KubeConfig
from lightkube.config.client_adapter import BearerTokenFileAuth
from lightkube.config.kubeconfig import Cluster, User

from kubespot.config.kube import KubeSettings
from kubespot.kube import connect
from kubespot.kube.aiohttp_transport import AiohttpRaw, _env_proxy
from kubespot.kube.client import AIOHTTP_IN_FLIGHT, MAX_IN_FLIGHT
from kubespot.kube.transport import ApiStatus, HttpxRaw, LinkError
from support.http_receiver import closed_port, serving


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[web.Request], dict[str, str]]]:
    """A server that accepts only the token in ``valid["token"]`` and records what it was sent."""
    seen: list[web.Request] = []
    valid = {"token": "new"}

    async def serve(req: web.Request) -> web.Response:
        await req.read()
        seen.append(req)
        if req.headers.get("Authorization") != f"Bearer {valid['token']}":
            return web.json_response({"kind": "Status", "reason": "Unauthorized", "code": 401}, status=401)
        return web.json_response({"kind": "Node", "metadata": {"name": "n1"}})

    async with serving(serve, access_log=None) as url:
        yield url, seen, valid


@asynccontextmanager
async def token_file_client(url: str, token: Path, text: str) -> AsyncIterator[AiohttpRaw]:
    """The transport to ``url`` authenticating with the token file ``token``, which holds ``text``
    at first (closed at the end)."""
    await asyncio.to_thread(token.write_text, text)
    raw = AiohttpRaw(url, tls=None, auth=BearerTokenFileAuth(str(token)), timeout=5)
    try:
        yield raw
    finally:
        await raw.aclose()


async def test_a_rotated_token_file_is_read_again_after_a_401_and_the_call_goes_through(
    server: tuple[str, list[web.Request], dict[str, str]], tmp_path: Path
) -> None:
    url, seen, valid = server
    token = tmp_path / "token"
    async with token_file_client(url, token, "old\n") as raw:
        valid["token"] = "old"
        await raw.request("GET", "api/v1/nodes/n1")
        token.write_text("new\n")  # the kubelet rotated the projected token; the old one is refused
        valid["token"] = "new"
        body = await raw.request("PATCH", "api/v1/nodes/n1", body=b"{}", content_type="application/x")
    assert b'"n1"' in body
    assert [r.headers["Authorization"] for r in seen] == ["Bearer old", "Bearer old", "Bearer new"]
    assert seen[-1].headers["Content-Type"] == "application/x"


async def test_a_refused_credential_that_does_not_change_is_an_api_status(
    server: tuple[str, list[web.Request], dict[str, str]], tmp_path: Path
) -> None:
    url, seen, _ = server
    async with token_file_client(url, tmp_path / "token", "wrong") as raw:
        with pytest.raises(ApiStatus) as err:
            await raw.request("GET", "api/v1/pods", params={"fieldSelector": "spec.nodeName=n1"})
    assert err.value.code == 401 and err.value.reason == "Unauthorized"
    assert len(seen) == 1, "the same token is not sent twice"
    assert seen[0].query["fieldSelector"] == "spec.nodeName=n1"


async def test_no_server_is_a_link_error_not_a_crash() -> None:
    raw = AiohttpRaw(f"http://127.0.0.1:{closed_port()}", tls=None, auth=None, timeout=5)
    try:
        with pytest.raises(LinkError):
            await raw.request("GET", "api/v1/nodes")
        with pytest.raises(LinkError):
            async with raw.stream("api/v1/pods", {"watch": "true"}, idle_timeout=5):
                pass
    finally:
        await raw.aclose()


def test_the_proxy_comes_from_the_environment_once_and_no_proxy_is_honoured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "10.100.0.1,.svc")
    assert _env_proxy("https://api.example.com:6443") == "http://proxy.internal:3128"
    assert _env_proxy("https://10.100.0.1:443") is None
    assert _env_proxy("https://kubernetes.default.svc") is None
    monkeypatch.delenv("HTTPS_PROXY")
    assert _env_proxy("https://api.example.com:6443") is None


async def test_the_controller_stack_is_chosen_at_connect_with_its_own_in_flight_cap() -> None:
    config = KubeConfig.from_one(cluster=Cluster(server="https://api.example:6443"), user=User(token="t"))
    agent = connect(KubeSettings(), config=config)
    controller = connect(KubeSettings(), config=config, http="aiohttp")
    try:
        assert isinstance(agent.raw, HttpxRaw) and agent.in_flight.limit == MAX_IN_FLIGHT
        assert isinstance(controller.raw, AiohttpRaw) and controller.in_flight.limit == AIOHTTP_IN_FLIGHT
        assert AIOHTTP_IN_FLIGHT > MAX_IN_FLIGHT
        assert await controller.raw._header() == "Bearer t"  # the credentials lightkube read
    finally:
        await agent.close()
        await controller.close()


class CountingTokenAuth(httpx2.Auth):
    """Like a token file: "old" until it is re-read after a refusal, then "new"; counts the re-reads."""

    def __init__(self) -> None:
        self.token = "old"
        self.rereads = 0

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if response.status_code == 401:
            self.rereads += 1
            self.token = "new"
            request.headers["Authorization"] = f"Bearer {self.token}"
            yield request


async def test_calls_refused_together_read_the_credentials_again_once(
    server: tuple[str, list[web.Request], dict[str, str]],
) -> None:
    """An exec plugin must not run once per call in flight when a token expires under a burst."""
    url, seen, _ = server
    auth = CountingTokenAuth()
    raw = AiohttpRaw(url, tls=None, auth=auth, timeout=5)
    try:
        await raw._header()  # the first read, as the first call makes it
        bodies = await asyncio.gather(*(raw.request("GET", f"api/v1/nodes/n{i}") for i in range(10)))
    finally:
        await raw.aclose()
    assert all(b'"n1"' in body for body in bodies)
    assert auth.rereads == 1
    assert sum(r.headers["Authorization"] == "Bearer new" for r in seen) == 10
