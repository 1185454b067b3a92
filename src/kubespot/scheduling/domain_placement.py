"""A pod group with zone, capacity-type or custom-label topology rules placed a domain at a time:
its share per domain worked out, each share placed, a domain that takes fewer blocked.
"""

from __future__ import annotations

from dataclasses import replace

from .fit import how_many_fit, pod_needs
from .groups import Group
from .labels import HOSTNAME
from .placement import Placement
from .requirements import Requirement
from .taints import untolerated
from .topology import min_count, spread_quotas


class DomainPlacement(Placement):
    """Placing a group with topology rules, domain by domain."""

    def _domain_rules(
        self, group: Group, blocked: set[tuple[str, str]], proven: set[tuple[str, str]] | None = None
    ) -> tuple[list[tuple[list[Requirement], int, tuple[str, str] | None]], str]:
        """Where the next pods of ``group`` go under its zone, capacity-type and custom-label rules:
        (requirements to add, how many, the domain to block when it takes fewer); or why none.

        A spread's shares are only safe if every domain takes its share: one that takes fewer
        would leave the others over the skew. So unless every domain is ``proven`` (took a full
        share of this group before), and no NodePool has limits (capacity may run out half way),
        and the spread is the pod's only domain rule, each domain gets no more than keeps the skew
        whatever the others take."""
        pod = group.exemplar
        topo = pod.topology.required if self._hard_only else pod.topology
        rules: list[tuple[str, dict[str, int], bool]] = []  # (key, quota per domain, one per domain)
        starting: tuple[str, str] | None = None  # the domain a self-affinity's first pod tries
        for spread in topo.spreads:
            if spread.key == HOSTNAME:
                continue
            eligible = self._eligible(pod, spread.key, spread.honor_node_affinity)
            counts = self._spread_counts(spread, pod)
            quotas = spread_quotas(
                spread,
                counts,
                eligible,
                [d for k, d in blocked if k == spread.key],
                group.left,
                self_selecting=self._selects(spread.scope, pod),
            )
            if not quotas:
                return [], spread.describe()
            several = (
                sum(s.key != HOSTNAME for s in topo.spreads) + sum(t.key != HOSTNAME for t in topo.terms) > 1
            )
            if several and self._scope is not None and self._selects(spread.scope, pod):
                # kube-scheduler, pod by pod: every domain within the skew (the others' rules choose).
                low = min_count(spread, counts, eligible)
                quotas = {d: low + spread.max_skew - counts.get(d, 0) for d in eligible}
            cautious = (
                self._limited
                or several
                or proven is None
                or any((spread.key, d) not in proven for d in quotas)
            )
            if cautious and self._selects(spread.scope, pod):
                low = min_count(spread, counts, eligible)
                for d in list(quotas):
                    safe = low + spread.max_skew - counts.get(d, 0)
                    quotas[d] = min(quotas[d], max(safe, 0))
                quotas = {d: n for d, n in quotas.items() if n > 0}
                if not quotas:
                    return [], spread.describe()
            rules.append((spread.key, quotas, True))
        for term in topo.terms:
            if term.key == HOSTNAME:
                continue
            eligible = [d for d in self._eligible(pod, term.key) if (term.key, d) not in blocked]
            tally = self.tallies.tally(term.key, term.scope, term.anti)
            mine = self._selects(term.scope, pod)
            if term.anti:
                empty = [d for d in eligible if not tally.counts.get(d, 0)]
                quotas = dict.fromkeys(empty, 1 if mine else group.left)
                rules.append((term.key, quotas, mine))
            else:
                found = [d for d in eligible if tally.counts.get(d, 0)]
                if not found and mine and tally.total == 0 and eligible:
                    # No matching pod anywhere: the first pod starts the domain, the rest follow
                    # it. kube-scheduler lets it onto any node (``interpodaffinity``
                    # satisfyPodAffinity); Karpenter tries the domains in turn, a domain no
                    # capacity serves being blocked (so one pod, and its domain to block).
                    start = eligible if self._scope is not None else eligible[:1]
                    rules.append((term.key, dict.fromkeys(start, 1), False))
                    starting = (term.key, start[0]) if len(start) == 1 else None
                    continue
                rules.append((term.key, dict.fromkeys(found, group.left), False))
            if not rules[-1][1]:
                return [], term.describe()
        if not rules:
            return [([], group.left, None)], ""
        key, quotas, split = rules[0]
        if len(rules) == 1:
            if split:
                return [
                    ([Requirement.of(key, "In", [d])], n, (key, d)) for d, n in sorted(quotas.items())
                ], ""
            quota = min(group.left, *quotas.values())
            return [([Requirement.of(key, "In", sorted(quotas))], quota, starting)], ""
        # Several rules: one pod at a time, in a domain every rule allows (rare shapes).
        allowed: dict[str, set[str]] = {}
        for k, q, _ in rules:
            allowed[k] = allowed[k] & set(q) if k in allowed else set(q)
        choices = [d for d in sorted(quotas) if d in allowed[key]]
        if not choices or not all(allowed.values()):
            rules_text = [s.describe() for s in topo.spreads if s.key != HOSTNAME]
            rules_text += [t.describe() for t in topo.terms if t.key != HOSTNAME]
            return [], "; ".join(rules_text)
        if self._scope is not None:
            # kube-scheduler takes any node every rule allows (the next pod sees the counts it left).
            extra = [Requirement.of(key, "In", choices)]
            extra += [Requirement.of(k, "In", sorted(v)) for k, v in allowed.items() if k != key]
            return [(extra, 1, None)], ""
        extra = [Requirement.of(key, "In", [choices[0]])]
        extra += [Requirement.of(k, "In", sorted(v)) for k, v in allowed.items() if k != key]
        return [(extra, 1, (key, choices[0]))], ""

    def _place_by_domain(self, group: Group) -> list[str]:
        """Place ``group`` a slice per domain (existing nodes, this pass's NodeClaims, new ones);
        a domain that takes fewer than its share is blocked and the shares are worked out again."""
        pod = group.exemplar
        if self.nodes and any(k != HOSTNAME for k in pod.topology.keys):
            # kube-scheduler binds what existing nodes take before Karpenter sees a pod, with the
            # domains it knows: the existing nodes' (Karpenter's add what NodePools could launch).
            # Rounds while they place: the counts a round leaves (a self-affinity's first pod,
            # spread shares kept safe) allow the next round more. Only while kube-scheduler's
            # domains differ from Karpenter's: when they are the same, the rounds below try the
            # existing nodes first with the same domains, at a share a round.
            keys = [k for k in pod.topology.keys if k != HOSTNAME]
            differ = any(set(self._eligible(pod, k)) != set(self._node_domains(k, pod, True)) for k in keys)
            self._scope = "existing"
            try:
                # The preferences first (what kube-scheduler's scores favour), then the required
                # rules alone (its Filter): see _on_existing.
                for hard_only in (False, True) if self._prefers(pod) else (False,):
                    self._hard_only = hard_only
                    placed = -1
                    while group.left and group.placed > placed and (placed < 0 or differ):
                        placed = group.placed
                        buckets, _ = self._domain_rules(group, set(), None)
                        for extra, quota, _ in buckets:
                            if not group.left:
                                break
                            exemplar = (
                                replace(pod, requirements=self._narrow(pod.requirements, extra))
                                if extra
                                else pod
                            )
                            part = Group(
                                exemplar,
                                group.pods[group.placed : group.placed + min(quota, group.left)],
                                origin=group,
                            )
                            self._on_existing(part)
                            group.placed += part.placed
                        if differ and group.left and group.placed > placed:
                            self._even_rounds(group)
            finally:
                self._scope = None
                self._hard_only = False
        blocked: set[tuple[str, str]] = set()
        proven: set[tuple[str, str]] = set()
        reasons: list[str] = []
        while group.left:
            buckets, why = self._domain_rules(group, blocked, proven)
            if not buckets:
                return [f'nodepool "{pc.pool.name}": {why}' for pc in self.pools] or [why]
            progress = grew = False
            for extra, quota, domain in buckets:
                if not group.left:
                    break
                exemplar = replace(pod, requirements=self._narrow(pod.requirements, extra)) if extra else pod
                part = Group(
                    exemplar, group.pods[group.placed : group.placed + min(quota, group.left)], origin=group
                )
                why_not = self._place(part, existing=True)
                group.placed += part.placed
                progress = progress or part.placed > 0
                if part.left:
                    reasons = why_not or reasons
                    if domain is not None:
                        grew = grew or domain not in blocked
                        blocked.add(domain)
                elif domain is not None:
                    proven.add(domain)
            # A round that placed nothing but blocked a domain tries the others (a self-affinity's
            # first pod, or a one-pod round of several rules, whose first domain had no capacity).
            if not progress and not grew:
                break
        return reasons or (self._hostname_reasons(pod) if group.left else [])

    def _even_rounds(self, group: Group) -> None:
        """Many rounds of a lone spread on existing nodes at once: adding the same number of pods
        to every domain keeps the skew, so while every domain has room for ``k`` more (resources
        only: identical pods without host ports or hostname rules add up node by node), each
        takes ``k``, as kube-scheduler's pod-by-pod placement would."""
        pod = group.exemplar
        topo = pod.topology.required if self._hard_only else pod.topology
        if len(topo.spreads) != 1 or topo.terms or pod.ports or topo.spreads[0].key == HOSTNAME:
            return
        key = topo.spreads[0].key
        domains = self._eligible(pod, key, topo.spreads[0].honor_node_affinity)
        need = pod_needs(pod.requests)
        room = dict.fromkeys(domains, 0)
        for node in self.nodes:
            req = node.requirements.get(key)
            if req is None or req.complement or len(req.values) != 1:
                continue
            d = next(iter(req.values))
            if d not in room or node.closed or untolerated(node.taints, pod.tolerations):
                continue
            reqs = self._filter_requirements(pod) if self._hard_only else pod.requirements
            if node.requirements.compatibility(reqs, frozenset()):
                continue
            free = {k: v - node.requested.get(k, 0) for k, v in node.allocatable.items()}
            room[d] += how_many_fit(free, need, self._cap(pod, node.hostname, existing=True))
        k = min(min(room.values(), default=0), group.left // max(len(domains), 1))
        if k <= 0:
            return
        for d in domains:
            exemplar = replace(
                pod, requirements=self._narrow(pod.requirements, [Requirement.of(key, "In", [d])])
            )
            part = Group(exemplar, group.pods[group.placed : group.placed + k], origin=group)
            self._on_existing(part)
            group.placed += part.placed
