"""``kubespot plan``'s simulation over a ``CloudProvider``: the shipped fake answers the way the EC2
catalog does, and an EC2NodeClass's resolved subnets narrow the zones offered.

Sources: kubernetes-sigs/karpenter ``pkg/cloudprovider/types.go`` (``GetInstanceTypes`` per
NodePool) and ``pkg/controllers/provisioning/provisioner.go`` (``NewScheduler``: the instance types
of each NodePool from the cloud provider); aws/karpenter-provider-aws
``pkg/providers/instancetype/instancetype.go`` ``List`` (offerings in the zones of
``nodeClass.ZoneInfo()``, the status's subnets).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kubespot.cloud import FakeCloud, fake_type
from kubespot.plan_cli import build_plan, subnet_zones

EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "karpenter" / "v1" / "general-purpose.yaml"


def _pending(name: str, cpu: str) -> dict[str, Any]:
    container = {"name": "c", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"containers": [container]},
        "status": {"phase": "Pending"},
    }


async def test_plan_takes_the_types_the_cloud_provider_offers() -> None:
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    objects = {
        "NodePool": [d for d in docs if d["kind"] == "NodePool"],
        "EC2NodeClass": [d for d in docs if d["kind"] == "EC2NodeClass"],
        "Pod": [_pending(f"p{i}", "1") for i in range(3)],
        "Node": [],
        "DaemonSet": [],
    }
    # The pool asks for c/m/r generation > 2 on-demand: only m5.xlarge qualifies.
    cloud = FakeCloud([fake_type("m5.xlarge", 4, 16, 0.192), fake_type("t3.xlarge", 4, 16, 0.1664)])
    plan, _ = await build_plan(objects, cloud)
    assert plan.claims and not plan.unschedulable
    assert sum(len(c.pods) for c in plan.claims) == 3
    assert {t for c in plan.claims for t in c.instance_types} == {"m5.xlarge"}


def test_subnet_zones_come_from_the_status() -> None:
    resolved = {
        "metadata": {"name": "a"},
        "status": {"subnets": [{"id": "s1", "zone": "us-east-1a"}, {"id": "s2", "zone": "us-east-1c"}]},
    }
    unresolved = {"metadata": {"name": "b"}, "status": {"conditions": []}}
    garbage = {"metadata": {"name": "c"}, "status": {"subnets": "nope"}}
    assert subnet_zones([resolved, unresolved, garbage, {"metadata": {"name": "d"}}]) == {
        "a": {"us-east-1a", "us-east-1c"}
    }
