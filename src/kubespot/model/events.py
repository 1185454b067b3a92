"""The one normalized interruption event every source produces and every action consumes."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import orjson


class Kind(StrEnum):
    """Why a node is going away (or may be). Values double as taint-key suffixes."""

    SPOT_INTERRUPTION = "spot-itn"
    REBALANCE_RECOMMENDATION = "rebalance-recommendation"
    SCHEDULED_MAINTENANCE = "scheduled-maintenance"
    ASG_LIFECYCLE = "asg-lifecycle-termination"
    STATE_CHANGE = "state-change"


class Source(StrEnum):
    """Where an event came from."""

    IMDS = "imds"
    SQS = "sqs"
    MANUAL = "manual"


@dataclass(frozen=True, slots=True)
class InterruptionEvent:
    """A signal that an instance (and so its node) is interrupted, or may be.

    ``act_at`` is when handling should start: the notice time for spot interruptions, NotBefore
    minus the configured lead time for scheduled maintenance. ``deadline`` is when the instance is
    expected to stop (None when no deadline is known, e.g. a rebalance recommendation).
    ``cancelled`` marks an event that withdraws an earlier one with the same id (a canceled or
    completed scheduled event): handling undoes what it did for it.
    """

    id: str
    kind: Kind
    instance_id: str
    source: Source
    notice_time: datetime
    act_at: datetime
    deadline: datetime | None = None
    node_name: str | None = None
    description: str = ""
    cancelled: bool = False
    #: The payload as received, for logs, webhooks and debugging (not part of equality).
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def seconds_left(self, now: datetime) -> float | None:
        """Seconds until the deadline (negative once passed), or None without one."""
        return None if self.deadline is None else (self.deadline - now).total_seconds()

    def taint_value(self) -> str:
        """The event id cut to a label value's 63 characters, as the reference handler does."""
        return self.id[:63]


def event_id(kind: Kind, instance_id: str, payload: Mapping[str, Any] | str) -> str:
    """A stable id: the same notice seen again (every poll, every redelivery) yields the same id.

    Built from the kind, the instance and the notice's identifying content, so repeats dedupe while
    a new notice for the same instance (a new time, a new scheduled event) gets a new id.
    """
    body = (
        payload if isinstance(payload, str) else orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode()
    )
    digest = hashlib.sha256(f"{kind.value}\x00{instance_id}\x00{body}".encode()).hexdigest()
    return f"{kind.value}-{digest[:24]}"
