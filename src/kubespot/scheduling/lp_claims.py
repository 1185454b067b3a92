"""New NodeClaims from the configuration LP's whole nodes (``packing``) for a cohort of pods
that may share any candidate type; the residue is left to the greedy.
"""

from __future__ import annotations

from collections.abc import Sequence

from .candidates import Candidates, undominated
from .claim import Claim, Opening
from .fit import how_many_fit, pod_needs
from .groups import Group
from .instance_types import InstanceType
from .labels import CAPACITY_TYPE, SPOT
from .lp_solver import SolverUnavailable
from .packing import EXACT_ROUNDS, NodeType, Packing, lp_eligible, pack
from .plan import PoolCapacity
from .requirements import Requirement, Requirements


class LpClaims(Candidates):
    """The LP's NodeClaims."""

    def _pack_lp(self, cohort: Sequence[Group], pc: PoolCapacity, reqs: Requirements) -> str:
        """NodeClaims from the configuration LP's whole nodes (``packing``) for the groups that may
        share any candidate type with the first; the residue is left to the greedy. Returns why
        the greedy packs alone ("" when the LP ran)."""
        same = cohort[0].exemplar.requirements.identity()
        groups = [g for g in cohort if lp_eligible(g.exemplar) and g.exemplar.requirements.identity() == same]
        # Every type a pod of the cohort fits, not only those the first (largest) pod fits.
        types, dropped, _ = self._candidates(pc, reqs, {"pods": 1})
        opening = Opening(types, dropped)
        books = self._price_books(types, reqs)
        frontier = undominated(types, books)
        free = {
            it.name: {k: v - pc.daemon_overhead.get(k, 0) for k, v in it.allocatable.items()}
            for it in frontier
        }
        needs = [pod_needs(g.exemplar.requests) for g in groups]
        # Only shapes some type of each capacity type holds, so the plans compared hold the same pods.
        fits = [
            all(
                any(how_many_fit(free[it.name], need, 1) for it in frontier if it.name in book)
                for book in books.values()
            )
            for need in needs
        ]
        groups = [g for g, ok in zip(groups, fits, strict=True) if ok]
        needs = [n for n, ok in zip(needs, fits, strict=True) if ok]
        if not groups:
            return ""
        # Groups that differ only in labels (other pods' selectors read them) are one shape to the
        # LP: its size grows with shapes, and a node's pattern is filled from them in order.
        members: dict[tuple[tuple[str, int], ...], list[int]] = {}
        for j, need in enumerate(needs):
            members.setdefault(tuple(sorted(need.items())), []).append(j)
        shapes = list(members.values())
        shape_groups = [groups[js[0]] for js in shapes]
        packed: dict[str, tuple[list[InstanceType], Packing]] = {}
        counts = [sum(groups[j].left for j in js) for js in shapes]
        needs = [needs[js[0]] for js in shapes]
        # Spot first (when allowed), packed to whole nodes; the other capacity type's LP from the
        # greedy pricing alone tells whether its plan is cheaper, at a fraction of the time.
        for ct in sorted(books, key=lambda ct: ct != SPOT):
            its = [it for it in frontier if it.name in books[ct]]
            node_types = [NodeType(it.name, free[it.name], books[ct][it.name]) for it in its]
            try:
                first = not packed
                packing = pack(
                    needs, counts, node_types, exact_rounds=EXACT_ROUNDS if first else 0, whole=first
                )
                if not first and packing.bound < min(p.bound for _, p in packed.values()):
                    packing = pack(needs, counts, node_types)
                    packed.clear()
                packed[ct] = (its, packing)
            except SolverUnavailable as e:
                return f"greedy packing: {e}"
            except ValueError:
                continue  # no pod fits a type with this capacity type: the other one, or the greedy
        # Spot unless the on-demand plan costs less for the same pods (decision 3, per plan).
        whole = [ct for ct, (_, p) in packed.items() if p.nodes]
        if not whole:
            return ""
        ct = whole[0]
        its, packing = packed[ct]
        final = reqs.copy()
        final.add(Requirement.of(CAPACITY_TYPE, "In", [ct]))
        used = self.usage[pc.pool.name]
        pods = sum(g.left for g in groups)
        # The LP's claims may offer any type the cohort fits; _charge sizes the offer from it.
        saved, self._opening = self._opening, opening
        try:
            for nodes in packing.nodes:
                it = its[nodes.type]
                why = (
                    f"{it.name}: {nodes.count} such nodes in the configuration LP's packing of {pods} "
                    f"pods ({len(its)} types considered, {ct}; {packing.note})"
                )
                # Limits as the greedy counts them (the largest capacity the claim may be offered).
                charge = self._charge(pc, final, it, ct, shape_groups, dict(nodes.pattern))
                for _ in range(nodes.count):
                    if any(charge.get(name, 0) > left for name, left in self._remaining(pc).items()):
                        return ""  # the greedy packs the rest and reports the limit
                    claim = Claim(pc, final, it, ct)
                    claim.why = why
                    claim.opening = opening
                    claim.charged = charge
                    claim.name = f"nodeclaim-{len(self.claims)}"
                    for s, n in nodes.pattern:
                        for j in shapes[s]:
                            k = min(n, groups[j].left)
                            if k:
                                claim.add(groups[j].take(k), needs[s], final)
                                claim.stories[id(groups[j].story)] = groups[j].story
                                # Other pods' topology rules may select these pods' labels.
                                self._record(groups[j].exemplar, k, final, claim.name)
                                n -= k
                    self.claims.append(claim)
                    if self._has_room(claim):
                        self._open.add(claim)
                    for name, amount in charge.items():
                        used[name] = used.get(name, 0) + amount
        finally:
            self._opening = saved
        return ""
