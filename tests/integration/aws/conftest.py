"""The AWS adapter's clients on moto (``aws_env``, from kubespot.sim.awssim's pytest plugin), built
as the controller builds them: settings, and credentials from the environment."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kubespot.aws import AwsClients
from kubespot.config.aws import AwsSettings
from kubespot.sim.awssim import MotoServer


@pytest.fixture
async def clients(aws_env: MotoServer) -> AsyncIterator[AwsClients]:
    """One attempt per call: a failure shows at once (a module testing retries overrides it)."""
    settings = AwsSettings(region=aws_env.region, endpoint_url=aws_env.endpoint_url, max_attempts=1)
    async with AwsClients(settings) as c:
        yield c
