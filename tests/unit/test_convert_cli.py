"""``kubespot convert FILE...`` through its command line: v1 YAML (multi-document) on stdout, one
warning per unmapped field on stderr, exit 0; exit 1 and nothing on stdout when a file cannot be read
or parsed. The mapping itself is tested in tests/unit/scheduling/test_sched_convert.py (sources there:
aws/karpenter-provider-aws ``website/content/en/v1.0/upgrading/v1beta1-migration.md``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubespot.cli import main
from kubespot.scheduling.api.load import load

OLD = Path(__file__).resolve().parents[1] / "data" / "karpenter" / "old"
ROOT = Path(__file__).resolve().parents[2]


def test_converts_every_file_to_valid_v1(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in OLD.glob("*.yaml"))
    assert main(["convert", *files]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("---\n")
    documents = list(yaml.safe_load_all(out))
    assert sorted((d["kind"], d["metadata"]["name"]) for d in documents) == [
        ("EC2NodeClass", "beta"),
        ("EC2NodeClass", "default"),
        ("EC2NodeClass", "inline"),
        ("NodePool", "beta"),
        ("NodePool", "default"),
        ("NodePool", "inline"),
    ]
    assert all(load(d).valid for d in documents)
    assert err.splitlines() == [
        "warning: Provisioner/default: kubelet.containerRuntime: has no v1 equivalent "
        "(containerd is the only runtime); dropped",
        "warning: AWSNodeTemplate/default: launchTemplate: unmanaged launch templates were removed in "
        "v1beta1; dropped",
    ]
    # Multi-line user data stays a readable literal block.
    assert '  userData: |\n    #!/bin/bash\n    echo "hello from user data"\n' in out


def test_kubelet_moves_to_a_nodeclass_given_in_another_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = list(yaml.safe_load_all((OLD / "provisioner-v1alpha5.yaml").read_text()))
    (tmp_path / "pool.yaml").write_text(yaml.safe_dump(docs[0]))
    (tmp_path / "class.yaml").write_text(yaml.safe_dump(docs[1]))
    assert main(["convert", str(tmp_path / "pool.yaml"), str(tmp_path / "class.yaml")]) == 0
    out, _ = capsys.readouterr()
    nodeclass = next(d for d in yaml.safe_load_all(out) if d["kind"] == "EC2NodeClass")
    assert nodeclass["spec"]["kubelet"]["maxPods"] == 58


def test_unreadable_file_exits_1_with_nothing_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["convert", str(OLD / "v1beta1.yaml"), str(tmp_path / "missing.yaml")]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"error: cannot read {tmp_path / 'missing.yaml'}: ")


def test_file_that_is_not_yaml_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("spec: [unclosed\n")
    assert main(["convert", str(bad)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: {bad} is not YAML: ")


def test_exit_codes_of_the_installed_command() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    ok = subprocess.run(
        [sys.executable, "-m", "kubespot", "convert", "-"],
        input=(OLD / "v1beta1.yaml").read_text(),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert ok.returncode == 0 and ok.stderr == ""
    assert [d["apiVersion"] for d in yaml.safe_load_all(ok.stdout)] == [
        "karpenter.sh/v1",
        "karpenter.k8s.aws/v1",
    ]
    missing = subprocess.run(
        [sys.executable, "-m", "kubespot", "convert", "/nonexistent/x.yaml"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert missing.returncode == 1 and missing.stdout == ""
    assert "cannot read /nonexistent/x.yaml" in missing.stderr


def test_an_eksctl_cluster_config_through_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``kubespot convert`` on an eksctl ClusterConfig (eksctl-io/eksctl ``types.go``; the mapping is
    tested in tests/unit/scheduling/test_sched_convert_eksctl.py): NodePools and one shared
    EC2NodeClass on stdout, warnings naming the node group and field on stderr, exit 0, no AWS call
    without ``--instance-sizes``."""
    path = ROOT / "tests" / "fixtures" / "eksctl" / "spot-managed.yaml"
    assert main(["convert", str(path)]) == 0
    out, err = capsys.readouterr()
    documents = list(yaml.safe_load_all(out))
    assert [(d["kind"], d["metadata"]["name"]) for d in documents] == [
        ("NodePool", "spot-web"),
        ("EC2NodeClass", "spot-web"),
        ("NodePool", "spot-default"),
        ("NodePool", "on-demand"),
    ]
    assert all(load(d).valid for d in documents)
    assert "warning: managedNodeGroups/spot-web: desiredCapacity: has no equivalent; dropped" in err
    assert all(line.startswith("warning: managedNodeGroups/") for line in err.splitlines())
