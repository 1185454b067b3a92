"""Fixtures for the node joiner tests: ``world`` and ``world_with`` (see joiner_world.py)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from joiner_world import World

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.app import KubeSim
from support.kubesim_timings import FAST_CONTROLLERS


@pytest.fixture
async def world_with(
    aws: MotoServer,
) -> AsyncIterator[Callable[..., contextlib.AbstractAsyncContextManager[World]]]:
    """``async with world_with(kubelet=False) as world``: the fast kubesim config, changed."""

    @contextlib.asynccontextmanager
    async def make(**changes: Any) -> AsyncIterator[World]:
        async with KubeSim(controllers=dataclasses.replace(FAST_CONTROLLERS, **changes)) as sim:
            world = World(aws, sim)
            try:
                yield world
            finally:
                await world.close()

    yield make


@pytest.fixture
async def world(
    world_with: Callable[..., contextlib.AbstractAsyncContextManager[World]],
) -> AsyncIterator[World]:
    async with world_with() as w:
        yield w
