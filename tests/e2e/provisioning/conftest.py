"""The provisioning world the tests of this directory share (``support.provision_e2e.running``).

Reading the instance type catalog (~1 400 types) costs the controller 10-30 s on a loaded 2-core
machine, so one world serves the whole package (``__init__.py`` makes it one: the fixture is torn
down after its last test, not at the end of the session) and its tests stay out of each other's way:

- each brings its own NodePools (labelled ``TEST_LABEL=<test>``) and namespace, and its pods select
  that label, so no test's pods land on another's nodes;
- a test that changes the market keeps to instance types no other test uses: ``FALLBACK_TYPES``
  (their spot pools are emptied) belong to the fallback test; the others use ``pw.INSTANCE_TYPES``
  without them (``SHARED_TYPES``);
- each test's Deployments are scaled to zero when it ends (``E2E.finish``), so nothing it left pending
  keeps the provisioner busy.

Tests run on the package's event loop: ``pytestmark = pytest.mark.asyncio(loop_scope="package")``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from kubespot.sim.awssim import MotoServer
from support.provision_e2e import E2E, SHARED_ENV, running


@pytest_asyncio.fixture(scope="package", loop_scope="package")
async def e2e(moto_server: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[E2E]:
    async with running(tmp_path_factory.mktemp("provision-world"), moto_server, SHARED_ENV) as world:
        yield world


@pytest_asyncio.fixture(autouse=True, loop_scope="package")
async def finish_workloads(e2e: E2E) -> AsyncIterator[None]:
    """After each test, its Deployments scaled to zero (``E2E.finish``), pass or fail."""
    yield
    await e2e.finish()
