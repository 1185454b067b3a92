"""The ``CloudProvider`` protocol: what the provisioner asks of a cloud (kubernetes-sigs/karpenter
``pkg/cloudprovider/types.go`` ``CloudProvider``), reduced to what issues 13 and 14 need.

- ``instance_types(nodepool, nodeclass)``: Karpenter's ``GetInstanceTypes``: every type the pool may
  launch, each with its offerings (zone, capacity type, price, availability) and the allocatable of
  a node of that type under the class's AMI family and kubelet settings.
- ``create`` / ``delete`` / ``get`` / ``list``: the NodeClaim lifecycle (``Create``, ``Delete``,
  ``Get`` by provider id, ``List``). Issue 14 launches; until then the AWS implementation raises
  ``NotImplementedError`` and only ``FakeCloud`` implements them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec
from kubespot.scheduling.instance_types import InstanceType
from kubespot.scheduling.nodepool import NodePool

__all__ = ["CloudNodeClaim", "CloudProvider", "NodeClaimNotFound"]


class NodeClaimNotFound(LookupError):
    """The cloud has no instance for this provider id (Karpenter's ``NodeClaimNotFoundError``)."""


@dataclass(frozen=True, slots=True)
class CloudNodeClaim:
    """What the cloud says of a launched NodeClaim (the fields Karpenter's ``Create`` fills in)."""

    name: str
    provider_id: str
    instance_type: str
    zone: str
    capacity_type: str
    labels: Mapping[str, str] = field(default_factory=dict)


class CloudProvider(Protocol):
    """A cloud the provisioner can ask for capacity."""

    #: A short name for logs and metrics (``aws``, ``fake``).
    name: str

    async def instance_types(self, nodepool: NodePool, nodeclass: EC2NodeClassSpec) -> list[InstanceType]:
        """Every type ``nodepool`` may launch through ``nodeclass``, with its offerings."""
        ...

    async def create(self, claim: NodeClaimSpec) -> CloudNodeClaim:
        """Launch capacity for ``claim`` (issue 14)."""
        ...

    async def delete(self, provider_id: str) -> None:
        """Terminate it; ``NodeClaimNotFound`` once it is gone (issue 14)."""
        ...

    async def get(self, provider_id: str) -> CloudNodeClaim:
        """What runs under ``provider_id``; ``NodeClaimNotFound`` when nothing does (issue 14)."""
        ...

    async def list(self) -> list[CloudNodeClaim]:
        """Every NodeClaim this cluster launched that still runs (issue 14)."""
        ...
