"""An EC2NodeClass's security groups: ``securityGroupSelectorTerms`` through ``DescribeSecurityGroups``.

As aws/karpenter-provider-aws ``pkg/providers/securitygroup/securitygroup.go`` (terms by tags, ids
(``group-id``) or names (``group-name``); one call per filter set, merged by id) and
``pkg/controllers/nodeclass/securitygroup.go`` (the status sorted by id).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubespot.scheduling.api.nodeclass import SelectorTerm

from .selectors import filter_sets
from .session import AwsClients

__all__ = ["SecurityGroupInfo", "resolve_security_groups"]


@dataclass(frozen=True, slots=True)
class SecurityGroupInfo:
    """One security group as ``status.securityGroups[]`` reports it."""

    id: str
    name: str

    def status(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name}


async def resolve_security_groups(
    clients: AwsClients, terms: Iterable[SelectorTerm]
) -> list[SecurityGroupInfo]:
    """The security groups any term selects, sorted by id. Raises ``AwsError``."""
    found: dict[str, SecurityGroupInfo] = {}
    for filters in filter_sets(terms, id_filter="group-id", name_filter="group-name"):
        request: dict[str, Any] = {"Filters": filters}
        while True:
            page = await clients.call("ec2", "DescribeSecurityGroups", **request)
            for raw in page.get("SecurityGroups") or []:
                group = SecurityGroupInfo(str(raw["GroupId"]), str(raw.get("GroupName") or ""))
                found[group.id] = group
            token = page.get("NextToken")
            if not token:
                break
            request["NextToken"] = token
    return [found[k] for k in sorted(found)]
