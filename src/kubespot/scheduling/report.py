"""A plan as people and scripts read it: the JSON of ``kubespot plan --output json``, a text summary,
and one pod's story (``--why``).

The JSON keys are a contract (scripts and CI pipelines read them): ``nodeclaims`` (each with
``nodepool``, ``capacity_type``, ``instance_types``, ``price_per_hour``, ``zones``, ``pods``,
``requests``, ``why``), ``existing`` (each with ``pod`` and ``node``), ``unschedulable`` (each with
``pod`` and ``reasons``), ``cost_per_hour``, and ``nodepools`` (each pool's validation: ``name``,
``valid``, ``reason``, ``message``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .api.conditions import Condition
from .simulate import Plan

_CPU = "cpu"
_MIB = 1024 * 1024


def _quantity(name: str, amount: int) -> str:
    if name == _CPU:
        return f"{amount}m" if amount % 1000 else str(amount // 1000)
    if name in ("memory", "ephemeral-storage") and amount % _MIB == 0:
        return f"{amount // _MIB}Mi"
    return str(amount)


def plan_json(plan: Plan, pools: Mapping[str, Condition] | None = None) -> dict[str, Any]:
    return {
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


def pod_story(plan: Plan, pod: str) -> str | None:
    """Where ``pod`` (``namespace/name``) goes and why; None when the plan does not know it."""
    if pod in plan.existing:
        return f"{pod} fits on the existing node {plan.existing[pod]}."
    for c in plan.claims:
        if pod in c.pods:
            return (
                f"{pod} goes to a new {c.capacity_type} NodeClaim of NodePool {c.pool} "
                f"(${c.price_per_hour:.4f}/hour, {len(c.pods)} pods, zones {', '.join(c.zones)}): "
                f"{c.why}. Instance types offered: {_types(c.instance_types, 10)}."
            )
    if pod in plan.unschedulable:
        return f"{pod} cannot be scheduled: " + "; ".join(plan.unschedulable[pod]) + "."
    return None
