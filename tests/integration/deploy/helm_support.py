"""What the chart tests share: finding helm, rendering the chart, and a kubesim cluster driven with
kubectl, on which the rendered objects are created.

kubesim serves no ``rbac.authorization.k8s.io`` (no authorization at all) and no Prometheus Operator
CRDs: ``STAND_IN_CRDS`` registers the RBAC kinds, PodMonitor and ServiceMonitor as
custom resources so that kubectl and helm can create the chart's objects as they would on a cluster.
Their content is checked by the render tests, not by kubesim.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
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


def template_args(
    files: Sequence[Path], sets: Mapping[str, str] | None, kube: str | None = None
) -> list[str]:
    """``helm template`` of the release; ``kube`` is the cluster version the chart is rendered for
    (``--kube-version``, which the chart's ``Capabilities`` checks read), helm's default if None."""
    version = ["--kube-version", kube] if kube else []
    return ["template", RELEASE, str(CHART), "--namespace", NS, *values_args(files, sets), *version]


def render_text(
    helm: str, *files: Path, sets: Mapping[str, str] | None = None, kube: str | None = None
) -> str:
    return run_helm(helm, *template_args(files, sets, kube)).stdout


def render(
    helm: str, *files: Path, sets: Mapping[str, str] | None = None, kube: str | None = None
) -> list[Obj]:
    return [d for d in yaml.safe_load_all(render_text(helm, *files, sets=sets, kube=kube)) if d]


def render_fails(
    helm: str, *files: Path, sets: Mapping[str, str] | None = None, kube: str | None = None
) -> str:
    res = run_helm(helm, *template_args(files, sets, kube), check=False)
    assert res.returncode != 0, f"helm template should have failed for {files} {sets}"
    return res.stderr


def only(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {[o['metadata']['name'] for o in found]}"
    return found[0]


def kinds(objs: list[Obj]) -> list[str]:
    return sorted(o["kind"] for o in objs)


def one_container(pod_spec: Obj) -> Obj:
    """The pod's only container (the workload has exactly one)."""
    containers = pod_spec["containers"]
    assert len(containers) == 1
    c: Obj = containers[0]
    return c


def env_by_name(container: Obj) -> dict[str, Obj]:
    """The container's env entries by name; no name may appear twice."""
    entries = container["env"]
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names)), f"duplicate env vars: {names}"
    return {e["name"]: e for e in entries}


def plain_values(env: Mapping[str, Obj]) -> dict[str, str]:
    """The env entries with a literal ``value`` (no ``valueFrom``)."""
    return {name: e["value"] for name, e in env.items() if "value" in e}


@dataclass(frozen=True)
class Workload:
    """One workload the chart renders (the agent's DaemonSet, the controller's Deployment), read from
    the rendered objects: its pod spec, its one container, and that container's environment."""

    kind: str
    name: str | None = None

    def pod_spec(self, objs: list[Obj]) -> Obj:
        spec: Obj = only(objs, self.kind, self.name)["spec"]["template"]["spec"]
        return spec

    def container(self, objs: list[Obj]) -> Obj:
        return one_container(self.pod_spec(objs))

    def env(self, objs: list[Obj]) -> dict[str, Obj]:
        return env_by_name(self.container(objs))

    def plain_env(self, objs: list[Obj]) -> dict[str, str]:
        return plain_values(self.env(objs))


def resolved_env(objs: list[Obj], env: Mapping[str, Obj], field: Callable[[str, Obj], str]) -> dict[str, str]:
    """The environment the process would see: literal values as they are, Downward API entries from
    ``field(name, entry)``, secretKeyRefs read (and decoded) from the rendered Secrets."""
    secrets = {o["metadata"]["name"]: o.get("data", {}) for o in objs if o["kind"] == "Secret"}
    out: dict[str, str] = {}
    for name, e in env.items():
        if "value" in e:
            out[name] = e["value"]
        elif "fieldRef" in e["valueFrom"]:
            out[name] = field(name, e)
        else:
            ref = e["valueFrom"]["secretKeyRef"]
            out[name] = base64.b64decode(secrets[ref["name"]][ref["key"]]).decode()
    return out


def helm_install(helm: str, cluster: Cluster, values: Path) -> subprocess.CompletedProcess[str]:
    """A real ``helm install`` of the chart with ``values`` on ``cluster`` (client-side apply; kubesim
    has no OpenAPI, so no schema validation)."""
    return run_helm(
        helm,
        "--kubeconfig",
        cluster.kubeconfig,
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        NS,
        "--disable-openapi-validation",
        "-f",
        str(values),
    )


def assert_created(cluster: Cluster, objs: list[Obj], out: str) -> None:
    """Every rendered object exists on ``cluster`` under its kind and name, and kubectl said so in ``out``."""
    for obj in objs:
        ns = obj["metadata"].get("namespace")
        got = cluster.get(obj["kind"], obj["metadata"]["name"], ns)
        assert got["kind"] == obj["kind"]
        assert got["metadata"]["name"] == obj["metadata"]["name"]
        assert f"{obj['metadata']['name']} created" in out


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
