"""docs/migration-from-cluster-autoscaler.md says what ``kubespot convert`` makes of an eksctl
ClusterConfig: its example input converts to exactly the objects and warnings the page shows, those
objects pass kubespot's validation (and name a role, which kubespot cannot launch through yet), the
tests the page cites exist, and its links lead to files and headings.

Sources: the example's meaning is eksctl's (``pkg/apis/eksctl.io/v1alpha5/types.go``
``NodeGroupInstancesDistribution``, ``ManagedNodeGroup``), the split annotation's
docs/designs/launching.md §6; the converter's own tests cite the rest.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import yaml

from kubespot.aws.amis import AmiInfo
from kubespot.aws.resolved import ResolvedNodeClass
from kubespot.aws.security_groups import SecurityGroupInfo
from kubespot.aws.subnets import SubnetInfo
from kubespot.scheduling.api.convert import convert
from kubespot.scheduling.api.load import load
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec
from unit.docs.doclinks import broken_links

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "migration-from-cluster-autoscaler.md"


def blocks() -> dict[str, str]:
    """The fenced blocks the page marks with ``<!-- doc-test: NAME -->``, by name."""
    text = DOC.read_text()
    found = re.findall(r"<!-- doc-test: ([\w-]+) -->\n```\w*\n(.*?)```", text, re.S)
    return dict(found)


def test_the_pages_example_converts_to_what_it_shows() -> None:
    shown = blocks()
    assert set(shown) == {"eksctl-input", "converted", "warnings"}
    result = convert(yaml.safe_load_all(shown["eksctl-input"]))
    assert list(result.documents) == [d for d in yaml.safe_load_all(shown["converted"]) if d]
    assert [f"warning: {w}" for w in result.warnings] == shown["warnings"].splitlines()
    for doc in result.documents:
        assert load(doc).valid, doc["metadata"]["name"]


def test_the_tests_the_page_cites_exist() -> None:
    cited = set(re.findall(r"`(tests/[\w/.-]+\.py)`", DOC.read_text()))
    assert cited, "the page cites no tests"
    assert [p for p in sorted(cited) if not (ROOT / p).is_file()] == []
    assert (ROOT / "tests" / "fixtures" / "eksctl").is_dir()


def test_the_pages_links_lead_to_files_and_headings() -> None:
    count, broken = broken_links(DOC)
    assert count and broken == []


def test_a_converted_class_names_a_role_and_launches_once_its_profile_is_made() -> None:
    """Step 1 of the page: the converter writes ``role`` (eksctl's ``iam.instanceRoleARN``); the
    class launches once the status loop has made its instance profile (aws/resolved.py
    ``not_ready``; Karpenter makes it too, aws ``pkg/providers/instanceprofile`` ``Create``), or
    with a profile named instead."""
    (cls,) = [d for d in yaml.safe_load_all(blocks()["converted"]) if d and d["kind"] == "EC2NodeClass"]
    assert cls["spec"]["role"] == "shop-nodes" and "instanceProfile" not in cls["spec"]
    spec = load(cls).spec
    assert isinstance(spec, EC2NodeClassSpec)
    resolved = ResolvedNodeClass(
        spec=spec,
        subnets=(SubnetInfo("subnet-0aa00000000000001", "us-east-1a", "use1-az1", 200),),
        security_groups=(SecurityGroupInfo("sg-0123", "eks-cluster-sg-shop"),),
        amis=(AmiInfo("ami-0123", "al2023", "2026-01-01T00:00:00Z", False, ()),),
    )
    assert resolved.not_ready() == "the instance profile for role 'shop-nodes' is not created"
    made = replace(resolved, instance_profile="shop_123")
    assert made.not_ready() is None
    assert made.launch_spec is not None and made.launch_spec.instance_profile == "shop_123"
    with_profile = {**cls, "spec": {**cls["spec"], "instanceProfile": "shop-nodes-profile"}}
    del with_profile["spec"]["role"]
    spec = load(with_profile).spec
    assert isinstance(spec, EC2NodeClassSpec)
    assert replace(resolved, spec=spec).not_ready() is None
    assert "`instanceProfile:`" in DOC.read_text() and "`instance-profile` group" in DOC.read_text()
