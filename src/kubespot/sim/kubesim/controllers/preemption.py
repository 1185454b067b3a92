"""Preemption: kube-scheduler's DefaultPreemption post-filter, for a pod that fits on no node.

Follows kube-scheduler 1.32 (pkg/scheduler/framework/preemption/preemption.go ``Preempt``,
``findCandidates``, ``DryRunPreemption``, ``SelectCandidate``, ``pickOneNodeForPreemption``,
``prepareCandidate``; pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go
``PodEligibleToPreemptOthers``, ``SelectVictimsOnNode``, ``filterPodsWithPDBViolation``,
``calculateNumCandidates``):

1. Eligibility: ``preemptionPolicy: Never`` pods do not preempt; a pod already nominated to a node
   where a lower-priority pod preempted earlier is still terminating waits for it instead of
   preempting again.
2. Candidates: only nodes that failed on a resolvable filter (the caller's ``potential`` nodes; the
   others are "Preemption is not helpful for scheduling"). On each, every pod of lower priority is
   removed; if the pod then fits, victims are reprieved one by one, most important first (higher
   priority, then earlier start), those whose eviction would violate a PodDisruptionBudget first,
   and a reprieved pod the preemptor no longer fits beside is a victim again. The search stops once
   it has a non-violating candidate and ``max(10 % of the nodes, 100)`` candidates in all, starting
   where the previous search stopped (upstream starts at random).
3. The node: fewest PDB violations, then the lowest highest-victim priority, the smallest sum of
   priorities, the fewest victims, the latest start among the highest-priority victims, the first.
4. The preemptor's ``status.nominatedNodeName`` is set (lower-priority pods nominated to that node
   lose theirs) and the victims get the ``DisruptionTarget`` condition (reason
   ``PreemptionByScheduler``) and a graceful delete (their own grace period). The scheduler tries a
   nominated pod on its node first (``fits_nominated``, upstream ``evaluateNominatedNode``) and so
   binds the preemptor there once the victims are gone. A pod preemption cannot help anywhere loses
   its nomination.

Whether a pod fits is not decided here: the scheduler passes a :data:`FitCheck` ("does this pod fit
on this node beside these pods, and if not, why"), so preemption follows whatever filters it runs.
The scheduler's is ``SchedulerController._fits`` (every filter, victims removed). Cost: a pod
whose priority is not above the lowest priority of any bound pod cannot have victims, which one
counter per priority answers at once.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .. import errors
from ..store import Obj, Store, WatchEvent, parse_rfc3339, rfc3339
from .disruption import matching_pdbs

log = logging.getLogger("kubespot.sim.kubesim.preemption")

#: ``(pod, node name, the other pods on that node) -> None if the pod fits, else why not``.
FitCheck = Callable[[Obj, str, Sequence[Obj]], "str | None"]

#: Upstream DefaultPreemptionArgs defaults.
MIN_CANDIDATE_NODES_PERCENTAGE: Final = 10
MIN_CANDIDATE_NODES_ABSOLUTE: Final = 100
NOT_HELPFUL: Final = "Preemption is not helpful for scheduling"
NO_VICTIMS: Final = "No preemption victims found for incoming pod"
NEVER: Final = "not eligible due to preemptionPolicy=Never."
TERMINATING: Final = "not eligible due to a terminating pod on the nominated node."
REASON: Final = "PreemptionByScheduler"
_TERMINAL = ("Succeeded", "Failed")
_INT32_SHIFT = 2**31  # upstream adds MaxInt32 + 1 so negative priorities sum correctly


def priority(pod: Mapping[str, Any]) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def _start(pod: Mapping[str, Any]) -> float:
    """``GetPodStartTime``: status.startTime, else (not started yet) now, which is later than every
    start: infinity (upstream's ``time.Now()`` per call orders pods not started arbitrarily; they tie)."""
    text = (pod.get("status") or {}).get("startTime")
    if not text:
        return math.inf
    try:
        return parse_rfc3339(str(text))
    except ValueError:
        return math.inf


def _selects_something(pdb: Mapping[str, Any]) -> bool:
    """Whether a budget's selector has a requirement (``labels.Selector.Empty`` is false)."""
    selector = (pdb.get("spec") or {}).get("selector") or {}
    return bool(selector.get("matchLabels") or selector.get("matchExpressions"))


def _has_condition(pod: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    """Whether ``pod`` has ``want``'s condition with the same status, reason and message (upstream
    ``UpdatePodCondition`` then reports no change and nothing is written)."""
    fields = ("status", "reason", "message")
    return any(
        c.get("type") == want["type"] and all(c.get(f) == want[f] for f in fields)
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def _terminating_by_preemption(pod: Mapping[str, Any]) -> bool:
    """Upstream ``podTerminatingByPreemption``: deleted, with the DisruptionTarget condition preemption
    sets (a pod terminating for another reason does not hold the preemptor back)."""
    if not pod["metadata"].get("deletionTimestamp"):
        return False
    return any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == REASON
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def _importance(pod: Mapping[str, Any]) -> tuple[int, float]:
    """Sort key for upstream's ``MoreImportantPod``: higher priority, then the earlier start, first."""
    return -priority(pod), _start(pod)


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    victims: list[Obj]  # most important first
    violations: int


def num_candidates(num_nodes: int) -> int:
    """Upstream ``calculateNumCandidates``."""
    n = max(num_nodes * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE)
    return min(n, num_nodes)


def split_by_pdb_violation(
    pods: Sequence[Obj], pdbs_for: Callable[[Obj], Iterable[Obj]]
) -> tuple[list[Obj], list[Obj]]:
    """Upstream ``filterPodsWithPDBViolation``: (violating, non-violating), order kept.

    Each pod takes one disruption of each budget covering it (unless the budget already counts it in
    ``disruptedPods``); a pod that takes a budget below zero would violate it.
    """
    allowed: dict[tuple[str, str], int] = {}
    violating: list[Obj] = []
    fine: list[Obj] = []
    for pod in pods:
        violated = False
        for pdb in pdbs_for(pod):
            meta, status = pdb["metadata"], pdb.get("status") or {}
            if pod["metadata"]["name"] in (status.get("disruptedPods") or {}):
                continue
            key = (str(meta.get("namespace", "")), str(meta["name"]))
            allowed[key] = allowed.get(key, int(status.get("disruptionsAllowed") or 0)) - 1
            if allowed[key] < 0:
                violated = True
        (violating if violated else fine).append(pod)
    return violating, fine


def select_victims(
    pod: Obj,
    node: str,
    pods: Sequence[Obj],
    fits: FitCheck,
    pdbs_for: Callable[[Obj], Iterable[Obj]],
    holding: Sequence[Obj] = (),
) -> tuple[Candidate | None, str]:
    """Upstream ``SelectVictimsOnNode``: the fewest lower-priority pods whose removal makes ``pod``
    fit on ``node``, or None and why the node cannot be made to fit. ``holding`` are pods nominated
    to the node with no lower priority: they count as there and are never victims."""
    prio = priority(pod)
    lower = sorted((p for p in pods if priority(p) < prio), key=_importance)
    if not lower:
        return None, NO_VICTIMS
    lower_ids = {id(p) for p in lower}
    remaining = [p for p in pods if id(p) not in lower_ids] + list(holding)
    why = fits(pod, node, remaining)
    if why is not None:
        return None, why
    violating, fine = split_by_pdb_violation(lower, pdbs_for)
    victims: list[Obj] = []
    violations = 0
    for group, counts in ((violating, True), (fine, False)):
        for p in group:
            remaining.append(p)
            if fits(pod, node, remaining) is not None:
                remaining.pop()
                victims.append(p)
                violations += counts
    victims.sort(key=_importance)
    return Candidate(node, victims, violations), ""


def pick_one(candidates: Sequence[Candidate]) -> Candidate:
    """Upstream ``pickOneNodeForPreemption``: the criteria in order, each narrowing the field."""
    for c in candidates:
        if not c.victims:
            return c  # nothing to preempt there
    field = list(candidates)
    criteria: list[Callable[[Candidate], float]] = [
        lambda c: c.violations,
        lambda c: priority(c.victims[0]),
        lambda c: sum(priority(v) + _INT32_SHIFT for v in c.victims),
        lambda c: len(c.victims),
        # The latest "earliest start among the highest-priority victims" wins: negated to minimize.
        lambda c: -min(_start(v) for v in c.victims if priority(v) == priority(c.victims[0])),
    ]
    for score in criteria:
        best = min(score(c) for c in field)
        field = [c for c in field if score(c) == best]
        if len(field) == 1:
            break
    return field[0]


@dataclass(frozen=True, slots=True)
class Result:
    """What the post-filter did: the node nominated (None: no preemption) and the status message
    (``preemption: ...``; empty when a node was nominated, as upstream's Success status)."""

    node: str | None
    victims: list[Obj]
    message: str


class Preemption:
    """Preemption for one scheduler; feed it the scheduler's pod events (``on_pod``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.pod_rt = store.registry.lookup("", "v1", "pods")
        self._priorities: Counter[int] | None = None  # bound, non-terminal pods per priority
        # Pods nominated to a node and not bound yet: they hold their place there against pods of
        # no higher priority (upstream ``RunFilterPluginsWithNominatedPods``).
        self._nominated: dict[str, dict[tuple[str, str], Obj]] = {}
        self._nominee_of: dict[tuple[str, str], str] = {}
        self._offset = itertools.count()
        #: Counters for tests and benchmarks.
        self.preemptions = 0

    # -- the lowest priority bound, kept from the scheduler's pod events ------------------------

    @staticmethod
    def _counted(pod: Obj | None) -> int | None:
        if pod is None or not (pod.get("spec") or {}).get("nodeName"):
            return None
        if (pod.get("status") or {}).get("phase") in _TERMINAL:
            return None
        return priority(pod)

    def on_pod(self, ev: WatchEvent) -> None:
        meta = ev.obj["metadata"]
        key = (str(meta.get("namespace", "")), str(meta["name"]))
        if key in self._nominee_of and (ev.type == "DELETED" or (ev.obj.get("spec") or {}).get("nodeName")):
            node = self._nominee_of.pop(key)
            self._forget_nomination(node, key)
        counts = self._priorities
        if counts is None:
            return  # not built yet: built from the store on first use
        before = self._counted(ev.old if ev.type != "DELETED" else ev.obj)
        after = None if ev.type == "DELETED" else self._counted(ev.obj)
        if before == after:
            return
        if before is not None:
            counts[before] -= 1
            if counts[before] <= 0:
                del counts[before]
        if after is not None:
            counts[after] += 1

    def _lowest(self) -> int | None:
        if self._priorities is None:
            assert self.pod_rt is not None
            self._priorities = Counter(
                p for p in (self._counted(o) for o in self.store.iter_objects(self.pod_rt)) if p is not None
            )
        return min(self._priorities) if self._priorities else None

    # -- the post-filter -------------------------------------------------------------------------

    def pods_on(self, node: str) -> list[Obj]:
        return [
            p for p in self.store.pods_on_node(node) if (p.get("status") or {}).get("phase") not in _TERMINAL
        ]

    def holding(self, pod: Obj, node: str) -> list[Obj]:
        """The other pods nominated to ``node`` with no lower priority than ``pod``: they count as
        there when ``pod`` is filtered (upstream ``addGENominatedPods``)."""
        nominees = self._nominated.get(node)
        if not nominees:
            return []
        meta = pod["metadata"]
        key = (str(meta.get("namespace", "")), str(meta["name"]))
        prio = priority(pod)
        return [p for k, p in nominees.items() if k != key and priority(p) >= prio]

    def has_nominees(self, node: str) -> bool:
        return bool(self._nominated.get(node))

    def held_nodes(self, pod: Obj) -> dict[str, list[Obj]]:
        """``holding`` for every node that has one (empty, at once, when nothing is nominated)."""
        if not self._nominated:
            return {}
        held = {node: self.holding(pod, node) for node in self._nominated}
        return {node: pods for node, pods in held.items() if pods}

    def fits_nominated(self, pod: Obj, fits: FitCheck) -> str | None:
        """The pod's nominated node if it fits there now (upstream ``evaluateNominatedNode``: a
        preemptor is tried on the node it preempted on before any other), else None."""
        node = (pod.get("status") or {}).get("nominatedNodeName")
        if not node:
            return None
        node = str(node)
        return node if fits(pod, node, self.pods_on(node) + self.holding(pod, node)) is None else None

    def eligible(self, pod: Obj, nominated_unresolvable: bool = False) -> str | None:
        """Upstream ``PodEligibleToPreemptOthers``: None, or why the pod may not preempt. A pod whose
        nominated node now fails on an UnschedulableAndUnresolvable filter (``nominated_unresolvable``)
        may preempt again, whatever still terminates there."""
        spec = pod.get("spec") or {}
        if spec.get("preemptionPolicy") == "Never":
            return NEVER
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        if nominated and not nominated_unresolvable:
            prio = priority(pod)
            for p in self.pods_on(nominated):
                if priority(p) < prio and _terminating_by_preemption(p):
                    return TERMINATING
        return None

    def find(
        self,
        pod: Obj,
        *,
        num_nodes: int,
        num_potential: int,
        potential: Callable[[], Sequence[str]],
        fits: FitCheck,
        nominated_unresolvable: bool = False,
    ) -> Result:
        """Upstream ``Preempt`` up to the choice of a node; changes nothing.

        ``potential()`` names the ``num_potential`` nodes that failed on a resolvable filter only; it
        is called only when some node may have victims (listing thousands of nodes for every pod
        that cannot preempt anyway would cost more than the rest).
        """
        why = self.eligible(pod, nominated_unresolvable)
        if why is not None:
            return Result(None, [], f"preemption: {why}")
        statuses: Counter[str] = Counter()
        candidates: list[Candidate] = []
        lowest = self._lowest()
        if num_potential and (lowest is None or priority(pod) <= lowest):
            # No bound pod has a lower priority: every potential node has no victims.
            statuses[NO_VICTIMS] = num_potential
        elif num_potential:
            names = potential()
            want = num_candidates(len(names))
            start = next(self._offset) % len(names)
            fine = violating = 0
            for i in range(len(names)):
                node = names[(start + i) % len(names)]
                holding = self.holding(pod, node)
                cand, why = select_victims(pod, node, self.pods_on(node), fits, self.pdbs_for, holding)
                if cand is None:
                    statuses[why] += 1
                    continue
                candidates.append(cand)
                if cand.violations:
                    violating += 1
                else:
                    fine += 1
                if fine and fine + violating >= want:
                    break
        if candidates:
            # Non-violating candidates first, as upstream lists them.
            best = pick_one(sorted(candidates, key=lambda c: c.violations > 0))
            return Result(best.node, best.victims, "")
        if num_nodes > num_potential:
            statuses[NOT_HELPFUL] += num_nodes - num_potential
        histogram = ", ".join(sorted(f"{count} {reason}" for reason, count in statuses.items()))
        return Result(None, [], f"preemption: 0/{num_nodes} nodes are available: {histogram}.")

    def pdbs_for(self, pod: Obj) -> list[Obj]:
        """The budgets covering ``pod`` as ``filterPodsWithPDBViolation`` matches them, not as the
        eviction API does: a pod without labels matches none, and a nil or empty selector matches
        nothing (the eviction API reads an empty selector as every pod of the namespace)."""
        if not pod["metadata"].get("labels"):
            return []
        return [pdb for pdb in matching_pdbs(self.store, pod) if _selects_something(pdb)]

    def run(
        self,
        pod: Obj,
        *,
        num_nodes: int,
        num_potential: int,
        potential: Callable[[], Sequence[str]],
        fits: FitCheck,
        nominated_unresolvable: bool = False,
    ) -> Result:
        """The post-filter: find a node and, if there is one, nominate it and preempt its victims."""
        result = self.find(
            pod,
            num_nodes=num_nodes,
            num_potential=num_potential,
            potential=potential,
            fits=fits,
            nominated_unresolvable=nominated_unresolvable,
        )
        if result.node is not None:
            self._prepare(pod, result)
        elif num_potential == 0:
            self.clear_nomination(pod)
        return result

    def _prepare(self, pod: Obj, result: Result) -> None:
        """Upstream ``prepareCandidate`` and the nomination the scheduling cycle writes."""
        assert self.pod_rt is not None and result.node is not None
        meta = pod["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        scheduler = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
        now = rfc3339(self.store.clock())
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": now,
            "reason": REASON,
            "message": f"{scheduler}: preempting to accommodate a higher priority pod",
        }
        for victim in result.victims:
            vmeta = victim["metadata"]
            vns, vname = vmeta.get("namespace", ""), vmeta["name"]

            def mark(o: Obj) -> None:
                conds = [
                    c
                    for c in (o.setdefault("status", {}).get("conditions") or [])
                    if c.get("type") != "DisruptionTarget"
                ]
                o["status"]["conditions"] = [*conds, dict(condition)]

            try:
                # Even on a victim already terminating (for another reason): upstream patches the
                # condition whenever ``UpdatePodCondition`` changes it, then deletes.
                if not _has_condition(victim, condition):
                    self.store.mutate(self.pod_rt, vns, vname, mark, status_only=True)
                # DeleteOptions{}: the victim's own terminationGracePeriodSeconds.
                self.store.delete(self.pod_rt, vns, vname)
            except errors.ApiError as exc:
                log.debug("preemption: victim %s/%s not deleted: %s", vns, vname, exc.message)
        self.preemptions += 1
        # Lower-priority pods nominated to this node lose their nomination (upstream
        # ``getLowerPriorityNominatedPods`` and ``ClearNominatedNodeName``): the room is this pod's.
        prio = priority(pod)
        for other_key, other in list(self._nominated.get(result.node, {}).items()):
            if priority(other) < prio:
                self._set_nomination(other_key, other, None)
        self._set_nomination((str(ns), str(name)), pod, result.node)

    def clear_nomination(self, pod: Obj) -> None:
        """Upstream ``ClearNominatedNodeName`` for a pod preemption cannot help anywhere."""
        meta = pod["metadata"]
        if (pod.get("status") or {}).get("nominatedNodeName"):
            self._set_nomination((str(meta.get("namespace", "")), str(meta["name"])), pod, None)

    def _forget_nomination(self, node: str, key: tuple[str, str]) -> None:
        """Drop ``key``'s nomination to ``node``; an empty entry goes too, so the fast "nothing
        nominated anywhere" answers stay fast once nominations have come and gone."""
        nominees = self._nominated.get(node)
        if nominees is not None:
            nominees.pop(key, None)
            if not nominees:
                del self._nominated[node]

    def _set_nomination(self, key: tuple[str, str], pod: Obj, node: str | None) -> None:
        previous = self._nominee_of.pop(key, None)
        if previous is not None:
            self._forget_nomination(previous, key)
        if node is not None:
            self._nominee_of[key] = node
            self._nominated.setdefault(node, {})[key] = pod

        def nominate(o: Obj) -> None:
            st = o.setdefault("status", {})
            if node is None:
                st.pop("nominatedNodeName", None)
            else:
                st["nominatedNodeName"] = node

        try:
            assert self.pod_rt is not None
            self.store.mutate(self.pod_rt, key[0], key[1], nominate, status_only=True)
        except errors.ApiError as exc:
            log.debug("preemption: nomination of %s/%s not written: %s", key[0], key[1], exc.message)
