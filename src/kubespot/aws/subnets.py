"""An EC2NodeClass's subnets: its ``subnetSelectorTerms`` resolved through ``DescribeSubnets``.

As aws/karpenter-provider-aws ``pkg/providers/subnet/subnet.go`` (``List``: one call per filter set,
results merged by id) and ``pkg/controllers/nodeclass/subnet.go`` (the status order: most available
IPv4 addresses first, then by id).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubespot.scheduling.api.nodeclass import SelectorTerm

from .selectors import filter_sets
from .session import AwsClients

__all__ = ["SubnetInfo", "resolve_subnets"]


@dataclass(frozen=True, slots=True)
class SubnetInfo:
    """One subnet as the EC2NodeClass status reports it (``status.subnets[]``), plus its free IPs."""

    id: str
    zone: str
    zone_id: str
    available_ips: int = 0

    def status(self) -> dict[str, str]:
        return {"id": self.id, "zone": self.zone, "zoneID": self.zone_id}


def _subnet(raw: dict[str, Any]) -> SubnetInfo:
    return SubnetInfo(
        id=str(raw["SubnetId"]),
        zone=str(raw.get("AvailabilityZone") or ""),
        zone_id=str(raw.get("AvailabilityZoneId") or ""),
        available_ips=int(raw.get("AvailableIpAddressCount") or 0),
    )


async def resolve_subnets(clients: AwsClients, terms: Iterable[SelectorTerm]) -> list[SubnetInfo]:
    """The subnets any term selects, most available IPs first (ties by id). Raises ``AwsError``."""
    found: dict[str, SubnetInfo] = {}
    for filters in filter_sets(terms, id_filter="subnet-id"):
        request: dict[str, Any] = {"Filters": filters}
        while True:
            page = await clients.call("ec2", "DescribeSubnets", **request)
            for raw in page.get("Subnets") or []:
                info = _subnet(raw)
                found[info.id] = info
            token = page.get("NextToken")
            if not token:
                break
            request["NextToken"] = token
    return sorted(found.values(), key=lambda s: (-s.available_ips, s.id))
