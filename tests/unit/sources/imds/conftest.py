"""Fixtures for the IMDS source's unit tests."""

from __future__ import annotations

import pytest
from imds_fakes import FakeClock, FakeImds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def imds() -> FakeImds:
    return FakeImds()
