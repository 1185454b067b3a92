"""What the docs tests share: a page's relative links that lead nowhere (a missing file, or an
anchor no heading of the target has, with GitHub's heading anchors)."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["broken_links"]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(page: Path) -> tuple[int, list[str]]:
    """(how many relative links ``page`` has, those that lead to no file or no heading)."""
    links = re.findall(r"\]\(([^)#:]*)(?:#([^)]*))?\)", page.read_text())
    broken = []
    for target, anchor in links:
        path = page.parent / target if target else page
        if not path.exists():
            broken.append(target)
        elif anchor:
            headings = re.findall(r"^#+ (.*)$", path.read_text(), re.M)
            if anchor not in {_slug(h) for h in headings}:
                broken.append(f"{target}#{anchor}")
    return len(links), broken
