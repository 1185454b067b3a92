"""A subcommand run from an install without its extra says which extra to install, in one line.

The missing packages are simulated in a child interpreter by a meta-path finder that refuses them,
as Python does when they are not installed (``ModuleNotFoundError`` with ``name`` set).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_BLOCKED_RUN = """
import sys

BLOCKED = {"boto3", "botocore", "aiobotocore", "aiohttp", "moto", "rich"}


class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Blocker())
from kubespot.cli import main

sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["kubesim"], "sim"),
        (["imds-sim"], "sim"),
        (["aws-sim"], "sim"),
        (["node-joiner"], "sim"),
        (["sandbox"], "sim"),
        (["controller", "--queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/q"], "controller"),
        (["aws", "--help"], "controller"),
    ],
)
def test_missing_extra_is_one_line_naming_it(argv: list[str], extra: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _BLOCKED_RUN, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        # PYTHONPATH kept: the child must import the kubespot under test (a worktree's src), not
        # whichever one is installed.
        env={
            "PATH": "/usr/bin:/bin",
            "AWS_REGION": "us-east-1",
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        },
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"pip install 'kubespot[{extra}]'" in lines[0]
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_missing_kubespot_module_is_still_a_traceback() -> None:
    """A missing module of kubespot itself is a bug, not a missing extra: it must not be disguised."""
    from kubespot import cli

    err = ModuleNotFoundError("No module named 'kubespot.nope'", name="kubespot.nope")
    with pytest.raises(ModuleNotFoundError):
        cli._reraise_missing("agent", err)
