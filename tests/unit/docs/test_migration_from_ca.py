"""docs/migration-from-cluster-autoscaler.md says what ``kubespot convert`` makes of an eksctl
ClusterConfig: its example input converts to exactly the objects and warnings the page shows, those
objects pass kubespot's validation, the tests the page cites exist, and its links lead to files.

Sources: the example's meaning is eksctl's (``pkg/apis/eksctl.io/v1alpha5/types.go``
``NodeGroupInstancesDistribution``, ``ManagedNodeGroup``), the split annotation's
docs/designs/launching.md §6; the converter's own tests cite the rest.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from kubespot.scheduling.api.convert import convert
from kubespot.scheduling.api.load import load

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


def test_the_pages_links_lead_to_files() -> None:
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", DOC.read_text())
    assert links
    assert [link for link in links if not (DOC.parent / link).exists()] == []
