"""``settle_after_startup``: the live heap frozen, the controller's thresholds applied; and the
controller's periodic full collection.

The settling runs in a child interpreter: freezing and new thresholds are process-wide and would
change how the rest of the test session collects."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import weakref

import pytest

from kubespot.process.collector import BURST_THRESHOLDS, collect_periodically

PROBE = """
import gc, json
from kubespot.process.collector import BURST_THRESHOLDS, settle_after_startup
kept = [[i] for i in range(1000)]            # long-lived state, e.g. a synced index
before = gc.get_threshold()
settle_after_startup({arg})
print(json.dumps({{"before": before, "after": gc.get_threshold(), "frozen": gc.get_freeze_count()}}))
"""


def probe(arg: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(arg=arg)], capture_output=True, text=True, check=True, timeout=60
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_the_controller_s_thresholds_apply_and_the_live_heap_is_frozen() -> None:
    got = probe("thresholds=BURST_THRESHOLDS")
    assert got["before"] == [700, 10, 10]  # CPython's defaults, which a burst outpaces
    assert got["after"] == list(BURST_THRESHOLDS)
    assert BURST_THRESHOLDS[0] > 700 and BURST_THRESHOLDS[2] > 10
    # Everything alive (modules, the 1 000 kept lists) is out of every later collection's way.
    assert isinstance(got["frozen"], int) and got["frozen"] > 1000


def test_without_thresholds_the_defaults_stay() -> None:
    got = probe("")
    assert got["after"] == got["before"] == [700, 10, 10]
    assert isinstance(got["frozen"], int) and got["frozen"] > 1000


async def test_the_periodic_full_collection_frees_what_the_thresholds_leave() -> None:
    """With the controller's thresholds a burst's cyclic garbage that reached the old generation
    would wait ~10^8 allocations; ``collect_periodically`` frees it every period instead."""

    class Drain:
        me: object

    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) > 1:
            raise asyncio.CancelledError

    gc.disable()  # nothing but the periodic collection may free the cycle here
    try:
        drain = Drain()
        drain.me = drain
        left = weakref.ref(drain)
        del drain
        assert left() is not None
        with pytest.raises(asyncio.CancelledError):
            await collect_periodically(sleep, seconds=7.0)
        assert left() is None
        assert sleeps == [7.0, 7.0]
    finally:
        gc.enable()
