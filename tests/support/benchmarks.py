"""Running a benchmark script as the tests of ``benchmarks/`` do: its own process, tiny sizes, and
one JSON object on stdout (the benchmarks' contract); the figures are not judged here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def run_benchmark(script: str, *args: str, timeout: float = 240) -> dict[str, object]:
    """The one JSON object ``benchmarks/<script>`` printed (stderr's tail on failure)."""
    res = subprocess.run(
        [sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=timeout
    )
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, res.stdout
    return dict(json.loads(lines[0]))
