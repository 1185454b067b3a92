"""The IMDS client over real HTTP against imdssim: IMDSv2-only, v1 fallback, token expiry and 401."""

from __future__ import annotations

import pytest
from imds_sim_helpers import IID, CountingTransport, SimTime, client_for

from kubespot.sim.imdssim import FakeClock, Fault, ImdsSim, SimInstance
from kubespot.sources.imds import ImdsHttpError, ImdsTokenError, ImdsUnavailable, paths


async def test_identity_on_an_imdsv2_only_instance(sim_clock: FakeClock, sim_time: SimTime) -> None:
    transport = CountingTransport()
    instance = SimInstance(IID, instance_type="c5.xlarge", availability_zone="eu-west-1b")
    sim = ImdsSim([instance], clock=sim_clock, require_v2=True)
    async with sim:
        client = client_for(sim.instance_url(IID), sim_time, transport)
        async with client:
            ident = await client.identity()
            assert not client.using_v1
    assert (ident.instance_id, ident.instance_type) == (IID, "c5.xlarge")
    assert (ident.availability_zone, ident.region) == ("eu-west-1b", "eu-west-1")
    assert ident.private_ip == "10.0.0.10" and ident.life_cycle == "spot"
    assert ident.local_hostname.startswith("ip-10-0-0-10.") and ident.account_id
    assert transport.count("PUT") == 1
    assert all(token for m, _, token in transport.requests if m == "GET")


@pytest.mark.parametrize(
    "fault",
    [
        Fault(kind="token", status=404),
        Fault(kind="token", status=403),
        Fault(kind="timeout", path=paths.TOKEN, seconds=30),
    ],
    ids=["token-404", "token-403", "token-timeout"],
)
async def test_v1_fallback_when_v2_is_not_required(sim: ImdsSim, sim_time: SimTime, fault: Fault) -> None:
    sim.fleet.faults.add(fault)
    transport = CountingTransport()
    async with client_for(sim.url, sim_time, transport, request_timeout=0.3) as client:
        assert await client.get(paths.LIFE_CYCLE) == "spot"
        assert client.using_v1
        assert await client.get(paths.LIFE_CYCLE) == "spot"
    assert [token for m, _, token in transport.requests if m == "GET"] == [None, None]


async def test_no_fallback_when_v2_is_required(sim: ImdsSim, sim_time: SimTime) -> None:
    sim.fleet.faults.add(Fault(kind="token", status=503))
    async with client_for(sim.url, sim_time, require_v2=True) as client:
        with pytest.raises(ImdsTokenError):
            await client.get(paths.LIFE_CYCLE)


async def test_token_is_refreshed_before_it_expires(
    sim: ImdsSim, sim_clock: FakeClock, sim_time: SimTime
) -> None:
    transport = CountingTransport()
    async with client_for(sim.url, sim_time, transport, token_ttl=120, token_refresh_margin=10) as client:
        await client.get(paths.LIFE_CYCLE)
        sim_clock.advance(100)
        await client.get(paths.LIFE_CYCLE)
        assert transport.count("PUT") == 1
        sim_clock.advance(15)  # 5 s before expiry: inside the margin
        await client.get(paths.LIFE_CYCLE)
        assert transport.count("PUT") == 2
        sim_clock.advance(100)  # the first token is long dead; the second one still serves
        await client.get(paths.LIFE_CYCLE)
    gets = [token for m, _, token in transport.requests if m == "GET"]
    assert gets[0] == gets[1] != gets[2] == gets[3]
    assert transport.count("GET") == 4  # no 401 was ever needed


async def test_401_on_a_token_the_service_expired_gets_a_fresh_one(
    sim: ImdsSim, sim_clock: FakeClock, sim_time: SimTime
) -> None:
    # The client's clock stands still while the service's moves: it cannot see the expiry coming.
    class Frozen(SimTime):
        def monotonic(self) -> float:
            return 0.0

    transport = CountingTransport()
    async with client_for(
        sim.url, Frozen(sim_clock), transport, token_ttl=60, token_refresh_margin=5
    ) as client:
        await client.get(paths.LIFE_CYCLE)
        sim_clock.advance(61)
        assert await client.get(paths.LIFE_CYCLE) == "spot"
    assert transport.count("PUT") == 2 and transport.count("GET") == 3


async def test_5xx_after_retries_is_a_typed_error_then_recovers(sim: ImdsSim, sim_time: SimTime) -> None:
    sim.fleet.faults.add(
        Fault(kind="error", status=500, path="/latest/meta-data/instance-life-cycle", count=3)
    )
    async with client_for(sim.url, sim_time) as client:
        with pytest.raises(ImdsHttpError) as info:
            await client.get(paths.LIFE_CYCLE)
        assert info.value.status == 500
        assert await client.get(paths.LIFE_CYCLE) == "spot"


async def test_a_hung_read_times_out(sim: ImdsSim, sim_time: SimTime) -> None:
    sim.fleet.faults.add(Fault(kind="timeout", path=paths.LIFE_CYCLE, seconds=30))
    async with client_for(sim.url, sim_time, request_timeout=0.2, tries=2) as client:
        with pytest.raises(ImdsUnavailable):
            await client.get(paths.LIFE_CYCLE)
