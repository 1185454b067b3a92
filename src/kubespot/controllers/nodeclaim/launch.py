"""Launch: a NodeClaim whose ``Launched`` condition is Unknown gets capacity from the cloud, as
Karpenter's launch step (kubernetes-sigs/karpenter ``pkg/controllers/nodeclaim/lifecycle/launch.go``
``Launch.Reconcile``, ``launchNodeClaim``, ``PopulateNodeClaimDetails``; events in ``events.go``).

- Success: labels are the cloud's overlaid by the NodeClaim's own (its own win), the NodeClaim's
  annotations kept as they are, ``status.providerID``, ``imageID``, ``capacity``, ``allocatable``;
  ``Launched=True``. Karpenter also overlays the cloud's annotations (aws returns the
  ``karpenter.k8s.aws/ec2nodeclass-hash`` ones, for drift); ``CloudNodeClaim`` carries none, as
  kubespot has no drift detection, so there is nothing to overlay.
- ``InsufficientCapacityError``: Warning event ``InsufficientCapacityError`` ("NodeClaim <name>
  event: <error>", cut at 300 characters) and the NodeClaim is deleted (the cloud has marked the
  pools; the provisioner plans its pods again). ``NodeClassNotReadyError``: deleted.
- ``CreateError`` (or anything else the cloud raises): ``Launched=Unknown`` with its reason and
  message (``LaunchFailed`` for other errors), retried with backoff by the loop.

Karpenter also keeps an in-memory copy of a launch for an hour in case the status write fails; the
cloud's launches here are idempotent per NodeClaim (docs/designs/launching.md §3), so asking again
returns the same instance, across restarts too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kubespot.cloud.errors import (
    CreateError,
    FailedOffering,
    InsufficientCapacityError,
    NodeClassNotReadyError,
)
from kubespot.cloud.provider import CloudNodeClaim, CloudProvider
from kubespot.scheduling.api.conditions import Condition
from kubespot.scheduling.api.nodeclaim import parse_nodeclaim
from kubespot.scheduling.labels import CAPACITY_TYPE, SPOT

from .objects import LAUNCHED, Obj, annotations_of, labels, name

__all__ = ["INSUFFICIENT", "LaunchOutcome", "allows_spot", "launch", "populate", "truncate"]

log = logging.getLogger("kubespot.controller.nodeclaim")

INSUFFICIENT_CAPACITY = "InsufficientCapacityError"
#: ``LaunchOutcome.delete_reason`` of a claim no pool had capacity for.
INSUFFICIENT = "insufficient_capacity"


def truncate(message: str) -> str:
    """``truncateMessage``: at most 300 characters, then ``...``."""
    return message if len(message) < 300 else message[:300] + "..."


@dataclass(frozen=True, slots=True)
class LaunchOutcome:
    """What a launch attempt came to."""

    launched: CloudNodeClaim | None = None
    #: Set when the NodeClaim is to be deleted: ``insufficient_capacity``, ``nodeclass_not_ready``.
    delete_reason: str = ""
    #: A Warning event on the NodeClaim: (reason, message).
    event: tuple[str, str] | None = None
    #: ``Launched=Unknown`` with the failure's reason (the launch is retried).
    condition: Condition | None = None
    #: The pools an insufficient-capacity failure named (for the launch-failure metric).
    failed: tuple[FailedOffering, ...] = ()


async def launch(cloud: CloudProvider, claim: Obj) -> LaunchOutcome:
    """Ask ``cloud`` for the claim's capacity; never raises for the cloud's errors."""
    spec = parse_nodeclaim(claim).spec
    try:
        launched = await cloud.create(spec)
    except InsufficientCapacityError as err:
        message = f"NodeClaim {name(claim)} event: {truncate(str(err))}"
        return LaunchOutcome(
            delete_reason=INSUFFICIENT,
            event=(INSUFFICIENT_CAPACITY, message),
            failed=err.offerings,
        )
    except NodeClassNotReadyError as err:
        log.error("nodeclaim %s: nodeclass not ready: %s", name(claim), err)
        return LaunchOutcome(delete_reason="nodeclass_not_ready")
    except CreateError as err:
        return LaunchOutcome(condition=Condition(LAUNCHED, "Unknown", err.reason, truncate(err.message)))
    except Exception as err:  # any other failure is Karpenter's LaunchFailed: retried, never fatal
        log.exception("nodeclaim %s: launch failed", name(claim))
        return LaunchOutcome(condition=Condition(LAUNCHED, "Unknown", "LaunchFailed", truncate(str(err))))
    return LaunchOutcome(launched=launched)


def allows_spot(claim: Obj) -> bool:
    """The claim's requirements let it run on spot (the provisioner always writes the
    ``karpenter.sh/capacity-type`` requirement): an on-demand launch of it is a fallback."""
    for req in (claim.get("spec") or {}).get("requirements") or ():
        if isinstance(req, dict) and req.get("key") == CAPACITY_TYPE:
            values = req.get("values") or ()
            op = req.get("operator")
            return (op == "In" and SPOT in values) or (op == "NotIn" and SPOT not in values) or op == "Exists"
    return True  # no capacity-type requirement: any, spot included


def populate(claim: Obj, launched: CloudNodeClaim) -> None:
    """``PopulateNodeClaimDetails`` on ``claim`` (a working copy)."""
    meta = claim.setdefault("metadata", {})
    meta["labels"] = {**launched.labels, **labels(claim)}
    if annotations_of(claim):
        meta["annotations"] = annotations_of(claim)
    status = claim.setdefault("status", {})
    status["providerID"] = launched.provider_id
    if launched.image_id:
        status["imageID"] = launched.image_id
    if launched.capacity:
        status["capacity"] = dict(launched.capacity)
    if launched.allocatable:
        status["allocatable"] = dict(launched.allocatable)
