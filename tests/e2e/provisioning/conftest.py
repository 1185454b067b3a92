"""One provisioning world per test module (``support.provision_e2e.running``): its tests share the
controller process and bring their own NodePools and namespaces. A module sets ``CONTROLLER_ENV``
for settings of its own (a short registration timeout); its tests run on the module's event loop
(``pytestmark = pytest.mark.asyncio(loop_scope="module")``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from kubespot.sim.awssim import MotoServer
from support.provision_e2e import E2E, running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def e2e(
    request: pytest.FixtureRequest, moto_server: MotoServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[E2E]:
    env = getattr(request.module, "CONTROLLER_ENV", {})
    async with running(tmp_path_factory.mktemp("provision-world"), moto_server, env) as world:
        yield world
