"""The errors of the Go-template engine: a template that cannot work, and why."""

from __future__ import annotations


class TemplateError(Exception):
    """The template cannot be parsed or executed; ``reason`` says why, ``line`` where (if known)."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {reason}" if line else reason)
        self.reason = reason
        self.line = line


class Unsupported(TemplateError):
    """Valid Go ``text/template``, but a construct this engine does not offer (``construct`` names it)."""

    def __init__(self, construct: str, line: int | None = None, why: str = "not supported") -> None:
        super().__init__(f"{construct}: {why}", line)
        self.construct = construct
