"""The IMDS client on a mock transport: tokens, v1 fallback, retries with jittered backoff, errors."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx2
import pytest
from imds_fakes import FakeClock, FakeImds

from kubespot.config.imds import ImdsSettings
from kubespot.sources.imds import (
    ImdsClient,
    ImdsHttpError,
    ImdsParseError,
    ImdsTokenError,
    ImdsUnavailable,
    paths,
)
from kubespot.sources.imds.client import V1_RECHECK_SECONDS

ID = paths.LOCAL_HOSTNAME
HOST = "ip-10-0-0-10.ec2.internal"


def make(imds: FakeImds, clock: FakeClock, *, rolls: Sequence[float] = (), **settings: Any) -> ImdsClient:
    """A client on the fake IMDS; ``rolls`` are the jitter draws (0.5 once they run out)."""
    values = iter(rolls)
    return ImdsClient(
        ImdsSettings(url="http://imds.test", **settings),
        clock=clock,
        transport=imds.transport(),
        rng=lambda: next(values, 0.5),
    )


@pytest.fixture
async def client(imds: FakeImds, clock: FakeClock) -> AsyncIterator[ImdsClient]:
    imds.bodies[ID] = HOST
    async with make(imds, clock) as c:
        yield c


# --- tokens ----------------------------------------------------------------------------------------


async def test_token_is_fetched_once_and_sent_on_every_read(client: ImdsClient, imds: FakeImds) -> None:
    assert await client.get(ID) == HOST
    assert await client.get(ID) == HOST
    (put,) = imds.puts()
    assert put.url.path == paths.TOKEN and put.headers[paths.TOKEN_TTL_HEADER] == "21600"
    assert [r.headers[paths.TOKEN_HEADER] for r in imds.gets()] == ["tok-1", "tok-1"]
    assert not client.using_v1


async def test_concurrent_first_reads_share_one_token_fetch(client: ImdsClient, imds: FakeImds) -> None:
    assert await asyncio.gather(*(client.get(ID) for _ in range(5))) == [HOST] * 5
    assert len(imds.puts()) == 1


async def test_token_is_refreshed_a_margin_before_expiry(
    client: ImdsClient, imds: FakeImds, clock: FakeClock
) -> None:
    await client.get(ID)
    clock.advance(21600 - 60 - 1)  # just inside the refresh margin's start
    await client.get(ID)
    assert len(imds.puts()) == 1
    clock.advance(2)  # now within 60 s of expiry
    await client.get(ID)
    assert len(imds.puts()) == 2
    assert imds.gets()[-1].headers[paths.TOKEN_HEADER] == "tok-2"


async def test_a_shorter_granted_ttl_is_honoured(imds: FakeImds, clock: FakeClock) -> None:
    imds.bodies[ID] = HOST
    imds.ttl_granted = "120"
    async with make(imds, clock) as c:
        await c.get(ID)
        clock.advance(61)
        await c.get(ID)
    assert len(imds.puts()) == 2


async def test_401_gets_a_fresh_token_and_one_retry(client: ImdsClient, imds: FakeImds) -> None:
    await client.get(ID)
    imds.valid.clear()  # the service forgot the token (expired on its clock, or restarted)
    assert await client.get(ID) == HOST
    assert [r.headers.get(paths.TOKEN_HEADER) for r in imds.gets()] == ["tok-1", "tok-1", "tok-2"]


async def test_persistent_401_ends_in_an_error(imds: FakeImds, clock: FakeClock) -> None:
    imds.script[ID] = [httpx2.Response(401)] * 10
    async with make(imds, clock, tries=2) as c:
        with pytest.raises(ImdsHttpError) as info:
            await c.get(ID)
    assert info.value.status == 401
    assert len(imds.gets()) == 4  # 2 tries x (read + one retry with a fresh token)


# --- IMDSv1 fallback -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [httpx2.Response(404), httpx2.Response(403), httpx2.Response(503), httpx2.ReadTimeout("slow")],
    ids=["404", "403", "503", "timeout"],
)
async def test_falls_back_to_v1_when_no_token(
    imds: FakeImds, clock: FakeClock, failure: httpx2.Response | Exception
) -> None:
    imds.bodies[ID] = HOST
    imds.script["PUT"] = [failure]
    async with make(imds, clock) as c:
        assert await c.get(ID) == HOST
        assert c.using_v1
        assert await c.get(ID) == HOST
        assert len(imds.puts()) == 1  # the token endpoint is not hammered while v1 works
        clock.advance(V1_RECHECK_SECONDS)
        assert await c.get(ID) == HOST
        assert not c.using_v1
    assert [r.headers.get(paths.TOKEN_HEADER) for r in imds.gets()] == [None, None, "tok-1"]


async def test_v1_refused_with_401_tries_the_token_endpoint_at_once(imds: FakeImds, clock: FakeClock) -> None:
    imds.bodies[ID] = HOST
    imds.script["PUT"] = [httpx2.Response(503)]
    async with make(imds, clock) as c:
        await c.get(ID)
        assert c.using_v1
        imds.require_v2 = True  # the instance was switched to IMDSv2-only
        assert await c.get(ID) == HOST
    assert [r.headers.get(paths.TOKEN_HEADER) for r in imds.gets()] == [None, None, "tok-1"]


async def test_require_v2_never_reads_without_a_token(imds: FakeImds, clock: FakeClock) -> None:
    imds.bodies[ID] = HOST
    imds.token_status = 404
    async with make(imds, clock, require_v2=True, tries=3) as c:
        with pytest.raises(ImdsTokenError, match="IMDSv2 is required"):
            await c.get(ID)
    assert imds.gets() == [] and len(imds.puts()) == 3
    assert len(clock.sleeps) == 2


# --- retries and errors ----------------------------------------------------------------------------


async def test_backoff_is_exponential_with_full_jitter_and_capped(imds: FakeImds, clock: FakeClock) -> None:
    imds.bodies[ID] = HOST
    imds.script[ID] = [httpx2.Response(500)] * 4
    c = make(imds, clock, tries=5, retry_backoff_base=0.1, retry_backoff_cap=0.3, rolls=[1.0, 0.5, 1.0, 0.25])
    async with c:
        assert await c.get(ID) == HOST
    # ceilings 0.1, 0.2, 0.4→0.3 (cap), 0.8→0.3; each scaled by the random draw
    assert clock.sleeps == pytest.approx([0.1, 0.1, 0.3, 0.075])


async def test_5xx_after_every_try_is_a_typed_error(imds: FakeImds, clock: FakeClock) -> None:
    imds.script[ID] = [httpx2.Response(503)] * 3
    async with make(imds, clock) as c:
        with pytest.raises(ImdsHttpError) as info:
            await c.get(ID)
    assert info.value.status == 503 and info.value.path == ID
    assert len(imds.gets()) == 3 and len(clock.sleeps) == 2


async def test_429_is_retried(imds: FakeImds, clock: FakeClock) -> None:
    imds.bodies[ID] = HOST
    imds.script[ID] = [httpx2.Response(429)]
    async with make(imds, clock) as c:
        assert await c.get(ID) == HOST


async def test_404_is_absent_not_an_error_and_not_retried(client: ImdsClient, imds: FakeImds) -> None:
    assert await client.get(paths.SPOT_INSTANCE_ACTION) is None
    assert len(imds.gets(paths.SPOT_INSTANCE_ACTION)) == 1


async def test_other_4xx_is_an_error_at_once(client: ImdsClient, imds: FakeImds) -> None:
    imds.script[ID] = [httpx2.Response(400)]
    with pytest.raises(ImdsHttpError):
        await client.get(ID)
    assert len(imds.gets()) == 1


async def test_connection_errors_become_imds_unavailable(imds: FakeImds, clock: FakeClock) -> None:
    imds.script["PUT"] = [httpx2.ConnectError("refused")]
    imds.script[ID] = [httpx2.ConnectError("refused")] * 3
    async with make(imds, clock) as c:
        with pytest.raises(ImdsUnavailable, match="ConnectError"):
            await c.get(ID)
        assert c.last_contact is None


async def test_whole_request_timeout(clock: FakeClock) -> None:
    async def hang(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(5)
        return httpx2.Response(200, text="late")

    settings = ImdsSettings(url="http://imds.test", request_timeout=0.05, tries=2)
    async with ImdsClient(settings, clock=clock, transport=httpx2.MockTransport(hang)) as c:
        with pytest.raises(ImdsUnavailable, match=re.escape("no answer within 0.05 s")):
            await c.get(ID)


async def test_a_body_that_is_not_utf8_is_a_parse_error(client: ImdsClient, imds: FakeImds) -> None:
    imds.script[ID] = [httpx2.Response(200, content=b"\xff\xfe\x00garbage")]
    with pytest.raises(ImdsParseError, match="not UTF-8"):
        await client.get(ID)


async def test_last_contact_counts_any_answer(client: ImdsClient, clock: FakeClock) -> None:
    assert client.last_contact is None
    clock.advance(7)
    assert await client.get(paths.REBALANCE) is None
    assert client.last_contact == clock.now()


async def test_path_prefix_in_the_url_is_kept(imds: FakeImds, clock: FakeClock) -> None:
    imds.bodies["/i-0123456789abcdef0" + ID] = HOST
    settings = ImdsSettings(url="http://imds.test/i-0123456789abcdef0/")
    async with ImdsClient(settings, clock=clock, transport=imds.transport()) as c:
        assert await c.get(ID) == HOST


# --- identity --------------------------------------------------------------------------------------


async def test_identity(client: ImdsClient, imds: FakeImds) -> None:
    imds.bodies[paths.IDENTITY_DOCUMENT] = json.dumps(
        {
            "accountId": "123456789012",
            "availabilityZone": "us-east-1a",
            "instanceId": "i-0123456789abcdef0",
            "instanceType": "m5.large",
            "privateIp": "10.0.0.10",
            "region": "us-east-1",
        },
        indent=2,
    )
    imds.bodies[paths.LIFE_CYCLE] = "spot"
    ident = await client.identity()
    assert ident.instance_id == "i-0123456789abcdef0" and ident.instance_type == "m5.large"
    assert ident.availability_zone == "us-east-1a" and ident.region == "us-east-1"
    assert ident.account_id == "123456789012" and ident.private_ip == "10.0.0.10"
    assert ident.local_hostname == HOST and ident.life_cycle == "spot"


async def test_identity_missing_is_an_error(client: ImdsClient) -> None:
    with pytest.raises(ImdsHttpError):
        await client.identity()
