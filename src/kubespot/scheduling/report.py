"""A plan as people and scripts read it: the JSON of ``kubespot plan --output json``, a text summary,
and one pod's story (``--why``).

The JSON keys are a contract (scripts and CI pipelines read them): ``nodeclaims`` (each with
``nodepool``, ``capacity_type``, ``instance_types``, ``price_per_hour``, ``zones``, ``pods``,
``requests``, ``why``, and ``types``: how many of the pool's types were considered, offered, and
dropped by reason, the distinct values per ``minValues`` key and what the claim counts against the
pool's limits), ``existing`` (each with ``pod`` and ``node``), ``unschedulable`` (each with
``pod`` and ``reasons``), ``cost_per_hour``, and ``nodepools`` (each pool's validation: ``name``,
``valid``, ``reason``, ``message``). ``--why`` with ``--output json`` prints ``pod_story_json``: the
pod, its outcome and its group's story (existing nodes tried and refused by reason, NodePools tried).

``avoided`` (the offerings the launch path avoids now, ``explain.AvoidedOffering``) is given by the
provisioner, which plans with the unavailable-offerings cache and the pool risk, or by
``kubespot plan`` from the controller's status ConfigMap (``cloud.avoided_status``); ``None`` means
they are not known (no ConfigMap, a stale one, or no cluster read), and a pod's story bound for a
new NodeClaim, or unschedulable, says so (``not_known``: why). The JSON key
``avoided_offerings`` is a list (each with ``kind``, ``capacity_type``, ``instance_type``, ``zone``
and ``reason`` and ``seconds_left`` for a mark, ``score`` for a risk) or null when not known.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubespot.model.quantity import quantity_text

from .api.conditions import Condition
from .explain import AVOIDED_UNAVAILABLE, AvoidedOffering, GroupStory
from .simulate import Plan, PlannedClaim


def _quantity(name: str, amount: int) -> str:
    return quantity_text(name, amount)


def plan_json(
    plan: Plan, pools: Mapping[str, Condition] | None = None, avoided: list[AvoidedOffering] | None = None
) -> dict[str, Any]:
    return {
        "avoided_offerings": avoided_json(avoided),
        "nodeclaims": [
            {
                "nodepool": c.pool,
                "capacity_type": c.capacity_type,
                "instance_types": list(c.instance_types),
                "price_per_hour": round(c.price_per_hour, 6),
                "zones": list(c.zones),
                "pods": sorted(c.pods),
                "requests": {k: _quantity(k, v) for k, v in sorted(c.requests.items())},
                "why": c.why,
                "types": claim_types_json(c),
            }
            for c in plan.claims
        ],
        "existing": [{"pod": pod, "node": node} for pod, node in sorted(plan.existing.items())],
        "unschedulable": [
            {"pod": pod, "reasons": list(reasons)} for pod, reasons in sorted(plan.unschedulable.items())
        ],
        "cost_per_hour": round(plan.cost_per_hour, 6),
        "nodepools": [
            {"name": name, "valid": c.is_true, "reason": c.reason, "message": c.message}
            for name, c in sorted((pools or {}).items())
        ],
    }


def claim_types_json(c: PlannedClaim) -> dict[str, Any]:
    """Why a NodeClaim offers the types it does (counted, not listed)."""
    return {
        "considered": c.considered,
        "offered": len(c.instance_types),
        "dropped": dict(sorted(c.dropped.items())),
        "min_values": dict(sorted(c.min_values.items())),
        "limits_charged": {k: _quantity(k, v) for k, v in sorted(c.limits_charged.items())},
    }


def _story_json(story: GroupStory) -> dict[str, Any]:
    return {
        "group_pods": story.pods,
        "existing_nodes": {"tried": story.nodes_tried, "refused": dict(sorted(story.nodes_refused.items()))},
        "nodepools": [{"name": name, "outcome": outcome} for name, outcome in story.outcomes()],
        "preferences_relaxed": story.relaxed,
    }


#: Said when the plan ran without the launch path's memory and a launch would consult it.
NOT_KNOWN = "Offerings avoided: not known here ({why})."
#: Why, when the caller does not say.
NOT_READ = "the controller's unavailable-offerings cache and pool risk were not read"


def avoided_json(avoided: Iterable[AvoidedOffering] | None) -> list[dict[str, Any]] | None:
    if avoided is None:
        return None
    out: list[dict[str, Any]] = []
    for a in avoided:
        entry: dict[str, Any] = a.pool_fields()
        if a.kind == AVOIDED_UNAVAILABLE:
            entry.update(reason=a.reason, seconds_left=a.seconds_left)
        else:
            entry["score"] = a.score
        out.append(entry)
    return out


def _avoided_line(a: AvoidedOffering) -> str:
    pool = f"{a.capacity_type} {a.instance_type} in {a.zone}".replace("* in *", "(every pool)")
    if a.kind == AVOIDED_UNAVAILABLE:
        return f"    {pool}: unavailable ({a.reason}) for another {a.seconds_left:.0f} s"
    return f"    {pool}: reclaim risk {a.score:g}, tried after safer pools"


def _avoided_lines(
    avoided: list[AvoidedOffering] | None, launches: bool, not_known: str = NOT_READ
) -> list[str]:
    """The story's lines on avoided offerings: only for a pod whose placement a launch decides."""
    if not launches:
        return []
    if avoided is None:
        return ["  " + NOT_KNOWN.format(why=not_known)]
    if not avoided:
        return ["  Offerings avoided: none now."]
    return [f"  Offerings avoided now ({len(avoided)}):", *(_avoided_line(a) for a in avoided)]


