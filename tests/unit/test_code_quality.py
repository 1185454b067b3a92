"""Lint and type checks run as tests, so the README's one test command covers them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which(tool, path=str(Path(sys.executable).parent))
    assert exe, f"{tool} is a dev dependency; run scripts/bootstrap"
    return subprocess.run([exe, *args], capture_output=True, text=True, cwd=ROOT)


def test_ruff_lint_is_clean() -> None:
    res = _run("ruff", "check", "src", "tests", "benchmarks")
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff_format_is_clean() -> None:
    res = _run("ruff", "format", "--check", "src", "tests", "benchmarks")
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_strict_on_src() -> None:
    res = _run("mypy", "--strict", "src")
    assert res.returncode == 0, res.stdout + res.stderr
