"""``kubespot plan`` end to end: the cluster read over HTTP from kubesim (the chart's CRDs, a
NodePool and EC2NodeClass from tests/data/karpenter, pending pods, a DaemonSet, an existing node),
the catalog and prices through boto3 from moto with kubespot's extensions, the plan printed.

Semantics checked: Karpenter's provisioning rules as docs/designs/provisioning.md lists them (the
NodePool's requirements narrow the types, existing capacity first, DaemonSet overhead on new
nodes), and the command-line contract of issue 13 (JSON keys, exit codes).
"""

from __future__ import annotations

import argparse
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml

from kubespot import plan_cli
from kubespot.aws.ondemand_prices import ONDEMAND_PRICES
from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import node, pod

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
CRDS = ROOT / "deploy" / "helm" / "kubespot" / "crds"
EXAMPLE = ROOT / "tests" / "data" / "karpenter" / "v1" / "general-purpose.yaml"
PLURALS = {"NodePool": "nodepools", "EC2NodeClass": "ec2nodeclasses"}
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
LOG_REQUESTS = {"requests": {"cpu": "200m"}}


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture
async def cluster(
    aws_env: MotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> AsyncIterator[KubeSim]:
    idle = ControllerConfig(scheduler=False, kubelet=False, workloads=False)
    async with KubeSim(controllers=idle) as sim, aiohttp.ClientSession(sim.url) as http:
        for path in sorted(CRDS.glob("*.yaml")):
            for crd in docs(path):
                async with http.post(CRD_PATH, json=crd) as r:
                    assert r.status == 201, await r.text()
        for obj in docs(EXAMPLE):
            async with http.post(f"/apis/{obj['apiVersion']}/{PLURALS[obj['kind']]}", json=obj) as r:
                assert r.status == 201, await r.text()
        # An existing node with room for two of the pods (2 CPUs once the DaemonSet's 200m, whose
        # pod is not bound there yet, is kept for it: Karpenter's existingnode.go), and eight pods
        # waiting for a node.
        existing = node("existing-1", cpu="2200m", memory="8Gi")
        async with http.post("/api/v1/nodes", json=existing) as r:
            assert r.status == 201, await r.text()
        for i in range(8):
            body = pod(f"web-{i}", namespace="default", requests={"cpu": "1", "memory": "2Gi"})
            async with http.post("/api/v1/namespaces/default/pods", json=body) as r:
                assert r.status == 201, await r.text()
        daemonset = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "logs", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"app": "logs"}},
                "template": {
                    "metadata": {"labels": {"app": "logs"}},
                    "spec": {"containers": [{"name": "c", "image": "fluent-bit", "resources": LOG_REQUESTS}]},
                },
            },
        }
        async with http.post("/apis/apps/v1/namespaces/kube-system/daemonsets", json=daemonset) as r:
            assert r.status == 201, await r.text()
        monkeypatch.setenv("KUBESPOT_KUBECONFIG", str(sim.kubeconfig_path))
        monkeypatch.setenv("KUBESPOT_AWS_ENDPOINT_URL", aws_env.endpoint_url)
        monkeypatch.setenv("KUBESPOT_AWS_REGION", aws_env.region)
        yield sim


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    plan_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


async def plan(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = await plan_cli.run(args(*argv), out=out)
    return code, out.getvalue()


async def test_plan_reads_the_cluster_and_the_catalog_and_prints_the_contract(
    cluster: KubeSim, tmp_path: Path
) -> None:
    extra = tmp_path / "more.yaml"
    extra.write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": "api", "namespace": "default"},
                    "spec": {
                        "replicas": 4,
                        "selector": {"matchLabels": {"app": "api"}},
                        "template": {
                            "metadata": {"labels": {"app": "api"}},
                            "spec": {
                                "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}],
                                # arm64 only: the NodePool allows amd64 alone, so these cannot go.
                                "nodeSelector": {"kubernetes.io/arch": "arm64"},
                            },
                        },
                    },
                }
            ]
        )
    )
    code, text = await plan("--output", "json", "-f", str(extra))
    assert code == 0, text
    result = orjson.loads(text)
    assert set(result) >= {"nodeclaims", "existing", "unschedulable", "cost_per_hour"}
    # Existing capacity first: two web pods fit the existing node, the other six need new capacity.
    assert [e["node"] for e in result["existing"]] == ["existing-1", "existing-1"]
    on_existing = {e["pod"] for e in result["existing"]}
    planned = sorted(p for c in result["nodeclaims"] for p in c["pods"])
    assert planned == sorted({f"default/web-{i}" for i in range(8)} - on_existing)
    prices = ONDEMAND_PRICES["us-east-1"]
    for claim in result["nodeclaims"]:
        assert claim["nodepool"] == "general" and claim["capacity_type"] == "on-demand"
        for name in claim["instance_types"]:
            family = name.split(".")[0]
            assert family[0] in "cmr" and int("".join(ch for ch in family[1:] if ch.isdigit())[:1]) > 2, name
        assert claim["price_per_hour"] == pytest.approx(prices[claim["instance_types"][0]])
        # The DaemonSet's 200m is reserved on every new node beside the pods.
        assert claim["requests"]["cpu"].endswith("200m")
    assert result["cost_per_hour"] == pytest.approx(sum(c["price_per_hour"] for c in result["nodeclaims"]))
    unschedulable = {u["pod"]: u["reasons"] for u in result["unschedulable"]}
    assert sorted(unschedulable) == [f"default/api-plan-{i}" for i in range(4)]
    assert "kubernetes.io/arch" in unschedulable["default/api-plan-0"][0]
    assert result["nodepools"] == [
        {"name": "general", "valid": True, "reason": "ValidationSucceeded", "message": ""}
    ]

    code, story = await plan("--why", "default/web-3")
    assert code == 0 and "NodePool general" in story and "on-demand" in story, story