def pod_story_json(
    plan: Plan, pod: str, avoided: list[AvoidedOffering] | None = None
) -> dict[str, Any] | None:
    """``pod_story`` as an object; None when the plan does not know the pod."""
    out: dict[str, Any] = {"pod": pod}
    if pod in plan.existing:
        out.update(outcome="existing", node=plan.existing[pod])
    elif pod in plan.unschedulable:
        out.update(outcome="unschedulable", reasons=list(plan.unschedulable[pod]))
    else:
        claim = next((c for c in plan.claims if pod in c.pods), None)
        if claim is None:
            return None
        out.update(
            outcome="nodeclaim",
            nodeclaim={
                "nodepool": claim.pool,
                "capacity_type": claim.capacity_type,
                "instance_types": list(claim.instance_types),
                "price_per_hour": round(claim.price_per_hour, 6),
                "zones": list(claim.zones),
                "pods": len(claim.pods),
                "why": claim.why,
                "types": claim_types_json(claim),
            },
        )
    story = plan.stories.get(pod)
    if story is not None:
        out["story"] = _story_json(story)
    if out["outcome"] != "existing":
        out["avoided_offerings"] = avoided_json(avoided)
    return out


def _counted(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {why}" for why, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _story_lines(story: GroupStory | None) -> list[str]:
    if story is None:
        return []
    lines = [f"  Its group: {story.pods} identical pod(s)."]
    if story.nodes_tried:
        refused = sum(story.nodes_refused.values())
        line = f"  Existing nodes: {story.nodes_tried} tried, {refused} refused"
        lines.append(line + (f" ({_counted(story.nodes_refused)})." if refused else "."))
    else:
        lines.append("  Existing nodes: none to try.")
    for name, outcome in story.outcomes():
        lines.append(f"  NodePool {name}: {outcome}.")
    if story.relaxed:
        lines.append("  Its preferences were dropped to place the rest (Karpenter's relaxation).")
    return lines


def _types_lines(c: PlannedClaim) -> list[str]:
    lines = [
        f"  Instance types: {c.considered} in the pool, {len(c.instance_types)} offered"
        + (f"; dropped: {_counted(c.dropped)}." if c.dropped else ".")
    ]
    if c.min_values:
        kept = ", ".join(f"{k} has {n} values" for k, n in sorted(c.min_values.items()))
        lines.append(f"  minValues: {kept}.")
    if c.limits_charged:
        charged = ", ".join(f"{k} {_quantity(k, v)}" for k, v in sorted(c.limits_charged.items()))
        lines.append(f"  Counted against the NodePool's limits (its largest type): {charged}.")
    return lines


def _types(names: Iterable[str], shown: int = 3) -> str:
    names = list(names)
    more = f" +{len(names) - shown}" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def plan_text(plan: Plan, pools: Mapping[str, Condition] | None = None) -> str:
    """A summary a person reads in a terminal."""
    lines: list[str] = []
    for name, cond in sorted((pools or {}).items()):
        if not cond.is_true:
            lines.append(f"NodePool {name} is left out: {cond.reason}: {cond.message}")
    if plan.claims:
        lines.append(f"{'NODEPOOL':<16} {'CAPACITY':<10} {'$/HOUR':>8} {'PODS':>5}  INSTANCE TYPES")
        for c in plan.claims:
            lines.append(
                f"{c.pool:<16} {c.capacity_type:<10} {c.price_per_hour:>8.4f} {len(c.pods):>5}  "
                f"{_types(c.instance_types)}"
            )
    lines.append(
        f"{len(plan.claims)} new NodeClaims, ${plan.cost_per_hour:.4f}/hour; "
        f"{len(plan.existing)} pods fit on existing nodes; {len(plan.unschedulable)} unschedulable"
    )
    for pod, reasons in sorted(plan.unschedulable.items()):
        lines.append(f"  {pod}: {'; '.join(reasons)}")
    return "\n".join(lines)


def pod_story(
    plan: Plan, pod: str, avoided: list[AvoidedOffering] | None = None, *, not_known: str = NOT_READ
) -> str | None:
    """Where ``pod`` (``namespace/name``) goes and why; None when the plan does not know it."""
    story = plan.stories.get(pod)
    if pod in plan.existing:
        return "\n".join([f"{pod} fits on the existing node {plan.existing[pod]}.", *_story_lines(story)])
    for c in plan.claims:
        if pod in c.pods:
            head = (
                f"{pod} goes to a new {c.capacity_type} NodeClaim of NodePool {c.pool} "
                f"(${c.price_per_hour:.4f}/hour, {len(c.pods)} pods, zones {', '.join(c.zones)}): "
                f"{c.why}. Instance types offered: {_types(c.instance_types, 10)}."
            )
            return "\n".join(
                [head, *_types_lines(c), *_avoided_lines(avoided, True, not_known), *_story_lines(story)]
            )
    if pod in plan.unschedulable:
        head = f"{pod} cannot be scheduled: " + "; ".join(plan.unschedulable[pod]) + "."
        return "\n".join([head, *_avoided_lines(avoided, True, not_known), *_story_lines(story)])
    return None
