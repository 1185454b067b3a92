"""Isolation: move every network interface of an instance onto a quarantine security group.

DescribeNetworkInterfaces (filter ``attachment.instance-id``) finds the instance's interfaces, the
primary one and those the VPC CNI attached for pods, with their current groups. DescribeSecurityGroups
checks that the quarantine group exists and belongs to the instance's VPC before anything changes
(AWS would refuse a group of another VPC only at the first interface, with a vaguer message). Then
one ModifyNetworkInterfaceAttribute per interface replaces its groups. What was replaced is
returned, for the summary and for ``restore``.

Pods given their own branch interfaces ("security groups for pods") are not attached to the
instance and keep their groups; their traffic is cut when the trunk interface is isolated.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from kubespot.aws.session import AwsClients, AwsError
from kubespot.model import Clock, SystemClock

__all__ = [
    "GroupRef",
    "InterfaceChange",
    "IsolationOutcome",
    "NetworkIsolation",
    "QuarantineGroupError",
]

_log = logging.getLogger(__name__)

#: Interfaces changed at once (an instance has at most a few dozen).
_CONCURRENCY: Final = 8
#: How long a checked quarantine group is trusted: a burst of isolations checks it once, and a
#: group deleted meanwhile fails the modification anyway, with AWS's own error.
GROUP_CHECK_TTL: Final = 300.0
_GROUP_NOT_FOUND: Final = frozenset(
    {"InvalidGroup.NotFound", "InvalidGroupId.Malformed", "InvalidGroupId.NotFound"}
)
_INTERFACE_GONE: Final = frozenset(
    {"InvalidNetworkInterfaceID.NotFound", "InvalidNetworkInterfaceId.NotFound"}
)


class QuarantineGroupError(ValueError):
    """The quarantine group does not exist or is not in the instance's VPC; nothing was changed."""

    def __init__(self, group: str, vpc_id: str, reason: str) -> None:
        self.group = group
        self.vpc_id = vpc_id
        super().__init__(f"quarantine security group {group!r} {reason} (instance VPC {vpc_id})")


@dataclass(frozen=True, order=True)
class GroupRef:
    """A security group, by id and (for people reading the summary) name."""

    group_id: str
    group_name: str = ""


@dataclass(frozen=True)
class InterfaceChange:
    """One interface and the groups it had before isolation."""

    network_interface_id: str
    previous_groups: tuple[GroupRef, ...]
    changed: bool
    """False when the interface was already on the quarantine group alone (a second isolation)."""


@dataclass(frozen=True)
class IsolationOutcome:
    """What ``isolate`` did.

    ``interfaces``: isolated (or already isolated). ``gone``: interfaces that disappeared between
    listing and changing. ``failed``: interface id -> the error. An instance with no interfaces
    left (terminated) has all three empty, ``vpc_id`` None, and nothing was checked.
    """

    instance_id: str
    vpc_id: str | None
    quarantine_group: GroupRef | None
    interfaces: tuple[InterfaceChange, ...] = ()
    gone: tuple[str, ...] = ()
    failed: Mapping[str, AwsError] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def ok(self) -> bool:
        """Nothing failed."""
        return not self.failed

    @property
    def replaced_groups(self) -> tuple[GroupRef, ...]:
        """Every group taken off an interface, once each, sorted (for the summary)."""
        return tuple(sorted({g for i in self.interfaces if i.changed for g in i.previous_groups}))


@dataclass(frozen=True)
class _Interface:
    interface_id: str
    vpc_id: str
    groups: tuple[GroupRef, ...]
    device_index: int


def _groups(raw: Iterable[Mapping[str, Any]]) -> tuple[GroupRef, ...]:
    return tuple(GroupRef(str(g.get("GroupId", "")), str(g.get("GroupName") or "")) for g in raw)


