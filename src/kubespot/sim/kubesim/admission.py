"""Mutating admission the simulated API server applies on create (what is not plain defaulting).

- **TaintNodesByCondition** (plugin/pkg/admission/nodetaint/admission.go, on by default): every Node
  created through the API gets ``node.kubernetes.io/not-ready:NoSchedule``, so nothing is scheduled
  to it before the node lifecycle controller has seen it Ready and removed the taint. Objects loaded
  at start-up (an already-running cluster) do not pass through admission.
"""

from __future__ import annotations

from typing import Any

NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def admit_node_create(node: dict[str, Any]) -> None:
    """Add the not-ready NoSchedule taint to a new Node unless it has it already (in place)."""
    spec = node.setdefault("spec", {})
    taints = list(spec.get("taints") or [])
    if not any(t.get("key") == NOT_READY_TAINT["key"] and t.get("effect") == "NoSchedule" for t in taints):
        taints.append(dict(NOT_READY_TAINT))
    spec["taints"] = taints
