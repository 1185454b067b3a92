"""Which taints the node lifecycle controller owns on a Node, and how it swaps them (pure).

Upstream (pkg/controller/nodelifecycle/node_lifecycle_controller.go):

- ``doNoScheduleTaintingPass`` (TaintNodesByCondition) keeps one NoSchedule taint per node condition
  that calls for it (``nodeConditionToTaintKeyStatusMap``: Ready False -> not-ready, Ready Unknown ->
  unreachable, MemoryPressure/DiskPressure/PIDPressure/NetworkUnavailable True -> memory-pressure,
  disk-pressure, pid-pressure, network-unavailable) plus ``node.kubernetes.io/unschedulable`` while
  ``spec.unschedulable`` is set (a cordon), and removes those no longer called for.
- the NoExecute not-ready / unreachable taints (taint-based eviction) are added through the zone's
  rate-limited queue (``zonedisruption.py``) and removed at once when the node is Ready again.

Every taint added gets ``timeAdded`` (pkg/controller/util/node ``SwapNodeControllerTaint``); taints
kept are left as they are, and taints that are not the controller's are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..store import Obj
from .scheduler import NOT_READY_TAINT_KEY, UNREACHABLE_TAINT_KEY, UNSCHEDULABLE_TAINT

UNSCHEDULABLE_TAINT_KEY = str(UNSCHEDULABLE_TAINT["key"])
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"

#: Upstream's ``nodeConditionToTaintKeyStatusMap``.
CONDITION_TAINTS: dict[str, dict[str, str]] = {
    "Ready": {"False": NOT_READY_TAINT_KEY, "Unknown": UNREACHABLE_TAINT_KEY},
    "MemoryPressure": {"True": "node.kubernetes.io/memory-pressure"},
    "DiskPressure": {"True": "node.kubernetes.io/disk-pressure"},
    "NetworkUnavailable": {"True": "node.kubernetes.io/network-unavailable"},
    "PIDPressure": {"True": "node.kubernetes.io/pid-pressure"},
}
#: The NoSchedule keys ``doNoScheduleTaintingPass`` compares (and so may remove).
NO_SCHEDULE_KEYS = frozenset(
    {UNSCHEDULABLE_TAINT_KEY, *(key for by_status in CONDITION_TAINTS.values() for key in by_status.values())}
)
#: The NoExecute keys of taint-based eviction.
NO_EXECUTE_KEYS = frozenset({NOT_READY_TAINT_KEY, UNREACHABLE_TAINT_KEY})

Taint = tuple[str, str]  # (key, effect): what upstream's MatchTaint compares


def taints_of(node: Obj) -> list[Obj]:
    return list((node.get("spec") or {}).get("taints") or [])


def has_taint(node: Obj, key: str, effect: str) -> bool:
    return any(t.get("key") == key and t.get("effect") == effect for t in taints_of(node))


def wanted_no_schedule(node: Obj) -> set[Taint]:
    """The NoSchedule taints ``doNoScheduleTaintingPass`` wants on ``node``."""
    out: set[Taint] = set()
    for cond in (node.get("status") or {}).get("conditions") or []:
        key = CONDITION_TAINTS.get(str(cond.get("type")), {}).get(str(cond.get("status")))
        if key is not None:
            out.add((key, NO_SCHEDULE))
    if (node.get("spec") or {}).get("unschedulable"):
        out.add((UNSCHEDULABLE_TAINT_KEY, NO_SCHEDULE))
    return out


def owned_no_schedule(node: Obj) -> set[Taint]:
    """The NoSchedule taints on ``node`` that ``doNoScheduleTaintingPass`` compares."""
    return {
        (str(t.get("key")), NO_SCHEDULE)
        for t in taints_of(node)
        if t.get("effect") == NO_SCHEDULE and t.get("key") in NO_SCHEDULE_KEYS
    }


def no_schedule_diff(node: Obj) -> tuple[set[Taint], set[Taint]]:
    """(to add, to remove) for the NoSchedule pass; both empty when the node is as wanted."""
    wanted, owned = wanted_no_schedule(node), owned_no_schedule(node)
    return wanted - owned, owned - wanted


def swap_taints(obj: Obj, add: Iterable[Taint], remove: Iterable[Taint], now: str) -> bool:
    """Add ``add`` (with ``timeAdded``) and drop ``remove`` in ``obj``'s spec; whether it changed."""
    spec = obj.setdefault("spec", {})
    drop = set(remove)
    before = list(spec.get("taints") or [])
    kept = [t for t in before if (t.get("key"), t.get("effect")) not in drop]
    present = {(t.get("key"), t.get("effect")) for t in kept}
    for key, effect in sorted(set(add)):
        if (key, effect) not in present:
            kept.append({"key": key, "effect": effect, "timeAdded": now})
    if kept == before:
        return False
    if kept:
        spec["taints"] = kept
    else:
        spec.pop("taints", None)
    return True
