"""What the chart tests share: finding helm, rendering the chart, and a kubesim cluster driven with
kubectl, on which the rendered objects are created.

kubesim serves no ``rbac.authorization.k8s.io`` (no authorization at all) and no Prometheus Operator
CRDs: ``STAND_IN_CRDS`` registers the RBAC kinds, PodMonitor and ServiceMonitor as
custom resources so that kubectl and helm can create the chart's objects as they would on a cluster.
Their content is checked by the render tests, not by kubesim.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubespot.sim.kubesim.app import KubeSim, ThreadedKubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import namespace

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "kubespot"
FIXTURES = ROOT / "tests" / "fixtures" / "helm"
EVERYTHING_ON = FIXTURES / "everything-on.yaml"
BOOTSTRAP_HELM = ROOT / ".tools" / "helm" / "package" / "bin" / "helm"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
NS = "kube-system"
RELEASE = "spot"


def find_helm() -> str:
    """helm from PATH or from scripts/bootstrap's .tools; the test fails (not skips) without it."""
    found = shutil.which("helm")
    if found:
        return found
    if BOOTSTRAP_HELM.is_file() and os.access(BOOTSTRAP_HELM, os.X_OK):
        return str(BOOTSTRAP_HELM)
    pytest.fail(f"helm not found on PATH nor at {BOOTSTRAP_HELM}: run scripts/bootstrap")


def run_helm(helm: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([helm, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)
    if check and res.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return res


def values_args(files: Sequence[Path], sets: Mapping[str, str] | None) -> list[str]:
    args: list[str] = []
    for f in files:
        args += ["-f", str(f)]
    for key, value in (sets or {}).items():
        args += ["--set", f"{key}={value}"]
    return args


def template_args(files: Sequence[Path], sets: Mapping[str, str] | None) -> list[str]:
    return ["template", RELEASE, str(CHART), "--namespace", NS, *values_args(files, sets)]


def render_text(helm: str, *files: Path, sets: Mapping[str, str] | None = None) -> str:
    return run_helm(helm, *template_args(files, sets)).stdout


def render(helm: str, *files: Path, sets: Mapping[str, str] | None = None) -> list[Obj]:
    return [d for d in yaml.safe_load_all(render_text(helm, *files, sets=sets)) if d]


def render_fails(helm: str, *files: Path, sets: Mapping[str, str] | None = None) -> str:
    res = run_helm(helm, *template_args(files, sets), check=False)
    assert res.returncode != 0, f"helm template should have failed for {files} {sets}"
    return res.stderr


def only(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {[o['metadata']['name'] for o in found]}"
    return found[0]


def kinds(objs: list[Obj]) -> list[str]:
    return sorted(o["kind"] for o in objs)


def crd(group: str, plural: str, kind: str, scope: str) -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


STAND_IN_CRDS = [
    crd("rbac.authorization.k8s.io", "clusterroles", "ClusterRole", "Cluster"),
    crd("rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding", "Cluster"),
    crd("rbac.authorization.k8s.io", "roles", "Role", "Namespaced"),
    crd("rbac.authorization.k8s.io", "rolebindings", "RoleBinding", "Namespaced"),
    crd("monitoring.coreos.com", "podmonitors", "PodMonitor", "Namespaced"),
    crd("monitoring.coreos.com", "servicemonitors", "ServiceMonitor", "Namespaced"),
]


class Cluster:
    """kubesim, and kubectl bound to it."""

    def __init__(self, sim: KubeSim) -> None:
        self.sim = sim
        self.kubeconfig = str(sim.kubeconfig_path)

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(
            [KUBECTL, "--kubeconfig", self.kubeconfig, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 0, f"kubectl {' '.join(args)} failed:\n{res.stdout}\n{res.stderr}"
        return res

    def create(self, objs: list[Obj]) -> str:
        return self.kubectl("create", "-f", "-", "--validate=false", stdin=yaml.safe_dump_all(objs)).stdout

    def get(self, kind: str, name: str, ns: str | None) -> Obj:
        args = ["get", kind, name, "-o", "yaml", *(["-n", ns] if ns else [])]
        got: Obj = yaml.safe_load(self.kubectl(*args).stdout)
        return got

    def pods(self, selector: str) -> list[Obj]:
        listing = yaml.safe_load(self.kubectl("get", "pods", "-n", NS, "-l", selector, "-o", "yaml").stdout)
        items: list[Obj] = listing["items"]
        return items


@contextmanager
def kubesim_cluster(tmp_path: Path, nodes: Sequence[Obj], cls: type[Cluster] = Cluster) -> Iterator[Cluster]:
    """kubesim with ``nodes`` and the stand-in CRDs, for kubectl and helm."""
    if not Path(KUBECTL).exists():
        pytest.fail(f"kubectl is required (expected at {KUBECTL})")
    runner = ThreadedKubeSim(
        objects=[namespace(NS), *nodes],
        controllers=ControllerConfig(pod_start_seconds=0.1, lease_renew_seconds=2.0, node_status_seconds=5.0),
        kubeconfig_path=tmp_path / "kubeconfig",
    )
    with runner as sim:
        cluster = cls(sim)
        cluster.create(STAND_IN_CRDS)
        yield cluster
