"""``settle_after_startup``: the live heap frozen, the controller's thresholds applied.

Run in a child interpreter: freezing and new thresholds are process-wide and would change how the
rest of the test session collects."""

from __future__ import annotations

import json
import subprocess
import sys

from kubespot.observability.collector import BURST_THRESHOLDS

PROBE = """
import gc, json
from kubespot.observability.collector import BURST_THRESHOLDS, settle_after_startup
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
