"""Calling the hooks a part is given to report to metrics: a hook that raises is logged on the
part's own logger and goes no further, since counting must never stop the work it counts."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def call_hook(hook: Callable[[T], object] | None, arg: T, *, what: str, log: logging.Logger) -> None:
    """``hook(arg)`` if there is a hook; an exception it raises is logged as ``"<what> hook failed"``."""
    if hook is None:
        return
    try:
        hook(arg)
    except Exception:
        log.exception("%s hook failed", what)
