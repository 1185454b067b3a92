"""eksctl node groups converted by ``kubespot convert`` load where users put them: read by ``kubespot
plan -f`` (the catalog and prices from moto with kubespot's extensions), every converted NodePool
valid and planned into with the types and capacity type its node group had. (Their fit to the
chart's CRD schemas is checked in tests/unit/scheduling/test_sched_convert_eksctl.py.)

Semantics checked: Karpenter's provisioning rules (``pkg/controllers/provisioning/scheduling``: a
NodePool's requirements narrow the types, its taints must be tolerated, its labels are the node's);
the node groups' meaning from eksctl's ``pkg/apis/eksctl.io/v1alpha5/types.go``.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kubespot import convert_cli, plan_cli
from kubespot.scheduling.api.convert import convert
from kubespot.sim.awssim import MotoServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "eksctl"


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def converted() -> tuple[dict[str, Any], ...]:
    return convert(d for p in sorted(FIXTURES.glob("*.yaml")) for d in docs(p)).documents


def deployment(name: str, replicas: int, cpu: str, **pod_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
                    **pod_spec,
                },
            },
        },
    }


async def test_plan_loads_the_converted_file_and_plans_into_its_pools(
    aws_env: MotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The page's preview: ``kubespot convert cluster.yaml > nodepools.yaml``, then ``kubespot plan
    --no-cluster -f nodepools.yaml -f workloads.yaml`` over the catalog and prices from moto."""
    monkeypatch.setenv("KUBESPOT_AWS_ENDPOINT_URL", aws_env.endpoint_url)
    monkeypatch.setenv("KUBESPOT_AWS_REGION", aws_env.region)
    nodepools = tmp_path / "nodepools.yaml"
    out, err = io.StringIO(), io.StringIO()
    assert convert_cli.run([str(p) for p in sorted(FIXTURES.glob("*.yaml"))], out=out, err=err) == 0
    nodepools.write_text(out.getvalue())
    workloads = tmp_path / "workloads.yaml"
    jobs_tolerations = [
        {"key": "dedicated", "operator": "Equal", "value": "jobs", "effect": "NoSchedule"},
        {"key": "example.com/batch", "operator": "Exists", "effect": "NoExecute"},
    ]
    workloads.write_text(
        yaml.safe_dump_all(
            [
                deployment("web", 6, "1"),
                # Only the jobs group's nodes carry this label; they are tainted for these pods alone.
                deployment("batch", 2, "4", nodeSelector={"workload": "jobs"}, tolerations=jobs_tolerations),
            ]
        )
    )
    parser = argparse.ArgumentParser()
    plan_cli.add_arguments(parser)
    out = io.StringIO()
    argv = ["--no-cluster", "--output", "json", "-f", str(nodepools), "-f", str(workloads)]
    code = await plan_cli.run(parser.parse_args(argv), out=out)
    assert code == 0, out.getvalue()
    result = orjson.loads(out.getvalue())

    pools = {d["metadata"]["name"]: d for d in converted() if d["kind"] == "NodePool"}
    assert len(pools) == 10
    # Every converted pool read from the file is valid with a valid node class.
    assert [p for p in result["nodepools"] if not p["valid"]] == []
    assert result["unschedulable"] == []
    planned = sorted(p for c in result["nodeclaims"] for p in c["pods"])
    assert len(planned) == 8
    for claim in result["nodeclaims"]:
        requirements = {
            r["key"]: r["values"]
            for r in pools[claim["nodepool"]]["spec"]["template"]["spec"]["requirements"]
        }
        assert set(claim["instance_types"]) <= set(requirements["node.kubernetes.io/instance-type"]), claim
        assert claim["capacity_type"] in requirements["karpenter.sh/capacity-type"], claim
    batch = [c for c in result["nodeclaims"] if any(p.startswith("default/batch-") for p in c["pods"])]
    assert {c["nodepool"] for c in batch} == {"jobs"}
    assert {t for c in batch for t in c["instance_types"]} == {"c5.4xlarge"}
    assert {c["capacity_type"] for c in batch} == {"on-demand"}


def test_convert_reads_instance_sizes_from_ec2_for_cpu_and_memory_limits(
    aws_env: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kubespot convert --instance-sizes``: DescribeInstanceTypes (filtered by name, through moto)
    gives each group's largest type, so ``maxSize`` also becomes cpu and memory limits (an estimate,
    as Karpenter before v1.11 counts no ``nodes``); the command line's exit 1 without a region."""
    monkeypatch.setenv("KUBESPOT_AWS_ENDPOINT_URL", aws_env.endpoint_url)
    monkeypatch.setenv("KUBESPOT_AWS_REGION", aws_env.region)
    out, err = io.StringIO(), io.StringIO()
    code = convert_cli.run([str(FIXTURES / "spot-managed.yaml")], out=out, err=err, instance_sizes=True)
    assert code == 0, err.getvalue()
    pools = {d["metadata"]["name"]: d for d in yaml.safe_load_all(out.getvalue()) if d["kind"] == "NodePool"}
    # spot-web: 20 nodes of c5/c5a/c6i.large (2 vCPUs, 4 GiB) and m5.large (2 vCPUs, 8 GiB).
    assert pools["spot-web"]["spec"]["limits"] == {"nodes": "20", "cpu": "40", "memory": "160Gi"}
    # on-demand: 4 nodes of m5.xlarge / m6i.xlarge (4 vCPUs, 16 GiB).
    assert pools["on-demand"]["spec"]["limits"] == {"nodes": "4", "cpu": "16", "memory": "64Gi"}
    assert "warning: managedNodeGroups/spot-web: maxSize: limits cpu 40 and memory 160Gi are an estimate" in (
        err.getvalue()
    )

    monkeypatch.delenv("KUBESPOT_AWS_REGION")
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    out, err = io.StringIO(), io.StringIO()
    code = convert_cli.run([str(FIXTURES / "spot-managed.yaml")], out=out, err=err, instance_sizes=True)
    assert (code, out.getvalue()) == (1, "")
    assert err.getvalue().startswith("error: cannot read the instance types: ")
