"""Per-node handling state, kept in one annotation on the Node so a restarted agent (or another
controller replica) knows what was done and resumes instead of starting over."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

import orjson

from kubespot.model import Kind

STATE_ANNOTATION = "kubespot.io/interruption"
KNOWN_KINDS = frozenset(k.value for k in Kind)
#: The ids of the last events whose fence was undone, comma-separated, newest last. IMDS keeps
#: serving a rebalance recommendation (and, for a while, a finished scheduled event) after kubespot
#: undid it; a restarted agent reads this so it does not fence the node again for a notice already
#: dealt with.
UNDONE_ANNOTATION = "kubespot.io/undone"
#: How many undone ids are remembered: a handful of notices can be live in IMDS at once.
UNDONE_KEPT = 8


def undone_ids(text: str | None) -> tuple[str, ...]:
    """The ids in an ``UNDONE_ANNOTATION`` value (empty when absent)."""
    return tuple(part for part in (text or "").split(",") if part)


def with_undone(text: str | None, event_id: str) -> str:
    """``UNDONE_ANNOTATION``'s value with ``event_id`` added (the oldest dropped beyond ``UNDONE_KEPT``)."""
    ids = [i for i in undone_ids(text) if i != event_id] + [event_id]
    return ",".join(ids[-UNDONE_KEPT:])


class Phase(StrEnum):
    FENCED = "fenced"  # tainted and cordoned
    DRAINING = "draining"
    DRAINED = "drained"
    #: The drain ended without emptying the node (refused under the settings, pods left at the
    #: deadline, the API unreachable): not DRAINED, so no lifecycle hook is completed and no
    #: post-drain action (isolation) runs; nobody holds the node, a restart retries the drain.
    DRAIN_FAILED = "drain-failed"


class StateError(ValueError):
    """The annotation is not a state kubespot wrote (hand-edited or from another version)."""


@dataclass(frozen=True)
class NodeState:
    """What kubespot did to a node for one event."""

    event_id: str
    kind: str
    phase: Phase
    since: datetime
    deadline: datetime | None = None
    #: Whether kubespot cordoned the node: undo uncordons only what it cordoned itself.
    cordoned_by_us: bool = False
    taints: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    undo_at: datetime | None = None
    #: Which process is working on the node (``host/pid``, or a pod name) and when it last said so:
    #: another agent or controller replica that sees a fresh mark follows instead of draining too.
    holder: str = ""
    renewed: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def advance(self, phase: Phase, now: datetime) -> NodeState:
        return replace(self, phase=phase, since=now, renewed=now)

    def held_by_other(self, me: str, now: datetime, stale_after: float) -> bool:
        """Whether a live process other than ``me`` is fencing or draining the node right now."""
        return (
            self.phase not in (Phase.DRAINED, Phase.DRAIN_FAILED)
            and bool(self.holder)
            and self.holder != me
            and self.renewed is not None
            and (now - self.renewed).total_seconds() < stale_after
        )

    def encode(self) -> str:
        # Shallow: asdict deep-copies every value, and a draining node's state is written every
        # HOLD_RENEW seconds (a thousand nodes in a burst).
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["phase"] = self.phase.value
        for key in ("since", "deadline", "undo_at", "renewed"):
            value = data[key]
            data[key] = value.isoformat() if value is not None else None
        return orjson.dumps({k: v for k, v in data.items() if v not in (None, (), {}, [])}).decode()


def decode(text: str | None) -> NodeState | None:
    """The state in an annotation value; None when there is none; StateError when it is garbage."""
    if not text:
        return None
    try:
        data = orjson.loads(text)
        kind = str(data["kind"])
        if kind not in KNOWN_KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        return NodeState(
            event_id=str(data["event_id"]),
            kind=kind,
            phase=Phase(data["phase"]),
            since=_time(data["since"]) or _missing("since"),
            deadline=_time(data.get("deadline")),
            cordoned_by_us=bool(data.get("cordoned_by_us", False)),
            taints=tuple(str(t) for t in data.get("taints", ())),
            labels=tuple(str(label) for label in data.get("labels", ())),
            undo_at=_time(data.get("undo_at")),
            holder=str(data.get("holder") or ""),
            renewed=_time(data.get("renewed")),
            extra=dict(data.get("extra") or {}),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise StateError(f"annotation {STATE_ANNOTATION} is not a kubespot state: {exc}") from None


def _missing(name: str) -> datetime:
    raise ValueError(f"{name} is missing")


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:  # kubespot always writes UTC offsets; a naive time was hand-edited
        raise ValueError(f"time without a timezone: {value!r}")
    return parsed
