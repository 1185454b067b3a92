"""Date formats IMDS uses on the wire, and parsing of the times users write in scenarios.

Spot and rebalance bodies use ISO 8601 with a ``Z`` suffix and whole seconds; scheduled maintenance
events use ``21 Nov 2026 09:00:00 GMT``. Month names are spelled out here rather than taken from
``strftime("%b")`` because that one follows the process locale.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _utc(epoch: float) -> datetime:
    # IMDS shows whole seconds; flooring keeps a notice from appearing to come from the future.
    return datetime.fromtimestamp(math.floor(epoch), tz=UTC)


def iso_utc(epoch: float) -> str:
    """``2026-11-20T17:04:13Z``: the format of spot ``time`` and rebalance ``noticeTime``."""
    return _utc(epoch).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_date(epoch: float) -> str:
    """``21 Nov 2026 09:00:00 GMT``: the format of scheduled-event ``NotBefore``/``NotAfter``."""
    d = _utc(epoch)
    return f"{d.day} {_MONTHS[d.month - 1]} {d.year} {d:%H:%M:%S} GMT"


def parse_time(value: object) -> float:
    """Read an absolute time: epoch seconds (number) or an ISO 8601 string with a zone.

    A naive ISO string (no zone) is taken as UTC, which is what every IMDS time is.
    Raises ``ValueError`` for anything else.
    """
    if isinstance(value, bool):
        raise ValueError("a time must be an ISO 8601 string or epoch seconds, not a boolean")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError("a time must be finite")
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"not an ISO 8601 time: {value!r}") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.timestamp()
    raise ValueError(f"a time must be an ISO 8601 string or epoch seconds, got {type(value).__name__}")
