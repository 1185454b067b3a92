"""A pod group placed where capacity exists or is already planned: existing nodes (as kube-scheduler
would bind, preferences first, then required rules alone), this pass's NodeClaims, then new ones.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import explain
from .claim import Claim
from .explain import GroupStory, count
from .fit import how_many_fit, pod_needs, ports_allow, short_of
from .groups import Group
from .labels import HOSTNAME
from .new_claims import NewClaims
from .pods import PodView
from .requirements import Requirement, Requirements
from .taints import untolerated
from .topology import UNLIMITED


class Placement(NewClaims):
    """Placing a group on existing nodes, planned NodeClaims and new capacity."""

    def _place(self, group: Group, *, existing: bool) -> list[str]:
        """Place what fits of ``group``; the reasons the rest does not fit new capacity."""
        if existing:
            self._on_existing(group)
        if group.left:
            self._on_claims(group)
        if group.left and self._keys and self._new_node_limits(group.exemplar)[0] <= 0:
            return self._hostname_reasons(group.exemplar)
        reasons: list[str] = []
        while group.left and not reasons:
            reasons = self._new_claims(group)
        return reasons

    def _on_existing(self, group: Group) -> None:
        """Place what existing nodes take of ``group``, as kube-scheduler binds before Karpenter
        sees a pod (design decision 3). Its Filter reads only required rules: preferences (pod
        (anti-)affinity, node affinity, ``ScheduleAnyway`` spreads) only score. So the nodes the
        preferences allow are tried first (what the scores favour) and then, for what is left,
        every node the required rules allow: preferences only act as required for new capacity."""
        self._existing_rounds(group)
        if group.left and not self._hard_only and self._prefers(group.exemplar):
            self._hard_only = True
            try:
                self._existing_rounds(group)
            finally:
                self._hard_only = False

    def _prefers(self, pod: PodView) -> bool:
        """Whether ``pod`` has preferences kube-scheduler's Filter ignores."""
        node_affinity = (pod.spec.get("affinity") or {}).get("nodeAffinity") or {}
        return pod.topology.required is not pod.topology or bool(
            node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
        )

    def _existing_rounds(self, group: Group) -> None:
        # kube-scheduler's hostname-spread minimum over the existing nodes rises as they fill, so
        # a pass that placed pods may let the next place more (what it does pod by pod).
        again = any(s.key == HOSTNAME for s in group.exemplar.topology.spreads)
        first = True
        while group.left:
            before = group.left
            self._existing_pass(group, group.story if first else GroupStory())
            first = False
            if not again or group.left == before:
                return

    def _existing_pass(self, group: Group, story: GroupStory) -> None:
        pod = group.exemplar
        need = pod_needs(pod.requests)
        for node in self.nodes:
            if not group.left:
                return
            story.nodes_tried += 1
            if node.closed:
                continue
            if untolerated(node.taints, pod.tolerations):
                count(story.nodes_refused, explain.NODE_TAINT)
                continue
            reqs = self._filter_requirements(pod) if self._hard_only else pod.requirements
            if node.requirements.compatibility(reqs, frozenset()):
                count(story.nodes_refused, explain.NODE_AFFINITY)
                continue
            free = {k: v - node.requested.get(k, 0) for k, v in node.allocatable.items()}
            ports = ports_allow(pod, node.ports)
            cap = self._cap(pod, node.hostname, existing=True) if self._keys else UNLIMITED
            n = how_many_fit(free, need, min(group.left, ports, cap))
            if n <= 0:
                if not ports:
                    why = explain.NODE_PORTS
                elif not cap:
                    why = "pod topology rules (spread, affinity, anti-affinity)"
                else:
                    why = short_of(free, need)
                count(story.nodes_refused, why)
                continue
            for p in group.take(n):
                self.plan.existing[p.key] = node.name
                node.ports |= p.ports
            for name, amount in need.items():
                node.requested[name] = node.requested.get(name, 0) + amount * n
            self._record(pod, n, node.requirements, node.hostname, node=True)

    def _filter_requirements(self, pod: PodView) -> Requirements:
        """What kube-scheduler's NodeAffinity Filter reads of ``pod`` on an existing node: its node
        selector and required terms (``nodeaffinity/node_affinity.go`` Filter; preferred terms only
        score), plus what the simulation narrowed the pod to (a topology domain, a fence)."""
        reqs = pod.requirements
        node_affinity = (pod.spec.get("affinity") or {}).get("nodeAffinity") or {}
        if not node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"):
            return reqs
        memo = (id(reqs), id(pod.strict_requirements))
        hit = self._filtering.get(memo)
        if hit is None:
            # Walk the narrowings back to the pod's own requirements, keeping what they added.
            narrowed: list[Requirement] = []
            at = reqs
            while (step := self._narrowings.get(id(at))) is not None and step[0] is at:
                narrowed += step[2]
                at = step[1]
            out = pod.strict_requirements.copy()
            out.add(*narrowed)
            hit = self._filtering[memo] = (reqs, pod.strict_requirements, out)
        return hit[2]

    def _on_claims(self, group: Group) -> None:
        pod = group.exemplar
        need = pod_needs(pod.requests)
        cpu, memory = need.get("cpu", 0), need.get("memory", 0)
        # Karpenter tries the NodeClaims with the fewest pods first. Most NodeClaims of a pass are
        # nearly full, so only those with room for the request are visited (``open_claims``), and
        # a hostname affinity only admits the few where a matching pod runs.
        hosts = self._affinity_hosts(pod) if self._keys else None
        fits: Iterable[Claim]
        if hosts is None:
            fits = self._open.fitting(cpu, memory)
        else:
            fits = sorted(
                (
                    c
                    for c in self._claims_named(hosts)
                    if self._has_room(c) and c.free.get("cpu", 0) >= cpu and c.free.get("memory", 0) >= memory
                ),
                key=lambda c: len(c.pods),
            )
        for claim in fits:
            if not group.left:
                break
            if untolerated(claim.pc.pool.taints, pod.tolerations):
                continue
            merged = self._merge(claim.reqs, pod)
            if merged is None or self._conflict(claim.target, merged):
                continue
            if self._price(claim.target, merged, claim.capacity_type) == float("inf"):
                continue  # it would narrow the claim (a zone, say) to where its type is not offered
            cap = self._cap(pod, claim.name) if self._keys else UNLIMITED
            n = how_many_fit(claim.free, need, min(group.left, ports_allow(pod, claim.ports), cap))
            if (
                n > 0
                and claim.pc.pool.name in self._min_values_pools
                and not self._min_values_hold(claim, merged, need, n)
            ):
                continue
            if n > 0:
                claim.add(group.take(n), need, merged)
                self._record(pod, n, claim.reqs, claim.name)
                if self._has_room(claim):
                    self._open.moved(claim)
                else:
                    self._open.discard(claim)
