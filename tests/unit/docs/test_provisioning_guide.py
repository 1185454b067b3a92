"""docs/provisioning.md works as written: every manifest it shows passes kubespot's validation, its
chart values render the provisioning controller, its ``kubespot aws policy`` line prints the launch
policy it describes, its ``kubespot plan`` line plans its workload into its pools,
and the defaults, events, health checks and reasons it names are the code's.

Sources: the objects' rules are Karpenter's (kubernetes-sigs/karpenter ``pkg/apis/v1``
``nodepool_validation.go``, aws/karpenter-provider-aws ``pkg/apis/v1`` ``ec2nodeclass_validation.go``),
the launch policy Karpenter's ``KarpenterControllerPolicy`` (getting-started ``cloudformation.yaml``
``AllowPassingInstanceRole``), the timeouts core ``pkg/controllers/nodeclaim/lifecycle/liveness.go``
``Liveness.Reconcile``, the split annotation docs/designs/launching.md §6.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from integration.deploy.helm_support import find_helm, render
from kubespot import cli, plan_cli
from kubespot.cloud.fake import FakeCloud, fake_type
from kubespot.config.launch import LaunchSettings
from kubespot.config.provisioning import ProvisioningSettings
from kubespot.controllers.nodeclaim import launch, liveness, registration
from kubespot.controllers.provisioning import nominations
from kubespot.controllers.provisioning.capacity_split import parse_split
from kubespot.scheduling.api.load import load
from kubespot.scheduling.cluster import workload_pods
from unit.docs.doclinks import broken_links

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "provisioning.md"
SRC = ROOT / "src" / "kubespot"
YAML_BLOCKS = ("nodepool", "nodeclass", "nodepool-batch")
INSUFFICIENT = launch.INSUFFICIENT_CAPACITY


def blocks() -> dict[str, str]:
    """The fenced blocks the page marks with ``<!-- doc-test: NAME -->``, by name."""
    found = re.findall(r"<!-- doc-test: ([\w-]+) -->\n```\w*\n(.*?)```", DOC.read_text(), re.S)
    return dict(found)


def command(name: str, program: str) -> list[str]:
    """The page's command line ``name``, without ``kubespot <program>``."""
    words = shlex.split(blocks()[name])
    assert words[: len(program.split()) + 1] == ["kubespot", *program.split()], words
    return words[len(program.split()) + 1 :]


def test_every_marked_block_is_tested() -> None:
    assert set(blocks()) == {*YAML_BLOCKS, "policy", "values", "workload", "plan"}


@pytest.mark.parametrize("name", YAML_BLOCKS)
def test_each_manifest_passes_kubespots_validation(name: str) -> None:
    """The NodePool and EC2NodeClass examples load with ``ValidationSucceeded=True`` (Karpenter's
    CRD and controller rules, ``nodepool_validation.go``, ``ec2nodeclass_validation.go``)."""
    (doc,) = list(yaml.safe_load_all(blocks()[name]))
    result = load(doc)
    assert result.valid, (name, result)


def test_the_split_annotation_is_the_one_described() -> None:
    """launching.md §6: base 2, then 20 % of the nodes above it on-demand, rounded up (Auto Scaling's
    rule): of 12 nodes, 2 + ceil(0.2 x 10) = 4 are on-demand."""
    (pool,) = list(yaml.safe_load_all(blocks()["nodepool"]))
    split = parse_split(pool["metadata"]["annotations"]["kubespot.io/capacity-split"])
    assert (split.on_demand_base, split.on_demand_percent_above_base) == (2, 20)
    assert [split.on_demand_target(n) for n in (1, 2, 3, 12)] == [1, 2, 3, 4]


def test_the_nodeclass_example_names_the_role_whose_profile_the_policy_lets_it_make() -> None:
    """The example names ``spec.role`` as Karpenter's getting-started EC2NodeClass does; the
    controller makes its profile (aws/karpenter-provider-aws ``pkg/providers/instanceprofile/
    instanceprofile.go`` ``Create``), which the page's policy line grants (``instance-profile``)."""
    (cls,) = list(yaml.safe_load_all(blocks()["nodeclass"]))
    assert cls["spec"].get("role") == "KarpenterNodeRole-prod" and "instanceProfile" not in cls["spec"]
    assert "instance-profile" in blocks()["policy"]


