"""docs/agent.md carries the metrics table generated from the code, so the two cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

from kubespot.observability.metrics import reference_markdown

DOC = Path(__file__).resolve().parents[3] / "docs" / "agent.md"


def test_agent_doc_lists_every_metric_as_the_code_defines_it() -> None:
    text = DOC.read_text()
    m = re.search(r"<!-- metrics-reference:begin[^>]*-->\n(.*?)<!-- metrics-reference:end -->", text, re.S)
    assert m, "docs/agent.md lost its metrics-reference markers"
    assert m.group(1) == reference_markdown(), (
        "docs/agent.md's metrics table is stale; replace it with the output of "
        "python -c 'from kubespot.observability.metrics import reference_markdown as r; print(r(), end=\"\")'"
    )
