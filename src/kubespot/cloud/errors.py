"""What a launch can fail with, as Karpenter's cloud provider errors
(kubernetes-sigs/karpenter ``pkg/cloudprovider/types.go``; aws/karpenter-provider-aws
``pkg/errors/errors.go``): the lifecycle controller handles each kind differently.

- ``InsufficientCapacityError``: every pool tried was out of capacity (EC2's insufficient-capacity
  codes). The NodeClaim is deleted and its pods simulated again without those offerings, which
  the cloud has already put in the ``UnavailableOfferings`` cache.
- ``NodeClassNotReadyError``: the EC2NodeClass is not resolved (no subnets, no AMI...). Deleted too.
- ``CreateError``: anything else (quota, auth, throttling, a malformed template): the NodeClaim
  keeps ``Launched=Unknown`` with ``reason``/``message`` and the launch is retried with backoff.
- ``NodeClaimNotFound``: no instance runs under the provider id (terminated or never launched).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CreateError",
    "FailedOffering",
    "InsufficientCapacityError",
    "NodeClaimNotFound",
    "NodeClassNotReadyError",
]


@dataclass(frozen=True, slots=True)
class FailedOffering:
    """One pool a launch could not use, as EC2 reported it (an entry of CreateFleet's ``Errors``)."""

    capacity_type: str
    instance_type: str
    zone: str
    #: EC2's error code (``InsufficientInstanceCapacity``, ``UnfulfillableCapacity``...).
    code: str
    message: str = ""


class NodeClaimNotFound(LookupError):
    """The cloud has no instance for this provider id (Karpenter's ``NodeClaimNotFoundError``)."""


class InsufficientCapacityError(Exception):
    """No pool the NodeClaim allows had capacity; ``offerings`` are the pools that said so."""

    def __init__(self, message: str, offerings: tuple[FailedOffering, ...] = ()) -> None:
        super().__init__(message)
        self.offerings = offerings


class NodeClassNotReadyError(Exception):
    """The NodeClaim's EC2NodeClass cannot launch yet (missing, or a *Ready condition not True)."""


class CreateError(Exception):
    """A launch failed for another reason; ``reason`` is Karpenter's CamelCase condition reason
    (``SpotQuotaExceeded``, ``VCPULimitExceeded``, ``Unauthorized``, ``LaunchFailed``...)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
