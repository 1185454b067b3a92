"""The layering rules of docs/architecture.md, checked on every module (including future ones).

import-linter checks the contracts in `.importlinter`; the AST walk below enforces the rules that
must hold for packages that do not exist yet, so a new package cannot slip past them.
"""

from __future__ import annotations

import ast
import functools
import shutil
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "kubespot"

#: Third-party packages only one product package may import (DESIGN.md: only kube/ talks to the
#: Kubernetes client library, only aws/ to the AWS SDK).
ADAPTER_ONLY = {
    "lightkube": "kube",
    "kubernetes": "kube",
    "boto3": "aws",
    "botocore": "aws",
    "aiobotocore": "aws",
    # The controller's HTTP stack for pod and node calls (kube/aiohttp_transport.py).
    "aiohttp": "kube",
}
#: Never in product code: these are simulator and test dependencies.
SIM_ONLY = ("moto",)
#: The LP solver belongs to the provisioner's packing alone, and the numpy it brings to the scheduling
#: simulation (the packing's pricing, the offers' vector tests), so nothing else (above all the
#: per-node agent) can come to load them (docs/architecture.md, dependencies). A package owns its
#: modules.
SOLVER_ONLY = {"highspy": "kubespot.scheduling.lp_solver", "numpy": "kubespot.scheduling"}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    pkg = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
    if path.name == "__init__.py":
        pkg = pkg.rsplit(".", 1)[0] + "._"
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: -node.level]
                module = ".".join([*base, node.module] if node.module else base)
            elif node.module:
                module = node.module
            else:
                continue
            out.append(module)
            # ``from kubespot.controllers import response`` imports a module too: name it.
            out.extend(f"{module}.{alias.name}" for alias in node.names)
    return out


@functools.cache  # parsed once per process: the sources do not change during a run
def _modules() -> tuple[tuple[Path, str, list[str]], ...]:
    rows = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).parts
        rows.append((path, rel[0] if len(rel) > 1 else path.stem, _imports(path)))
    return tuple(rows)


def test_simulators_and_product_never_import_each_other() -> None:
    bad = []
    for path, top, imports in _modules():
        for name in imports:
            if top == "sim" and name.startswith("kubespot.") and not name.startswith("kubespot.sim"):
                bad.append(f"{path}: simulator imports product module {name}")
            if top not in ("sim", "cli", "sandbox") and name.startswith("kubespot.sim"):
                bad.append(f"{path}: product imports simulator module {name}")
    assert not bad, "\n".join(bad)


def test_adapter_libraries_stay_in_their_adapter() -> None:
    bad = []
    for path, top, imports in _modules():
        if top in ("sim", "sandbox"):
            # The simulators, and the sandbox that drives them as a test would (it sets worlds up
            # over the simulators' own HTTP APIs), are not product code talking to real services.
            continue
        for name in imports:
            root = name.split(".")[0]
            if root in ADAPTER_ONLY and top != ADAPTER_ONLY[root]:
                bad.append(f"{path}: {root} may only be imported in kubespot.{ADAPTER_ONLY[root]}")
            if root in SIM_ONLY:
                bad.append(f"{path}: {root} is a simulator dependency, not for product code")
    assert not bad, "\n".join(bad)


def test_the_lp_solver_stays_in_the_packing_module() -> None:
    bad = []
    for path, top, imports in _modules():
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        for name in imports:
            owner = SOLVER_ONLY.get(name.split(".")[0])
            if top != "sim" and owner is not None and not (module == owner or module.startswith(owner + ".")):
                bad.append(f"{path}: {name} may only be imported in {owner}")
    assert not bad, "\n".join(bad)


def test_model_imports_nothing_of_ours() -> None:
    bad = [
        f"{p}: {n}"
        for p, top, imps in _modules()
        if top == "model"
        for n in imps
        if n.startswith("kubespot.") and not n.startswith("kubespot.model")
    ]
    assert not bad, "\n".join(bad)


def test_sources_and_actions_never_import_each_other() -> None:
    bad = []
    for path, top, imports in _modules():
        for name in imports:
            if top == "sources" and name.startswith("kubespot.actions"):
                bad.append(f"{path}: {name}")
            if top == "actions" and name.startswith("kubespot.sources"):
                bad.append(f"{path}: {name}")
    assert not bad, "\n".join(bad)


def _subpackage(path: Path) -> str | None:
    """The controller a module belongs to (``controllers/<concern>/...``), if any."""
    rel = path.relative_to(SRC).parts
    return rel[1] if rel[0] == "controllers" and len(rel) > 2 else None


def test_controllers_never_import_each_other() -> None:
    """One folder per concern, wired by the operator: a new controller cannot lean on another."""
    bad = []
    for path, _top, imports in _modules():
        mine = _subpackage(path)
        if mine is None:
            continue
        for name in imports:
            parts = name.split(".")
            if parts[:2] == ["kubespot", "controllers"] and len(parts) > 2 and parts[2] != mine:
                bad.append(f"{path}: {name}")
    assert not bad, "\n".join(bad)


def test_the_agent_never_imports_the_operator_or_its_controllers() -> None:
    bad = [
        f"{p}: {n}"
        for p, top, imps in _modules()
        if top == "agent"
        for n in imps
        if n.startswith(("kubespot.operator", "kubespot.controllers"))
    ]
    assert not bad, "\n".join(bad)


#: The pure cores below the adapters: the node records' codecs, and those the provisioner adds
#: (scheduling simulation, the cloud interface with its fake): time and data in, no I/O, so only the
#: layers below them.
PURE_CORES = ("records", "scheduling", "cloud")
#: What a pure core may import besides config and model: the cloud interface speaks in the
#: scheduling core's types (instance types, NodePools), as Karpenter's cloudprovider does.
PURE_CORE_DEPENDENCIES = {"cloud": ("scheduling",)}


def test_pure_cores_import_only_config_and_model() -> None:
    bad = [
        f"{p}: {n}"
        for p, top, imps in _modules()
        if top in PURE_CORES
        for n in imps
        if n.startswith("kubespot.")
        and n.split(".")[1] not in (top, "config", "model", *PURE_CORE_DEPENDENCIES.get(top, ()))
    ]
    assert not bad, "\n".join(bad)


def test_import_linter_contracts_hold() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is a dev dependency; run scripts/bootstrap"
    res = subprocess.run([exe, "--no-cache"], capture_output=True, text=True, cwd=SRC.parents[1])
    assert res.returncode == 0, res.stdout + res.stderr
