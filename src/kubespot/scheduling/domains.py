"""Topology rules (``topology.py``) met against this pass's nodes and NodeClaims: each key's
domains, where a placement counts, the hostname caps, the fences anti-affinity raises, and why a
hostname rule stops a pod.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from .claim import Claim
from .fit import how_many_fit, pod_needs
from .groups import Group
from .labels import CAPACITY_TYPE, HOSTNAME, WELL_KNOWN, ZONE
from .plan import ExistingNode
from .pods import PodView
from .requirements import Requirement, Requirements
from .state import PassState
from .taints import untolerated
from .topology import UNLIMITED, PodTerm, Scope, Spread


class Domains(PassState):
    """The topology side of a pass."""

    def _count_existing(self) -> None:
        """The existing nodes' pods in the topology counts, and their anti-affinity terms."""
        if self._keys:
            for node in self.nodes:
                where = self._where(node.requirements, node.hostname, node=True)
                for namespace, labels in node.pods:
                    self.tallies.record(namespace, labels, where, 1, node.requirements)
                self._keep_out(node.anti, where)

    def _affinity_hosts(self, pod: PodView) -> set[str] | None:
        """The nodes and NodeClaims ``pod``'s hostname affinity admits (where a matching pod
        runs), or None when it has none or may start its own (no match yet, selects itself)."""
        hosts: set[str] | None = None
        for term in pod.topology.terms:
            if term.anti or term.key != HOSTNAME:
                continue
            tally = self.tallies.tally(HOSTNAME, term.scope, False)
            if tally.total == 0 and self._selects(term.scope, pod):
                continue
            here = set(self._hosts_running(term.scope))
            hosts = here if hosts is None else hosts & here
        return hosts

    def _claims_named(self, names: Iterable[str]) -> list[Claim]:
        """This pass's NodeClaims among ``names``, in the order they were opened."""
        for claim in self.claims[self._hosts_seen :]:
            self._hosts[claim.name] = claim
            self._claim_at[claim.name] = self._hosts_seen
            self._hosts_seen += 1
        found = [(self._claim_at[n], self._hosts[n]) for n in names if n in self._claim_at]
        return [c for _, c in sorted(found, key=lambda x: x[0]) if isinstance(c, Claim)]

    def _universe(self, key: str) -> list[str]:
        """A key's domains: what the NodePools' requirements and offerings allow, and the values
        existing nodes have (Karpenter's domain groups, ``topology.go`` ``NewTopology``)."""
        hit = self._universes.get(key)
        if hit is not None:
            return hit
        values: set[str] = set()
        for pc in self.pools:
            reqs = pc.pool.requirements
            allowed = reqs.get_or_any(key)
            if not allowed.complement:
                values.update(allowed.values)
                continue
            for it in pc.instance_types:
                if it.requirements.conflicts(reqs):
                    continue
                if key in (ZONE, CAPACITY_TYPE):
                    values.update(
                        o.zone if key == ZONE else o.capacity_type for o in it.available_offerings(reqs)
                    )
                elif key in it.requirements and not it.requirements[key].complement:
                    values.update(v for v in it.requirements[key].values if allowed.has(v))
        for node in self.nodes:
            req = node.requirements.get(key)
            if req is not None and not req.complement:
                values.update(req.values)
        out = self._universes[key] = sorted(values)
        return out

    def _where(self, reqs: Requirements, hostname: str, *, node: bool = False) -> dict[str, tuple[str, ...]]:
        """The domains a node or NodeClaim with ``reqs`` may be in, per key the rules read. A
        real ``node`` without the key is in no domain of it (Karpenter ``topology.go`` countDomains,
        kube-scheduler alike), where a NodeClaim without it may still land in any."""
        out: dict[str, tuple[str, ...]] = {}
        for key in self._keys:
            if key == HOSTNAME:
                out[key] = (hostname,)
                continue
            req = reqs.get(key)
            if req is None and node:
                out[key] = ()
            elif req is None or req.complement:
                out[key] = tuple(d for d in self._universe(key) if req is None or req.has(d))
            else:
                out[key] = tuple(sorted(req.values))
        return out

    def _record(self, pod: PodView, n: int, reqs: Requirements, hostname: str, *, node: bool = False) -> None:
        if not self._keys or n <= 0:
            return
        where = self._where(reqs, hostname, node=node)
        self.tallies.record(pod.namespace, pod.labels, where, n, reqs)
        # Only required terms keep other pods away (Karpenter topology.go updateInverseAntiAffinity
        # leaves preferences out): a relaxed pod must not stay barred by its own dropped preference.
        self._keep_out([(t.key, t.scope) for t in pod.topology.terms if t.anti and t.weight == 0], where)

    def _keep_out(self, terms: Sequence[tuple[str, Scope]], where: Mapping[str, tuple[str, ...]]) -> None:
        """Anti-affinity terms of pods placed at ``where`` keep the pods they select out of those
        domains (kube-scheduler ``interpodaffinity`` satisfyExistingPodsAntiAffinity; Karpenter's
        inverse anti-affinity groups, ``topology.go``). A NodeClaim whose domain is still open
        keeps them out of every domain it may get, as Karpenter records it."""
        for key, scope in terms:
            if key == HOSTNAME:
                self._anti_at.setdefault(where[key][0], []).append(scope)
                continue
            by_domain = self._inverse.setdefault(key, {})
            for d in where.get(key, ()):
                by_domain.setdefault(d, []).append(scope)

    def _fence(self, group: Group) -> None:
        """Narrow ``group`` away from the domains placed pods' anti-affinity keeps it out of."""
        pod = group.exemplar
        extra = []
        for key, by_domain in self._inverse.items():
            bad = sorted(d for d, scopes in by_domain.items() if any(self._selects(s, pod) for s in scopes))
            if bad:
                extra.append(Requirement.of(key, "NotIn", bad))
        if extra:
            group.exemplar = replace(pod, requirements=self._narrow(pod.requirements, extra))

    def _selects(self, scope: Scope, pod: PodView) -> bool:
        return self.tallies.selects(scope, pod.namespace, pod.labels)

    def _cap(self, pod: PodView, hostname: str, *, existing: bool = False) -> int:
        """How many of ``pod``'s group the node (or NodeClaim) ``hostname`` may still take under
        the hostname rules: spread caps it at maxSkew over the minimum (Karpenter's 0, a new node
        being an empty domain; on an ``existing`` node kube-scheduler's, which binds first and
        knows only the nodes there are), anti-affinity at one and only where no matching pod
        runs, affinity to where one runs; another pod's anti-affinity there keeps it off
        (kube-scheduler's ``interpodaffinity`` filter checks both ways)."""
        if any(self._selects(scope, pod) for scope in self._anti_at.get(hostname, ())):
            return 0
        cap = UNLIMITED
        topo = pod.topology.required if existing and self._hard_only else pod.topology
        for spread in topo.spreads:
            if spread.key != HOSTNAME:
                continue
            count = self.tallies.tally(HOSTNAME, spread.scope, False).counts.get(hostname, 0)
            low = self._existing_min(spread, pod) if existing else 0
            if self._selects(spread.scope, pod):
                cap = min(cap, max(spread.max_skew + low - count, 0))
            elif count - low > spread.max_skew:
                return 0
        for term in topo.terms:
            if term.key != HOSTNAME:
                continue
            tally = self.tallies.tally(HOSTNAME, term.scope, term.anti)
            count = tally.counts.get(hostname, 0)
            if term.anti:
                if count:
                    return 0
                if self._selects(term.scope, pod):
                    cap = min(cap, 1)
            elif not count and not (tally.total == 0 and self._selects(term.scope, pod)):
                return 0
        return cap

    def _existing_min(self, spread: Spread, pod: PodView) -> int:
        """kube-scheduler's minimum of a hostname spread: the fewest matching pods on an existing
        node the spread counts (``podtopologyspread`` PreFilter: every node with the key and,
        with ``nodeAffinityPolicy: Honor``, that the pod's selector and required affinity match;
        tainted and cordoned nodes too, ``nodeTaintsPolicy`` being Ignore)."""
        strict = pod.strict_requirements
        honor = spread.honor_node_affinity and len(strict) > 0
        key = (spread.scope, strict.identity() if honor else ())
        hit = self._lows.get(key)
        if hit is not None and hit[0] == self.tallies.version:
            return hit[1]
        counts = self.tallies.tally(HOSTNAME, spread.scope, False).counts
        low = min(
            (
                counts.get(n.hostname, 0)
                for n in self.nodes
                if not honor or not n.requirements.compatibility(strict, WELL_KNOWN)
            ),
            default=0,
        )
        self._lows[key] = (self.tallies.version, low)
        return low

    def _new_node_limits(self, pod: PodView) -> tuple[int, int]:
        """How many of ``pod``'s group one new NodeClaim takes, and how many such NodeClaims the
        hostname rules allow at once (self-affinity: the first pod's node, so one)."""
        cap = self._cap(pod, "")
        claims = UNLIMITED
        for term in pod.topology.terms:
            if term.key == HOSTNAME and not term.anti:
                claims = 1
        return cap, claims

    def _hostname_scopes(self, pod: PodView) -> list[Scope]:
        return [s.scope for s in pod.topology.spreads if s.key == HOSTNAME] + [
            t.scope for t in pod.topology.terms if t.key == HOSTNAME
        ]

    def _sharing_scopes(self, pod: PodView) -> list[Scope]:
        """The scopes of ``pod``'s rules that a pod sharing its node would break or count for."""
        return self._hostname_scopes(pod) + [
            t.scope for t in pod.topology.terms if t.anti and t.key != HOSTNAME
        ]

    def _spread_counts(self, spread: Spread, pod: PodView) -> Mapping[str, int]:
        """The pods a spread counts per domain; with ``nodeAffinityPolicy: Honor`` (the default)
        only those on nodes the pod's node selector and required affinity match (kube-scheduler's
        ``podtopologyspread`` PreFilter; Karpenter's ``TopologyNodeFilter``)."""
        strict = pod.strict_requirements
        if not spread.honor_node_affinity or not len(strict):
            return self.tallies.tally(spread.key, spread.scope, False).counts
        key = (spread.key, spread.scope, strict.identity())
        hit = self._honored.get(key)
        if hit is None or hit[0] != self.tallies.version:
            counts = self.tallies.counts_where(
                spread.key,
                spread.scope,
                lambda where: isinstance(where, Requirements) and not where.compatibility(strict, WELL_KNOWN),
            )
            hit = self._honored[key] = (self.tallies.version, counts)
        return hit[1]

    def _eligible(self, pod: PodView, key: str, honor: bool = True) -> list[str]:
        """The domains of ``key`` the pod's node requirements allow (``nodeAffinityPolicy: Honor``).
        Its strict requirements: a preference narrowing the domains would let a hard spread count
        its minimum over one zone (Karpenter passes StrictRequirements as the pod's domains)."""
        allowed = pod.strict_requirements.get_or_any(key)
        universe = self._universe(key) if self._scope is None else self._node_domains(key, pod, honor)
        return [d for d in universe if not honor or allowed.has(d)]

    def _node_domains(self, key: str, pod: PodView, honor: bool) -> list[str]:
        """The values existing nodes have for ``key``: the only domains kube-scheduler knows (with
        ``nodeAffinityPolicy: Honor``, of the nodes the pod's selector and affinity match)."""
        values: set[str] = set()
        for node in self.nodes:
            if honor and node.requirements.compatibility(pod.strict_requirements, WELL_KNOWN):
                continue
            req = node.requirements.get(key)
            if req is not None and not req.complement:
                values.update(req.values)
        return sorted(values)

    def _hostname_reasons(self, pod: PodView) -> list[str]:
        rules = [s.describe() for s in pod.topology.spreads if s.key == HOSTNAME]
        rules += [self._hostname_term_reason(pod, t) for t in pod.topology.terms if t.key == HOSTNAME]
        return [f'nodepool "{pc.pool.name}": {rules[0]}' for pc in self.pools] if rules else []

    def _hostname_term_reason(self, pod: PodView, term: PodTerm) -> str:
        """Why a hostname term stops the pod: for affinity, whether a matching pod runs anywhere
        and, if so, whether the nodes it runs on are only full or refuse the pod outright."""
        if term.anti:
            return term.describe()
        hosts = self._hosts_running(term.scope)
        if not hosts:
            return term.describe()
        memo = (term.scope, self.tallies.version, id(pod.requirements), pod.tolerations, str(pod.requests))
        hit = self._term_reasons.get(memo)
        if hit is not None:
            return hit[1]
        need = pod_needs(pod.requests)
        full = True
        self._claims_named(())  # brings the index up to date
        for host in hosts:
            place = self._hosts.get(host)
            if isinstance(place, ExistingNode):
                refused = (
                    place.closed
                    or bool(untolerated(place.taints, pod.tolerations))
                    or bool(place.requirements.compatibility(pod.requirements, frozenset()))
                )
                free = {k: v - place.requested.get(k, 0) for k, v in place.allocatable.items()}
            elif place is not None:
                refused = bool(untolerated(place.pc.pool.taints, pod.tolerations)) or (
                    self._merge(place.reqs, pod) is None
                )
                free = place.free
            else:
                continue
            full = not refused and how_many_fit(free, need, 1) == 0
            if not full:
                break
        first = heapq.nsmallest(3, hosts)
        named = ", ".join(first) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")
        why = "has no room for it" if full else "does not take it"
        out = f"pod affinity on {HOSTNAME}: {named}, running a pod matching {term.scope.selector}, {why}"
        self._term_reasons[memo] = (pod.requirements, out)  # keeps the id's object alive
        return out

    def _hosts_running(self, scope: Scope) -> list[str]:
        """The nodes and NodeClaims where a pod ``scope`` selects runs (memoised per count version)."""
        hit = self._running.get(scope)
        if hit is None or hit[0] != self.tallies.version:
            counts = self.tallies.tally(HOSTNAME, scope, False).counts
            hit = self._running[scope] = (self.tallies.version, [h for h, n in counts.items() if n])
        return hit[1]
