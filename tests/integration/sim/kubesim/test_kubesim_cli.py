"""`kubespot kubesim` as users run it: a process serving a loaded dump that kubectl can use."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "kubectl-dump-small.json"
KUBECTL = "/usr/bin/kubectl"


def _serve(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubespot", "kubesim", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(r"serving (\d+) objects at (http://\S+)", line)
        if m:
            return proc, m.group(2)
    raise AssertionError(f"kubesim did not start (exit {proc.wait()})")


def test_serves_a_kubectl_dump_and_exits_cleanly_on_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc, _url = _serve(["--from", str(FIXTURE), "--kubeconfig-out", str(kubeconfig)])
    try:
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        out = subprocess.run(
            [KUBECTL, "get", "nodes", "-o", "json"], capture_output=True, text=True, env=env, timeout=60
        )
        assert out.returncode == 0, out.stderr
        dump_nodes = [o for o in json.loads(FIXTURE.read_text())["items"] if o["kind"] == "Node"]
        names = sorted(n["metadata"]["name"] for n in json.loads(out.stdout)["items"])
        assert names == sorted(n["metadata"]["name"] for n in dump_nodes)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fault", "verb=explode"], "unknown verb"),
        (["--from", "/nonexistent/dump.json"], "dump.json"),
    ],
)
def test_bad_flags_are_a_clear_error(tmp_path: Path, args: list[str], message: str) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "kubespot", "kubesim", "--kubeconfig-out", str(tmp_path / "k"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert message in res.stderr
