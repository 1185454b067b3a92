"""The plan oracle: is a scheduling plan one a real cluster would accept? Judged by kubesim's scheduler.

The simulation (``kubespot.scheduling.simulate``) decides where pending pods go; this module checks
each decision without the simulation's own code. It builds the Kubernetes objects the plan implies
and asks kubesim's scheduler filters (``SchedulerController.fit_reasons``: NodeAffinity,
NodeUnschedulable, TaintToleration, NodePorts, NodeResourcesFit, VolumeBinding/VolumeZone,
PodTopologySpread, InterPodAffinity, as kube-scheduler 1.32's default profile runs them) about every
placement:

- each existing node as given, with its pods;
- each planned NodeClaim as the Node Karpenter and the kubelet would register (``plan_objects``):
  its first instance type, in a zone of the claim's where that type has an available offering of
  the claim's capacity type; and the DaemonSet pods that would run there;
- then every placement, in the plan's order (existing nodes, then each NodeClaim's pods), must be
  accepted given the pods already bound everywhere; the existing nodes' placements are judged
  before the NodeClaims' Nodes exist, as kube-scheduler binds them before Karpenter launches any.
  Like kube-scheduler's queue (and Karpenter's, which re-cycles failed pods while progress is
  made), a pod refused now is retried after the others are bound; a placement refused for good
  is a violation.

Also: every pending pod is placed or listed unschedulable, exactly once; the NodeClaims of a pool
stay within its limits counted as Karpenter does (each claim its largest candidate type) and keep
its ``minValues``; every
type a claim offers is offered in one of its zones, satisfies its requirements and, as that node,
holds its pods (the node-local filters); a claim's price is its first type's cheapest offering; no
pod is left unschedulable that an existing node would take.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kubespot.scheduling.simulate import Plan, PlannedClaim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.controllers.scheduler import SchedulerController, node_reasons
from kubespot.sim.kubesim.store import Store
from support.plan_objects import (
    Obj,
    bound,
    claim_node,
    daemon_pods,
    offered_zones,
    pod_key,
)

if TYPE_CHECKING:
    from support.sched_problems import Problem

#: The scheduler alone: nothing else writes to the store the oracle fills.
_QUIET = ControllerConfig(kubelet=False, workloads=False)


@dataclass
class Verdict:
    """What the oracle found wrong with one plan (empty: the plan is valid)."""

    violations: list[str] = field(default_factory=list)
    #: Placements kube-scheduler accepted (for the test's own sanity: the oracle did judge).
    accepted: int = 0

    def add(self, message: str) -> None:
        self.violations.append(message)


def check_partition(problem: Problem, plan: Plan, verdict: Verdict) -> None:
    """Every pending pod is placed or unschedulable, exactly once, and nothing else appears."""
    pending = {pod_key(p) for p in problem.pending}
    seen: dict[str, int] = {}
    for key in [*plan.existing, *(k for c in plan.claims for k in c.pods), *plan.unschedulable]:
        seen[key] = seen.get(key, 0) + 1
    for key, n in sorted(seen.items()):
        if key not in pending:
            verdict.add(f"{key}: in the plan but not pending")
        elif n > 1:
            verdict.add(f"{key}: appears {n} times in the plan")
    for key in sorted(pending - seen.keys()):
        verdict.add(f"{key}: neither placed nor unschedulable")
    for key, reasons in plan.unschedulable.items():
        if not reasons:
            verdict.add(f"{key}: unschedulable without a reason")
    names = {n["metadata"]["name"] for n in problem.nodes}
    for key, node in plan.existing.items():
        if node not in names:
            verdict.add(f"{key}: placed on {node}, which is no existing node")


def _limit(name: str, value: str) -> int:
    from kubespot.model.quantity import milli, units

    return milli(value) if name == "cpu" else units(value)


def check_limits(problem: Problem, plan: Plan, verdict: Verdict) -> None:
    """Per pool: what its nodes have plus, per NodeClaim, its largest candidate type's capacity stays
    within ``spec.limits`` (core pkg/controllers/provisioning/scheduling/scheduler.go: each new
    NodeClaim subtracts the max of its instance type options from the remaining limits)."""
    types = problem.types()
    for pool in problem.nodepools:
        name = pool["metadata"]["name"]
        limits = {k: _limit(k, v) for k, v in (pool["spec"].get("limits") or {}).items()}
        if not limits:
            continue
        used: dict[str, int] = {}
        for node in problem.nodes:
            if node["metadata"]["labels"].get("karpenter.sh/nodepool") == name:
                used["nodes"] = used.get("nodes", 0) + 1
                for k, v in node["status"]["capacity"].items():
                    used[k] = used.get(k, 0) + _limit(k, v)
        claims = [c for c in plan.claims if c.pool == name]
        if not claims:
            continue  # nodes already over the limits are the cluster's doing, not the plan's
        for claim in claims:
            used["nodes"] = used.get("nodes", 0) + 1
            for k in limits:
                if k != "nodes":
                    worst = max(
                        (types[t].resources.capacity.get(k, 0) for t in claim.instance_types), default=0
                    )
                    used[k] = used.get(k, 0) + worst
        for k, cap in limits.items():
            if used.get(k, 0) > cap:
                verdict.add(f"nodepool {name}: {k} {used.get(k, 0)} over its limit {cap}")


def check_min_values(problem: Problem, plan: Plan, verdict: Verdict) -> None:
    """Each NodeClaim of a pool with ``minValues`` offers types with that many distinct values of
    the key (core pkg/controllers/provisioning/scheduling/nodeclaim.go CanAdd refuses a pod that
    would leave fewer, Strict policy; pkg/scheduling/requirements.go SatisfiesMinValues)."""
    types = problem.types()
    for pool in problem.nodepools:
        name = pool["metadata"]["name"]
        asked = {
            r["key"]: r["minValues"]
            for r in pool["spec"]["template"]["spec"].get("requirements") or []
            if r.get("minValues")
        }
        for claim in (c for c in plan.claims if c.pool == name and asked):
            for key, least in asked.items():
                values = set()
                for t in claim.instance_types:
                    req = types[t].requirements.get(key)
                    if req is not None and not req.complement:
                        values |= req.values
                if len(values) < least:
                    verdict.add(
                        f"claim of {name} {claim.instance_types}: {len(values)} values of {key}, "
                        f"minValues {least} (pods {claim.pods})"
                    )


@dataclass
class _Cluster:
    """The objects one plan implies, and the placements to judge in order."""

    nodes: list[Obj] = field(default_factory=list)
    running: list[Obj] = field(default_factory=list)
    placements: list[tuple[Obj, str]] = field(default_factory=list)


def _claim_node(
    problem: Problem, claim: PlannedClaim, index: int, rng: random.Random, verdict: Verdict
) -> Obj | None:
    if not claim.instance_types:
        verdict.add(f"claim {index} of {claim.pool}: offers no instance type (pods {claim.pods})")
        return None
    first = claim.instance_types[0]
    zones = offered_zones(problem, claim, first)
    if not zones:
        verdict.add(f"claim {index} ({first}): no available {claim.capacity_type} offering in {claim.zones}")
        return None
    cheapest = min(
        o.price
        for o in problem.types()[first].offerings
        if o.available and o.capacity_type == claim.capacity_type and o.zone in zones
    )
    if abs(claim.price_per_hour - cheapest) > 1e-9:
        verdict.add(
            f"claim {index} ({first}): priced {claim.price_per_hour}, its cheapest offering is {cheapest}"
        )
    zone = rng.choice(zones)
    node, broken = claim_node(problem, claim, index, first, zone, rng)
    if broken:
        verdict.add(f"claim {index} as {first} in {zone}: breaks its own requirements: {broken}")
    return node


def check_alternatives(problem: Problem, plan: Plan, rng: random.Random, verdict: Verdict) -> None:
    """Every type a claim offers could be the one launched: it has an available offering of the
    claim's capacity type in one of its zones, its labels satisfy the claim's requirements, and a
    node of it takes the DaemonSet pods and the claim's pods (node-local filters: node affinity,
    taints, ports, resources; kube-scheduler's framework.RunFilterPlugins)."""
    pending = {pod_key(p): p for p in problem.pending}
    for index, claim in enumerate(plan.claims):
        for name in claim.instance_types[1:]:
            zones = offered_zones(problem, claim, name)
            if not zones:
                where = f"no available {claim.capacity_type} offering in {claim.zones}"
                verdict.add(f"claim {index}: offers {name}, with {where}")
                continue
            node, broken = claim_node(problem, claim, index, name, rng.choice(zones), rng)
            if broken:
                verdict.add(f"claim {index}: offers {name}, which breaks its requirements: {broken}")
                continue
            on_node: list[Obj] = []
            here = node["metadata"]["name"]
            for pod in [*daemon_pods(problem, node), *(bound(pending[k], here) for k in claim.pods)]:
                reasons = node_reasons(pod, node, on_node)
                if reasons:
                    verdict.add(f"claim {index}: offers {name}, which refuses {pod_key(pod)}: {reasons}")
                    break
                on_node.append(pod)


