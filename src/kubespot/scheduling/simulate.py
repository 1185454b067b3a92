"""The scheduling simulation: where pending pods go, and which new capacity is the cheapest that fits.

Karpenter's rules (``pkg/controllers/provisioning/scheduling``; docs/designs/provisioning.md):
pods in order of CPU then memory requests, largest first; each tries the existing nodes (initialized
ones first, then by name), then the NodeClaims this simulation already made (fewest pods first),
then a new NodeClaim from the NodePools in weight order. A NodeClaim may use spot when its
requirements allow it and one of its types has an available spot offering; spot offerings dearer
than the cheapest on-demand one are left out; limits are counted pessimistically (the largest
capacity among the types a NodeClaim offers); minValues keeps that many distinct values among them
(``minvalues.py``). Every NodeClaim and pod group records why, counted (``explain.py``).
Topology spread and pod (anti-)affinity (``topology.py``): a group with such rules is placed a
domain at a time (its share of each zone, capacity type or custom value, as a requirement) and
capped per node on hostname rules; preferences act as required and are relaxed one step at a time
in Karpenter's order when a group does not fully place.

What differs is how a new NodeClaim is chosen (decision 3 of the design note). Identical pods form
a group and are placed a group at a time. A new NodeClaim is packed at once, largest pods first,
from every pending pod that may share it, and its instance type is the one whose node holds the
most of the pending requests (each resource as a share of the pending total) per dollar. A packing
that can be repeated (the same pods again) is repeated without searching again. The NodeClaim then
offers every type that holds its pods within ``flexibility`` of that price, cheapest first, so the
fleet request keeps room to choose by capacity. The first time a pool's new capacity is packed
for pods that may all share any of its types (``packing.lp_eligible``, the same requirements), the
configuration LP packs them all at once (``packing``: whole nodes of the LP's solution); the greedy
above packs what it leaves, and everything when the LP solver cannot be used (the claims say so).

Pure: pods, nodes, pools and the catalog in; a ``Plan`` out.

The pass is layered, one module per job, each class adding its step to the one below it:
``state`` (the pass's state and memos), ``domains`` (topology rules against nodes and NodeClaims),
``offers`` (what a packed NodeClaim offers and charges), ``candidates`` (a new NodeClaim's types),
``lp_claims`` and ``greedy`` (packing new capacity), ``new_claims`` (the NodePools in turn),
``placement`` (existing nodes, planned NodeClaims, new ones), ``domain_placement`` (groups with
topology rules); this module drives the pass. Inputs and the result: ``plan``; pod groups:
``groups``; fitting: ``fit``; a NodeClaim being packed: ``claim``; the NodeClaims that may still take
pods, indexed by room: ``open_claims``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from .candidates import undominated
from .domain_placement import DomainPlacement
from .greedy import market_prices, share_weights
from .groups import Group, group_pods
from .offers import MAX_INSTANCE_TYPES
from .plan import ExistingNode, Plan, PlannedClaim, PoolCapacity
from .pods import PodView
from .topology import relax

__all__ = [
    "MAX_INSTANCE_TYPES",
    "ExistingNode",
    "Plan",
    "PlannedClaim",
    "PoolCapacity",
    "Simulation",
    "group_pods",
    "market_prices",
    "share_weights",
    "simulate",
    "undominated",
]


class Simulation(DomainPlacement):
    """One scheduling pass. ``run()`` once; the result is a ``Plan``."""

    def __init__(
        self,
        pods: Sequence[PodView],
        nodes: Sequence[ExistingNode],
        pools: Sequence[PoolCapacity],
        *,
        flexibility: float = 0.10,
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        super().__init__(pods, nodes, pools, flexibility=flexibility, namespace_labels=namespace_labels)
        self._count_existing()

    def run(self) -> Plan:
        # Existing capacity first for every pod, largest first: a pod only goes to new capacity
        # when no existing node takes it, whatever new capacity larger pods caused. (Pods with
        # topology rules choose their domain first, so they take existing nodes in their turn.)
        for group in self.groups:
            if not group.exemplar.topology:
                if self._inverse:
                    self._fence(group)
                self._on_existing(group)
        waiting: list[tuple[Group, list[str]]] = []
        for group in list(self.groups):
            reasons = self._attempt(group, existing=bool(group.exemplar.topology))
            while group.left:
                # Preferences first act as requirements; the pods they leave unplaced try again
                # with one preference less (Karpenter's preferences.go order).
                step = relax(
                    group.exemplar.spec, tolerate_prefer_no_schedule=self._tolerate_prefer_no_schedule
                )
                if step is None:
                    break
                exemplar = group.exemplar.with_spec(step[0])
                relaxed = Group(
                    exemplar,
                    [
                        replace(exemplar, namespace=p.namespace, name=p.name, uid=p.uid)
                        for p in group.pods[group.placed :]
                    ],
                    story=group.story,
                )
                group.story.relaxed = True
                group.placed = len(group.pods)
                self.groups.insert(self.groups.index(group) + 1, relaxed)
                if not exemplar.topology:
                    self._plain.append(relaxed)
                group, reasons = relaxed, self._attempt(relaxed, existing=True)
            if group.left:
                waiting.append((group, reasons))
        # Karpenter's queue cycles failed pods while a cycle places something: pod affinity to
        # pods placed after them is met on a later cycle.
        progress = True
        while progress and any(g.exemplar.topology for g, _ in waiting):
            progress = False
            for i, (group, _) in enumerate(waiting):
                if group.exemplar.topology:
                    before = group.left
                    reasons = self._attempt(group, existing=True)
                    progress = progress or group.left < before
                    waiting[i] = (group, reasons)
        for group, reasons in waiting:
            for p in group.take(group.left):
                self.plan.unschedulable[p.key] = reasons or ["no NodePool"]
        for claim in self.claims:
            self._finish(claim)
        stories = self.plan.stories
        for group in self.groups:
            group.story.pods = max(group.story.pods, len(group.pods))
            for p in group.pods:
                stories[p.key] = group.story
        return self.plan

    def _attempt(self, group: Group, *, existing: bool) -> list[str]:
        if self._inverse:
            self._fence(group)
        return (
            self._place_by_domain(group) if group.exemplar.topology else self._place(group, existing=existing)
        )


def simulate(
    pods: Sequence[PodView],
    nodes: Sequence[ExistingNode],
    pools: Sequence[PoolCapacity],
    *,
    flexibility: float = 0.10,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> Plan:
    """Where ``pods`` go: existing ``nodes`` first, then new NodeClaims from ``pools``
    (``namespace_labels``: for pod affinity terms that select namespaces by label)."""
    return Simulation(pods, nodes, pools, flexibility=flexibility, namespace_labels=namespace_labels).run()
