"""``kubespot plan --why NS/POD``, as text and with ``--output json`` (docs/designs/provisioning.md
decision 4), through ``plan_cli.run`` with the AWS catalog replaced by a fixed one (the end-to-end
path over moto is tests/integration/plan/test_plan_cli.py; the instance types come from the shipped
``FakeCloud``). The story's rules cite Karpenter's
``nodeclaim.go`` filterInstanceTypesByRequirements and ``scheduler.go`` filterByRemainingResources."""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kubespot import plan_cli
from kubespot.cloud import FakeCloud
from kubespot.kube import KubeError
from support.catalog import itype

EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "karpenter" / "v1" / "general-purpose.yaml"


TYPES = [
    itype("m5.large", 2, 8, od=0.096),
    itype("m5.xlarge", 4, 16, od=0.192),
    itype("c5.large", 2, 4, od=0.085),
    itype("t3.large", 2, 8, od=0.083),  # burstable: outside the pool's c/m/r
]


class FixedCatalog:
    """What ``plan_cli.run`` asks of ``aws.catalog.Catalog`` before handing it to the cloud."""

    def __init__(self, *args: object) -> None:
        pass

    async def refresh(self) -> None:
        pass

    def infos(self) -> dict[str, object]:
        return {it.name: it for it in TYPES}


class FixedCloud(FakeCloud):
    """``AwsCloud``'s place: the shipped fake over ``TYPES``."""

    def __init__(self, catalog: object) -> None:
        super().__init__(TYPES)

    def set_resolved(self, nodeclass: str, resolved: object) -> None:
        pass


class NoAws:
    region = "us-east-1"

    def __init__(self, *args: object) -> None:
        pass

    async def __aenter__(self) -> NoAws:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass


def write_manifests(tmp_path: Path) -> Path:
    """The example NodePool and EC2NodeClass, and a Deployment whose pods need a new NodeClaim."""
    web: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "replicas": 3,
            "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]}
            },
        },
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump_all([*yaml.safe_load_all(EXAMPLE.read_text()), web]))
    return path


@pytest.fixture
def manifests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(plan_cli, "Catalog", FixedCatalog)
    monkeypatch.setattr(plan_cli, "AwsCloud", FixedCloud)
    monkeypatch.setattr(plan_cli, "AwsClients", NoAws)
    return write_manifests(tmp_path)


