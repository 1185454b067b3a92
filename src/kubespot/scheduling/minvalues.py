"""Karpenter's ``minValues``: how many distinct values of a label key a NodeClaim's types keep open.

A requirement with ``minValues`` N on a key (``node.kubernetes.io/instance-type``,
``karpenter.k8s.aws/instance-family`` or any label) asks that the instance types a NodeClaim offers
carry at least N distinct values of that key, so the fleet request keeps that much choice
(kubernetes-sigs/karpenter ``pkg/cloudprovider/types.go`` ``SatisfiesMinValues`` and ``Truncate``;
several requirements on one key: the largest wins, as ``Requirement.intersection`` keeps it). A type
that does not define the key adds no value. Cutting the list (to 60 for CreateFleet) must keep
every ``minValues``: ``truncate`` keeps the types that bring the values first.

A deliberate difference from Karpenter's ``Truncate`` (cheapest 60, and under the Strict policy a
NodeClaim whose cut misses a minValues is dropped, its pods unschedulable): Karpenter cuts all the
compatible types of the pool, where the cheapest 60 usually carry the values; kubespot cuts its own
flexibility band, widened past the band with the types that bring the missing values, which are
then the dearest of the list. A cheapest-first cut would drop exactly those and fail NodeClaims
Karpenter launches, so ``truncate`` keeps them (the design note, minValues).

Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from .instance_types import InstanceType
from .requirements import Requirements


def _asked(reqs: Requirements) -> dict[str, int]:
    return {key: r.min_values for key, r in reqs.items() if r.min_values is not None}


def _values(it: InstanceType, key: str) -> frozenset[str]:
    req = it.requirements.get(key)
    # A type's labels are finite ``In`` sets; a key it does not define brings nothing.
    return frozenset() if req is None or req.complement else req.values


def distinct_values(types: Sequence[InstanceType], reqs: Requirements) -> dict[str, int]:
    """Per key with ``minValues``: how many distinct values ``types`` carry."""
    return {key: len(set().union(*(_values(it, key) for it in types))) for key in _asked(reqs)}


def unmet(types: Sequence[InstanceType], reqs: Requirements) -> dict[str, int]:
    """The keys whose ``minValues`` ``types`` do not reach, with how many values they do carry."""
    asked = _asked(reqs)
    have = distinct_values(types, reqs)
    return {key: have[key] for key, n in asked.items() if have[key] < n}


def unmet_message(missing: dict[str, int], reqs: Requirements) -> str:
    """Karpenter's words (``SatisfiesMinValues``), with the counts beside them."""
    detail = ", ".join(f"{key}: {n} of {reqs[key].min_values}" for key, n in sorted(missing.items()))
    return f"minValues requirement is not met for label(s) (label(s)=[{' '.join(sorted(missing))}]; {detail})"


def widen(
    chosen: Sequence[InstanceType], more: Sequence[InstanceType], reqs: Requirements
) -> list[InstanceType]:
    """``chosen`` plus, in ``more``'s order, each type that brings a value a short key still lacks,
    until every ``minValues`` is met (or ``more`` runs out): the smallest widening, cheapest first."""
    out = list(chosen)
    missing = unmet(out, reqs)
    if not missing:
        return out
    seen = {key: set().union(*(_values(it, key) for it in out)) for key in missing}
    for it in more:
        new = {key: _values(it, key) - seen[key] for key in missing}
        if not any(new.values()):
            continue
        out.append(it)
        for key, values in new.items():
            seen[key] |= values
        missing = {k: v for k, v in missing.items() if len(seen[k]) < (reqs[k].min_values or 0)}
        if not missing:
            break
    return out


def truncate(types: Sequence[InstanceType], reqs: Requirements, limit: int) -> list[InstanceType]:
    """At most ``limit`` of ``types`` (kept in their order), still meeting every ``minValues`` the
    whole list meets: the types bringing the values first (in order), then the rest in order.
    (Karpenter's ``Truncate`` takes the cheapest N and fails; why kubespot differs: module doc.)"""
    if len(types) <= limit:
        return list(types)
    head = list(types[:limit])
    if not _asked(reqs) or not unmet(head, reqs) or unmet(types, reqs):
        return head
    needed = widen(types[:1], types[1:], reqs)
    keep = {id(it) for it in needed}
    for it in types:
        if len(keep) >= limit:
            break
        keep.add(id(it))
    return [it for it in types if id(it) in keep]
