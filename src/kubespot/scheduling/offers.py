"""The instance types a NodeClaim offers once packed (the flexibility band, the spot filter,
minValues, the 60-type cut), the planned claim written from them, and what a new NodeClaim counts
against its pool's limits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from . import explain, minvalues
from .claim import Claim, Offer, OfferBase
from .domains import Domains
from .explain import count
from .fit import pod_needs
from .groups import Group
from .instance_types import InstanceType
from .labels import CAPACITY_TYPE, INSTANCE_TYPE, ON_DEMAND, SPOT, ZONE
from .plan import PlannedClaim, PoolCapacity
from .requirements import Requirement, Requirements

#: A type's verdict under a claim's requirements (``Offers._type_verdict``).
_CANDIDATE, _OTHER_CAPACITY, _INCOMPATIBLE = 0, 1, 2

#: Most instance types one NodeClaim carries (the AWS provider's CreateFleet cut).
MAX_INSTANCE_TYPES = 60


class Offers(Domains):
    """A NodeClaim's offer and its charge against the limits."""

    def _finish(self, claim: Claim) -> None:
        """The NodeClaim's types: all that hold its pods within the flexibility band (wider where
        minValues asks), and the record of why the others are not offered."""
        pc, reqs = claim.pc, claim.reqs
        key = (
            pc.pool.name,
            id(reqs),
            claim.target.name,
            claim.capacity_type,
            tuple(sorted(claim.requested.items())),
            id(claim.opening),
            tuple(sorted(claim.charged.items())),
            claim.both,
        )
        hit = self._finished.get(key)
        if hit is None:
            # The opening is kept alive by the claim; its id is part of the key like the reqs'.
            hit = self._finished[key] = (reqs, self._offer(claim))
        offer = hit[1]
        chosen = offer.types
        zones = sorted(
            {
                o.zone
                for it in chosen
                for o in self._offerings(it, reqs)
                if o.capacity_type == claim.capacity_type
            }
        )
        final = reqs.copy()
        final.add(Requirement.of(INSTANCE_TYPE, "In", [it.name for it in chosen]))
        final.add(Requirement.of(ZONE, "In", zones))
        why = claim.why
        if offer.widened:
            why += f"; widened past the flexibility band to meet minValues ({offer.widened} types added)"
        if offer.short:
            why += "; " + minvalues.unmet_message(offer.short, reqs)
        self.plan.claims.append(
            PlannedClaim(
                pool=pc.pool.name,
                capacity_type=claim.capacity_type,
                instance_types=[it.name for it in chosen],
                price_per_hour=offer.price,
                zones=zones,
                pods=list(claim.pods),
                requests=claim.requested,
                requirements=final,
                why=why,
                considered=len(pc.instance_types),
                dropped=dict(offer.dropped),
                min_values=dict(offer.values),
                limits_charged=dict(claim.charged),
            )
        )

    def _offer_base(self, claim: Claim) -> OfferBase:
        """What ``_offer`` needs of each candidate type that does not depend on the claim's
        requests: whether its requirements refuse the claim's, its price, and (for the spot
        filter) its cheapest on-demand offering in the claim's zones. The NodeClaims of a pass
        share a few (requirements, target, capacity type, candidates), so this is worked out once
        for each, from each type's verdict under the requirements (worked out once per type)."""
        reqs, ct, types = claim.reqs, claim.capacity_type, claim.opening.types
        # A memoised opening hands every NodeClaim it makes one candidate list object.
        key = (id(reqs), claim.target.name, ct, id(types), claim.both)
        hit = self._offer_bases.get(key)
        if hit is not None:
            return hit[2]
        verdicts = self._type_verdicts(reqs, ct, claim.both)
        base = OfferBase()
        candidates: list[tuple[InstanceType, float, float]] = []
        others = (it for it in types if it is not claim.target)
        for it in (claim.target, *others):
            verdict = verdicts.get(it.name)
            if verdict is None:
                verdict = verdicts[it.name] = self._type_verdict(it, reqs, ct, claim.both)
            kind, price, od = verdict
            if kind == _OTHER_CAPACITY:
                base.other_capacity_count += 1
                if od < float("inf"):
                    base.other_capacity_od.append((it, od))
            elif kind == _INCOMPATIBLE:
                base.incompatible += 1
            else:
                candidates.append((it, price, od))
        base.set_candidates(claim.target, candidates)
        # The entry keeps ``reqs`` and the candidate list alive, so their ids are not reused.
        self._offer_bases[key] = (reqs, types, base)
        return base

    def _type_verdicts(self, reqs: Requirements, ct: str, both: bool) -> dict[str, tuple[int, float, float]]:
        """The verdicts on types under ``reqs`` so far, by type name (see ``_type_verdict``)."""
        key = (reqs.identity(), ct, both)
        hit = self._verdicts.get(key)
        if hit is None:
            hit = self._verdicts[key] = {}
        return hit

    def _type_verdict(
        self, it: InstanceType, reqs: Requirements, ct: str, both: bool
    ) -> tuple[int, float, float]:
        """Whether a claim with ``reqs`` may be offered ``it`` (or why not), its price of capacity type
        ``ct``, and its cheapest on-demand offering in the claim's zones (only the spot filter reads
        it: infinite otherwise)."""
        od = float("inf")
        if ct == SPOT and both and not reqs.has_min_values():
            zones = reqs.get_or_any(ZONE)
            od = min(
                (
                    o.price
                    for o in it.offerings
                    if o.available and o.capacity_type == ON_DEMAND and zones.has(o.zone)
                ),
                default=float("inf"),
            )
        if self._conflict(it, reqs):
            # The claim's requirements pin its capacity type; a type offered only as another
            # one lacks an offering, it is not incompatible with the pods.
            why = it.requirements.conflicts(reqs)
            if all(r.startswith(f"key {CAPACITY_TYPE},") for r in why):
                return _OTHER_CAPACITY, float("inf"), od
            return _INCOMPATIBLE, float("inf"), od
        return _CANDIDATE, self._price(it, reqs, ct), od

    def _offer(self, claim: Claim) -> Offer:
        """The types a NodeClaim offers: its target first, then the rest of the band, cheapest
        first; past the band, the cheapest types that bring the values minValues still lacks; at
        most ``MAX_INSTANCE_TYPES``, keeping minValues (Karpenter's ``Truncate``)."""
        reqs = claim.reqs
        ct = claim.capacity_type
        target_price = self._price(claim.target, reqs, ct)
        ceiling = target_price * (1 + self.flexibility)
        dropped = dict(claim.opening.dropped)
        has_min_values = reqs.has_min_values()
        base = self._offer_base(claim)
        if base.other_capacity_count:
            count(dropped, explain.NO_OFFERING, base.other_capacity_count)
        if base.incompatible:
            count(dropped, explain.INCOMPATIBLE, base.incompatible)
        # The candidates too small for what the claim holds, then those without an offering of its
        # capacity type, as vector tests over the family's candidates (in the offer's order).
        small = np.zeros(len(base.types), dtype=bool)
        for k, amount in claim.requested.items():
            small |= base.allocatable(k) < amount
        fits = ~small
        count(dropped, explain.TOO_SMALL, int(small.sum()))
        cheapest_od = float("inf")
        if ct == SPOT and claim.both and not has_min_values:
            cheapest_od = base.other_capacity_bar(claim.requested)
            if fits.any():
                cheapest_od = min(cheapest_od, float(base.on_demand[fits].min()))
        no_offering = fits & base.no_offering
        count(dropped, explain.NO_OFFERING, int(no_offering.sum()))
        priced = fits & ~no_offering
        prices = base.prices
        if ct == SPOT and claim.both and not has_min_values:
            # Karpenter's launch filter (aws ``filter.go`` SpotOfferingFilter, only when the
            # NodeClaim's own requirements allow both capacity types, not merely its pool's): spot
            # offerings dearer than the cheapest on-demand offering of the types that hold the
            # pods (candidates, and types offered only on demand: ``CompatibleAvailableFilter``
            # runs first) are left out; skipped when minValues asks for choice, as there.
            kept = priced & ((prices <= cheapest_od) | base.target)
            count(dropped, explain.SPOT_DEARER, int(priced.sum() - kept.sum()))
            priced = kept
        types = base.types
        band = [types[i] for i in np.flatnonzero(priced & (prices <= ceiling))]
        if claim.charged:
            # Karpenter's scheduler.go charges the limits once, when the NodeClaim is created
            # (subtractMax); pods joining later only narrow its options. A type larger than that
            # charge (a dearer zone left by a joining pod raises the band) stays out.
            within = [
                it
                for it in band
                if it is claim.target
                or all(it.resources.capacity.get(k, 0) <= v for k, v in claim.charged.items() if k != "nodes")
            ]
            count(dropped, explain.OVER_LIMITS, len(band) - len(within))
            band = within
        beyond = [types[i] for i in np.flatnonzero(priced & (prices > ceiling))]
        if has_min_values and claim.charged:
            # Widen only within what the claim counted against the limits when it opened (the band
            # then held every type of the band now: same target and ceiling, fewer types fit).
            charged = claim.charged
            more = [t for t in beyond if all(t.resources.capacity.get(k, 0) <= v for k, v in charged.items())]
        else:
            more = beyond
        chosen = minvalues.widen(band, more, reqs) if has_min_values else band
        widened = len(chosen) - len(band)
        count(dropped, explain.OUTSIDE_BAND, len(beyond) - widened)
        if widened:
            # Widened types join the list in price order, after the target.
            chosen = [chosen[0], *sorted(chosen[1:], key=lambda t: (self._price(t, reqs, ct), t.name))]
        cut = minvalues.truncate(chosen, reqs, MAX_INSTANCE_TYPES)
        count(dropped, explain.BEYOND_CUT, len(chosen) - len(cut))
        short = minvalues.unmet(cut, reqs) if has_min_values else {}
        values = minvalues.distinct_values(cut, reqs) if has_min_values else {}
        return Offer(cut, target_price, {k: v for k, v in dropped.items() if v}, widened, short, values)

    def _charge(
        self,
        pc: PoolCapacity,
        reqs: Requirements,
        target: InstanceType,
        capacity_type: str,
        cohort: Sequence[Group],
        pattern: Mapping[int, int],
    ) -> dict[str, int]:
        """What a new NodeClaim counts against its pool's limits: per limited resource the largest
        capacity among the types it would offer (Karpenter's ``scheduler.go`` ``subtractMax``, so
        whichever type EC2 picks the limits hold); ``nodes`` one each."""
        limits = pc.pool.limits
        if not limits:
            return {}
        if set(limits) == {"nodes"}:
            return {"nodes": 1}  # exact: no need to know the types
        probe = Claim(pc, reqs, target, capacity_type)
        probe.opening = self._opening
        for i, n in pattern.items():
            for name, amount in pod_needs(cohort[i].exemplar.requests).items():
                probe.requested[name] = probe.requested.get(name, 0) + amount * n
        offered = self._offer(probe).types
        # Nothing offered (the packing left the claim no type, the open capacity-type defect the
        # oracle pins): the target is what would be launched, so it is what counts.
        charge = {
            name: max(
                (it.resources.capacity.get(name, 0) for it in offered),
                default=target.resources.capacity.get(name, 0),
            )
            for name in limits
            if name != "nodes"
        }
        if "nodes" in limits:
            charge["nodes"] = 1
        return charge
