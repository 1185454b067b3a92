"""Reading the JSON that kubespot keeps in Node annotations (the actions record, the scheduled
changes): strict field readers that raise ``TypeError``/``ValueError`` for what a hand edit can
break, so each codec turns them into its own error with the annotation's name."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any


def text_field(item: Mapping[str, Any], key: str) -> str:
    """``item[key]``, which must be a non-empty string."""
    value = item[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key!r} is not a non-empty string")
    return value


def utc_time(value: Any) -> datetime:
    """An ISO 8601 time with its offset, as kubespot writes them."""
    if not isinstance(value, str):
        raise TypeError(f"time is {type(value).__name__}, expected a string")
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:  # kubespot always writes UTC offsets; a naive time was hand-edited
        raise ValueError(f"time without a timezone: {value!r}")
    return parsed