def _build(problem: Problem, plan: Plan, rng: random.Random, verdict: Verdict) -> _Cluster:
    cluster = _Cluster(nodes=list(problem.nodes), running=list(problem.bound))
    pending = {pod_key(p): p for p in problem.pending}
    for key, name in plan.existing.items():
        cluster.placements.append((pending[key], name))
    for index, claim in enumerate(plan.claims):
        node = _claim_node(problem, claim, index, rng, verdict)
        if node is None:
            continue
        cluster.nodes.append(node)
        name = node["metadata"]["name"]
        # DaemonSet pods first: their controller binds them as soon as the node registers.
        cluster.placements += [(p, name) for p in daemon_pods(problem, node)]
        cluster.placements += [(pending[k], name) for k in claim.pods if k in pending]
    return cluster


async def _bind(
    problem: Problem,
    nodes: list[Obj],
    running: list[Obj],
    placements: list[tuple[Obj, str]],
    verdict: Verdict,
) -> tuple[list[Obj], list[tuple[Obj, str]], dict[str, list[str]], SchedulerController, Store]:
    """Bind ``placements`` onto ``nodes`` through kubesim's filters, retrying a refused pod after the
    others (kube-scheduler's queue). Returns the pods bound, those refused for good (with why) and
    the started scheduler with its store, for the caller's further questions and ``stop``."""
    store = Store()
    store.load(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in problem.namespaces]
    )
    store.load(copy.deepcopy(nodes))
    store.load(copy.deepcopy(running))
    scheduler = SchedulerController(store, _QUIET)
    scheduler.start()
    accepted: list[Obj] = []
    left = list(placements)
    refused: dict[str, list[str]] = {}
    while left:
        later = []
        for pod, node in left:
            reasons = scheduler.fit_reasons(pod, node)
            if reasons:
                refused[pod_key(pod)] = [node, *reasons]
                later.append((pod, node))
                continue
            body = bound(pod, node)
            store.create(scheduler.pod_rt, body, namespace=body["metadata"].get("namespace") or "default")
            accepted.append(body)
            verdict.accepted += 1
        if len(later) == len(left):
            break
        left = later
    return accepted, left, refused, scheduler, store


