"""The ``CloudProvider`` protocol: what the provisioner asks of a cloud (kubernetes-sigs/karpenter
``pkg/cloudprovider/types.go`` ``CloudProvider``), reduced to what issues 13 and 14 need.

- ``instance_types(nodepool, nodeclass)``: Karpenter's ``GetInstanceTypes``: every type the pool may
  launch, each with its offerings (zone, capacity type, price, availability) and the allocatable of
  a node of that type under the class's AMI family and kubelet settings.
- ``create`` / ``delete`` / ``get`` / ``list``: the NodeClaim lifecycle (``Create``, ``Delete``,
  ``Get`` by provider id, ``List``). ``create`` resolves the claim's candidate types itself from its
  requirements (as Karpenter's ``Create`` does), so a NodeClaim read back after a restart launches
  the same way; it skips pools in the ``UnavailableOfferings`` cache, marks the pools that fail, and
  raises the errors of ``cloud.errors``. It is idempotent per NodeClaim (docs/designs/launching.md):
  an instance already launched for the claim's name is returned, not launched again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec
from kubespot.scheduling.instance_types import InstanceType
from kubespot.scheduling.nodepool import NodePool

from .errors import FailedOffering, NodeClaimNotFound

__all__ = ["CloudNodeClaim", "CloudProvider", "NodeClaimNotFound"]


@dataclass(frozen=True, slots=True)
class CloudNodeClaim:
    """What the cloud says of a launched NodeClaim (the fields Karpenter's ``Create`` fills in)."""

    #: The NodeClaim's name (from the instance's ``karpenter.sh/nodeclaim`` tag; "" if untagged).
    name: str
    #: ``aws:///<zone>/<instance id>`` (Karpenter's and the kubelet's form).
    provider_id: str
    instance_type: str
    zone: str
    capacity_type: str
    #: The labels the node will carry (the type's, zone, capacity type, nodepool...).
    labels: Mapping[str, str] = field(default_factory=dict)
    image_id: str = ""
    #: The NodePool and EC2NodeClass the instance was launched for (its tags).
    nodepool: str = ""
    nodeclass: str = ""
    #: Launch time, seconds since the epoch (GC spares instances younger than 30 s).
    launched_at: float = 0.0
    #: Instance state as the cloud says it (``pending``, ``running``, ``shutting-down``...).
    state: str = "running"
    #: Pools CreateFleet tried and could not use before this launch succeeded (already cached).
    failed_offerings: tuple[FailedOffering, ...] = ()
    #: The node's expected capacity and allocatable, as quantities (``cpu: "2"``, ``memory:
    #: "7680Mi"``): the NodeClaim's ``status.capacity`` / ``status.allocatable`` (Karpenter's
    #: ``Create`` fills them from the instance type; empty when the cloud does not know them).
    capacity: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, str] = field(default_factory=dict)


class CloudProvider(Protocol):
    """A cloud the provisioner can ask for capacity."""

    #: A short name for logs and metrics (``aws``, ``fake``).
    name: str

    async def instance_types(self, nodepool: NodePool, nodeclass: EC2NodeClassSpec) -> list[InstanceType]:
        """Every type ``nodepool`` may launch through ``nodeclass``, with its offerings."""
        ...

    async def create(self, claim: NodeClaimSpec) -> CloudNodeClaim:
        """Launch capacity for ``claim``: ``InsufficientCapacityError``, ``NodeClassNotReadyError``
        or ``CreateError`` when it cannot; the instance already launched for it if there is one."""
        ...

    async def delete(self, provider_id: str) -> None:
        """Terminate it: returns while the instance exists, also while it is shutting down (the
        caller requeues and asks again, as Karpenter's lifecycle and termination controllers do
        until ``Delete`` is NotFound); ``NodeClaimNotFound`` only once it is terminated or unknown."""
        ...

    async def get(self, provider_id: str) -> CloudNodeClaim:
        """What runs under ``provider_id``; ``NodeClaimNotFound`` when nothing does."""
        ...

    async def list(self) -> list[CloudNodeClaim]:
        """Every instance this cluster launched for a NodePool that is not terminated."""
        ...
