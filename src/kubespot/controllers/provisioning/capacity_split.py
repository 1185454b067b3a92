"""The per-NodePool spot/on-demand split (docs/designs/launching.md §6), pure.

The NodePool annotation ``kubespot.io/capacity-split: "onDemandBase=N,onDemandPercentAboveBase=P"``
carries Auto Scaling's ``InstancesDistribution`` (``OnDemandBaseCapacity``,
``OnDemandPercentageAboveBaseCapacity``) into a manifest Karpenter still accepts (it ignores the
annotation). Counted in nodes, as Auto Scaling counts instances: of ``total`` nodes the pool should
run ``min(total, N) + ceil(P% x (total - N))`` on-demand; a fractional count rounds up, in favour
of on-demand, as Auto Scaling does (Amazon EC2 Auto Scaling User Guide, "Setup overview for
creating a mixed instances group", Scaling behavior,
https://docs.aws.amazon.com/autoscaling/ec2/userguide/mixed-instances-groups-set-up-overview.html:
the percentage becomes a number of instances, a fraction rounded up in favour of On-Demand; a group
smaller than the base is all base).

At NodeClaim creation (``narrow``) a new claim of a pool with a split is narrowed to on-demand
while the pool's on-demand count, this claim included, is below that target, and to spot
otherwise; only to a capacity type the claim already allows (its pool, its pods and the available
offerings of its instance types), so a pool without spot, pods that need on-demand, or spot
pools all marked unavailable keep the claim as it was. A malformed annotation is a
``ValidationSucceeded=False`` reason ``CapacitySplitInvalid`` (``split_validation``) and the pool
is used without a split.

``narrowing`` is ``narrow`` with what the provisioner tells of it: when a claim open to both
capacity types is narrowed, a Normal ``CapacitySplit`` event on the NodeClaim and its NodePool
(``Nominations.capacity_split``) says to which type and why: the split, the pool's counts before
the claim and the on-demand target with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubespot.scheduling.api.conditions import VALIDATION_SUCCEEDED, Condition
from kubespot.scheduling.labels import CAPACITY_TYPE, NODEPOOL, ON_DEMAND, SPOT

__all__ = [
    "CAPACITY_SPLIT_INVALID",
    "SPLIT_ANNOTATION",
    "CapacitySplit",
    "Narrowing",
    "SplitError",
    "capacity_counts",
    "narrow",
    "narrowing",
    "parse_split",
    "split_of",
    "split_validation",
]

SPLIT_ANNOTATION = "kubespot.io/capacity-split"
CAPACITY_SPLIT_INVALID = "CapacitySplitInvalid"

Obj = dict[str, Any]

_FIELD = re.compile(r"^\s*(onDemandBase|onDemandPercentAboveBase)\s*=\s*(\d+)\s*$")


class SplitError(ValueError):
    """The annotation cannot be read."""


@dataclass(frozen=True)
class CapacitySplit:
    on_demand_base: int = 0
    on_demand_percent_above_base: int = 100

    def on_demand_target(self, total: int) -> int:
        """How many of ``total`` nodes are on-demand (the fraction rounded up)."""
        base = min(total, self.on_demand_base)
        above = total - base
        return base + -(-above * self.on_demand_percent_above_base // 100)

    def next_capacity_type(self, on_demand: int, spot: int) -> str:
        """The capacity type of one more node in a pool running ``on_demand`` and ``spot`` ones."""
        return ON_DEMAND if on_demand < self.on_demand_target(on_demand + spot + 1) else SPOT


def parse_split(text: str) -> CapacitySplit:
    """The split an annotation value says; ``SplitError`` when it is malformed. Both fields are
    optional, with Auto Scaling's defaults (base 0, 100 %); each at most once."""
    found: dict[str, int] = {}
    for part in text.split(","):
        if not part.strip():
            raise SplitError(f"empty field in {text!r}")
        match = _FIELD.match(part)
        if match is None:
            raise SplitError(
                f"{part.strip()!r} is not onDemandBase=<count> or onDemandPercentAboveBase=<0-100>"
            )
        key, value = match.group(1), int(match.group(2))
        if key in found:
            raise SplitError(f"{key} given twice")
        found[key] = value
    percent = found.get("onDemandPercentAboveBase", 100)
    if percent > 100:
        raise SplitError(f"onDemandPercentAboveBase={percent} is over 100")
    return CapacitySplit(found.get("onDemandBase", 0), percent)


