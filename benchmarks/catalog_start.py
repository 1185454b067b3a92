"""The controller's start-up catalog read: what it costs before the NodePools are Ready.

Figures (seconds, wall clock, on whatever load the machine has; run before/after back to back):

- ``types_page_first`` / ``types_page_again``: awssim's DescribeInstanceTypes, every page of
  ``MaxResults=100`` (the whole catalog), mean per page, in a fresh process and once more
  (the client's XML parse included: real EC2 answers a page in ~0.1-0.3 s);
- ``ready_first``: a ``ProvisionWorld`` (kubesim, the sandbox's two NodePools, moto in this
  process, fresh) from ``start_controller`` to every NodePool and EC2NodeClass Ready;
- ``catalog_first``: from the same start to the controller's ``catalog refreshed`` log line (its
  first catalog read done: what the e2e harness waits for before a test may provision);
- ``catalog_restart``: the same after a controller restart against the same moto (moto's
  process-wide state warm, the controller's cold).

Usage: ``PYTHONPATH=src python benchmarks/catalog_start.py`` (one world, ~1 minute).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

from kubespot.sandbox.provision_world import ProvisionWorld
from kubespot.sandbox.timing import Timing
from kubespot.sim.awssim import MotoServer


def _types_pages(aws: MotoServer) -> float:
    ec2 = aws.client("ec2")
    pages, token, start = 0, None, time.perf_counter()
    while True:
        extra = {"NextToken": token} if token else {}
        token = ec2.describe_instance_types(MaxResults=100, **extra).get("NextToken")  # type: ignore[arg-type]
        pages += 1
        if not token:
            return (time.perf_counter() - start) / pages


def _refreshes(world: ProvisionWorld) -> int:
    """``catalog refreshed`` lines since the log's last controller start."""
    log = world.workdir / "controller.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    return text.rpartition("--- sandbox: controller start")[2].count("catalog refreshed")


async def _start(world: ProvisionWorld, out: dict[str, float], suffix: str) -> None:
    start = time.perf_counter()
    await world.start_controller()
    out[f"ready_{suffix}"] = time.perf_counter() - start
    # Polling the log file: the line is all the child process tells.
    while _refreshes(world) < 1:  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    out[f"catalog_{suffix}"] = time.perf_counter() - start


async def main() -> None:
    out: dict[str, float] = {}
    with MotoServer() as aws, tempfile.TemporaryDirectory() as tmp:
        world = ProvisionWorld(Path(tmp), Timing(25.0), aws)
        await world.start()
        try:
            await _start(world, out, "first")
            assert world.controller is not None
            await world.controller.stop()
            await _start(world, out, "restart")
        finally:
            await world.stop()
    with MotoServer() as aws:
        # moto's state is process-wide but the first world already paid for its catalog: these
        # figures are the second process-level pass unless run alone (--pages-only below).
        out["types_page_again"] = _types_pages(aws)
    print(json.dumps({k: round(v, 2) for k, v in out.items()}))


async def pages_only() -> None:
    with MotoServer() as aws:
        first = _types_pages(aws)
        again = _types_pages(aws)
    print(json.dumps({"types_page_first": round(first, 3), "types_page_again": round(again, 3)}))


if __name__ == "__main__":
    import sys

    asyncio.run(pages_only() if "--pages-only" in sys.argv else main())
