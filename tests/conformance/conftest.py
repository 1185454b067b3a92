"""Fixtures for conformance tests: a kubesim in a background thread, driven by clients nobody here wrote."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kubespot.sim.kubesim.app import KubeSim, ThreadedKubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


@dataclass
class Cluster:
    """A running kubesim plus a kubectl bound to it."""

    sim: KubeSim
    runner: ThreadedKubeSim
    kubeconfig: Path

    def kubectl(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        res = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
            )
        return res


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    if not Path(KUBECTL).exists():
        pytest.fail("kubectl is required for conformance tests (expected at /usr/bin/kubectl)")
    runner = ThreadedKubeSim(
        nodes=4,
        pods_per_node=5,
        seed=7,
        controllers=ControllerConfig(pod_start_seconds=0.2, lease_renew_seconds=2.0, node_status_seconds=5.0),
        kubeconfig_path=tmp_path / "kubeconfig",
    )
    with runner as sim:
        yield Cluster(sim, runner, sim.kubeconfig_path)
