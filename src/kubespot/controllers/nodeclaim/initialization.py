"""Initialization: a registered NodeClaim's Node is ready for pods (pure), as Karpenter's
initialization step (kubernetes-sigs/karpenter ``pkg/controllers/nodeclaim/lifecycle/
initialization.go`` ``Initialization.Reconcile``, ``StartupTaintsRemoved``,
``KnownEphemeralTaintsRemoved``, ``RequestedResourcesRegistered``, ``formatTaint``).

``Initialized`` stays Unknown, with the first reason that holds, while: there is no single Node
(``NodeNotFound``), the Node is not Ready (``NodeNotReady``), a startup taint of the NodeClaim is
still on it (``StartupTaintsExist``), a known ephemeral taint is (``KnownEphemeralTaintsExist``:
``scheduling.taints.EPHEMERAL_TAINTS`` and its key prefixes), or a resource the NodeClaim requests
is not allocatable (``ResourceNotRegistered``). Then the Node is labelled
``karpenter.sh/initialized=true`` and ``Initialized=True`` (so ``Ready=True``). Karpenter's DRA
check (``DRADriverPoolsNotPublished``) has nothing to look at here: kubespot does not plan DRA
claims.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubespot.model.quantity import QuantityError, quantity
from kubespot.scheduling.api.conditions import Condition
from kubespot.scheduling.taints import EPHEMERAL_TAINT_PREFIXES, EPHEMERAL_TAINTS

from .objects import (
    INITIALIZED,
    INITIALIZED_LABEL,
    Obj,
    labels,
    matches,
    node_allocatable,
    node_ready,
    requests,
    taints,
)

__all__ = ["Initialization", "initialize"]


@dataclass(frozen=True, slots=True)
class Initialization:
    condition: Condition
    #: Labels to set on the Node (None: nothing to write).
    node_labels: dict[str, str] | None = None


def _unknown(reason: str, message: str) -> Initialization:
    return Initialization(Condition(INITIALIZED, "Unknown", reason, message))


def _zero(value: object) -> bool:
    if value is None:
        return True
    try:
        return quantity(value) == 0  # type: ignore[arg-type]
    except QuantityError:
        return True


def initialize(claim: Obj, nodes: Sequence[Obj]) -> Initialization:
    """The initialization of a registered ``claim`` given the Nodes carrying its provider id."""
    if len(nodes) != 1:
        return _unknown("NodeNotFound", "Node not registered with cluster")
    node = nodes[0]
    if not node_ready(node):
        return _unknown("NodeNotReady", "Node status is NotReady")
    on_node = taints(node)
    for startup in taints(claim, "startupTaints"):
        for t in on_node:
            if matches(startup, t):
                return _unknown("StartupTaintsExist", f'StartupTaint "{t}" still exists')
    for t in on_node:
        if any(matches(t, e) for e in EPHEMERAL_TAINTS) or t.key.startswith(EPHEMERAL_TAINT_PREFIXES):
            return _unknown("KnownEphemeralTaintsExist", f'KnownEphemeralTaint "{t}" still exists')
    allocatable = node_allocatable(node)
    for resource, amount in requests(claim).items():
        if _zero(amount):
            continue
        if _zero(allocatable.get(resource)):
            return _unknown(
                "ResourceNotRegistered", f'Resource "{resource}" was requested but not registered'
            )
    wanted = None if labels(node).get(INITIALIZED_LABEL) == "true" else {INITIALIZED_LABEL: "true"}
    return Initialization(Condition(INITIALIZED, "True", INITIALIZED), wanted)
