"""pytest fixtures for the moto stand-in.

Register from the root ``tests/conftest.py`` with
``pytest_plugins = ["kubespot.sim.awssim.pytest_plugin"]``. Fixtures:

``moto_server`` (session)
    one ``MotoServer`` for the whole test session, extensions installed, on a free port.
``aws`` (function)
    the same server after ``reset()``: every test starts with no queues, instances or groups.
``aws_env`` (function)
    ``aws`` plus ``AWS_ENDPOINT_URL``, fake credentials and region set in ``os.environ`` for the
    test's duration, for code that builds its AWS clients from the environment.

If ``KUBESPOT_ONDEMAND_PRICES`` names a price file, DescribeSpotPriceHistory answers from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    # Imported lazily at run time: the root conftest loads this plugin for every test run, and
    # moto + boto3 take about a second to import.
    from kubespot.sim.awssim.server import MotoServer

__all__ = ["aws", "aws_env", "moto_server"]


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """moto in server mode on 127.0.0.1, started once per test session."""
    from kubespot.sim.awssim.server import MotoServer

    with MotoServer() as server:
        yield server


@pytest.fixture
def aws(moto_server: MotoServer) -> MotoServer:
    """The session's moto server, reset so the test starts from an empty AWS account."""
    moto_server.reset()
    return moto_server


@pytest.fixture
def aws_env(aws: MotoServer, monkeypatch: pytest.MonkeyPatch) -> MotoServer:
    """``aws`` with the AWS SDK environment variables pointing at it."""
    for name, value in aws.env().items():
        monkeypatch.setenv(name, value)
    return aws
