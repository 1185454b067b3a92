"""The chart's default image is the one the release workflow builds.

.github/workflows/release.yml builds the repository's Dockerfile for linux/amd64 and linux/arm64 and
pushes ``$IMAGE:<appVersion>``; the chart renders ``image.repository:<appVersion>`` by default. Both
are read here (the workflow as YAML, the chart by rendering it), so neither can change alone.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml
from helm_support import CHART, ROOT, only, render

WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def workflow() -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return loaded


def steps() -> list[dict[str, Any]]:
    jobs = workflow()["jobs"]
    assert len(jobs) == 1
    found: list[dict[str, Any]] = next(iter(jobs.values()))["steps"]
    return found


def build_step() -> dict[str, Any]:
    (step,) = [s for s in steps() if str(s.get("uses", "")).startswith("docker/build-push-action@")]
    return step


def app_version() -> str:
    version: str = str(yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))["appVersion"])
    return version


def test_the_workflow_builds_the_dockerfile_for_amd64_and_arm64_and_pushes() -> None:
    w = build_step()["with"]
    assert w["context"] == "." and (ROOT / w["file"]).is_file()
    assert set(str(w["platforms"]).split(",")) == {"linux/amd64", "linux/arm64"}
    assert w["push"] is True
    assert w["tags"] == "${{ env.IMAGE }}:${{ steps.version.outputs.app_version }}"
    # A push trigger: PyYAML reads the key "on" as True.
    triggers = workflow()[True]
    assert "push" in triggers and "workflow_dispatch" in triggers


def test_the_version_step_reads_the_charts_app_version(tmp_path: Path) -> None:
    """Run the workflow's own shell step against Chart.yaml: it must print the appVersion."""
    (step,) = [s for s in steps() if s.get("id") == "version"]
    out = tmp_path / "out"
    env = {
        **os.environ,
        "CHART": workflow()["env"]["CHART"],
        "GITHUB_OUTPUT": str(out),
        "GITHUB_REF_TYPE": "tag",
        "GITHUB_REF_NAME": f"v{app_version()}",
    }
    subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=ROOT, env=env, check=True, timeout=30)
    assert out.read_text().strip() == f"app_version={app_version()}"
    env["GITHUB_REF_NAME"] = "v9.9.9"
    bad = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=ROOT, env=env, timeout=30)
    assert bad.returncode != 0, "a tag naming another version must not publish"


def test_the_charts_default_image_is_the_one_the_workflow_pushes(helm: str) -> None:
    pushed = f"{workflow()['env']['IMAGE']}:{app_version()}"
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert values["image"]["repository"] == workflow()["env"]["IMAGE"]
    assert values["image"]["tag"] == ""
    ds = only(render(helm), "DaemonSet")
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == pushed
    dep = only(render(helm, sets={"enableSqsTerminationDraining": "true", "queueURL": "q"}), "Deployment")
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == pushed
