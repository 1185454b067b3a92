"""A relaunch after insufficient capacity: which pods came back from a NodeClaim EC2 refused, and
the wide type list their replacement carries (docs/designs/launching.md §2b, "Widened relaunch").

An ordinary NodeClaim offers the simulation's flexibility band (docs/designs/provisioning.md), so
one refusal rules out one price band and the next costs a whole delete → re-plan → create → launch
round trip. Karpenter's NodeClaims always carry every compatible type that fits, cheapest first, up
to 60 (kubernetes-sigs/karpenter ``pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go``
``ToNodeClaim``; aws/karpenter-provider-aws ``pkg/providers/instance/instance.go``
``filterInstanceTypes``), so one CreateFleet reaches every spot pool EC2's
``price-capacity-optimized`` may pick. kubespot does that only for the replacement of a claim
refused for insufficient capacity: there, finding capacity in one call is worth more than the
band's price.

- ``RelaunchMemory``: the NodeClaim controller tells it (``refused``) before it deletes a claim for
  insufficient capacity; when the provisioner sees that claim go, the pods released from it are
  remembered (``released``) for ``ttl`` seconds, and a planned claim holding any of them is widened.
  Memory only: after a restart a replacement carries the band, as any first launch.
- ``widen``: the planned claim with every type of its class's (already filtered) catalog that is
  compatible with its other requirements and the instance types its pool and pods allow, holds its
  requests, and has an available offering in its zones and capacity types; exotic types only when
  nothing else is left, cheapest first by the claim's capacity type, at most 60 keeping
  ``minValues``. Its zones stay the plan's (a topology rule may have chosen them). A type whose
  capacity exceeds what the pool's limits leave is dropped, as Karpenter's scheduler drops it before
  ``ToNodeClaim`` (``scheduler.go`` ``filterByRemainingResources``); the claim is then charged its
  largest type (``subtractMax``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from kubespot.cloud.candidates import MAX_INSTANCE_TYPES, is_exotic
from kubespot.scheduling.instance_types import InstanceType
from kubespot.scheduling.labels import CAPACITY_TYPE, INSTANCE_TYPE, WELL_KNOWN, ZONE
from kubespot.scheduling.minvalues import truncate
from kubespot.scheduling.requirements import Requirement, Requirements
from kubespot.scheduling.simulate import PlannedClaim

__all__ = ["RELAUNCH_MEMORY_SECONDS", "RelaunchMemory", "widen"]

#: How long pods released from a refused claim are planned wide. Their re-plan comes within a
#: second (``Batcher.trigger_now``); the margin covers a pass abandoned on an API error and retried.
RELAUNCH_MEMORY_SECONDS = 120.0


class RelaunchMemory:
    """NodeClaims refused for insufficient capacity, and the pods that came back from them."""

    def __init__(self, ttl: float = RELAUNCH_MEMORY_SECONDS, monotonic: Callable[[], float] = time.monotonic):
        self.ttl = ttl
        self._monotonic = monotonic
        self._claims: dict[str, float] = {}
        self._pods: dict[str, float] = {}

    def refused(self, claim: str) -> None:
        """``claim`` is about to be deleted for insufficient capacity (the NodeClaim controller)."""
        now = self._monotonic()
        self._forget(now)
        self._claims[claim] = now + self.ttl

    def released(self, claim: str, pods: Iterable[str]) -> bool:
        """The pods (UIDs) of ``claim`` are pending again; True when it was refused, so that their
        replacement is widened."""
        now = self._monotonic()
        if self._claims.pop(claim, 0.0) <= now:
            return False
        for uid in pods:
            self._pods[uid] = now + self.ttl
        return True

    def wide(self, uids: Iterable[str]) -> bool:
        """Any of the pods came back from a refused claim lately."""
        now = self._monotonic()
        return any(self._pods.get(uid, 0.0) > now for uid in uids)

    def _forget(self, now: float) -> None:
        if len(self._claims) + len(self._pods) < 4096:
            return
        self._claims = {k: t for k, t in self._claims.items() if t > now}
        self._pods = {k: t for k, t in self._pods.items() if t > now}


def _price(
    t: InstanceType, zones: Requirement, capacity_type: str, allowed: Requirement
) -> tuple[int, float]:
    """Sort key: types offered in the claim's own capacity type first, then by their cheapest
    available offering (of that capacity type, else of any allowed one)."""
    offers = [o for o in t.offerings if o.available and zones.has(o.zone)]
    own = [o.price for o in offers if o.capacity_type == capacity_type]
    if own:
        return 0, min(own)
    return 1, min((o.price for o in offers if allowed.has(o.capacity_type)), default=float("inf"))


def widen(
    planned: PlannedClaim,
    types: Sequence[InstanceType],
    allowed_capacity: Requirement,
    allowed_types: Requirement | None = None,
    limits_left: Mapping[str, int] | None = None,
) -> PlannedClaim:
    """``planned`` with every type of ``types`` its pods may use (module docstring); unchanged when
    none is found (the catalog changed under the plan). ``allowed_types``: the instance-type
    requirement of the pool and the pods (the plan's own was narrowed to the band, and the catalog
    is the class's, not the pool's). ``limits_left``: per limited resource, what the pool's limits
    leave this claim (its own charge included)."""
    reqs = Requirements(r for k, r in planned.requirements.items() if k not in (INSTANCE_TYPE, CAPACITY_TYPE))
    reqs.add(allowed_capacity)
    if allowed_types is not None:
        reqs.add(allowed_types)
    zones = reqs.get_or_any(ZONE)
    requests = planned.requests
    candidates: list[tuple[tuple[int, float], str, InstanceType]] = []
    for t in types:
        if not reqs.is_compatible(t.requirements, WELL_KNOWN):
            continue
        if any(amount > t.allocatable.get(name, 0) for name, amount in requests.items()):
            continue
        if limits_left and any(
            t.resources.capacity.get(name, 0) > left for name, left in limits_left.items() if name != "nodes"
        ):
            continue
        key = _price(t, zones, planned.capacity_type, allowed_capacity)
        if key[1] < float("inf"):
            candidates.append((key, t.name, t))
    generic = [c for c in candidates if not is_exotic(c[2])]
    candidates = generic or candidates
    candidates.sort(key=lambda c: (c[0], c[1]))
    kept = truncate([c[2] for c in candidates], reqs, MAX_INSTANCE_TYPES)
    if not kept:
        return planned
    names = [t.name for t in kept]
    final = Requirements(r for k, r in planned.requirements.items() if k != INSTANCE_TYPE)
    final.add(Requirement.of(INSTANCE_TYPE, "In", names))
    charged = {
        k: v if k == "nodes" else max(t.resources.capacity.get(k, 0) for t in kept)
        for k, v in planned.limits_charged.items()
    }
    return replace(
        planned,
        instance_types=names,
        requirements=final,
        limits_charged=charged,
        why=planned.why + f"; widened to {len(names)} types after insufficient capacity",
    )