def _listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def test_the_policy_command_prints_the_launch_policy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``kubespot aws policy ... --actions launch,nodeclass,catalog --node-role NAME``: CreateFleet
    and a PassRole scoped to the node role, only to EC2 (Karpenter's ``AllowPassingInstanceRole``)."""
    assert cli.main(["aws", *command("policy", "aws")]) == 0
    policy = json.loads(capsys.readouterr().out)
    statements = policy["Statement"]
    actions = {a for s in statements for a in _listed(s["Action"])}
    launch_calls = {"ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:TerminateInstances", "iam:PassRole"}
    assert launch_calls <= actions
    assert {"ec2:DescribeSubnets", "ec2:DescribeInstanceTypes"} <= actions  # nodeclass, catalog
    assert "eks:DescribeCluster" in actions  # the endpoint, CA bundle and CIDR the page leaves empty
    assert {"iam:CreateInstanceProfile", "iam:AddRoleToInstanceProfile"} <= actions  # spec.role
    (pass_role,) = [s for s in statements if "iam:PassRole" in str(s["Action"])]
    assert pass_role["Resource"] in (
        "arn:aws:iam::123456789012:role/KarpenterNodeRole-prod",
        ["arn:aws:iam::123456789012:role/KarpenterNodeRole-prod"],
    )
    assert "ec2.amazonaws.com" in json.dumps(pass_role["Condition"])


def test_the_values_file_renders_the_provisioning_controller(tmp_path: Path) -> None:
    """The chart's values (``controller.provisioning.enabled``, ``controller.launch.clusterName``)
    become the controller's settings, and the NodeClaim RBAC is granted."""
    values = tmp_path / "values-provisioning.yaml"
    values.write_text(blocks()["values"])
    objs = render(find_helm(), values)
    (deployment,) = [o for o in objs if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["KUBESPOT_PROVISIONING_ENABLED"] == "true"
    assert env["KUBESPOT_CLUSTER_NAME"] == "prod"
    assert env["KUBESPOT_QUEUE_URL"].endswith("/prod-kubespot-interruptions")
    rules = [r for o in objs if o["kind"] == "ClusterRole" for r in o.get("rules", [])]
    claims = [r for r in rules if "nodeclaims" in r.get("resources", [])]
    assert claims and {"create", "delete"} <= {v for r in claims for v in r["verbs"]}


def test_the_plan_command_plans_the_workload_into_the_pools(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``kubespot plan --no-cluster -f nodepools.yaml -f web.yaml``: the page's command line parsed
    by the command's own parser, its files read by its reader and planned by its ``build_plan`` over
    a small catalog (``FakeCloud``; the EC2 catalog through awssim costs seconds, and
    tests/integration/plan/test_plan_eksctl.py already runs the command against it): both pools
    usable, the 12 pods planned into the general pool (the batch pool's taint is not tolerated) on
    types its requirements allow (generation above 4; Karpenter's
    ``pkg/controllers/provisioning/scheduling`` taint and requirement rules)."""
    shown = blocks()
    monkeypatch.chdir(tmp_path)
    Path("nodepools.yaml").write_text("---\n".join(shown[n] for n in YAML_BLOCKS))
    Path("web.yaml").write_text(shown["workload"])
    parser = argparse.ArgumentParser()
    plan_cli.add_arguments(parser)
    args = parser.parse_args(command("plan", "plan"))
    assert args.no_cluster
    objects: dict[str, list[dict[str, Any]]] = {}
    for obj in plan_cli.read_manifests(args.filename):
        objects.setdefault(obj["kind"], []).append(obj)
    objects["Pod"] = workload_pods(objects.pop("Deployment"))
    cloud = FakeCloud(
        [
            fake_type("m4.xlarge", 4, 16, 0.15, spot=0.03),  # cheapest, but generation 4
            fake_type("m5.xlarge", 4, 16, 0.192, spot=0.07),
            fake_type("c5.2xlarge", 8, 16, 0.34, spot=0.12),
            fake_type("r5.2xlarge", 8, 64, 0.504, spot=0.16),
        ]
    )
    plan, conditions = asyncio.run(plan_cli.build_plan(objects, cloud))
    assert {name: c.status for name, c in conditions.items()} == {"general": "True", "batch": "True"}
    assert plan.unschedulable == {}
    assert sum(len(c.pods) for c in plan.claims) == 12
    assert {c.pool for c in plan.claims} == {"general"}
    assert "m4.xlarge" not in {t for c in plan.claims for t in c.instance_types}


def test_the_defaults_the_page_names_are_the_codes() -> None:
    """Batching 1 s / 10 s (Karpenter's BATCH_IDLE_DURATION / BATCH_MAX_DURATION), the cache 180 s,
    the risk half-life 1 h, timeouts 5 and 15 min (liveness.go), /healthz after 15 min."""
    launch_defaults, provisioning = LaunchSettings(), ProvisioningSettings()
    assert (launch_defaults.batch_idle_duration, launch_defaults.batch_max_duration) == (1.0, 10.0)
    assert launch_defaults.unavailable_offerings_ttl == 180.0
    assert launch_defaults.spot_risk_half_life == 3600.0
    assert (launch_defaults.launch_timeout, launch_defaults.registration_timeout) == (300.0, 900.0)
    assert provisioning.stuck_after == 900.0
    text = DOC.read_text()
    for said in ("180 s", "(1 h)", "(5 min)", "(15 min", "1 s without a new one, at most 10 s"):
        assert said in text, said


def test_the_events_reasons_and_checks_the_page_names_exist() -> None:
    """Events, delete reasons and /healthz checks the page tells the reader to look for are the
    ones the code emits (no invented names)."""
    text = DOC.read_text()
    for reason in (
        nominations.NOMINATED,
        nominations.FAILED_SCHEDULING,
        launch.INSUFFICIENT_CAPACITY,
        registration.UNREGISTERED_TAINT_MISSING,
        liveness.LAUNCH_TIMEOUT,
        liveness.REGISTRATION_TIMEOUT,
        "insufficient_capacity",
        "nodeclass_not_ready",
    ):
        assert f"`{reason}`" in text, reason
    sources = "".join(p.read_text() for p in (SRC / "controllers").rglob("*.py"))
    assert '"TerminationGracePeriodExpiring"' in sources
    for check in ("provisioning", "catalog", "provisioner", "nodeclaim", "nodeclaim-gc"):
        assert f'Check("{check}"' in sources, check
        assert f"`{check}`" in text, check
    aws = (SRC / "aws" / "fleet.py").read_text()
    for reason in re.findall(r"`([A-Z]\w+)`", text[text.index("## 6.") : text.index("## 7.")]):
        if reason in ("Launched", "Registered", "FailedScheduling", "NodeClassReady", INSUFFICIENT):
            continue
        in_status = (SRC / "controllers" / "provisioning" / "nodeclass_status.py").read_text()
        assert f'"{reason}"' in aws + in_status + sources, reason


def test_the_pages_links_lead_to_files_and_headings() -> None:
    count, broken = broken_links(DOC)
    assert count and broken == []
