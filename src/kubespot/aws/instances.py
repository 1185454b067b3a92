"""The instances kubespot launched for NodeClaims: found by tags, read, terminated.

As aws/karpenter-provider-aws ``pkg/providers/instance/instance.go`` (``Get``, ``List``, ``Delete``)
and ``types.go`` (``NewInstance``, ``capacityTypeFromInstance``):

- ``list``: DescribeInstances with the tag keys ``karpenter.sh/nodepool`` and
  ``karpenter.k8s.aws/ec2nodeclass``, the cluster's ``eks:eks-cluster-name`` tag and a live state
  (pending, running, stopping, stopped, shutting-down), paged 1 000 at a time;
- ``for_nodeclaim``: the same filters plus ``karpenter.sh/nodeclaim=<name>``, the tag kubespot
  writes at launch so a NodeClaim whose status write was lost finds its instance again
  (docs/designs/launching.md §3: Karpenter tags it only after registration);
- ``get``: by id with the live-state filter; ``NodeClaimNotFound`` when EC2 does not know the id
  or it is terminated;
- ``terminate``: TerminateInstances; no call when the instance is already shutting down (``Delete``
  returns nil then, to spare EC2's rate limit), ``NodeClaimNotFound`` only once it is terminated
  or unknown (``CloudProvider.delete``'s contract: the caller waits until then).

The capacity type is read back as Karpenter reads it: spot when ``SpotInstanceRequestId`` is set;
moto sets only ``InstanceLifecycle: spot``, which AWS sets too, so either says spot.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final

from kubespot.cloud.errors import NodeClaimNotFound
from kubespot.scheduling.labels import NODEPOOL, ON_DEMAND, SPOT

from .session import AwsClients, AwsError

__all__ = [
    "CLUSTER_NAME_TAG",
    "LIVE_STATES",
    "NODECLAIM_TAG",
    "NODECLASS_TAG",
    "Instance",
    "Instances",
    "cluster_tag",
    "parse_instance",
    "provider_id",
]

NODECLASS_TAG: Final = "karpenter.k8s.aws/ec2nodeclass"
NODECLAIM_TAG: Final = "karpenter.sh/nodeclaim"
CLUSTER_NAME_TAG: Final = "eks:eks-cluster-name"
#: Karpenter's ``instanceStateFilter``: everything but terminated.
LIVE_STATES: Final = ("pending", "running", "stopping", "stopped", "shutting-down")
_PAGE: Final = 1000
_NOT_FOUND: Final = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})


def cluster_tag(cluster: str) -> str:
    """``kubernetes.io/cluster/<cluster>``, the key whose value ``owned`` claims a resource."""
    return f"kubernetes.io/cluster/{cluster}"


def provider_id(zone: str, instance_id: str) -> str:
    """The Node's ``spec.providerID`` (kubelet's and Karpenter's form)."""
    return f"aws:///{zone}/{instance_id}"


@dataclass(frozen=True, slots=True)
class Instance:
    """What the launch path needs of one EC2 instance."""

    id: str
    instance_type: str
    zone: str
    state: str
    capacity_type: str
    image_id: str = ""
    subnet_id: str = ""
    tags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: Seconds since the epoch; 0 when EC2 did not say.
    launched_at: float = 0.0

    @property
    def provider_id(self) -> str:
        return provider_id(self.zone, self.id)

    @property
    def nodeclaim(self) -> str:
        return self.tags.get(NODECLAIM_TAG, "")

    @property
    def nodepool(self) -> str:
        return self.tags.get(NODEPOOL, "")

    @property
    def nodeclass(self) -> str:
        return self.tags.get(NODECLASS_TAG, "")


def _epoch(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return 0.0
    return 0.0


def parse_instance(raw: Mapping[str, Any]) -> Instance:
    """One DescribeInstances entry (``types.go`` ``NewInstance``)."""
    spot = bool(raw.get("SpotInstanceRequestId")) or raw.get("InstanceLifecycle") == SPOT
    return Instance(
        id=str(raw.get("InstanceId") or ""),
        instance_type=str(raw.get("InstanceType") or ""),
        zone=str((raw.get("Placement") or {}).get("AvailabilityZone") or ""),
        state=str((raw.get("State") or {}).get("Name") or ""),
        capacity_type=SPOT if spot else ON_DEMAND,
        image_id=str(raw.get("ImageId") or ""),
        subnet_id=str(raw.get("SubnetId") or ""),
        tags=MappingProxyType({str(t.get("Key")): str(t.get("Value") or "") for t in raw.get("Tags") or []}),
        launched_at=_epoch(raw.get("LaunchTime")),
    )


def _instances(page: Mapping[str, Any]) -> Iterable[Instance]:
    for reservation in page.get("Reservations") or []:
        for raw in reservation.get("Instances") or []:
            yield parse_instance(raw)


def _live() -> dict[str, Any]:
    return {"Name": "instance-state-name", "Values": list(LIVE_STATES)}


class Instances:
    """DescribeInstances and TerminateInstances for one cluster's NodeClaim instances."""

    def __init__(self, clients: AwsClients, cluster: str) -> None:
        self._clients = clients
        self.cluster = cluster

    def _owned(self) -> list[dict[str, Any]]:
        return [
            {"Name": "tag-key", "Values": [NODEPOOL]},
            {"Name": "tag-key", "Values": [NODECLASS_TAG]},
            {"Name": f"tag:{CLUSTER_NAME_TAG}", "Values": [self.cluster]},
            _live(),
        ]

    async def _describe(self, **request: Any) -> builtins.list[Instance]:
        out: list[Instance] = []
        while True:
            page = await self._clients.call("ec2", "DescribeInstances", **request)
            out.extend(_instances(page))
            token = page.get("NextToken")
            if not token:
                return out
            request["NextToken"] = token

    async def list(self) -> list[Instance]:
        """Every live instance launched for this cluster's NodePools (``List``)."""
        return await self._describe(Filters=self._owned(), MaxResults=_PAGE)

    async def for_nodeclaim(self, name: str) -> builtins.list[Instance]:
        """The live instances tagged for NodeClaim ``name`` (normally none or one)."""
        filters = [*self._owned(), {"Name": f"tag:{NODECLAIM_TAG}", "Values": [name]}]
        return await self._describe(Filters=filters, MaxResults=_PAGE)

    async def get(self, instance_id: str) -> Instance:
        """The live instance ``instance_id``; ``NodeClaimNotFound`` when unknown or terminated."""
        try:
            found = await self._describe(InstanceIds=[instance_id], Filters=[_live()])
        except AwsError as err:
            if err.code in _NOT_FOUND:
                raise NodeClaimNotFound(instance_id) from err
            raise
        for instance in found:
            if instance.id == instance_id:
                return instance
        raise NodeClaimNotFound(instance_id)

    async def terminate(self, instance_id: str) -> Instance:
        """TerminateInstances for it; returns what ``get`` saw. Already shutting down: no call, and
        no error either, as Karpenter's ``Delete``: the instance still exists (its volumes may be
        attached), so the caller keeps waiting until ``NodeClaimNotFound`` (terminated or
        unknown), the ``CloudProvider.delete`` contract."""
        instance = await self.get(instance_id)
        if instance.state == "shutting-down":
            return instance
        try:
            await self._clients.call("ec2", "TerminateInstances", InstanceIds=[instance_id])
        except AwsError as err:
            if err.code in _NOT_FOUND:
                raise NodeClaimNotFound(instance_id) from err
            raise
        return instance
