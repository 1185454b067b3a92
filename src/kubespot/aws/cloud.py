"""``AwsCloud``: the ``cloud.CloudProvider`` of EC2, over ``catalog.Catalog``.

``instance_types(nodepool, nodeclass)`` is Karpenter's AWS ``GetInstanceTypes``
(aws/karpenter-provider-aws ``pkg/cloudprovider/cloudprovider.go``, ``pkg/providers/instancetype``):
the catalog's types with the allocatable of the class's AMI family and kubelet block, offered in the
zones of the class's resolved subnets (``set_zones``, kept by the EC2NodeClass controller). Until
they are known every zone of the region is offered: Karpenter refuses ("no subnets found"), but
``kubespot plan`` reads classes no controller has resolved and must still plan. The NodeClaim
calls (``create``, ``delete``, ``get``, ``list``) are issue 14's launch path and raise
``NotImplementedError`` until then.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubespot.cloud.provider import CloudNodeClaim
from kubespot.model.capacity import AMIFamily
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec
from kubespot.scheduling.instance_types import InstanceType
from kubespot.scheduling.nodepool import NodePool

from .catalog import Catalog

__all__ = ["AwsCloud"]

_LATER = "launching is issue 14: AwsCloud does not create, delete or list NodeClaims yet"


class AwsCloud:
    """EC2 as a ``CloudProvider``: the catalog's instance types; launches in issue 14."""

    name = "aws"

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._zones: dict[str, frozenset[str]] = {}

    def set_zones(self, nodeclass: str, zones: Iterable[str] | None) -> None:
        """The zones ``nodeclass``'s subnets cover (None: not resolved, every zone)."""
        if zones is None:
            self._zones.pop(nodeclass, None)
        else:
            self._zones[nodeclass] = frozenset(zones)

    async def instance_types(self, nodepool: NodePool, nodeclass: EC2NodeClassSpec) -> list[InstanceType]:
        await self.catalog.refresh_if_due()
        kubelet = nodeclass.kubelet.capacity() if nodeclass.kubelet is not None else None
        return self.catalog.instance_types(
            self._zones.get(nodeclass.name),
            family=nodeclass.family or AMIFamily.AL2023,
            kubelet=kubelet,
        )

    async def create(self, claim: NodeClaimSpec) -> CloudNodeClaim:
        raise NotImplementedError(_LATER)

    async def delete(self, provider_id: str) -> None:
        raise NotImplementedError(_LATER)

    async def get(self, provider_id: str) -> CloudNodeClaim:
        raise NotImplementedError(_LATER)

    async def list(self) -> list[CloudNodeClaim]:
        raise NotImplementedError(_LATER)
