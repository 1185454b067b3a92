"""A NodePool's status conditions (pure).

kubernetes-sigs/karpenter ``pkg/controllers/nodepool/validation/controller.go``
(``ValidationSucceeded``: True, or False with ``NodePoolValidationFailed`` and the errors: the
pure validator's condition), ``pkg/controllers/nodepool/readiness/controller.go``
(``NodeClassReady``: False ``NodeClassNotFound`` "NodeClass not found on cluster", False
``NodeClassTerminating`` "NodeClass is Terminating", False ``NodeClassReadinessUnknown`` "Node Class
Readiness Unknown" while the class's Ready is Unknown, False with the class's own Ready reason and
message when it is not Ready, else True) and ``pkg/apis/v1/nodepool_status.go`` (Ready = both);
``resources`` and ``nodes`` as the counter counts them (``nodepool_counter``);
``NodeRegistrationHealthy`` and ``nodeClassObservedGeneration`` as ``registration_health`` decides
them (not a ``Ready`` dependent, as upstream). Deliberate
difference: ``ValidationSucceeded`` False ``CapacitySplitInvalid`` (kubespot's own annotation,
``capacity_split``) leaves ``Ready`` to ``NodeClassReady`` alone, so the pool is still used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kubespot.scheduling.api.conditions import VALIDATION_SUCCEEDED, Condition

from .capacity_split import CAPACITY_SPLIT_INVALID
from .conditions import READY, merge_conditions

__all__ = ["NODECLASS_READY", "NODEPOOL_CONDITIONS", "nodeclass_ready", "nodepool_status"]

NODECLASS_READY = "NodeClassReady"
NODEPOOL_CONDITIONS = (VALIDATION_SUCCEEDED, NODECLASS_READY)

Obj = dict[str, Any]


def nodeclass_ready(nodeclass: Mapping[str, Any] | None) -> Condition:
    """``NodeClassReady`` of a pool whose class is ``nodeclass`` (None: not in the cluster)."""
    if nodeclass is None:
        return Condition(NODECLASS_READY, "False", "NodeClassNotFound", "NodeClass not found on cluster")
    if (nodeclass.get("metadata") or {}).get("deletionTimestamp"):
        return Condition(NODECLASS_READY, "False", "NodeClassTerminating", "NodeClass is Terminating")
    conditions = (nodeclass.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == READY), None)
    if ready is None or ready.get("status") not in ("True", "False"):
        return Condition(
            NODECLASS_READY, "False", "NodeClassReadinessUnknown", "Node Class Readiness Unknown"
        )
    if ready.get("status") == "False":
        return Condition(
            NODECLASS_READY, "False", str(ready.get("reason") or ""), str(ready.get("message") or "")
        )
    return Condition(NODECLASS_READY, "True", NODECLASS_READY)


def nodepool_status(
    old: Mapping[str, Any] | None,
    validation: Condition,
    nodeclass: Mapping[str, Any] | None,
    *,
    generation: int,
    now: datetime,
    created: str | None = None,
    deleting: bool = False,
    counts: tuple[Mapping[str, str], int] | None = None,
    registration: Sequence[Condition] = (),
    class_generation: int | None = None,
) -> Obj:
    """The status to write: ``old`` with the two conditions and ``Ready`` set, and, when
    ``counts`` is given, ``resources`` and ``nodes`` (``nodepool_counter``). ``registration``:
    ``NodeRegistrationHealthy`` when it changes (``registration_health``), set after the others
    and not a ``Ready`` dependent; ``class_generation``: the class's generation, written as
    ``nodeClassObservedGeneration`` (None: the class is not found, left as it was)."""
    status: Obj = dict(old or {})
    if counts is not None:
        status["resources"] = dict(counts[0])
        status["nodes"] = counts[1]
    if class_generation is not None:
        status["nodeClassObservedGeneration"] = class_generation
    status["conditions"] = merge_conditions(
        (old or {}).get("conditions"),
        [validation, nodeclass_ready(nodeclass), *registration],
        # A malformed split annotation (kubespot's, which Karpenter ignores) is reported but does
        # not stop the pool: it is used without a split (docs/designs/launching.md §6).
        dependents=(NODECLASS_READY,) if validation.reason == CAPACITY_SPLIT_INVALID else NODEPOOL_CONDITIONS,
        generation=generation,
        now=now,
        created=created,
        deleting=deleting,
    )
    return status
