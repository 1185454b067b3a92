"""``UnavailableOfferings``: the pools (capacity type, instance type, zone) not to launch into for a
while, shared by everything that learns about capacity (pure; time comes from a ``Clock``).

Karpenter keeps the same cache (aws/karpenter-provider-aws ``pkg/cache/unavailableofferings.go``):
an insufficient-capacity error marks the pool for 3 minutes, marking again restarts the wait, and a
whole capacity type can be marked (spot without its service-linked role). kubespot marks from two
sides: the launch path (CreateFleet's errors) and the interruption handler (a spot interruption
warning marks its instance's pool, as Karpenter's interruption controller does). ``generation``
changes on every mark and every expiry, so a reader holding a filtered catalog knows when to filter
again (Karpenter's per-type sequence numbers, aws PR #5839).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from kubespot.model import Clock
from kubespot.scheduling.instance_types import InstanceType

__all__ = ["OfferingKey", "Unavailable", "UnavailableOfferings"]

#: (capacity type, instance type, zone); ``"*"`` for the type and zone means every one.
OfferingKey = tuple[str, str, str]
ANY = "*"


@dataclass(frozen=True, slots=True)
class Unavailable:
    """Why and until when a pool is avoided."""

    key: OfferingKey
    #: What marked it: an EC2 error code, ``SpotInterruptionWarning``...
    reason: str
    #: ``Clock.monotonic()`` seconds after which the mark is gone.
    until: float


class UnavailableOfferings:
    """Marks with a time to live; reads drop what has expired."""

    def __init__(self, clock: Clock, ttl: float = 180.0) -> None:
        self.clock = clock
        self.ttl = ttl
        self._marks: dict[OfferingKey, Unavailable] = {}
        self.generation = 0

    def mark(
        self, capacity_type: str, instance_type: str, zone: str, reason: str, ttl: float | None = None
    ) -> None:
        """Avoid the pool for ``ttl`` seconds (the cache's TTL by default), from now."""
        key = (capacity_type, instance_type, zone)
        until = self.clock.monotonic() + (self.ttl if ttl is None else ttl)
        self._marks[key] = Unavailable(key, reason, until)
        self.generation += 1

    def mark_capacity_type(self, capacity_type: str, reason: str) -> None:
        """Avoid every pool of ``capacity_type`` (spot without its service-linked role)."""
        self.mark(capacity_type, ANY, ANY, reason)

    def why(self, capacity_type: str, instance_type: str, zone: str) -> Unavailable | None:
        """The live mark that covers the pool, if any."""
        self._expire()
        for key in ((capacity_type, instance_type, zone), (capacity_type, ANY, ANY)):
            mark = self._marks.get(key)
            if mark is not None:
                return mark
        return None

    def is_unavailable(self, capacity_type: str, instance_type: str, zone: str) -> bool:
        return self.why(capacity_type, instance_type, zone) is not None

    def __iter__(self) -> Iterator[Unavailable]:
        self._expire()
        return iter(list(self._marks.values()))

    def __len__(self) -> int:
        self._expire()
        return len(self._marks)

    def apply(self, types: Iterable[InstanceType]) -> list[InstanceType]:
        """``types`` with the offerings of marked pools made unavailable (the others untouched)."""
        self._expire()
        if not self._marks:
            return list(types)
        out = []
        for t in types:
            offerings = tuple(
                replace(o, available=False)
                if o.available and self._covers(o.capacity_type, t.name, o.zone)
                else o
                for o in t.offerings
            )
            out.append(t if offerings == t.offerings else replace(t, offerings=offerings))
        return out

    def _covers(self, capacity_type: str, instance_type: str, zone: str) -> bool:
        marks = self._marks
        return (capacity_type, instance_type, zone) in marks or (capacity_type, ANY, ANY) in marks

    def _expire(self) -> None:
        now = self.clock.monotonic()
        gone = [k for k, m in self._marks.items() if m.until <= now]
        for k in gone:
            del self._marks[k]
        if gone:
            self.generation += 1
