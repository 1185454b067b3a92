"""A Go ``text/template`` engine for webhook messages written for aws-node-termination-handler.

NTH renders its webhook body with Go's ``text/template`` and sprig's functions, so that is the
language its users' templates are in. This package implements it (a pure module: no I/O, no access
to Python objects beyond mappings, lists, scalars and times): ``parse`` checks a template once,
``Template.execute`` fills it in. ``Unsupported`` names a construct that is valid Go but not offered
here (named templates, sprig's ``env``...), so the caller can say exactly what to change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from . import funcs
from .errors import TemplateError, Unsupported
from .execute import GO_ZERO_TIME, Executor, Struct
from .gofmt import MISSING, go_time, go_value
from .parser import Node
from .parser import parse as _parse

__all__ = [
    "GO_ZERO_TIME",
    "MISSING",
    "Struct",
    "Template",
    "TemplateError",
    "Unsupported",
    "go_time",
    "go_value",
    "parse",
]


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template; ``execute`` may be called any number of times."""

    nodes: tuple[Node, ...]

    def execute(
        self,
        data: Any,
        *,
        now: datetime | None = None,
        json_strings: bool = False,
        show: Callable[[str], str] | None = None,
    ) -> str:
        """The text for ``data`` (a ``Struct`` for Go-struct semantics). ``TemplateError`` if it fails.

        ``show``: applied to each printed value (not to the template's own text), e.g. to
        percent-encode the values of a URL by where they land."""
        run = Executor(data, now=now or datetime.now(UTC), json_strings=json_strings, show=show)
        return run.run(list(self.nodes))


def parse(text: str) -> Template:
    """``text`` parsed; ``TemplateError`` (or its ``Unsupported``) saying why it cannot be."""
    return Template(tuple(_parse(text, funcs.functions(), funcs.unsupported)))
