"""Suite-wide fixtures and the order tests are handed to pytest-xdist's workers (scripts/test).

The suite mostly waits (subprocesses, simulated clocks, HTTP servers), so scripts/test runs it on more
workers than the machine has cores. Three rules keep that short and fair on 2 cores:

- Long tests first: the ``slow`` ones and the cold ``mypy`` run are dealt out before the rest, so no
  worker starts a minute-long test while the others are already idle at the end.
- CPU-bound tests share one worker (``CPU_BOUND``): the benchmark runs and the large generated cluster
  each keep a core busy for tens of seconds; two of them at once would leave nothing to the
  timing-sensitive e2e tests running beside them.
- Tests that share an expensive module- or package-scoped fixture stay on one worker (``SHARED_FIXTURE``).

The groups are made by the scheduler below (``--dist loadgroup``), from node ids: xdist's own
``xdist_group`` mark does nothing under pytest 9.2 (xdist 3.8 appends the group to
``item._nodeid``, which pytest 9.2 no longer reads). No rule changes what a test asserts, and no test
relies on running after another one: without xdist (``-n 0``) the tests simply run long ones first.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest_plugins = ["kubespot.sim.awssim.pytest_plugin"]

#: Tests that keep a core busy for many seconds each on 2 cores, by node id prefix: run one at a time,
#: all on the same worker.
CPU_BOUND = (
    "tests/integration/benchmarks/",
    "tests/unit/sim/kubesim/test_generator.py::test_large_cluster_counts",
)
#: Modules and packages whose tests share an expensive module- or package-scoped fixture, by node id
#: prefix: on one worker, the fixture is built once, not once per worker. The catalog from moto
#: (seconds of DescribeInstanceTypes paging); the provisioning e2e world (a controller that reads
#: the whole catalog, 10-30 s on a loaded machine).
SHARED_FIXTURE = ("tests/integration/aws/test_aws_catalog.py", "tests/e2e/provisioning/")
#: Long tests not marked ``slow`` (a cold ``mypy --strict`` takes minutes of one core).
LONG = ("tests/unit/test_code_quality.py::test_mypy_strict_on_src",)


def worker_group(nodeid: str) -> str:
    """The unit of work a worker takes whole: a group's name, else the test itself."""
    if nodeid.startswith(CPU_BOUND):
        return "cpu"
    return next((prefix for prefix in SHARED_FIXTURE if nodeid.startswith(prefix)), nodeid)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def long_first(item: pytest.Item) -> int:
        long = item.nodeid.startswith(CPU_BOUND + LONG) or item.get_closest_marker("slow") is not None
        return 0 if long else 1

    items.sort(key=long_first)  # stable: collection order within each class


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before xdist's own choice
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with ``worker_group`` as the scope: groups are dealt out first
        (largest first, xdist's default), then single tests in collection order, two queued per worker."""

        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return GroupScheduling(config, log)
