"""Status conditions as Karpenter's condition sets keep them (pure).

awslabs/operatorpkg ``status/condition_set.go`` at HEAD (checked at ``7a13865``; Karpenter HEAD
pins a later commit that adds an injectable clock, ``WithClock``, nothing this module decides):

- ``For``: the root (``Ready``) and then each dependent that is missing is set ``Unknown``
  ``AwaitingReconciliation`` "object is awaiting reconciliation".
- ``Set``: the condition carries the object's ``generation`` as ``observedGeneration``; its
  ``lastTransitionTime`` moves only when its status changes (a new reason, message or generation
  with the same status keeps the old time); a condition set for the first time is stamped with the
  object's ``creationTimestamp`` when it is the root or a dependent (its "last transition" was the
  object's creation), with now otherwise. A condition equal to the stored one in every field is no
  change at all (nothing re-sorted, the root not recomputed). While the object is being deleted
  every other condition's ``observedGeneration`` is bumped to the generation too (the API server
  bumps a custom resource's generation when it marks it deleting, and the root must not fall to
  ``Unknown`` for it). The list is kept sorted by ``lastTransitionTime``, oldest first (a stable
  sort), with the root last.
- ``recomputeRootCondition`` after every change of a non-root condition: ``Ready`` True (reason
  ``Ready``, no message) when every dependent is True at the current generation; otherwise False
  with reason ``UnhealthyDependents`` once one is False at the current generation, else Unknown
  with ``ReconcilingDependents``; the message lists the unhealthy ones as ``Type=Status``, latest
  transition first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .conditions import Condition

__all__ = ["AWAITING", "READY", "merge_conditions", "rfc3339"]

READY = "Ready"
#: operatorpkg's ``SetUnknown``: what a condition says before anything has looked at it.
AWAITING = ("AwaitingReconciliation", "object is awaiting reconciliation")

Obj = dict[str, Any]
_FIELDS = ("type", "status", "observedGeneration", "lastTransitionTime", "reason", "message")


def rfc3339(at: datetime) -> str:
    """A metav1.Time as the API writes it (second precision, ``Z``)."""
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _when(c: Mapping[str, Any]) -> datetime:
    """A condition's ``lastTransitionTime`` for ordering (unreadable: the zero time, as Go's)."""
    text = c.get("lastTransitionTime")
    if isinstance(text, str) and text:
        try:
            at = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return datetime.min.replace(tzinfo=UTC)


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Go's ``reflect.DeepEqual`` of two conditions (omitted fields are their zero values)."""
    zero: dict[str, Any] = {"observedGeneration": 0}
    return all(a.get(k, zero.get(k, "")) == b.get(k, zero.get(k, "")) for k in _FIELDS)


class _ConditionSet:
    """One object's conditions while they are set, as operatorpkg's ``ConditionSet``."""

    def __init__(
        self,
        current: list[Obj],
        dependents: Sequence[str],
        *,
        generation: int,
        now: str,
        created: str,
        deleting: bool,
    ) -> None:
        self.current = current
        self.dependents = [d for d in dict.fromkeys(dependents) if d != READY]
        self.generation = generation
        self.now = now
        self.created = created
        self.deleting = deleting

    def start(self) -> None:
        """``For``: the root first (its time is the consistent one), then the dependents."""
        present = {c["type"] for c in self.current}
        for t in (READY, *self.dependents):
            if t not in present:
                self.set(Condition(t, "Unknown", *AWAITING))
                present.add(t)

    def set(self, cond: Condition) -> bool:
        new: Obj = {
            "type": cond.type,
            "status": cond.status,
            "observedGeneration": self.generation,
            "lastTransitionTime": "",
            "reason": cond.reason,
            "message": cond.message,
        }
        out: list[Obj] = []
        found = False
        for c in self.current:
            if c["type"] != cond.type:
                out.append({**c, "observedGeneration": self.generation} if self.deleting else c)
                continue
            found = True
            # A transition is a change of status only: readers (kubectl, alerts on "False for
            # 10 min", the NodeClaim timeouts) measure how long a status has held.
            new["lastTransitionTime"] = (
                c.get("lastTransitionTime") or self.now if c.get("status") == cond.status else self.now
            )
            if _same(new, c):
                return False
        if not found:
            dependent = cond.type == READY or cond.type in self.dependents
            new["lastTransitionTime"] = self.created if dependent else self.now
        out.append(new)
        # Sorted for kubectl's reader: oldest transition first, the root last (stable).
        out.sort(key=lambda c: (c["type"] == READY, _when(c)))
        self.current = out
        if cond.type != READY:
            self._root()
        return True

    def _root(self) -> None:
        unhealthy = [
            c
            for c in self.current
            if c["type"] in self.dependents
            and (c.get("status") != "True" or c.get("observedGeneration") != self.generation)
        ]
        if not unhealthy:
            self.set(Condition(READY, "True", READY))
            return
        unhealthy.sort(key=_when, reverse=True)
        failed = any(
            c.get("status") == "False" and c.get("observedGeneration") == self.generation for c in unhealthy
        )
        message = ", ".join(f"{c['type']}={c.get('status')}" for c in unhealthy)
        if failed:
            self.set(Condition(READY, "False", "UnhealthyDependents", message))
        else:
            self.set(Condition(READY, "Unknown", "ReconcilingDependents", message))


def merge_conditions(
    old: Iterable[Mapping[str, Any]] | None,
    conditions: Iterable[Condition],
    *,
    dependents: Sequence[str],
    generation: int,
    now: datetime,
    created: str | None = None,
    deleting: bool = False,
) -> list[Obj]:
    """``old`` with ``conditions`` set one after the other as operatorpkg's ``For`` then ``Set``
    (module docstring): ``Ready`` recomputed from ``dependents``.

    ``created``: the object's ``creationTimestamp`` (the first stamp of the root and the
    dependents; now when unknown); ``deleting``: it has a ``deletionTimestamp``. Conditions
    ``old`` has that are not set here stay as they were (another controller's).
    """
    stamp = rfc3339(now)
    current: list[Obj] = []
    seen: set[str] = set()
    for c in old or ():
        if isinstance(c, Mapping) and isinstance(c.get("type"), str) and c["type"] not in seen:
            seen.add(c["type"])
            current.append(dict(c))
    cs = _ConditionSet(
        current,
        dependents,
        generation=generation,
        now=stamp,
        created=created or stamp,
        deleting=deleting,
    )
    cs.start()
    for cond in conditions:
        cs.set(cond)
    return cs.current