async def check_placements(problem: Problem, plan: Plan, rng: random.Random, verdict: Verdict) -> None:
    """Bind every placement through kubesim's filters (see the module docstring).

    Placements on existing nodes are bound first onto the existing nodes alone: kube-scheduler binds
    what fits there as soon as the pods are created, before Karpenter has launched anything (the
    pods Karpenter sees are those it failed: core pkg/controllers/provisioning/provisioner.go
    GetPendingPods); spread and affinity are judged by the domains that exist then. The NodeClaims'
    Nodes register later, and their pods are judged with everything before bound."""
    cluster = _build(problem, plan, rng, verdict)
    first = len(plan.existing)
    bound_early, early_left, refused, scheduler, _ = await _bind(
        problem, list(problem.nodes), list(problem.bound), cluster.placements[:first], verdict
    )
    await scheduler.stop()
    _, left, later_refused, scheduler, _ = await _bind(
        problem,
        cluster.nodes,
        [*cluster.running, *bound_early],
        [*early_left, *cluster.placements[first:]],
        verdict,
    )
    refused.update(later_refused)
    try:
        for pod, _ in left:
            node, *reasons = refused[pod_key(pod)]
            verdict.add(f"{pod_key(pod)} on {node}: kube-scheduler refuses it: {reasons}")
        # The completeness check for pods with cluster-wide rules, now that the plan is bound.
        pending = {pod_key(p): p for p in problem.pending}
        for key in plan.unschedulable:
            pod = pending[key]
            if not _cluster_wide(pod):
                continue
            for node in problem.nodes:
                name = node["metadata"]["name"]
                if not scheduler.fit_reasons(pod, name):
                    verdict.add(f"{key}: unschedulable, but {name} takes it")
                    break
    finally:
        await scheduler.stop()


