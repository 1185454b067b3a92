"""Suite-wide fixtures and the order tests are handed to pytest-xdist's workers (scripts/test).

The suite mostly waits (subprocesses, simulated clocks, HTTP servers), so scripts/test runs it on more
workers than the machine has cores. Two rules keep that short and fair on 2 cores:

- Long tests first: the ``slow`` ones and the cold ``mypy`` run are dealt out before the rest, so no
  worker starts a minute-long test while the others are already idle at the end.
- CPU-bound tests share one worker (``xdist_group("cpu")`` with ``--dist loadgroup``): the benchmark
  runs and the large generated clusters each keep a core busy for tens of seconds; two of them at
  once would leave nothing to the timing-sensitive e2e tests running beside them.

Neither rule changes what a test asserts, and no test relies on running after another one.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["kubespot.sim.awssim.pytest_plugin"]

#: Tests that keep a core busy for many seconds (measured: tens of seconds each on 2 cores), by node id
#: prefix. They run one at a time on the same worker.
CPU_BOUND = (
    "tests/integration/benchmarks/",
    "tests/unit/sim/kubesim/test_generator.py::test_large_cluster_counts",
)
#: Modules whose tests share an expensive module-scoped fixture (the catalog from moto: seconds of
#: DescribeInstanceTypes paging): kept on one worker, so the fixture is built once, not once per worker.
SHARED_FIXTURE = ("tests/integration/aws/test_aws_catalog.py",)
#: Long tests not marked ``slow`` (a cold ``mypy --strict`` takes minutes of one core).
LONG = ("tests/unit/test_code_quality.py::test_mypy_strict_on_src",)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(CPU_BOUND):
            item.add_marker(pytest.mark.xdist_group("cpu"))
        elif item.nodeid.startswith(SHARED_FIXTURE):
            item.add_marker(pytest.mark.xdist_group(item.path.stem))

    def long_first(item: pytest.Item) -> int:
        cpu = item.nodeid.startswith(CPU_BOUND)
        return 0 if cpu or item.nodeid.startswith(LONG) or item.get_closest_marker("slow") else 1

    items.sort(key=long_first)  # stable: collection order within each class