def _annotation(pool: Mapping[str, Any]) -> str | None:
    annotations = (pool.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(SPLIT_ANNOTATION) if isinstance(annotations, Mapping) else None
    return None if value is None else str(value)


def split_of(pool: Mapping[str, Any]) -> CapacitySplit | None:
    """The NodePool object's split; None without one or when it is malformed (used unsplit)."""
    text = _annotation(pool)
    if text is None:
        return None
    try:
        return parse_split(text)
    except SplitError:
        return None


def split_validation(pool: Mapping[str, Any]) -> Condition | None:
    """``ValidationSucceeded`` False ``CapacitySplitInvalid`` for a malformed annotation, else None."""
    text = _annotation(pool)
    if text is None:
        return None
    try:
        parse_split(text)
    except SplitError as err:
        return Condition(
            VALIDATION_SUCCEEDED,
            "False",
            CAPACITY_SPLIT_INVALID,
            f"annotation {SPLIT_ANNOTATION}: {err}; the NodePool is used without a split",
        )
    return None


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _claim_capacity_type(claim: Mapping[str, Any]) -> str | None:
    """A NodeClaim's capacity type: its label once launched, else its requirement if single."""
    label = (_meta(claim).get("labels") or {}).get(CAPACITY_TYPE)
    if label in (SPOT, ON_DEMAND):
        return str(label)
    for req in (claim.get("spec") or {}).get("requirements") or ():
        if req.get("key") == CAPACITY_TYPE and req.get("operator") == "In":
            values = list(req.get("values") or [])
            if len(values) == 1 and values[0] in (SPOT, ON_DEMAND):
                return str(values[0])
    return None


def capacity_counts(
    pool: str, nodes: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]]
) -> dict[str, int]:
    """The pool's live nodes by capacity type: its NodeClaims not being deleted, and its nodes that
    have no NodeClaim (adopted or hand-made). A claim whose capacity type is not known yet (open
    to both, not launched) counts for neither."""
    counts = {ON_DEMAND: 0, SPOT: 0}
    claimed: set[str] = set()
    for claim in claims:
        meta = _meta(claim)
        host = str((claim.get("status") or {}).get("nodeName") or "")
        if host:
            claimed.add(host)
        if (meta.get("labels") or {}).get(NODEPOOL) != pool or meta.get("deletionTimestamp"):
            continue
        kind = _claim_capacity_type(claim)
        if kind is not None:
            counts[kind] += 1
    for node in nodes:
        meta = _meta(node)
        labels = meta.get("labels") or {}
        if labels.get(NODEPOOL) != pool or meta.get("deletionTimestamp") or meta.get("name") in claimed:
            continue
        kind = labels.get(CAPACITY_TYPE)
        if kind in counts:
            counts[str(kind)] += 1
    return counts


def narrow(claim: Obj, split: CapacitySplit, counts: dict[str, int]) -> str | None:
    """Narrow ``claim``'s capacity-type requirement as the split says, if it allows that type, and
    count it in ``counts``; the type it is narrowed to (None: left as it was)."""
    want = split.next_capacity_type(counts[ON_DEMAND], counts[SPOT])
    for req in claim["spec"]["requirements"]:
        if req.get("key") == CAPACITY_TYPE and req.get("operator") == "In":
            if want not in (req.get("values") or ()):
                only = list(req.get("values") or ())
                if len(only) == 1 and only[0] in counts:
                    counts[only[0]] += 1
                return None
            req["values"] = [want]
            counts[want] += 1
            return want
    return None


@dataclass(frozen=True)
class Narrowing:
    """A claim open to both capacity types narrowed by the split: to which type, and why."""

    capacity_type: str
    message: str


def _describe(split: CapacitySplit) -> str:
    return (
        f"onDemandBase={split.on_demand_base}, onDemandPercentAboveBase={split.on_demand_percent_above_base}"
    )


def narrowing(claim: Obj, split: CapacitySplit, counts: dict[str, int]) -> Narrowing | None:
    """``narrow``, and when it narrowed a claim that allowed more than one capacity type, what
    the event says (module docstring); None when the claim was pinned already or left alone."""
    allowed: list[str] = []
    for req in claim["spec"]["requirements"]:
        if req.get("key") == CAPACITY_TYPE and req.get("operator") == "In":
            allowed = list(req.get("values") or ())
            break
    on_demand, spot = counts[ON_DEMAND], counts[SPOT]
    kind = narrow(claim, split, counts)
    if kind is None or len(allowed) < 2:
        return None
    total = on_demand + spot + 1
    target = split.on_demand_target(total)
    message = (
        f"Narrowed to {kind} by {SPLIT_ANNOTATION} ({_describe(split)}): the NodePool runs "
        f"{on_demand} on-demand and {spot} spot node(s); of {total} with this one, {target} should "
        f"be on-demand"
    )
    if kind == SPOT:
        message += f" and {on_demand} already are"
    return Narrowing(kind, message)
