"""The chart's Karpenter CRDs: generated and up to date, outside ``helm template``'s objects, served
by kubesim over HTTP, and declaring every field the v1 examples use (a real API server prunes fields
its schema does not declare) with the defaults kubespot's parser applies.

Sources: apiextensions.k8s.io/v1 structural schemas and pruning
(k8s.io/apiextensions-apiserver ``pkg/apiserver/schema/pruning``: unknown fields are dropped unless
``x-kubernetes-preserve-unknown-fields``), helm's crds/ folder (installed before the templates, never
upgraded, skipped with ``--skip-crds``, left out of ``helm template`` without ``--include-crds``),
and Karpenter's CRDs (kubernetes-sigs/karpenter ``pkg/apis/crds/karpenter.sh_nodepools.yaml``,
aws/karpenter-provider-aws ``pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml``) for names,
scope, subresources and defaults.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from helm_support import CHART, ROOT, find_helm, kubesim_cluster, run_helm

from kubespot.scheduling.api.load import load
from kubespot.scheduling.api.nodeclass import MetadataOptions
from kubespot.scheduling.api.nodepool import DEFAULT_BUDGETS, DEFAULT_CONSOLIDATE_AFTER
from kubespot.scheduling.api.template import DEFAULT_EXPIRE_AFTER
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from support.crd_schema import crd_schema, schema_problems

Obj = dict[str, Any]
CRDS = CHART / "crds"
EXAMPLES = ROOT / "tests" / "data" / "karpenter" / "v1"
PLURALS = {"NodePool": "nodepools", "NodeClaim": "nodeclaims", "EC2NodeClass": "ec2nodeclasses"}


@functools.cache
def _crd_text() -> tuple[str, ...]:
    return tuple(path.read_text() for path in sorted(CRDS.glob("*.yaml")))


def crds() -> list[Obj]:
    return [d for text in _crd_text() for d in yaml.safe_load_all(text) if d]


def examples() -> list[Obj]:
    return [d for path in sorted(EXAMPLES.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text()) if d]


def schema_of(kind: str) -> Obj:
    return crd_schema(kind, crds())


def test_crds_are_generated_and_up_to_date() -> None:
    res = subprocess.run(
        [sys.executable, "scripts/karpenter_crds.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT / "src")},
    )
    assert res.returncode == 0, res.stderr


def test_three_cluster_scoped_crds_with_status_and_printer_columns() -> None:
    found = {c["spec"]["names"]["kind"]: c for c in crds()}
    assert set(found) == {"NodePool", "NodeClaim", "EC2NodeClass"}
    for kind, crd in found.items():
        spec = crd["spec"]
        assert spec["scope"] == "Cluster"
        assert crd["metadata"]["name"] == f"{PLURALS[kind]}.{spec['group']}"
        assert spec["group"] == ("karpenter.k8s.aws" if kind == "EC2NodeClass" else "karpenter.sh")
        (version,) = spec["versions"]
        assert version["name"] == "v1" and version["served"] and version["storage"]
        assert version["subresources"] == {"status": {}}
        assert any(c["name"] == "Ready" for c in version["additionalPrinterColumns"])
        # Uninstalling kubespot must not delete every NodePool with the CRD.
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_crd_defaults_are_the_parsers_defaults() -> None:
    """What the API server writes into a stored object is what ``scheduling.api`` assumes when a
    field is absent (kubesim and files given to kubespot skip the API server's defaulting)."""
    pool = schema_of("NodePool")["properties"]["spec"]["properties"]
    disruption = pool["disruption"]
    assert disruption["default"] == {"consolidateAfter": DEFAULT_CONSOLIDATE_AFTER}
    assert disruption["properties"]["consolidateAfter"]["default"] == DEFAULT_CONSOLIDATE_AFTER
    assert "required" not in disruption  # v1.1+: a disruption block without consolidateAfter is fine
    assert disruption["properties"]["consolidationPolicy"]["default"] == "WhenEmptyOrUnderutilized"
    assert disruption["properties"]["budgets"]["default"] == [b.to_dict() for b in DEFAULT_BUDGETS]
    tspec = pool["template"]["properties"]["spec"]["properties"]
    assert tspec["expireAfter"]["default"] == DEFAULT_EXPIRE_AFTER
    claim = schema_of("NodeClaim")["properties"]["spec"]["properties"]
    assert claim["expireAfter"]["default"] == DEFAULT_EXPIRE_AFTER
    nodeclass = schema_of("EC2NodeClass")["properties"]["spec"]["properties"]
    assert nodeclass["metadataOptions"]["default"] == MetadataOptions().to_dict()


@pytest.mark.parametrize("doc", examples(), ids=lambda d: f"{d['kind']}-{d['metadata']['name']}")
def test_every_v1_example_fits_the_crd_schema(doc: Obj) -> None:
    assert schema_problems(doc, schema_of(doc["kind"])) == []


def test_the_schema_check_catches_fields_the_crd_would_prune() -> None:
    """v1beta1's ``spec.disruption.expireAfter`` moved to the template in v1: a v1 CRD drops it."""
    doc = next(d for d in examples() if d["kind"] == "NodePool")
    doc["spec"].setdefault("disruption", {})["expireAfter"] = "720h"
    doc["spec"]["weight"] = 0
    problems = schema_problems(doc, schema_of("NodePool"))
    assert ".spec.disruption.expireAfter: not declared, a real API server would prune it" in problems
    assert ".spec.weight: 0 out of bounds" in problems


def test_helm_template_leaves_the_crds_out_unless_asked() -> None:
    helm = find_helm()
    plain = [d for d in yaml.safe_load_all(run_helm(helm, "template", "r", str(CHART)).stdout) if d]
    assert "CustomResourceDefinition" not in {d["kind"] for d in plain}
    both = run_helm(helm, "template", "r", str(CHART), "--include-crds").stdout
    names = {
        d["metadata"]["name"]
        for d in yaml.safe_load_all(both)
        if d and d["kind"] == "CustomResourceDefinition"
    }
    assert names == {"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"}


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    idle = ControllerConfig(scheduler=False, kubelet=False, workloads=False)
    async with KubeSim(controllers=idle) as sim, aiohttp.ClientSession(sim.url) as session:
        yield session


async def test_kubesim_serves_the_crds_and_accepts_every_v1_example(http: aiohttp.ClientSession) -> None:
    for crd in crds():
        async with http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd) as r:
            assert r.status == 201, await r.text()
    async with http.get("/apis/karpenter.sh/v1") as r:
        served = {res["name"]: res for res in (await r.json())["resources"]}
    assert served["nodepools"]["namespaced"] is False and "nodepools/status" in served
    assert served["nodeclaims"]["categories"] == ["karpenter"]
    async with http.get("/apis/karpenter.k8s.aws/v1") as r:
        assert {res["name"] for res in (await r.json())["resources"]} >= {
            "ec2nodeclasses",
            "ec2nodeclasses/status",
        }
    for doc in examples():
        group_version = doc["apiVersion"]
        url = f"/apis/{group_version}/{PLURALS[doc['kind']]}"
        async with http.post(url, json=doc) as r:
            assert r.status == 201, (doc["metadata"]["name"], await r.text())
        async with http.get(f"{url}/{doc['metadata']['name']}") as r:
            stored = await r.json()
        assert stored["spec"] == doc["spec"]
        assert load(stored).valid, load(stored).condition
    # The status subresource: what kubespot's controllers will write (ValidationSucceeded).
    pool = next(d for d in examples() if d["kind"] == "NodePool")["metadata"]["name"]
    condition = load(next(d for d in examples() if d["metadata"]["name"] == pool)).condition.to_dict()
    ready = {"type": "Ready", "status": "True", "reason": "Ready", "message": ""}
    stamp = {"lastTransitionTime": "2026-01-01T00:00:00Z"}
    status = {"status": {"conditions": [{**condition, **stamp}, {**ready, **stamp}], "nodes": 2}}
    async with http.patch(
        f"/apis/karpenter.sh/v1/nodepools/{pool}/status",
        json=status,
        headers={"Content-Type": "application/merge-patch+json"},
    ) as r:
        assert r.status == 200, await r.text()
        assert (await r.json())["status"]["conditions"][0]["type"] == "ValidationSucceeded"
    # kubectl get's columns (server-side Table), the CRD's additionalPrinterColumns.
    table_accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    async with http.get(f"/apis/karpenter.sh/v1/nodepools/{pool}", headers=table_accept) as r:
        table = await r.json()
    columns = [c["name"] for c in table["columnDefinitions"]]
    cells = dict(zip(columns, table["rows"][0]["cells"], strict=True))
    assert cells["Ready"] == "True" and cells["Nodes"] == "2"
    async with http.get("/apis/karpenter.sh/v1/nodeclaims", headers=table_accept) as r:
        table = await r.json()
    columns = [c["name"] for c in table["columnDefinitions"]]
    cells = dict(zip(columns, table["rows"][0]["cells"], strict=True))
    assert cells["NodePool"] == "general" and cells["NodeClass"] == "general"


