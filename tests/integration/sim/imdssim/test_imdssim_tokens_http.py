"""IMDSv1 / IMDSv2 over HTTP: token PUT, TTL bounds, expiry, require-v2, and the refusals.

Sources: FACTS.md (token PUT with ``X-aws-ec2-metadata-token-ttl-seconds: 1..21600``, sent back as
``X-aws-ec2-metadata-token``; out-of-range TTL → 400; missing/expired token on an IMDSv2-only
instance → 401); the EC2 User Guide "Configure the instance metadata service options" (quoted in
JuliaCloud/AWS.jl PR #736: required mode → 401 without a valid token); kube2iam PR #279
(X-Forwarded-For on token requests → 403); lyft/metadataproxy issue #98 (the token path is PUT-only).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from kubespot.sim.imdssim import FakeClock, ImdsSim, SimInstance

A = "i-0aaaaaaaaaaaaaaa0"
B = "i-0bbbbbbbbbbbbbbb0"
TTL = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN = "X-aws-ec2-metadata-token"


@pytest.fixture
async def sim(clock: FakeClock) -> AsyncIterator[ImdsSim]:
    async with ImdsSim([SimInstance(A), SimInstance(B, private_ip="10.0.0.11")], clock=clock) as s:
        yield s


async def put_token(
    http: aiohttp.ClientSession, base: str, headers: dict[str, str]
) -> tuple[int, str, str | None]:
    async with http.put(base + "/latest/api/token", headers=headers) as resp:
        return resp.status, await resp.text(), resp.headers.get(TTL)


async def get_id(
    http: aiohttp.ClientSession, base: str, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    async with http.get(base + "/latest/meta-data/instance-id", headers=headers or {}) as resp:
        return resp.status, await resp.text()


async def test_v2_flow_returns_token_and_echoes_ttl(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    status, token, ttl = await put_token(http, sim.url, {TTL: "21600"})
    assert status == 200 and token and ttl == "21600"
    async with http.get(sim.url + "/latest/meta-data/instance-id", headers={TOKEN: token}) as resp:
        assert resp.status == 200 and await resp.text() == A
        assert resp.headers[TTL] == "21600"


async def test_v1_works_when_v2_not_required(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    assert await get_id(http, sim.url) == (200, A)


@pytest.mark.parametrize("ttl", ["0", "21601", "-1", "abc", "", "60.0"])
async def test_bad_ttl_is_400(sim: ImdsSim, http: aiohttp.ClientSession, ttl: str) -> None:
    status, body, _ = await put_token(http, sim.url, {TTL: ttl})
    assert status == 400 and "400 - Bad Request" in body


async def test_missing_ttl_is_400(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    assert (await put_token(http, sim.url, {}))[0] == 400


async def test_ttl_bounds_inclusive(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    assert (await put_token(http, sim.url, {TTL: "1"}))[0] == 200
    assert (await put_token(http, sim.url, {TTL: "21600"}))[0] == 200


async def test_forwarded_token_request_is_403(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    assert (await put_token(http, sim.url, {TTL: "60", "X-Forwarded-For": "203.0.113.9"}))[0] == 403


async def test_forwarded_get_with_token_is_403(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    _, token, _ = await put_token(http, sim.url, {TTL: "60"})
    assert (await get_id(http, sim.url, {TOKEN: token, "X-Forwarded-For": "203.0.113.9"}))[0] == 403


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
async def test_token_path_is_put_only(sim: ImdsSim, http: aiohttp.ClientSession, method: str) -> None:
    async with http.request(method, sim.url + "/latest/api/token", headers={TTL: "60"}) as resp:
        assert resp.status == 405
        assert "PUT" in resp.headers["Allow"]


async def test_invalid_token_is_401_even_when_v1_allowed(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    status, body = await get_id(http, sim.url, {TOKEN: "forged"})
    assert status == 401 and "401 - Unauthorized" in body


async def test_expired_token_is_401(sim: ImdsSim, http: aiohttp.ClientSession, clock: FakeClock) -> None:
    _, token, _ = await put_token(http, sim.url, {TTL: "5"})
    clock.advance(4)
    async with http.get(sim.url + "/latest/meta-data/instance-id", headers={TOKEN: token}) as resp:
        assert resp.status == 200 and resp.headers[TTL] == "1"
    clock.advance(1)
    assert (await get_id(http, sim.url, {TOKEN: token}))[0] == 401


async def test_require_v2_refuses_tokenless_reads(clock: FakeClock, http: aiohttp.ClientSession) -> None:
    async with ImdsSim([SimInstance(A)], clock=clock, require_v2=True) as sim:
        assert (await get_id(http, sim.url))[0] == 401
        _, token, _ = await put_token(http, sim.url, {TTL: "60"})
        assert await get_id(http, sim.url, {TOKEN: token}) == (200, A)


async def test_require_v2_per_instance(clock: FakeClock, http: aiohttp.ClientSession) -> None:
    async with ImdsSim(
        [SimInstance(A, require_v2=True), SimInstance(B, private_ip="10.0.0.11")], clock=clock
    ) as sim:
        assert (await get_id(http, sim.instance_url(A)))[0] == 401
        assert await get_id(http, sim.instance_url(B)) == (200, B)


async def test_tokens_are_per_instance(sim: ImdsSim, http: aiohttp.ClientSession) -> None:
    _, token_a, _ = await put_token(http, sim.instance_url(A), {TTL: "60"})
    assert await get_id(http, sim.instance_url(A), {TOKEN: token_a}) == (200, A)
    assert (await get_id(http, sim.instance_url(B), {TOKEN: token_a}))[0] == 401