def _first_term_only(pod: Obj) -> Obj:
    out = copy.deepcopy(pod)
    required = out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    required["nodeSelectorTerms"] = required["nodeSelectorTerms"][:1]
    return out


def _cluster_wide(pod: Obj) -> bool:
    """Whether the pod has rules whose verdict depends on other nodes' pods (topology spread, pod
    affinity or anti-affinity), which node-local filters cannot judge."""
    affinity = pod["spec"].get("affinity") or {}
    return bool(
        pod["spec"].get("topologySpreadConstraints")
        or affinity.get("podAffinity")
        or affinity.get("podAntiAffinity")
    )


def check_room_left(problem: Problem, plan: Plan, verdict: Verdict) -> None:
    """No pod is left unschedulable that an existing node still takes once the plan is bound
    (node-local filters, whose verdict only worsens as pods are added, so the pod would have fitted
    at its turn too): Karpenter tries existing nodes first for every pod and relaxes its
    preferences, then its required OR-terms one by one, before giving up (core
    pkg/controllers/provisioning/scheduling/scheduler.go add, preferences.go Relax)."""
    pending = {pod_key(p): p for p in problem.pending}
    on: dict[str, list[Obj]] = {}
    for pod in problem.bound:
        on.setdefault(pod["spec"]["nodeName"], []).append(pod)
    for key, name in plan.existing.items():
        on.setdefault(name, []).append(bound(pending[key], name))
    for key in plan.unschedulable:
        pod = pending[key]
        if _cluster_wide(pod):
            continue  # judged with every node's pods in check_placements
        for node in problem.nodes:
            name = node["metadata"]["name"]
            if node_reasons(pod, node, on.get(name, [])):
                continue
            terms = ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            ) or {}
            later = len(terms.get("nodeSelectorTerms") or []) > 1 and node_reasons(
                _first_term_only(pod), node, on.get(name, [])
            )
            how = " through a later required node selector term" if later else ""
            verdict.add(f"{key}: unschedulable, but {name} takes it{how}")
            break


async def judge(problem: Problem, plan: Plan) -> Verdict:
    """Everything the oracle checks of ``plan`` for ``problem``."""
    verdict = Verdict()
    rng = random.Random(problem.seed)
    check_partition(problem, plan, verdict)
    check_limits(problem, plan, verdict)
    check_min_values(problem, plan, verdict)
    check_alternatives(problem, plan, rng, verdict)
    check_room_left(problem, plan, verdict)
    await check_placements(problem, plan, rng, verdict)
    return verdict
