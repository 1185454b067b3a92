"""docs/configuration.md is the generated reference, byte for byte, so it cannot drift from the code."""

from __future__ import annotations

from pathlib import Path

from kubespot.config.agent import AgentSettings
from kubespot.config.controller import ControllerSettings
from kubespot.config.loader import specs
from kubespot.config.reference import main, render

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_committed_reference_is_up_to_date() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/configuration.md is stale: python -m kubespot.config.reference > docs/configuration.md"
    )


def test_every_setting_and_alias_is_in_the_reference() -> None:
    text = render()
    for s in (*specs(AgentSettings), *specs(ControllerSettings)):
        assert f"| `{s.path}` |" in text
        assert f"`{s.env}`" in text
        assert all(f"`{n}`" in text for n in s.nth)


def test_secrets_are_marked_and_have_no_flag() -> None:
    row = next(line for line in render().splitlines() if line.startswith("| `webhook.url` |"))
    assert "**Secret.**" in row and "| — |" in row


def test_check_mode(tmp_path: Path) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text("old\n")
    assert main(["--check", str(stale)]) == 1
    stale.write_text(render())
    assert main(["--check", str(stale)]) == 0