async def run(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    plan_cli.add_arguments(parser)
    out = io.StringIO()
    return await plan_cli.run(parser.parse_args(list(argv)), out=out), out.getvalue()


async def test_why_tells_the_claims_types_and_the_groups_story_as_text_and_as_json(manifests: Path) -> None:
    """Decision 4: the types considered, offered and dropped by reason, and the group's pools."""
    code, text = await run("--no-cluster", "-f", str(manifests), "--why", "shop/web-plan-2")
    assert code == 0, text
    assert "goes to a new on-demand NodeClaim of NodePool general" in text
    # 1.5 CPUs: c5.large and m5.large hold one each; the t3 is not in the pool's categories.
    assert (
        "Instance types: 4 in the pool, 1 offered; dropped: 2 outside the flexibility band, 1 incompatible"
        in text
    )
    assert "Its group: 3 identical pod(s)." in text and "NodePool general: opened 3 NodeClaim(s)." in text

    code, text = await run(
        "--no-cluster", "-f", str(manifests), "--why", "shop/web-plan-2", "--output", "json"
    )
    assert code == 0, text
    told = orjson.loads(text)
    assert told["pod"] == "shop/web-plan-2" and told["outcome"] == "nodeclaim"
    claim = told["nodeclaim"]
    assert claim["nodepool"] == "general" and claim["instance_types"] == ["c5.large"]
    assert claim["types"]["considered"] == 4
    assert claim["types"]["dropped"] == {
        "incompatible requirements": 1,
        "outside the flexibility band": 2,
    }
    # The pool's 1000-CPU limit: each claim counts its largest offered type's capacity.
    assert claim["types"]["limits_charged"] == {"cpu": "2"}
    assert told["story"] == {
        "group_pods": 3,
        "existing_nodes": {"tried": 0, "refused": {}},
        "nodepools": [{"name": "general", "outcome": "opened 3 NodeClaim(s)"}],
        "preferences_relaxed": False,
    }


async def test_without_the_controllers_memory_the_story_says_avoided_offerings_are_not_known(
    manifests: Path,
) -> None:
    """Issue 14 §2: the plan of a running cluster has no unavailable-offerings cache (aws
    pkg/cache/unavailableofferings.go) nor pool risk: a pod bound for a new NodeClaim is told so,
    as text and as JSON (null, not an empty list: nothing is known, not "nothing avoided")."""
    code, text = await run("--no-cluster", "-f", str(manifests), "--why", "shop/web-plan-2")
    assert code == 0, text
    assert "Offerings avoided: not known here" in text
    code, text = await run(
        "--no-cluster", "-f", str(manifests), "--why", "shop/web-plan-2", "--output", "json"
    )
    assert orjson.loads(text)["avoided_offerings"] is None
    code, text = await run("--no-cluster", "-f", str(manifests), "--output", "json")
    assert code == 0 and orjson.loads(text)["avoided_offerings"] is None
    code, text = await run("--no-cluster", "-f", str(manifests))
    assert code == 0 and "avoided" not in text  # the summary only says it where it matters


@pytest.mark.parametrize(
    ("broken", "named"),
    [
        (
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": "gp3"},
                "provisioner": "ebs.csi.aws.com",
                "volumeBindingMode": "WaitForFirstConsumer",
                "allowedTopologies": [{"matchLabelExpressions": [{"values": ["z1"]}]}],
            },
            "StorageClass 'gp3'",
        ),
        (
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": "gp3"},
                "spec": {
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "topology.kubernetes.io/zone", "operator": "in"}
                                    ]
                                }
                            ]
                        }
                    }
                },
            },
            "PersistentVolume 'gp3'",
        ),
    ],
)
async def test_a_malformed_volume_or_class_exits_1_naming_it(
    manifests: Path, broken: dict[str, Any], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """k8s.io/api core/v1 TopologySelectorLabelRequirement (key required) and
    NodeSelectorRequirement (operator one of In, NotIn, Exists...): the API server refuses such
    objects, so only a file brings one; the plan names it and exits 1 (exit codes in plan_cli's
    docstring), not a traceback (review finding 9)."""
    claim: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {"storageClassName": "gp3"},
    }
    if broken["kind"] == "PersistentVolume":
        claim["spec"] = {"volumeName": "gp3"}
        claim["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    db = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "db"},
        "spec": {
            "containers": [{"name": "c"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }
    with_broken = manifests.parent / "broken.yaml"
    with_broken.write_text(yaml.safe_dump_all([broken, claim, db]))
    code, _ = await run("--no-cluster", "-f", str(manifests), "-f", str(with_broken))
    assert code == 1
    assert f"kubespot plan: cannot plan for {named}" in capsys.readouterr().err


class ClusterWithAClaim:
    """``kube.connect``'s place: a cluster whose only capacity is a NodeClaim launched as an
    m5.xlarge that has no Node yet."""

    CLAIM = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "general-abcde", "labels": {"karpenter.sh/nodepool": "general"}},
        "spec": {
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            ],
            "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
        },
    }

    def __init__(self, settings: object) -> None:
        pass

    async def list_objects(self, path: str) -> list[dict[str, Any]]:
        return [self.CLAIM] if path == "apis/karpenter.sh/v1/nodeclaims" else []

    def _send(self, *args: object, **kwargs: object) -> None:
        return None

    async def call(self, what: str, send: object) -> bytes:
        # The only single read kubespot plan makes: the controller's status ConfigMap (absent).
        assert what.startswith("get api/v1/namespaces/kube-system/configmaps/"), what
        raise KubeError(404, "not found")

    async def close(self) -> None:
        pass


async def test_plan_counts_a_launched_nodeclaim_without_a_node_as_existing_capacity(
    manifests: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Karpenter's cluster state (pkg/controllers/state/cluster.go, statenode.go) holds a NodeClaim
    whose Node has not registered as a state node of its requirements and labels, and the scheduler
    tries pods on it before new capacity (scheduler.go calculateExistingNodeClaims): the plan lists
    ``karpenter.sh/v1`` NodeClaims and sends pods there instead of launching a duplicate."""
    monkeypatch.setattr(plan_cli, "connect", ClusterWithAClaim)
    code, text = await run("-f", str(manifests), "--output", "json")
    assert code == 0, text
    result = orjson.loads(text)
    # m5.xlarge (4 vCPUs less the kubelet's reserve) holds two of the three 1.5-CPU web pods.
    assert [e["node"] for e in result["existing"]] == ["general-abcde", "general-abcde"]
    assert sum(len(c["pods"]) for c in result["nodeclaims"]) == 1
