"""Fakes of the AWS adapters the response actions drive through their Protocols
(``kubespot.controllers.response``: ``TargetIndex``, ``ClassicIndex``, ``Quarantine``, ``Instances``,
``SnsTarget``, ``EventTarget``), each recording what it was asked.

Every fake can share a ``steps`` list with the others (and with a fake API), on which it writes its
call's name, so a test reads the order of all the calls across them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, NamedTuple

from kubespot.aws import (
    AwsError,
    ClassicRegistration,
    DeregisterOutcome,
    GroupRef,
    InstanceInfo,
    InterfaceChange,
    IsolationOutcome,
    Registration,
)

#: The quarantine security group a fake ``NetworkIsolation`` moves instances onto.
QUARANTINE = GroupRef("sg-q", "quarantine")


class FakeTargets:
    """ELBv2's ``TargetDirectory``: ``registered`` by target id. A deregistration fails for every
    registration when ``fail`` is set, else for those in ``failing``; the draining wait answers
    ``drains``; ``lookup_error`` is raised by lookups and refreshes."""

    def __init__(
        self, registered: Mapping[str, tuple[Registration, ...]], *, steps: list[str] | None = None
    ) -> None:
        self.registered = dict(registered)
        self.steps = [] if steps is None else steps
        self.deregistered: list[Registration] = []
        self.fail: AwsError | None = None
        self.failing: dict[Registration, AwsError] = {}
        self.drains = True
        self.lookup_error: AwsError | None = None
        self.refreshes = 0
        #: ``max_wait`` of every draining wait.
        self.waited: list[float] = []

    async def lookup(self, target_ids: Iterable[str]) -> dict[str, tuple[Registration, ...]]:
        if self.lookup_error is not None:
            raise self.lookup_error
        return {i: self.registered[i] for i in target_ids if i in self.registered}

    async def refresh(self) -> None:
        self.refreshes += 1
        if self.lookup_error is not None:
            raise self.lookup_error

    async def deregister(self, registrations: Iterable[Registration]) -> DeregisterOutcome[Registration]:
        regs = tuple(registrations)
        self.steps.append("deregister")
        failed = {r: self.fail or self.failing[r] for r in regs if self.fail or r in self.failing}
        done = tuple(r for r in regs if r not in failed)
        self.deregistered += done
        return DeregisterOutcome(deregistered=done, failed=MappingProxyType(failed))

    async def wait_draining(
        self, registrations: Iterable[Registration], *, max_wait: float, interval: float = 2.0
    ) -> bool:
        self.waited.append(max_wait)
        return self.drains


class FakeClassic:
    """Classic Load Balancers: every instance is registered with the one ``legacy`` balancer."""

    async def lookup(self, instance_ids: Iterable[str]) -> dict[str, tuple[ClassicRegistration, ...]]:
        return {i: (ClassicRegistration("legacy", i),) for i in instance_ids}

    async def refresh(self) -> None:
        return None

    async def deregister(
        self, registrations: Iterable[ClassicRegistration]
    ) -> DeregisterOutcome[ClassicRegistration]:
        return DeregisterOutcome(deregistered=tuple(registrations))


class FakeQuarantine:
    """``NetworkIsolation``: ``outcome`` is answered (an exception raised, and raised by
    ``find_group`` too when it is an ``AwsError``); without one, an instance's interface is moved onto
    ``QUARANTINE`` on its first isolation and found there already after. ``find_group`` finds
    ``group`` by id or name. ``asked``: every instance asked for; ``isolated``: those answered."""

    def __init__(
        self,
        outcome: IsolationOutcome | Exception | None = None,
        *,
        group: GroupRef | None = None,
        steps: list[str] | None = None,
    ) -> None:
        self.outcome = outcome
        self.group = group
        self.steps = [] if steps is None else steps
        self.asked: list[str] = []
        self.isolated: list[str] = []

    async def isolate(self, instance_id: str, quarantine_group: str) -> IsolationOutcome:
        self.steps.append("isolate")
        self.asked.append(instance_id)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        first = instance_id not in self.isolated
        self.isolated.append(instance_id)
        if self.outcome is not None:
            return self.outcome
        before = (GroupRef("sg-nodes", "nodes"),) if first else (QUARANTINE,)
        return IsolationOutcome(
            instance_id, "vpc-1", QUARANTINE, (InterfaceChange("eni-1", before, changed=first),)
        )

    async def find_group(self, group: str) -> GroupRef | None:
        if isinstance(self.outcome, AwsError):
            raise self.outcome
        found = self.group is not None and group in (self.group.group_id, self.group.group_name)
        return self.group if found else None


class FakeInstances:
    """EC2's ``InstanceDirectory``: the running instances' ``tags`` by id, or ``error`` raised."""

    def __init__(self, tags: dict[str, dict[str, str]], error: AwsError | None = None) -> None:
        self.tags = tags
        self.error = error

    async def lookup(self, instance_ids: Iterable[str]) -> dict[str, InstanceInfo]:
        if self.error is not None:
            raise self.error
        return {
            i: InstanceInfo(i, "", "us-east-1a", "running", MappingProxyType(self.tags[i]))
            for i in instance_ids
            if i in self.tags
        }


class SnsMessage(NamedTuple):
    message: dict[str, Any]
    subject: str
    kind: str
    attributes: dict[str, str]


class FakeSns:
    """``SnsPublisher``: messages kept in ``sent``, ids ``msg-1``, ``msg-2``…; ``fail`` is raised."""

    def __init__(self, fail: Exception | None = None, *, steps: list[str] | None = None) -> None:
        self.fail = fail
        self.steps = [] if steps is None else steps
        self.sent: list[SnsMessage] = []

    async def publish(
        self,
        message: Mapping[str, Any],
        *,
        subject: str,
        kind: str,
        attributes: Mapping[str, str] | None = None,
    ) -> str:
        self.steps.append("sns")
        if self.fail is not None:
            raise self.fail
        self.sent.append(SnsMessage(dict(message), subject, kind, dict(attributes or {})))
        return f"msg-{len(self.sent)}"


class FakeEvents:
    """``EventBridgePublisher``: details kept in ``sent``, ids ``evt-1``, ``evt-2``…"""

    def __init__(self, *, steps: list[str] | None = None) -> None:
        self.steps = [] if steps is None else steps
        self.sent: list[dict[str, Any]] = []

    async def put(
        self,
        detail: Mapping[str, Any],
        *,
        detail_type: str | None = None,
        resources: Iterable[str] = (),
        time: datetime | None = None,
    ) -> str:
        self.steps.append("eventbridge")
        self.sent.append(dict(detail))
        return f"evt-{len(self.sent)}"