def test_chart_crds_folder_is_the_only_place_crds_live() -> None:
    templates = Path(CHART / "templates")
    assert not [p for p in templates.iterdir() if "CustomResourceDefinition" in p.read_text()]


def test_helm_install_keeps_a_clusters_own_karpenter_crds(tmp_path: Path) -> None:
    """On a cluster already running Karpenter, ``helm install`` creates only the CRDs that are
    missing and leaves Karpenter's in place (helm's crds/ folder: an existing CRD is skipped)."""
    helm = find_helm()
    own = next(c for c in crds() if c["spec"]["names"]["kind"] == "NodePool")
    own["metadata"] = {"name": own["metadata"]["name"], "labels": {"owner": "karpenter"}}
    with kubesim_cluster(tmp_path, []) as cluster:
        cluster.create([own])
        run_helm(
            helm,
            "--kubeconfig",
            cluster.kubeconfig,
            "install",
            "spot",
            str(CHART),
            "--namespace",
            "kube-system",
            "--disable-openapi-validation",
        )
        kept = cluster.get("CustomResourceDefinition", "nodepools.karpenter.sh", None)
        assert kept["metadata"]["labels"] == {"owner": "karpenter"}
        added = cluster.get("CustomResourceDefinition", "ec2nodeclasses.karpenter.k8s.aws", None)
        assert added["metadata"]["labels"] == {"app.kubernetes.io/part-of": "kubespot"}


def test_helm_install_skip_crds_installs_none(tmp_path: Path) -> None:
    helm = find_helm()
    with kubesim_cluster(tmp_path, []) as cluster:
        run_helm(
            helm,
            "--kubeconfig",
            cluster.kubeconfig,
            "install",
            "spot",
            str(CHART),
            "--namespace",
            "kube-system",
            "--disable-openapi-validation",
            "--skip-crds",
        )
        listed = yaml.safe_load(cluster.kubectl("get", "crd", "-o", "yaml").stdout)["items"]
        assert not [c for c in listed if c["spec"]["group"].startswith("karpenter")]
