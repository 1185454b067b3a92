"""The provisioning world the tests of this directory share (``support.provision_e2e.running``).

Reading the instance type catalog (~1 400 types) costs the controller 10-30 s on a loaded 2-core
machine, so one world serves the whole package (``__init__.py`` makes it one: the fixture is torn
down after its last test, not at the end of the session) and its tests stay out of each other's way:

- each brings its own NodePools (labelled ``TEST_LABEL=<test>``) and namespace, and its pods select
  that label, so no test's pods land on another's nodes;
- a test that changes the market keeps to instance types no other test uses: ``FALLBACK_TYPES``
  (their spot pools are emptied) belong to the fallback test; the others use ``pw.INSTANCE_TYPES``
  without them (``SHARED_TYPES``); the spot reclaims of the pre-spin and interruption tests take
  back whole pools, so those tests keep to types of their own (``m6i``/``c6i``/``m6a``);
- each test's Deployments are scaled to zero when it ends (``E2E.finish``), so nothing it left pending
  keeps the provisioner busy;
- a test that restarts the controller with other settings (a dry-run twin: ``E2E.restarted``) is
  marked ``RESTARTS`` and runs after the others; each test starts with the package's settings
  (``E2E.as_package``: a restart only after such a test).

Tests run on the package's event loop: ``pytestmark = pytest.mark.asyncio(loop_scope="package")``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from kubespot.sim.awssim import MotoServer
from support.provision_e2e import E2E, RESTARTS, SHARED_ENV, running

HERE = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{RESTARTS}: restarts the shared world's controller (runs last)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """This package's ``RESTARTS`` tests after its other tests (the order of the rest kept)."""
    ours = [i for i, item in enumerate(items) if HERE in item.path.parents]
    if not ours:
        return
    block = [items[i] for i in ours]
    block = [t for t in block if t.get_closest_marker(RESTARTS) is None] + [
        t for t in block if t.get_closest_marker(RESTARTS) is not None
    ]
    for i, item in zip(ours, block, strict=True):
        items[i] = item


@pytest_asyncio.fixture(scope="package", loop_scope="package")
async def e2e(moto_server: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[E2E]:
    async with running(tmp_path_factory.mktemp("provision-world"), moto_server, SHARED_ENV) as world:
        yield world


@pytest_asyncio.fixture(autouse=True, loop_scope="package")
async def finish_workloads(e2e: E2E) -> AsyncIterator[None]:
    """Before each test, the controller with the package's settings (``E2E.as_package``); after
    it, its Deployments scaled to zero (``E2E.finish``), pass or fail."""
    await e2e.as_package()
    yield
    await e2e.finish()
