"""Fixtures: one imdssim instance on loopback, on a fake clock shared with the source under test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from imds_sim_helpers import IID, SimTime

from kubespot.sim.imdssim import FakeClock, ImdsSim, SimInstance


@pytest.fixture
def sim_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sim_time(sim_clock: FakeClock) -> SimTime:
    return SimTime(sim_clock)


@pytest.fixture
async def sim(sim_clock: FakeClock) -> AsyncIterator[ImdsSim]:
    async with ImdsSim([SimInstance(IID, instance_type="m5.large")], clock=sim_clock) as s:
        yield s