class NetworkIsolation:
    """Swaps an instance's security groups for a quarantine group, and back."""

    def __init__(
        self,
        clients: AwsClients,
        *,
        group_check_ttl: float = GROUP_CHECK_TTL,
        clock: Clock | None = None,
    ) -> None:
        self._clients = clients
        self._group_check_ttl = group_check_ttl
        self._clock = clock or SystemClock()
        self._limit = asyncio.Semaphore(_CONCURRENCY)
        # (group as given, VPC) -> (checked at, the group)
        self._checked: dict[tuple[str, str], tuple[float, GroupRef]] = {}

    async def isolate(self, instance_id: str, quarantine_group: str) -> IsolationOutcome:
        """Put every interface of ``instance_id`` on ``quarantine_group`` (an ``sg-`` id, or a
        group name looked up in the instance's VPC) alone.

        Raises ``QuarantineGroupError`` (nothing changed) if the group is missing or in another
        VPC, ``AwsError`` if the interfaces or the group cannot be read. Failures to change an
        interface are in the outcome's ``failed``; the other interfaces are still changed.
        """
        interfaces = await self._interfaces(instance_id)
        if not interfaces:
            return IsolationOutcome(instance_id, None, None)
        # Every interface of an instance is in the instance's VPC (EC2 refuses anything else).
        vpc_id = interfaces[0].vpc_id
        quarantine = await self.check_quarantine_group(quarantine_group, vpc_id)
        results = await asyncio.gather(*(self._swap(i, quarantine) for i in interfaces))
        changes: list[InterfaceChange] = []
        gone: list[str] = []
        failed: dict[str, AwsError] = {}
        for interface, result in zip(interfaces, results, strict=True):
            if isinstance(result, InterfaceChange):
                changes.append(result)
            elif result is None:
                gone.append(interface.interface_id)
            else:
                failed[interface.interface_id] = result
        return IsolationOutcome(
            instance_id, vpc_id, quarantine, tuple(changes), tuple(gone), MappingProxyType(failed)
        )

    async def restore(self, changes: Iterable[InterfaceChange]) -> dict[str, AwsError]:
        """Give each changed interface its previous groups back; returns the failures by interface
        (an interface that no longer exists is not one)."""
        todo = [c for c in changes if c.changed and c.previous_groups]
        results = await asyncio.gather(
            *(self._set_groups(c.network_interface_id, [g.group_id for g in c.previous_groups]) for c in todo)
        )
        return {
            c.network_interface_id: err
            for c, err in zip(todo, results, strict=True)
            if err is not None and err.code not in _INTERFACE_GONE
        }

    async def check_quarantine_group(self, group: str, vpc_id: str) -> GroupRef:
        """The quarantine group, checked to exist in ``vpc_id``; ``QuarantineGroupError`` if not."""
        key = (group, vpc_id)
        now = self._clock.monotonic()
        cached = self._checked.get(key)
        if cached is not None and now - cached[0] <= self._group_check_ttl:
            return cached[1]
        if group.startswith("sg-"):
            try:
                answer = await self._clients.call("ec2", "DescribeSecurityGroups", GroupIds=[group])
            except AwsError as exc:
                if exc.code in _GROUP_NOT_FOUND:
                    raise QuarantineGroupError(group, vpc_id, "does not exist") from None
                raise
            found = answer.get("SecurityGroups") or []
            if not found:
                raise QuarantineGroupError(group, vpc_id, "does not exist")
            if found[0].get("VpcId") != vpc_id:
                raise QuarantineGroupError(group, vpc_id, f"is in {found[0].get('VpcId') or 'no VPC'}")
        else:
            answer = await self._clients.call(
                "ec2",
                "DescribeSecurityGroups",
                Filters=[
                    {"Name": "group-name", "Values": [group]},
                    {"Name": "vpc-id", "Values": [vpc_id]},
                ],
            )
            found = answer.get("SecurityGroups") or []
            if not found:
                raise QuarantineGroupError(group, vpc_id, "does not exist in that VPC")
        ref = GroupRef(str(found[0].get("GroupId", "")), str(found[0].get("GroupName") or ""))
        self._checked[key] = (now, ref)
        return ref

    async def find_group(self, group: str) -> GroupRef | None:
        """The group (an ``sg-`` id, or a name in any VPC) if it exists anywhere in the region; None
        if not. For a start-up check, before any instance (and so any VPC) is known. Raises
        ``AwsError`` when the question cannot be answered (AccessDenied, transport)."""
        try:
            if group.startswith("sg-"):
                answer = await self._clients.call("ec2", "DescribeSecurityGroups", GroupIds=[group])
            else:
                answer = await self._clients.call(
                    "ec2", "DescribeSecurityGroups", Filters=[{"Name": "group-name", "Values": [group]}]
                )
        except AwsError as exc:
            if exc.code in _GROUP_NOT_FOUND:
                return None
            raise
        found = answer.get("SecurityGroups") or []
        if not found:
            return None
        return GroupRef(str(found[0].get("GroupId", "")), str(found[0].get("GroupName") or ""))

    async def _interfaces(self, instance_id: str) -> list[_Interface]:
        found: list[_Interface] = []
        token: str | None = None
        while True:
            answer = await self._clients.call(
                "ec2",
                "DescribeNetworkInterfaces",
                Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}],
                **({"NextToken": token} if token else {}),
            )
            for raw in answer.get("NetworkInterfaces") or []:
                attachment = raw.get("Attachment") or {}
                found.append(
                    _Interface(
                        interface_id=str(raw.get("NetworkInterfaceId", "")),
                        vpc_id=str(raw.get("VpcId") or ""),
                        groups=_groups(raw.get("Groups") or []),
                        device_index=int(attachment.get("DeviceIndex") or 0),
                    )
                )
            token = answer.get("NextToken") or None
            if not token:
                return sorted(found, key=lambda i: (i.device_index, i.interface_id))

    async def _swap(self, interface: _Interface, quarantine: GroupRef) -> InterfaceChange | AwsError | None:
        if [g.group_id for g in interface.groups] == [quarantine.group_id]:
            return InterfaceChange(interface.interface_id, interface.groups, changed=False)
        error = await self._set_groups(interface.interface_id, [quarantine.group_id])
        if error is None:
            return InterfaceChange(interface.interface_id, interface.groups, changed=True)
        if error.code in _INTERFACE_GONE:
            return None
        return error

    async def _set_groups(self, interface_id: str, group_ids: list[str]) -> AwsError | None:
        try:
            async with self._limit:
                await self._clients.call(
                    "ec2",
                    "ModifyNetworkInterfaceAttribute",
                    NetworkInterfaceId=interface_id,
                    Groups=group_ids,
                )
        except AwsError as exc:
            if exc.code in _INTERFACE_GONE:
                _log.debug("network interface %s is gone: %s", interface_id, exc)
            return exc
        return None
