"""New NodeClaims packed greedily: the cohort that may share one, filled per candidate type, the
type holding the most pending requests per dollar chosen, the packing repeated while it can be.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .candidates import undominated
from .claim import Claim
from .fit import how_many_fit, pod_needs, ports_allow
from .groups import Group, group_shape
from .instance_types import InstanceType
from .labels import CAPACITY_TYPE, ON_DEMAND, SPOT
from .lp_claims import LpClaims
from .packing import lp_eligible
from .plan import PoolCapacity
from .requirements import Requirement, Requirements
from .state import Best
from .taints import untolerated
from .topology import UNLIMITED


class Greedy(LpClaims):
    """The greedy packing of new NodeClaims (after the LP's, when it ran)."""

    def _cohort(self, first: Group, pc: PoolCapacity) -> list[Group]:
        """The pending groups that may share a new NodeClaim of ``pc`` with ``first``'s pods."""
        out = [first]
        start = self._position(first.origin or first)
        # Pods with topology rules place themselves (their domain first); nor may a pod join whose
        # labels the first pods' hostname rules or anti-affinity (any key: a node shares every
        # domain) select (it would count against them).
        scopes = self._sharing_scopes(first.exemplar) if self._keys else []
        if self._keys:
            # Only groups without topology rules may join: keep just those still pending, so the
            # scan does not walk the (many, small) topology groups every time.
            self._plain = [g for g in self._plain if g.left]
            later = [g for g in self._plain if self._position(g) > start]
        else:
            later = self.groups[start + 1 :]
        for g in later:
            if g.left and not untolerated(pc.pool.taints, g.exemplar.tolerations):
                if g.exemplar.topology or any(self._selects(sc, g.exemplar) for sc in scopes):
                    continue
                out.append(g)
        return out

    def _position(self, group: Group) -> int:
        pos = self._positions.get(id(group))
        if pos is None or self.groups[pos] is not group:
            self._positions = {id(g): i for i, g in enumerate(self.groups)}
            pos = self._positions[id(group)]
        return pos

    def _fill(
        self,
        cohort: Sequence[Group],
        it: InstanceType,
        pc: PoolCapacity,
        reqs: Requirements,
        left: Mapping[int, int],
        order: Sequence[int],
        first_cap: int = UNLIMITED,
        needs: Sequence[Mapping[str, int]] | None = None,
    ) -> tuple[dict[int, int], Requirements]:
        """How many of each group one node of ``it`` holds, filled in ``order`` (and the final
        reqs); the first group (the pods that opened the claim) always goes first."""
        free = {k: v - pc.daemon_overhead.get(k, 0) for k, v in it.allocatable.items()}
        pattern: dict[int, int] = {}
        ports: set[tuple[str, str, int]] = set(pc.daemon_ports)
        requested = dict(pc.daemon_overhead)
        for i in order:
            g = cohort[i]
            n = min(left[i], first_cap) if i == 0 else left[i]
            if n <= 0:
                continue
            need = needs[i] if needs is not None else pod_needs(g.exemplar.requests)
            # Room first (cheap, and what stops most groups once a node fills), requirements after.
            if need.get("cpu", 0) > free.get("cpu", 0) or need.get("memory", 0) > free.get("memory", 0):
                if i == 0:
                    return {}, reqs
                continue
            k = how_many_fit(free, need, min(n, ports_allow(g.exemplar, ports)))
            if k <= 0:
                if i == 0:
                    return {}, reqs
                continue
            merged = self._merge(reqs, g.exemplar) if i else reqs
            if merged is None or self._conflict(it, merged) or (i and not self._offerings(it, merged)):
                # Karpenter's nodeclaim.go CanAdd: a pod that would leave the type no available
                # offering (its zones, its capacity type) does not join.
                if i == 0:
                    return {}, reqs
                continue
            if pc.pool.name in self._min_values_pools:
                # CanAdd again: the claim's types that still hold everything must keep minValues
                # (filterInstanceTypesByRequirements with the summed requests), pod by pod.
                k = self._min_values_room(pc, merged, requested, need, k)
                if k <= 0:
                    if i == 0:
                        return {}, reqs
                    continue
            pattern[i] = k
            reqs = merged
            ports |= g.exemplar.ports
            for name, amount in need.items():
                free[name] = free.get(name, 0) - amount * k
                requested[name] = requested.get(name, 0) + amount * k
            if any(free.get(name, 0) < least for name, least in self._smallest.items()):
                break  # no pending pod fits what is left
        return pattern, reqs

    def _cheapest_first(
        self, types: Sequence[InstanceType], books: Mapping[str, Mapping[str, float]]
    ) -> list[InstanceType]:
        """``types`` by their cheapest offering in ``books`` (then name); the same few candidate
        lists and books come back for every NodeClaim of a workload, so each order is kept."""
        key = (id(types), id(books))
        hit = self._cheapest_orders.get(key)
        if hit is None:
            order = sorted(
                types,
                key=lambda t: (min((b[t.name] for b in books.values() if t.name in b), default=0.0), t.name),
            )
            # The entry keeps both alive, so their ids are not reused.
            hit = self._cheapest_orders[key] = (types, books, order)
        return hit[2]

    def _pack(
        self,
        first: Group,
        pc: PoolCapacity,
        reqs: Requirements,
        types: Sequence[InstanceType],
        books: Mapping[str, Mapping[str, float]],
    ) -> bool:
        cohort = self._cohort(first, pc)
        lp_key = (pc.pool.name, id(reqs))
        # A pool with minValues keeps the greedy, which checks them pod by pod (Karpenter's CanAdd).
        if (
            lp_key not in self._lp_tried
            and lp_eligible(first.exemplar)
            and pc.pool.name not in self._min_values_pools
        ):
            claims = len(self.claims)
            self._lp_tried[lp_key] = (reqs, self._pack_lp(cohort, pc, reqs))
            if len(self.claims) > claims:
                return True  # the residue is packed next, from candidates within the limits left
        lp_note = self._lp_tried.get(lp_key, (reqs, ""))[1]
        left = {i: g.left for i, g in enumerate(cohort)}
        fitted = self._market.get(id(types))
        if fitted is None or fitted[0] is not types:
            fitted = self._market[id(types)] = (types, market_prices(types, books))
        weights = fitted[1] or share_weights(cohort, left)
        # Two fills per type, largest CPU first and largest memory first: which packs a node best
        # depends on the type's shape (on Karpenter's generic mix the better of the two saved 3 %).
        by_cpu = list(range(len(cohort)))
        by_memory = [
            0,
            *sorted(
                range(1, len(cohort)),
                key=lambda j: (
                    -cohort[j].exemplar.requests.get("memory", 0),
                    -cohort[j].exemplar.requests.get("cpu", 0),
                ),
            ),
        ]
        needs = [pod_needs(g.exemplar.requests) for g in cohort]
        first_cap, max_claims = (
            self._new_node_limits(first.exemplar) if self._keys else (UNLIMITED, UNLIMITED)
        )
        others = {g.exemplar.requirements.identity() for g in cohort[1:]}
        if len(others) <= 1 and (len(cohort) == 1 or self._asks_no_more(reqs, cohort[1].exemplar)):
            # Safe: every pod may go to every candidate (the others ask for no more than the
            # first). The same pool and requirements come back for every new NodeClaim of a
            # workload, with the same candidates.
            key = (pc.pool.name, id(reqs), len(types))
            hit = self._frontiers.get(key)
            if hit is None:
                hit = self._frontiers[key] = (reqs, undominated(types, books))
            types = hit[1]

        def value(pattern: Mapping[int, int]) -> float:
            return sum(
                cohort[i].exemplar.requests.get(name, 0) * n * w
                for i, n in pattern.items()
                for name, w in weights.items()
            )

        # The best packing per capacity type, by pending requests held per dollar. Pods that open a
        # NodeClaim alone (topology rules keep others off) come back in the same shapes often.
        solo = (
            (
                pc.pool.name,
                id(reqs),
                len(types),
                group_shape(first.exemplar, frozenset()),
                min(left[0], first_cap),
            )
            if len(cohort) == 1 and not pc.pool.limits
            else None
        )
        memo = self._solo.get(solo) if solo else None
        best: Best = memo[1] if memo else {}
        # A type dearer than one that already held every pending pod of the cohort cannot score
        # better (it holds no more), so types go cheapest first and those are skipped.
        everything = {i: min(n, first_cap) if i == 0 else n for i, n in left.items() if n > 0}
        ceiling = dict.fromkeys(books, float("inf"))
        # And a type whose node could not hold more than the best packing per dollar so far, even
        # filled with exactly what it has room for, is not filled at all (an upper bound).
        totals = {
            name: sum(cohort[i].exemplar.requests.get(name, 0) * n for i, n in everything.items())
            for name in weights
        }

        def hopeless(it: InstanceType) -> bool:
            bound = sum(
                w * min(it.allocatable.get(name, 0) - pc.daemon_overhead.get(name, 0), totals[name])
                for name, w in weights.items()
            )
            for ct, book in books.items():
                price = book.get(it.name)
                if price is None:
                    continue
                if ct not in best or price <= 0:
                    return False
                mark = best[ct][0][0]
                if -bound / price <= mark + 1e-9 * abs(mark):
                    return False
            return True

        # minValues count the types with an offering of the claim's capacity type: such a pool's
        # claims are filled with it fixed from the start.
        pinned_only = pc.pool.name in self._min_values_pools
        # The hostname rules allow the group a single new NodeClaim (self-affinity): requests per
        # dollar would pick a small type and leave the rest of the group nowhere to go.
        lone = max_claims == 1 and left[0] > 1
        held: float = 0.0
        pattern: dict[int, int] = {}
        final = reqs
        for it in [] if memo else self._cheapest_first(types, books):
            if all(book.get(it.name, float("inf")) > ceiling[ct] for ct, book in books.items()):
                continue
            if best and not lone and hopeless(it):
                continue
            if not pinned_only:
                fills = [
                    self._fill(cohort, it, pc, reqs, left, order, first_cap, needs)
                    for order in (by_cpu, by_memory)
                ]
                held, (pattern, final) = max(((value(f[0]), f) for f in fills), key=lambda vf: vf[0])
                if not pattern:
                    continue
            for ct, book in books.items():
                if it.name not in book:
                    continue
                ct_held, ct_pattern, ct_final = held, pattern, final
                price = float("inf") if pinned_only else self._price(it, final, ct)
                if price == float("inf"):
                    # The fill's pods left no offering of this capacity type (one needs the other,
                    # or narrowed the zones): Karpenter's CanAdd would refuse them on such a
                    # claim, so fill again with the capacity type fixed first (rare).
                    pinned = self._narrow(reqs, [Requirement.of(CAPACITY_TYPE, "In", [ct])])
                    refills = [
                        self._fill(cohort, it, pc, pinned, left, order, first_cap, needs)
                        for order in (by_cpu, by_memory)
                    ]
                    ct_held, (ct_pattern, ct_final) = max(
                        ((value(f[0]), f) for f in refills), key=lambda vf: vf[0]
                    )
                    price = self._price(it, ct_final, ct) if ct_pattern else float("inf")
                    if price == float("inf"):
                        continue
                if ct_pattern == everything:
                    ceiling[ct] = min(ceiling[ct], book[it.name])
                score = (
                    # One NodeClaim may hold the group: the most of it first, then the cheapest
                    # (Karpenter's later pods join that NodeClaim, its types narrowing to the
                    # ones that fit them all: scheduler.go add, nodeclaim.go CanAdd).
                    (-ct_pattern.get(0, 0), price, it.name)
                    if lone
                    else (-ct_held / price if price > 0 else float("-inf"), price, it.name)
                )
                if ct not in best or score < best[ct][0]:
                    best[ct] = (score, it, ct_pattern, ct_final)
        if solo and not memo:
            self._solo[solo] = (reqs, best)
        # Spot first, unless an on-demand packing holds more per dollar (Karpenter drops spot
        # offerings dearer than the cheapest on-demand one; here the comparison is per packing).
        if not best:
            return False
        if SPOT in best and (ON_DEMAND not in best or best[SPOT][0] <= best[ON_DEMAND][0]):
            capacity_type = SPOT
        else:
            capacity_type = ON_DEMAND
        _, it, pattern, final = best[capacity_type]
        # One object per requirements text, so the memos keyed by identity hit across NodeClaims.
        final = self._narrow(final, [Requirement.of(CAPACITY_TYPE, "In", [capacity_type])])
        # Repeat the packing while every group in it has that many pods left.
        repeat = min(left[i] // n for i, n in pattern.items())
        repeat = min(repeat, max_claims)
        charge = self._charge(pc, final, it, capacity_type, cohort, pattern)
        for name, left_over in self._remaining(pc).items():
            per = charge.get(name, 0)
            if per > 0:
                repeat = min(repeat, max(left_over // per, 1))
        why = (
            f"{it.name} holds the most pending requests per dollar "
            f"({len(types)} types considered, {capacity_type})"
        ) + (f"; {lp_note}" if lp_note else "")
        used = self.usage[pc.pool.name]
        for _ in range(repeat):
            claim = Claim(pc, final, it, capacity_type)
            claim.why = why
            claim.opening = self._opening
            claim.charged = charge
            claim.name = f"nodeclaim-{len(self.claims)}"
            for i, n in pattern.items():
                g = cohort[i]
                claim.add(g.take(n), pod_needs(g.exemplar.requests), claim.reqs)
                claim.stories[id(g.story)] = g.story
                self._record(g.exemplar, n, claim.reqs, claim.name)
            self.claims.append(claim)
            if self._has_room(claim):
                self._open.add(claim)
            for name, amount in charge.items():
                used[name] = used.get(name, 0) + amount
        return True


def market_prices(
    types: Sequence[InstanceType], books: Mapping[str, Mapping[str, float]]
) -> dict[str, float] | None:
    """Dollars per millicore and per byte that best explain the candidates' prices (least squares
    over price ~ a * cpu + b * memory), so a packing is valued at what its requests cost on this
    catalog; None when the fit is degenerate or gives a resource no worth."""
    rows = [
        (float(it.allocatable.get("cpu", 0)), float(it.allocatable.get("memory", 0)), price)
        for it in types
        for book in books.values()
        if (price := book.get(it.name)) is not None
    ]
    scc = sum(c * c for c, _, _ in rows)
    smm = sum(m * m for _, m, _ in rows)
    scm = sum(c * m for c, m, _ in rows)
    scp = sum(c * p for c, _, p in rows)
    smp = sum(m * p for _, m, p in rows)
    det = scc * smm - scm * scm
    if not rows or det <= 0 or abs(det) < 1e-12 * scc * smm:
        return None
    per_cpu = (scp * smm - smp * scm) / det
    per_byte = (smp * scc - scp * scm) / det
    if per_cpu <= 0 or per_byte <= 0:
        return None
    return {"cpu": per_cpu, "memory": per_byte}


def share_weights(cohort: Sequence[Group], left: Mapping[int, int]) -> dict[str, float]:
    """Each resource weighted by the inverse of what the pending pods request of it in total."""
    totals: dict[str, float] = {}
    for i, g in enumerate(cohort):
        for name, amount in g.exemplar.requests.items():
            totals[name] = totals.get(name, 0) + amount * left[i]
    return {name: 1.0 / total for name, total in totals.items() if total > 0}
