"""Status conditions as Karpenter's condition sets keep them (pure).

awslabs/operatorpkg ``status/condition_set.go`` (``Set``, unchanged in this respect since
``bef8fba``; checked at ``7a13865``): a condition's ``lastTransitionTime`` moves only when its
status changes; a new reason, message or ``observedGeneration`` with the same status is written
with the old time. Each carries the ``observedGeneration`` it was computed at;
the list is sorted by type. The root
``Ready`` follows its dependents (``recomputeRootCondition``): True (reason ``Ready``) when every
dependent is True at the current generation; otherwise False with reason ``UnhealthyDependents``
once one is False at the current generation, else Unknown with ``ReconcilingDependents``; the
message lists the unhealthy ones as ``Type=Status``, latest transition first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .conditions import Condition

__all__ = ["READY", "merge_conditions", "rfc3339"]

READY = "Ready"

Obj = dict[str, Any]


def rfc3339(at: datetime) -> str:
    """A metav1.Time as the API writes it (second precision, ``Z``)."""
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _set(current: dict[str, Obj], cond: Condition, generation: int, now: str) -> None:
    old = current.get(cond.type)
    same_status = old is not None and old.get("status") == cond.status
    current[cond.type] = {
        "type": cond.type,
        "status": cond.status,
        "observedGeneration": generation,
        # A transition is a change of status only: readers (kubectl, alerts on "False for 10 min")
        # measure how long a condition has held, which a new message must not restart.
        "lastTransitionTime": old.get("lastTransitionTime", now) if old is not None and same_status else now,
        "reason": cond.reason,
        "message": cond.message,
    }


def _root(current: dict[str, Obj], dependents: Sequence[str], generation: int) -> Condition:
    unhealthy = [
        current[t]
        for t in dependents
        if t in current
        and (current[t].get("status") != "True" or current[t].get("observedGeneration") != generation)
    ]
    missing = [t for t in dependents if t not in current]
    if not unhealthy and not missing:
        return Condition(READY, "True", READY)
    failed = any(c.get("status") == "False" and c.get("observedGeneration") == generation for c in unhealthy)
    ordered = sorted(
        unhealthy, key=lambda c: (str(c.get("lastTransitionTime") or ""), c["type"]), reverse=True
    )
    message = ", ".join(
        [f"{c['type']}={c.get('status')}" for c in ordered] + [f"{t}=Unknown" for t in missing]
    )
    if failed:
        return Condition(READY, "False", "UnhealthyDependents", message)
    return Condition(READY, "Unknown", "ReconcilingDependents", message)


def merge_conditions(
    old: Iterable[Mapping[str, Any]] | None,
    conditions: Iterable[Condition],
    *,
    dependents: Sequence[str],
    generation: int,
    now: datetime,
) -> list[Obj]:
    """``old`` with ``conditions`` set and ``Ready`` recomputed from ``dependents``, sorted by type.

    Conditions ``old`` has that are not set here stay as they were (another controller's).
    """
    stamp = rfc3339(now)
    current: dict[str, Obj] = {}
    for c in old or ():
        if isinstance(c, Mapping) and isinstance(c.get("type"), str):
            current[c["type"]] = dict(c)
    for cond in conditions:
        _set(current, cond, generation, stamp)
    _set(current, _root(current, dependents, generation), generation, stamp)
    return [current[t] for t in sorted(current)]
