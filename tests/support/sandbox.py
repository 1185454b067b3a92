"""``kubespot sandbox`` run as a user runs it (a subprocess printing one JSON summary), and the
processes a run may have left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def sandbox_command(workdir: Path, *args: str) -> list[str]:
    """The command line of ``kubespot sandbox --json`` in ``workdir``, with ``args``."""
    return [sys.executable, "-m", "kubespot", "sandbox", "--json", "--workdir", str(workdir), *args]


def run_sandbox(workdir: Path, *args: str, timeout: float) -> tuple[int, dict[str, Any], str]:
    """(exit code, the one-line JSON summary, stderr) of one run."""
    res = subprocess.run(sandbox_command(workdir, *args), capture_output=True, text=True, timeout=timeout)
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"stdout: {res.stdout[-3000:]}\nstderr: {res.stderr[-3000:]}"
    return res.returncode, json.loads(lines[0]), res.stderr


def left_running(workdir: Path) -> list[int]:
    """Processes still running with this run's settings (the agents and controller name the workdir)."""
    left = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if str(workdir).encode() in (proc / "environ").read_bytes():
                left.append(int(proc.name))
        except OSError:
            continue
    return left
