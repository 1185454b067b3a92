"""`kubespot drain NODE` end to end: a real subprocess against kubesim over HTTP."""

from __future__ import annotations

import asyncio
import json
import sys

from kubespot.sim.kubesim.testing import deployment, pdb, pod

from .conftest import NODE, drain_env


async def _kubespot(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kubespot",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_cli_drains_the_node_and_reports_json() -> None:
    objects = [
        deployment("web", 2),
        pdb("web", selector={"matchLabels": {"app": "web"}}, max_unavailable=1),
        pod("bare", node=NODE, grace=1),
    ]
    async with drain_env(*objects, expect_pods=3) as env:
        kubeconfig = str(env.sim.kubeconfig_path)
        code, out, err = await _kubespot(
            "drain", NODE, "--deadline", "20s", "--dry-run", "--kubeconfig", kubeconfig
        )
        assert code == 0, err
        assert "would-evict" in out and "would-delete-bare" in out
        assert len(env.pods(NODE)) == 3

        code, out, err = await _kubespot(
            "drain",
            NODE,
            "--deadline",
            "20s",
            "--kubeconfig",
            kubeconfig,
            "--output",
            "json",
            "--safety-margin",
            "1",
        )
        assert code == 0, err
        summary = json.loads(out)
        assert summary["emptied"] is True
        assert summary["counts"] == {"evicted": 2, "deleted-bare": 1}
        assert env.pods(NODE) == []
        node = env.node()
        assert node is not None and node["spec"].get("unschedulable") is True


async def test_cli_exits_1_when_the_node_is_not_emptied() -> None:
    objects = [deployment("db", 1), pdb("db", selector={"matchLabels": {"app": "db"}}, min_available=1)]
    async with drain_env(*objects) as env:
        code, out, _ = await _kubespot(
            "drain",
            NODE,
            "--deadline",
            "2s",
            "--pdb-deadline-action",
            "keep",
            "--safety-margin",
            "0.5",
            "--kubeconfig",
            str(env.sim.kubeconfig_path),
        )
        assert code == 1
        assert "still-running" in out and "NOT emptied" in out


def test_bad_settings_from_the_environment_are_a_clear_error() -> None:
    """Settings come through the one loader: an NTH variable with a bad value names itself."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DELETE_LOCAL_DATA": "perhaps"}
    res = subprocess.run(
        [sys.executable, "-m", "kubespot", "drain", "some-node", "--kubeconfig", "/nonexistent"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert res.returncode == 2
    assert "DELETE_LOCAL_DATA" in res.stderr and "perhaps" in res.stderr