async def test_plan_exit_codes(cluster: KubeSim, tmp_path: Path) -> None:
    code, _ = await plan("-f", str(tmp_path / "missing.yaml"))
    assert code == 1
    code, _ = await plan("--why", "default/nobody")
    assert code == 1


@pytest.mark.parametrize(
    ("manifest", "named"),
    [
        (
            {
                "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {"replicas": "three", "template": {}},
            },
            "Deployment 'web': replicas must be a whole number",
        ),
        (
            {
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "1Gb"}}}]},
            },
            "Pod ns/p:",
        ),
    ],
)
async def test_a_manifest_that_cannot_be_planned_is_named_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], manifest: dict[str, Any], named: str
) -> None:
    """Bad input from ``-f`` exits 1 with the object named, before any AWS call (no AWS here)."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", **manifest}))
    code, _ = await plan("--no-cluster", "-f", str(path))
    assert code == 1
    assert named in capsys.readouterr().err


async def test_a_statefulsets_bound_volume_puts_its_nodeclaim_in_the_volumes_zone(
    cluster: KubeSim, tmp_path: Path
) -> None:
    """Karpenter's volumetopology.go (getPersistentVolumeRequirements: a bound claim's PV nodeAffinity
    becomes the NodeClaim's requirement; ValidatePersistentVolumeClaims: an unbound claim whose class
    is missing leaves the pod alone, "Failed to schedule pod, ..." as scheduling/events.go words it).
    The claim, volume and class are read from kubesim over HTTP, the StatefulSet comes from a file."""
    zone = "us-east-1b"
    objects = [
        (
            "/apis/storage.k8s.io/v1/storageclasses",
            {
                "metadata": {"name": "gp3"},
                "provisioner": "ebs.csi.aws.com",
                "volumeBindingMode": "WaitForFirstConsumer",
            },
        ),
        (
            "/api/v1/persistentvolumes",
            {
                "metadata": {"name": "pv-db-0"},
                "spec": {
                    "capacity": {"storage": "10Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "gp3",
                    "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0123"},
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "topology.kubernetes.io/zone",
                                            "operator": "In",
                                            "values": [zone],
                                        }
                                    ]
                                }
                            ]
                        }
                    },
                },
            },
        ),
        (
            "/api/v1/namespaces/default/persistentvolumeclaims",
            {
                "metadata": {"name": "data-db-0", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "gp3",
                    "volumeName": "pv-db-0",
                    "resources": {"requests": {"storage": "10Gi"}},
                },
            },
        ),
    ]
    async with aiohttp.ClientSession(cluster.url) as http:
        for path, body in objects:
            async with http.post(path, json=body) as r:
                assert r.status == 201, await r.text()
    template = {
        "metadata": {"labels": {"app": "db"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}]},
    }
    stateful = [
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "db"}},
                "template": template,
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"storageClassName": cls}}],
            },
        }
        for name, cls in (("db", "gp3"), ("cache", "no-such-class"))
    ]
    extra = tmp_path / "db.yaml"
    extra.write_text(yaml.safe_dump_all(stateful))
    code, text = await plan("--output", "json", "-f", str(extra))
    assert code == 0, text
    result = orjson.loads(text)
    (claim,) = [c for c in result["nodeclaims"] if "default/db-0" in c["pods"]]
    assert claim["zones"] == [zone]
    unschedulable = {u["pod"]: u["reasons"] for u in result["unschedulable"]}
    assert unschedulable["default/cache-0"] == [
        "Failed to schedule pod, failed to validate pvc, failed to get storage class, "
        'storageclasses.storage.k8s.io "no-such-class" not found'
    ]

    # The existing node has no zone label: the volume's zone keeps the pod off it, and one plan
    # call (the catalog read dominates this test's time) shows the claim's type accounting.
    assert "default/db-0" not in {e["pod"] for e in result["existing"]}
    types = claim["types"]
    assert types["considered"] == types["offered"] + sum(types["dropped"].values())
    assert types["dropped"]["incompatible requirements"] > 0  # the pool allows c/m/r gen > 2 only


def _deployment(name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}], **spec},
            },
        },
    }


async def test_plan_spreads_a_deployment_by_zone_and_keeps_anti_affine_pods_apart(
    cluster: KubeSim, tmp_path: Path
) -> None:
    """Karpenter ``topologygroup.go``: ``nextDomainTopologySpread`` narrows each new NodeClaim to
    the min-count zone; ``nextDomainAntiAffinity`` on hostname puts one matching pod per node."""
    zonal = _deployment(
        "zonal",
        3,
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "zonal"}},
            }
        ],
    )
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "solo"}}}
    solo = _deployment(
        "solo", 3, affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    )
    extra = tmp_path / "topology.yaml"
    extra.write_text(yaml.safe_dump_all([zonal, solo]))
    code, text = await plan("--output", "json", "-f", str(extra))
    assert code == 0, text
    result = orjson.loads(text)
    assert result["unschedulable"] == []
    zones = []
    for claim in result["nodeclaims"]:
        mine = [p for p in claim["pods"] if p.startswith("default/zonal-")]
        if mine:
            assert len(claim["zones"]) == 1, claim
            zones += claim["zones"] * len(mine)
        assert sum(p.startswith("default/solo-") for p in claim["pods"]) <= 1, claim
    assert len(zones) == 3 and len(set(zones)) == 3, zones
    assert sum(p.startswith("default/solo-") for c in result["nodeclaims"] for p in c["pods"]) == 3
