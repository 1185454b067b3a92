"""The status ConfigMap's format: what the elected controller avoids now (``avoided_offerings``),
written by its publisher (``controllers.provisioning.avoided_publisher``) and read back by
``kubespot plan`` for its explanations. Pure: objects in, objects out.

As Cluster Autoscaler's ``cluster-autoscaler-status`` ConfigMap (its own namespace, name set by
``--status-config-map-name``, the write time in the annotation
``cluster-autoscaler.kubernetes.io/last-updated``): one ConfigMap, ``kubespot-status`` by default,
in the controller's namespace; its ``avoided-offerings`` key holds JSON, a list of entries with
``kind``, ``capacity_type``, ``instance_type`` and ``zone``, and ``reason`` and ``expires`` (RFC 3339)
for a mark, ``score`` for a reclaim risk; ``kubespot.io/last-updated`` is when it was last written.
A mark's end is written as a time, not as seconds left, so the content changes only when what is
avoided changes; a reader turns it back into seconds left. Against the entries written last
(``previous``), a mark keeps its written end unless the new one differs by more than
``EXPIRES_SLACK_SECONDS`` (the seconds left are whole seconds of the monotonic clock, the write time
a second of the wall clock: their sum wobbles by a second from tick to tick), and a score keeps its
written value until it moved by ``SCORE_STEP`` (scores decay continuously), so only a meaningful
change rewrites the ConfigMap; the heartbeat keeps it fresh. A time without a zone (hand-edited,
another tool) makes it unreadable: its meaning is unknown. The publisher writes at least every
``HEARTBEAT_SECONDS``: older than ``STALE_AFTER_SECONDS``, no controller is keeping it (stopped,
or no leader), and a reader says the offerings are not known.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kubespot.scheduling.explain import AVOIDED_RISK, AVOIDED_UNAVAILABLE, AvoidedOffering

__all__ = [
    "DATA_KEY",
    "DEFAULT_NAME",
    "EXPIRES_SLACK_SECONDS",
    "HEARTBEAT_SECONDS",
    "SCORE_STEP",
    "STALE_AFTER_SECONDS",
    "UPDATED_ANNOTATION",
    "Published",
    "configmap",
    "read",
]

DEFAULT_NAME = "kubespot-status"
DATA_KEY = "avoided-offerings"
UPDATED_ANNOTATION = "kubespot.io/last-updated"
#: The publisher rewrites an unchanged ConfigMap this often, so its age says whether it is kept.
HEARTBEAT_SECONDS = 60.0
#: Older than this (three heartbeats missed), nobody keeps it.
STALE_AFTER_SECONDS = 180.0
#: A mark's end moved by at most this much is the same end (rounding, the two clocks' phases);
#: a mark renewed later than this is a change.
EXPIRES_SLACK_SECONDS = 2.0
#: A score that moved by less than this since it was written is written as it was.
SCORE_STEP = 0.05


def _rfc3339(at: datetime) -> str:
    return at.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _parse(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    # Naive: local time of whoever wrote it, or UTC? Not known, so not readable.
    return at if at.tzinfo is not None else None


_NOT_A_TIME = "%s is not an RFC 3339 time with a time zone"
_ANNOTATION = f"its {UPDATED_ANNOTATION} annotation"
_EXPIRES = "an entry's expires"


def _key(entry: Mapping[str, Any]) -> tuple[object, ...]:
    return tuple(entry.get(k) for k in ("kind", "capacity_type", "instance_type", "zone", "reason"))


def entries(
    avoided: Sequence[AvoidedOffering],
    now: datetime,
    previous: Sequence[Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The JSON entries of ``avoided`` (a mark's seconds left from ``now`` made an end time),
    keeping ``previous``' (the entries written last) end times and scores where they did not
    meaningfully change."""
    before = {_key(e): e for e in previous or ()}
    out: list[dict[str, Any]] = []
    for a in avoided:
        entry: dict[str, Any] = a.pool_fields()
        if a.kind == AVOIDED_UNAVAILABLE:
            entry["reason"] = a.reason
            ends = now.replace(microsecond=0) + timedelta(seconds=round(a.seconds_left or 0.0))
            entry["expires"] = _rfc3339(ends)
            old = before.get(_key(entry), {}).get("expires")
            was = _parse(old)
            if was is not None and abs((was - ends).total_seconds()) <= EXPIRES_SLACK_SECONDS:
                entry["expires"] = old
        else:
            entry["score"] = round(a.score or 0.0, 2)
            old = before.get(_key(entry), {}).get("score")
            if isinstance(old, int | float) and abs(old - (a.score or 0.0)) < SCORE_STEP:
                entry["score"] = old
        out.append(entry)
    return out


def configmap(name: str, namespace: str, data: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """The ConfigMap holding ``data`` (from ``entries``), written at ``now``."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {UPDATED_ANNOTATION: _rfc3339(now)},
        },
        "data": {DATA_KEY: json.dumps(data, sort_keys=True)},
    }


@dataclass(frozen=True, slots=True)
class Published:
    """What a reader makes of the ConfigMap: the offerings avoided (None: not known), how old it
    is (None: absent or unreadable), and, when not known, why."""

    avoided: list[AvoidedOffering] | None
    age: float | None
    why_unknown: str = ""


def read(obj: Mapping[str, Any] | None, now: datetime, where: str) -> Published:
    """The offerings ``obj`` (the ConfigMap ``where``, None when absent) says are avoided at
    ``now``; marks that ended since it was written are left out."""
    if obj is None:
        return Published(None, None, f"no status ConfigMap {where}: is the controller running?")
    meta = obj.get("metadata") or {}
    updated = _parse((meta.get("annotations") or {}).get(UPDATED_ANNOTATION))
    raw = (obj.get("data") or {}).get(DATA_KEY)
    try:
        listed = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        listed = None
    if not isinstance(listed, list):
        return Published(None, None, f"the status ConfigMap {where} is not readable")
    if updated is None:
        return Published(
            None,
            None,
            f"the status ConfigMap {where} is not readable: {_NOT_A_TIME % _ANNOTATION}",
        )
    age = max((now - updated).total_seconds(), 0.0)
    if age > STALE_AFTER_SECONDS:
        return Published(
            None, age, f"the status ConfigMap {where} is {age:.0f} s old: no controller keeps it now"
        )
    out: list[AvoidedOffering] = []
    for e in listed:
        if not isinstance(e, Mapping):
            continue
        pool = (str(e.get("capacity_type", "")), str(e.get("instance_type", "")), str(e.get("zone", "")))
        if e.get("kind") == AVOIDED_UNAVAILABLE:
            ends = _parse(e.get("expires"))
            if ends is None:
                return Published(
                    None,
                    None,
                    f"the status ConfigMap {where} is not readable: {_NOT_A_TIME % _EXPIRES}",
                )
            left = (ends - now).total_seconds()
            if left > 0:
                out.append(AvoidedOffering(AVOIDED_UNAVAILABLE, *pool, str(e.get("reason", "")), round(left)))
        elif e.get("kind") == AVOIDED_RISK and isinstance(e.get("score"), int | float):
            out.append(AvoidedOffering(AVOIDED_RISK, *pool, score=float(e["score"])))
    return Published(out, age)
