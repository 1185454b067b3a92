"""What a fresh interpreter loads: the tests that keep the per-node agent light (no AWS SDK, no
pydantic, no jinja2 unless asked for) run the code in a process of its own, where no other test has
imported anything yet."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable


def loaded_by(code: str, modules: Iterable[str]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has loaded once ``code`` has run (which must not
    fail: its own asserts count too), sorted."""
    probe = f"{code}\nimport sys\nprint(sorted(set({sorted(modules)!r}) & set(sys.modules)))"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    loaded: list[str] = ast.literal_eval(res.stdout.strip().splitlines()[-1])
    return loaded
