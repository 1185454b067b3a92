"""Network isolation of an interrupted instance (a controller response action).

Every interface of the instance goes onto the quarantine security group alone
(``kubespot.aws.NetworkIsolation``); what each interface had is returned for the record and the
summary. Isolating twice changes nothing the second time (the adapter reports such interfaces as
unchanged), so a resumed runner is harmless. AWS errors never reach the caller.

Only an instance carrying the managed tag (``queue.managed_tag``, the tag that marks the cluster's
instances) is isolated: the instance id comes from the Node's providerID, which the cloud provider
sets, but the Node is writable by more than the controller, and a quarantine is too drastic to do
to an instance this cluster does not own. The generated IAM policy makes the same demand of the
instance (``kubespot.aws.iam``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from kubespot.aws import AwsError, GroupRef, InstanceInfo, IsolationOutcome, QuarantineGroupError
from kubespot.model import Clock
from kubespot.model.summary import ActionResult, ActionSummary

log = logging.getLogger("kubespot.actions.isolate")

ACTION = "isolate"


class Quarantine(Protocol):
    """``kubespot.aws.NetworkIsolation`` as this action uses it (a fake in unit tests)."""

    async def isolate(self, instance_id: str, quarantine_group: str) -> IsolationOutcome: ...

    async def find_group(self, group: str) -> GroupRef | None: ...


class Instances(Protocol):
    """``kubespot.aws.InstanceDirectory`` as this action uses it: the instance's tags."""

    async def lookup(self, instance_ids: Iterable[str]) -> dict[str, InstanceInfo]: ...


@dataclass(frozen=True, slots=True)
class IsolationResult:
    """``replaced``: interface id -> the group ids it had, for the interfaces this call changed."""

    summary: ActionSummary
    replaced: dict[str, tuple[str, ...]]
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.summary.result is ActionResult.SUCCESS

    @property
    def skipped(self) -> bool:
        """Nothing was asked of AWS: the instance is not one this cluster may isolate."""
        return self.summary.result is ActionResult.SKIPPED


class InstanceIsolation:
    """Isolates instances onto ``quarantine_group`` (an ``sg-`` id or a group name).

    With ``instances`` given, only an instance whose tags include ``managed_tag`` is isolated; any
    other is skipped (the result says why). ``instances`` None (unit tests of the action alone)
    checks nothing.
    """

    def __init__(
        self,
        quarantine: Quarantine,
        quarantine_group: str,
        *,
        clock: Clock,
        instances: Instances | None = None,
        managed_tag: str = "",
    ) -> None:
        self._quarantine = quarantine
        self.quarantine_group = quarantine_group
        self._clock = clock
        self._instances = instances
        self.managed_tag = managed_tag

    async def check(self) -> str | None:
        """Start-up check: None when the group exists (or AWS cannot tell now: logged), else why
        not. Its VPC is checked against each instance's when isolating."""
        try:
            found = await self._quarantine.find_group(self.quarantine_group)
        except AwsError as err:
            log.warning("cannot check quarantine group %s now: %s", self.quarantine_group, err)
            return None
        if found is None:
            return f"quarantine security group {self.quarantine_group!r} does not exist"
        return None

    async def isolate(self, instance_id: str) -> IsolationResult:
        begun = self._clock.now()
        mono = self._clock.monotonic()

        def done(
            result: ActionResult, detail: str, replaced: dict[str, tuple[str, ...]], error: str = ""
        ) -> IsolationResult:
            summary = ActionSummary(
                name=ACTION,
                result=result,
                started=begun,
                duration=self._clock.monotonic() - mono,
                detail=detail,
            )
            return IsolationResult(summary, replaced, error)

        if self._instances is not None:
            try:
                info = (await self._instances.lookup([instance_id])).get(instance_id)
            except AwsError as err:
                log.warning("cannot read the tags of %s: %s", instance_id, err)
                return done(ActionResult.FAILURE, f"cannot read the instance's tags: {err}", {}, str(err))
            if info is None:
                why = f"instance {instance_id} is unknown to EC2"
                return done(ActionResult.SKIPPED, why, {}, why)
            if self.managed_tag not in info.tags:
                why = f"instance {instance_id} has no {self.managed_tag} tag: not managed here"
                log.warning("not isolating %s: it has no %s tag", instance_id, self.managed_tag)
                return done(ActionResult.SKIPPED, why, {}, why)
        try:
            outcome = await self._quarantine.isolate(instance_id, self.quarantine_group)
        except (AwsError, QuarantineGroupError) as err:
            log.warning("cannot isolate %s: %s", instance_id, err)
            return done(ActionResult.FAILURE, str(err), {}, str(err))
        replaced = {
            c.network_interface_id: tuple(g.group_id for g in c.previous_groups)
            for c in outcome.interfaces
            if c.changed
        }
        if not outcome.interfaces and not outcome.failed:
            return done(ActionResult.SUCCESS, "no network interface left (instance gone)", replaced)
        group = outcome.quarantine_group.group_id if outcome.quarantine_group else self.quarantine_group
        unchanged = len(outcome.interfaces) - len(replaced)
        detail = f"{len(replaced)} interfaces moved to {group}"
        if unchanged:
            detail += f", {unchanged} already there"
        if outcome.failed:
            errors = [f"{eni}: {err}" for eni, err in sorted(outcome.failed.items())]
            log.warning("isolation of %s: %d interfaces failed: %s", instance_id, len(errors), errors[0])
            return done(
                ActionResult.FAILURE, f"{detail}, {len(errors)} failed: {errors[0]}", replaced, errors[0]
            )
        return done(ActionResult.SUCCESS, detail, replaced)
