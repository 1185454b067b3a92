"""What the imdssim HTTP tests share: a fake clock for the simulator and one HTTP client session."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from kubespot.sim.imdssim import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
