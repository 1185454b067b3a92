"""The AWS response actions on fakes of their adapters: which targets a node has, what a (partly)
failed deregistration or an unconfirmed drain reports, isolation and publishing outcomes; no AWS
error ever reaches the caller."""

from __future__ import annotations

from datetime import UTC, datetime
from types import MappingProxyType

from kubespot.aws import (
    AwsError,
    ClassicRegistration,
    GroupRef,
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
from support.clocks import StillClock
from support.fake_aws import FakeClassic, FakeEvents, FakeInstances, FakeQuarantine, FakeSns, FakeTargets

T0 = datetime(2026, 11, 20, 17, 4, 13, tzinfo=UTC)
#: The steps never sleep: the fakes answer at once.
CLOCK = StillClock(T0, mono=0.0)
TG = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/web/0000000000000001"


POD = Registration(TG, "10.0.1.5", 8080)
TARGETS = NodeTargets("i-0abc", ("10.0.0.10",), {"10.0.1.5": "default/web-0", "10.0.1.6": "default/batch-0"})


async def test_pod_targets_and_node_targets_are_told_apart() -> None:
    lb = LoadBalancerDeregistration(FakeTargets({"10.0.1.5": (POD,)}), None, clock=CLOCK)
    plan = await lb.find(TARGETS)
    assert plan.elbv2 == (POD,) and plan.pods == ("default/web-0",) and plan.node is False
    node_ip = Registration(TG, "10.0.0.10", 80)
    lb = LoadBalancerDeregistration(FakeTargets({"10.0.0.10": (node_ip,)}), FakeClassic(), clock=CLOCK)
    plan = await lb.find(TARGETS)
    assert (
        plan.node is True and plan.pods == () and plan.classic == (ClassicRegistration("legacy", "i-0abc"),)
    )


async def test_deregistration_success_partial_failure_and_timeout() -> None:
    elbv2 = FakeTargets({"10.0.1.5": (POD,)})
    lb = LoadBalancerDeregistration(elbv2, FakeClassic(), clock=CLOCK)
    result = await lb.deregister(await lb.find(TARGETS), max_wait=12.0)
    assert result.summary.result is ActionResult.SUCCESS and result.started == T0
    assert (result.deregistered, result.failed, result.confirmed) == (2, 0, True)
    assert elbv2.waited == [12.0]

    elbv2.drains = False
    result = await lb.deregister(await lb.find(TARGETS), max_wait=3.0)
    assert result.summary.result is ActionResult.TIMEOUT and not result.confirmed
    assert "not draining after 3s" in result.summary.detail

    elbv2.failing[POD] = AwsError("AccessDenied", "denied", service="elbv2")
    result = await lb.deregister(await lb.find(TARGETS), max_wait=3.0)
    # The Classic one went, the ELBv2 one failed: started, and the failure is reported.
    assert result.started == T0 and result.failed == 1 and "AccessDenied" in result.error
    assert result.summary.result is ActionResult.FAILURE

    only_elbv2 = LoadBalancerDeregistration(elbv2, None, clock=CLOCK)
    result = await only_elbv2.deregister(await only_elbv2.find(TARGETS), max_wait=3.0)
    assert result.started is None and result.summary.result is ActionResult.FAILURE


async def test_lookup_and_warm_failures_are_reported_not_raised() -> None:
    elbv2 = FakeTargets({})
    elbv2.lookup_error = AwsError("AccessDenied", "no", service="elbv2", operation="DescribeTargetGroups")
    lb = LoadBalancerDeregistration(elbv2, None, clock=CLOCK)
    plan = await lb.find(TARGETS)
    assert "AccessDenied" in plan.error and plan.empty
    assert await lb.warm() is False


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
    result = await InstanceIsolation(FakeQuarantine(changed), "sg-q", clock=CLOCK).isolate("i-0abc")
    assert result.replaced == {"eni-1": ("sg-a", "sg-b")}  # only what this call changed
    assert result.summary.result is ActionResult.FAILURE and "eni-3" in result.error
    wrong = QuarantineGroupError("sg-q", "vpc-1", "is in vpc-2")
    result = await InstanceIsolation(FakeQuarantine(wrong), "sg-q", clock=CLOCK).isolate("i-0abc")
    assert result.summary.result is ActionResult.FAILURE and "vpc-2" in result.error
    gone = await InstanceIsolation(
        FakeQuarantine(IsolationOutcome("i-0abc", None, None)), "sg-q", clock=CLOCK
    ).isolate("i-0abc")
    assert gone.ok and "no network interface" in gone.summary.detail
    # The start-up check: missing is a problem, unanswerable is not (logged).
    assert await InstanceIsolation(FakeQuarantine(changed), "sg-q", clock=CLOCK).check() is not None
    throttled = AwsError("RequestLimitExceeded", "slow down", throttled=True)
    assert await InstanceIsolation(FakeQuarantine(throttled), "sg-q", clock=CLOCK).check() is None


async def test_only_an_instance_with_the_managed_tag_is_isolated() -> None:
    """Issue 10: the quarantine is asked for only when the instance carries the managed tag."""
    outcome = IsolationOutcome("i-0abc", "vpc-1", GroupRef("sg-q"), ())
    tag = "aws-node-termination-handler/managed"
    instances = FakeInstances({"i-0abc": {tag: ""}, "i-0def": {"team": "other"}})
    quarantine = FakeQuarantine(outcome)

    def action(found: FakeInstances) -> InstanceIsolation:
        return InstanceIsolation(quarantine, "sg-q", clock=CLOCK, instances=found, managed_tag=tag)

    assert (await action(instances).isolate("i-0abc")).ok
    assert quarantine.asked == ["i-0abc"]
    untagged = await action(instances).isolate("i-0def")
    assert untagged.skipped and f"no {tag} tag" in untagged.error
    unknown = await action(instances).isolate("i-0123")
    assert unknown.skipped and "unknown to EC2" in unknown.error
    denied = await action(FakeInstances({}, AwsError("UnauthorizedOperation", "no", service="ec2"))).isolate(
        "i-0abc"
    )
    assert denied.summary.result is ActionResult.FAILURE and "tags" in denied.summary.detail
    assert quarantine.asked == ["i-0abc"]


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
    sns, events = FakeSns(), FakeEvents()
    out = await SummaryPublisher(sns, events, clock=CLOCK).publish(SUMMARY)
    assert [(p.target, p.recorded) for p in out] == [("sns", "msg-1"), ("eventbridge", "evt-1")]
    assert sns.sent[0].subject == subject(SUMMARY) == "kubespot: spot-itn on node ip-10-0-0-10 done"
    assert (sns.sent[0].kind, sns.sent[0].attributes["node"], sns.sent[0].attributes["outcome"]) == (
        "spot-itn",
        "ip-10-0-0-10",
        "done",
    )
    assert events.sent == [SUMMARY.to_dict()]

    failing = SummaryPublisher(FakeSns(PublishError("too large")), FakeEvents(), clock=CLOCK)
    out = await failing.publish(SUMMARY)
    assert [(p.target, p.ok) for p in out] == [("sns", False), ("eventbridge", True)]
    assert out[0].recorded == "error: too large" and out[0].summary.name == "publish_sns"
    # A target already done is skipped.
    assert [p.target for p in await failing.publish(SUMMARY, skip={"sns"})] == ["eventbridge"]
