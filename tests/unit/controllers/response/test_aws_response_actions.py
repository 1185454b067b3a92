"""The AWS response actions on fakes of their adapters: which targets a node has, what a (partly)
failed deregistration or an unconfirmed drain reports, isolation and publishing outcomes; no AWS
error ever reaches the caller."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from kubespot.aws import (
    AwsError,
    ClassicRegistration,
    DeregisterOutcome,
    GroupRef,
    InstanceInfo,
    InterfaceChange,
    IsolationOutcome,
    PublishError,
    QuarantineGroupError,
    Registration,
)
from kubespot.controllers.response.isolate import InstanceIsolation
from kubespot.controllers.response.loadbalancer import LoadBalancerDeregistration, NodeTargets
from kubespot.controllers.response.publish import SummaryPublisher, subject
from kubespot.model import Kind, Source
from kubespot.model.summary import ActionResult, InterruptionSummary, Outcome, Stage

T0 = datetime(2026, 11, 20, 17, 4, 13, tzinfo=UTC)
TG = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/web/0000000000000001"


class Clock:
    def now(self) -> datetime:
        return T0

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        return None


class Elbv2:
    def __init__(self, registered: Mapping[str, tuple[Registration, ...]]) -> None:
        self.registered = dict(registered)
        self.failed: set[Registration] = set()
        self.drains = True
        self.lookup_error: AwsError | None = None
        self.waited: list[float] = []

    async def lookup(self, target_ids: Iterable[str]) -> dict[str, tuple[Registration, ...]]:
        if self.lookup_error is not None:
            raise self.lookup_error
        return {i: self.registered[i] for i in target_ids if i in self.registered}

    async def refresh(self) -> None:
        if self.lookup_error is not None:
            raise self.lookup_error

    async def deregister(self, registrations: Iterable[Registration]) -> DeregisterOutcome[Registration]:
        regs = list(registrations)
        bad = {r: AwsError("AccessDenied", "denied", service="elbv2") for r in regs if r in self.failed}
        return DeregisterOutcome(
            deregistered=tuple(r for r in regs if r not in bad), failed=MappingProxyType(bad)
        )

    async def wait_draining(
        self, registrations: Iterable[Registration], *, max_wait: float, interval: float = 2.0
    ) -> bool:
        self.waited.append(max_wait)
        return self.drains


class Classic:
    async def lookup(self, instance_ids: Iterable[str]) -> dict[str, tuple[ClassicRegistration, ...]]:
        return {i: (ClassicRegistration("legacy", i),) for i in instance_ids}

    async def refresh(self) -> None:
        return None

    async def deregister(
        self, registrations: Iterable[ClassicRegistration]
    ) -> DeregisterOutcome[ClassicRegistration]:
        return DeregisterOutcome(deregistered=tuple(registrations))


POD = Registration(TG, "10.0.1.5", 8080)
TARGETS = NodeTargets("i-0abc", ("10.0.0.10",), {"10.0.1.5": "default/web-0", "10.0.1.6": "default/batch-0"})


async def test_pod_targets_and_node_targets_are_told_apart() -> None:
    lb = LoadBalancerDeregistration(Elbv2({"10.0.1.5": (POD,)}), None, clock=Clock())
    plan = await lb.find(TARGETS)
    assert plan.elbv2 == (POD,) and plan.pods == ("default/web-0",) and plan.node is False
    node_ip = Registration(TG, "10.0.0.10", 80)
    lb = LoadBalancerDeregistration(Elbv2({"10.0.0.10": (node_ip,)}), Classic(), clock=Clock())
    plan = await lb.find(TARGETS)
    assert (
        plan.node is True and plan.pods == () and plan.classic == (ClassicRegistration("legacy", "i-0abc"),)
    )


async def test_deregistration_success_partial_failure_and_timeout() -> None:
    elbv2 = Elbv2({"10.0.1.5": (POD,)})
    lb = LoadBalancerDeregistration(elbv2, Classic(), clock=Clock())
    result = await lb.deregister(await lb.find(TARGETS), max_wait=12.0)
    assert result.summary.result is ActionResult.SUCCESS and result.started == T0
    assert (result.deregistered, result.failed, result.confirmed) == (2, 0, True)
    assert elbv2.waited == [12.0]

    elbv2.drains = False
    result = await lb.deregister(await lb.find(TARGETS), max_wait=3.0)
    assert result.summary.result is ActionResult.TIMEOUT and not result.confirmed
    assert "not draining after 3s" in result.summary.detail

    elbv2.failed.add(POD)
    result = await lb.deregister(await lb.find(TARGETS), max_wait=3.0)
    # The Classic one went, the ELBv2 one failed: started, and the failure is reported.
    assert result.started == T0 and result.failed == 1 and "AccessDenied" in result.error
    assert result.summary.result is ActionResult.FAILURE

    only_elbv2 = LoadBalancerDeregistration(elbv2, None, clock=Clock())
    result = await only_elbv2.deregister(await only_elbv2.find(TARGETS), max_wait=3.0)
    assert result.started is None and result.summary.result is ActionResult.FAILURE


async def test_lookup_and_warm_failures_are_reported_not_raised() -> None:
    elbv2 = Elbv2({})
    elbv2.lookup_error = AwsError("AccessDenied", "no", service="elbv2", operation="DescribeTargetGroups")
    lb = LoadBalancerDeregistration(elbv2, None, clock=Clock())
    plan = await lb.find(TARGETS)
    assert "AccessDenied" in plan.error and plan.empty
    assert await lb.warm() is False


class Quarantine:
    def __init__(self, outcome: IsolationOutcome | Exception) -> None:
        self.outcome = outcome
        self.asked: list[str] = []

    async def isolate(self, instance_id: str, quarantine_group: str) -> IsolationOutcome:
        self.asked.append(instance_id)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome

    async def find_group(self, group: str) -> GroupRef | None:
        if isinstance(self.outcome, AwsError):
            raise self.outcome
        return None


async def test_isolation_outcomes() -> None:
    q = GroupRef("sg-q", "quarantine")
    changed = IsolationOutcome(
        "i-0abc",
        "vpc-1",
        q,
        (
            InterfaceChange("eni-1", (GroupRef("sg-a"), GroupRef("sg-b")), True),
            InterfaceChange("eni-2", (q,), False),
        ),
        failed=MappingProxyType({"eni-3": AwsError("InvalidParameterValue", "bad", service="ec2")}),
    )
    result = await InstanceIsolation(Quarantine(changed), "sg-q", clock=Clock()).isolate("i-0abc")
    assert result.replaced == {"eni-1": ("sg-a", "sg-b")}  # only what this call changed
    assert result.summary.result is ActionResult.FAILURE and "eni-3" in result.error
    wrong = QuarantineGroupError("sg-q", "vpc-1", "is in vpc-2")
    result = await InstanceIsolation(Quarantine(wrong), "sg-q", clock=Clock()).isolate("i-0abc")
    assert result.summary.result is ActionResult.FAILURE and "vpc-2" in result.error
    gone = await InstanceIsolation(
        Quarantine(IsolationOutcome("i-0abc", None, None)), "sg-q", clock=Clock()
    ).isolate("i-0abc")
    assert gone.ok and "no network interface" in gone.summary.detail
    # The start-up check: missing is a problem, unanswerable is not (logged).
    assert await InstanceIsolation(Quarantine(changed), "sg-q", clock=Clock()).check() is not None
    throttled = AwsError("RequestLimitExceeded", "slow down", throttled=True)
    assert await InstanceIsolation(Quarantine(throttled), "sg-q", clock=Clock()).check() is None


class Instances:
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


async def test_only_an_instance_with_the_managed_tag_is_isolated() -> None:
    """Issue 10: the quarantine is asked for only when the instance carries the managed tag."""
    outcome = IsolationOutcome("i-0abc", "vpc-1", GroupRef("sg-q"), ())
    tag = "aws-node-termination-handler/managed"
    instances = Instances({"i-0abc": {tag: ""}, "i-0def": {"team": "other"}})
    quarantine = Quarantine(outcome)

    def action(found: Instances) -> InstanceIsolation:
        return InstanceIsolation(quarantine, "sg-q", clock=Clock(), instances=found, managed_tag=tag)

    assert (await action(instances).isolate("i-0abc")).ok
    assert quarantine.asked == ["i-0abc"]
    untagged = await action(instances).isolate("i-0def")
    assert untagged.skipped and f"no {tag} tag" in untagged.error
    unknown = await action(instances).isolate("i-0123")
    assert unknown.skipped and "unknown to EC2" in unknown.error
    denied = await action(Instances({}, AwsError("UnauthorizedOperation", "no", service="ec2"))).isolate(
        "i-0abc"
    )
    assert denied.summary.result is ActionResult.FAILURE and "tags" in denied.summary.detail
    assert quarantine.asked == ["i-0abc"]


class Sns:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.sent: list[dict[str, Any]] = []

    async def publish(
        self,
        message: Mapping[str, Any],
        *,
        subject: str,
        kind: str,
        attributes: Mapping[str, str] | None = None,
    ) -> str:
        if self.error is not None:
            raise self.error
        self.sent.append({"message": dict(message), "subject": subject, "kind": kind, **(attributes or {})})
        return "m-1"


class Events:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def put(
        self,
        detail: Mapping[str, Any],
        *,
        detail_type: str | None = None,
        resources: Iterable[str] = (),
        time: datetime | None = None,
    ) -> str:
        self.sent.append(dict(detail))
        return "e-1"


SUMMARY = InterruptionSummary(
    event_id="spot-itn-1",
    kind=Kind.SPOT_INTERRUPTION,
    node="ip-10-0-0-10",
    instance_id="i-0abc",
    source=Source.IMDS,
    stage=Stage.FINISHED,
    outcome=Outcome.DONE,
)


async def test_publishing_to_both_targets_and_failures_kept_apart() -> None:
    sns, events = Sns(), Events()
    out = await SummaryPublisher(sns, events, clock=Clock()).publish(SUMMARY)
    assert [(p.target, p.recorded) for p in out] == [("sns", "m-1"), ("eventbridge", "e-1")]
    assert sns.sent[0]["subject"] == subject(SUMMARY) == "kubespot: spot-itn on node ip-10-0-0-10 done"
    assert (sns.sent[0]["kind"], sns.sent[0]["node"], sns.sent[0]["outcome"]) == (
        "spot-itn",
        "ip-10-0-0-10",
        "done",
    )
    assert events.sent == [SUMMARY.to_dict()]

    failing = SummaryPublisher(Sns(PublishError("too large")), Events(), clock=Clock())
    out = await failing.publish(SUMMARY)
    assert [(p.target, p.ok) for p in out] == [("sns", False), ("eventbridge", True)]
    assert out[0].recorded == "error: too large" and out[0].summary.name == "publish_sns"
    # A target already done is skipped.
    assert [p.target for p in await failing.publish(SUMMARY, skip={"sns"})] == ["eventbridge"]
