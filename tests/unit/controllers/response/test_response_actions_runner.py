"""The controller's AWS action runner (kubespot.controllers.response.response_actions) on fakes: the record is
written before anything is deregistered, the post-drain steps wait for DRAINED and run in order,
a restarted or second runner continues from the record without repeating a step, one failing
action never stops the others, a withdrawn event is not isolated, dry run writes nothing."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kubespot.aws import (
    AwsError,
    ClassicRegistration,
    DeregisterOutcome,
    Registration,
)
from kubespot.controllers.response.isolate import InstanceIsolation
from kubespot.controllers.response.loadbalancer import LoadBalancerDeregistration
from kubespot.controllers.response.publish import SummaryPublisher
from kubespot.controllers.response.response_actions import ResponseActions
from kubespot.kube import KubeError, NodeView, PodView
from kubespot.model import Kind
from kubespot.observability.metrics import Metrics
from kubespot.records.actions import (
    ACTIONS_ANNOTATION,
    ActionsRecord,
    StepState,
    decode_record,
    deregistration_for,
)
from kubespot.records.interruption import STATE_ANNOTATION, NodeState, Phase
from support import fake_aws, fake_kube
from support.clocks import StillClock
from support.fake_aws import QUARANTINE, FakeEvents, FakeQuarantine, FakeSns

T0 = datetime(2026, 11, 20, 17, 4, 13, tzinfo=UTC)
NODE = "ip-10-0-0-10.ec2.internal"
INSTANCE = "i-0123456789abcdef0"
NODE_IP = "10.0.0.10"
TG_IP = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-web/0000000000000001"
TG_INSTANCE = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-nodeport/0000000000000002"
EVENT = "spot-itn-0123456789abcdef01234567"
ALL = frozenset(Kind)


class Timeline:
    """What happened, in order, across the fakes."""

    def __init__(self) -> None:
        self.steps: list[str] = []


class FakeKube(fake_kube.FakeKube):
    """The shared fake API with the node and its pods; each actions record written goes on the
    timeline, ``record()`` reads the current one."""

    def __init__(self, timeline: Timeline) -> None:
        node = NodeView(NODE, provider_id=f"aws:///us-east-1a/{INSTANCE}", internal_ip=NODE_IP)
        pods = [
            PodView("default", "web-0", "u0", node_name=NODE, phase="Running", ip="10.0.1.5"),
            PodView("default", "batch-0", "u1", node_name=NODE, phase="Running", ip="10.0.1.6"),
            # Host network: its IP is the node's, never one of "its" targets.
            PodView("kube-system", "proxy", "u2", node_name=NODE, phase="Running", ip=NODE_IP),
            PodView("default", "done", "u3", node_name=NODE, phase="Succeeded", ip="10.0.1.9"),
        ]
        super().__init__(node, pods=pods)
        self.timeline = timeline
        self.on_write = self.written

    def written(self, node: NodeView) -> None:
        record = decode_record(node.annotations.get(ACTIONS_ANNOTATION))
        assert record is not None
        self.timeline.steps.append(f"write:{_phase(record)}")

    def record(self) -> ActionsRecord | None:
        assert self.node is not None
        return decode_record(self.node.annotations.get(ACTIONS_ANNOTATION))


def _phase(record: ActionsRecord) -> str:
    if record.finished is not None:
        return "finished"
    if record.post is not None:
        return "post"
    return record.loadbalancer.state.value if record.loadbalancer is not None else "claimed"


class FakeIndex:
    def __init__(self, kube: FakeKube) -> None:
        self.kube = kube
        self.listeners: list[Callable[[str], None]] = []

    def by_name(self, name: str) -> NodeView | None:
        return self.kube.node if name == NODE else None

    def nodes(self) -> list[NodeView]:
        return [self.kube.node] if self.kube.node is not None else []

    def subscribe(self, listener: Callable[[str], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    async def wait_synced(self) -> None:
        return None


class FakeTargets(fake_aws.FakeTargets):
    """ELBv2: the pod 10.0.1.5 in an ip group, the instance in an instance group; the actions record
    as it stood when the deregistration was asked for is kept."""

    def __init__(self, kube: FakeKube, timeline: Timeline) -> None:
        super().__init__(
            {
                "10.0.1.5": (Registration(TG_IP, "10.0.1.5", 8080),),
                INSTANCE: (Registration(TG_INSTANCE, INSTANCE, 30080),),
            },
            steps=timeline.steps,
        )
        self.kube = kube
        self.record_at_deregistration: ActionsRecord | None = None

    async def deregister(self, registrations: Iterable[Registration]) -> DeregisterOutcome[Registration]:
        self.record_at_deregistration = self.kube.record()
        return await super().deregister(registrations)


class World:
    def __init__(self) -> None:
        self.timeline = Timeline()
        self.kube = FakeKube(self.timeline)
        self.index = FakeIndex(self.kube)
        self.targets = FakeTargets(self.kube, self.timeline)
        self.quarantine = FakeQuarantine(group=QUARANTINE, steps=self.timeline.steps)
        self.sns = FakeSns(steps=self.timeline.steps)
        self.events = FakeEvents(steps=self.timeline.steps)
        self.clock = StillClock(T0)
        self.metrics = Metrics()

    def runner(
        self, identity: str = "ctl-a", *, exclusive: bool = True, dry_run: bool = False
    ) -> ResponseActions:
        return ResponseActions(
            kube=self.kube,
            nodes=self.index,
            clock=self.clock,
            metrics=self.metrics,
            identity=identity,
            exclusive=exclusive,
            dry_run=dry_run,
            loadbalancer=LoadBalancerDeregistration(self.targets, None, clock=self.clock),
            loadbalancer_kinds=ALL,
            settle=5.0,
            max_delay=30.0,
            isolation=InstanceIsolation(self.quarantine, "sg-q", clock=self.clock),
            isolation_kinds=ALL,
            publisher=SummaryPublisher(self.sns, self.events, clock=self.clock),
            publish_kinds=ALL,
        )

    def state(self, phase: Phase, **extra: Any) -> None:
        state = NodeState(
            event_id=EVENT,
            kind=Kind.SPOT_INTERRUPTION.value,
            phase=phase,
            since=T0 - timedelta(seconds=1),
            deadline=T0 + timedelta(minutes=2),
            holder="agent",
            renewed=T0,
            extra={"source": "imds", "instance_id": INSTANCE, **extra},
        )
        self.kube.annotate(STATE_ANNOTATION, state.encode())

    def actions(self, action: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(self.metrics.render()[0].decode()):
            for sample in family.samples:
                if sample.name == "kubespot_actions_total" and sample.labels["action"] == action:
                    out[sample.labels["result"]] = sample.value
        return out


async def test_the_record_lands_before_deregistration_and_names_the_target_pods() -> None:
    w = World()
    w.state(Phase.DRAINING)
    await w.runner().reconcile(NODE)

    # Written pending (targets, pods) before DeregisterTargets was sent, then draining.
    assert w.timeline.steps == ["write:pending", "deregister", "write:draining"]
    before = w.targets.record_at_deregistration
    assert before is not None and before.loadbalancer is not None
    assert before.loadbalancer.state is StepState.PENDING
    assert before.loadbalancer.pods == ("default/web-0",)
    record = w.kube.record()
    assert record is not None and record.runner == "ctl-a" and record.event == EVENT
    assert record.kind == "spot-itn" and record.instance == INSTANCE
    lb = record.loadbalancer
    assert lb is not None and lb.state is StepState.DRAINING and lb.settle == 5.0
    # The instance is an instance target: the node is a target, every pod is held.
    assert lb.node is True
    assert {(t.tg, t.id, t.port) for t in lb.targets} == {
        (TG_IP, "10.0.1.5", 8080),
        (TG_INSTANCE, INSTANCE, 30080),
    }
    assert set(w.targets.deregistered) == {r for regs in w.targets.registered.values() for r in regs}
    # Nothing after the drain yet.
    assert w.quarantine.isolated == [] and w.sns.sent == []
    held = deregistration_for(record, EVENT)
    assert (
        held is not None and held.state is StepState.DRAINING and held.release_at == T0 + timedelta(seconds=5)
    )
    assert w.actions("deregister") == {"success": 1.0}
    # Seen again: nothing more to do until the drain ends.
    await w.runner().reconcile(NODE)
    assert w.kube.writes == 2


async def test_only_pod_targets_are_held_when_the_node_is_no_target() -> None:
    w = World()
    del w.targets.registered[INSTANCE]
    w.state(Phase.FENCED)
    await w.runner().reconcile(NODE)
    record = w.kube.record()
    assert record is not None and record.loadbalancer is not None
    assert record.loadbalancer.node is False and record.loadbalancer.pods == ("default/web-0",)
    held = deregistration_for(record, EVENT)
    assert held is not None and held.held == frozenset({"default/web-0"})


async def test_no_target_at_all_releases_the_drain_at_once() -> None:
    w = World()
    w.targets.registered.clear()
    w.state(Phase.DRAINING)
    await w.runner().reconcile(NODE)
    record = w.kube.record()
    assert record is not None and record.loadbalancer is not None
    assert record.loadbalancer.state is StepState.DONE
    assert "deregister" not in w.timeline.steps
    held = deregistration_for(record, EVENT)
    assert held is not None and not held.holds("default/web-0", T0)


async def test_post_drain_runs_after_drained_in_order_and_once() -> None:
    w = World()
    runner = w.runner()
    w.state(Phase.DRAINING)
    await runner.reconcile(NODE)
    w.clock.t = T0 + timedelta(seconds=40)
    w.state(Phase.DRAINED, pods={"evicted": 3, "skipped": 1})
    await runner.reconcile(NODE)

    assert w.timeline.steps == [
        "write:pending",
        "deregister",
        "write:draining",
        "write:post",
        "isolate",
        "sns",
        "eventbridge",
        "write:finished",
    ]
    record = w.kube.record()
    assert record is not None and record.finished == w.clock.t
    assert record.isolation is not None and record.isolation.state is StepState.DONE
    assert record.isolation.replaced == (("eni-1", ("sg-nodes",)),)
    assert dict(record.published) == {"sns": "msg-1", "eventbridge": "evt-1"}
    message, subject, _, attributes = w.sns.sent[0]
    assert subject == f"kubespot: spot-itn on node {NODE} done"
    assert attributes == {"node": NODE, "outcome": "done"}
    assert message["event_id"] == EVENT and message["stage"] == "finished" and message["outcome"] == "done"
    assert message["instance_id"] == INSTANCE and message["source"] == "imds"
    assert message["pods"]["evicted"] == 3 and message["pods"]["skipped"] == 1
    assert [a["name"] for a in message["actions"]] == ["deregister", "isolate"]
    assert w.events.sent == [message]
    # Again (a new change of the node, a restart): nothing is repeated.
    await runner.reconcile(NODE)
    await w.runner("ctl-b").reconcile(NODE)
    assert w.timeline.steps.count("isolate") == 1 and w.timeline.steps.count("sns") == 1
    assert w.actions("isolate") == {"success": 1.0}
    assert w.actions("publish_sns") == {"success": 1.0}
    assert w.actions("publish_eventbridge") == {"success": 1.0}


async def test_first_seen_drained_still_deregisters_first() -> None:
    w = World()
    w.state(Phase.DRAINED)
    await w.runner().reconcile(NODE)
    steps = w.timeline.steps
    assert steps.index("deregister") < steps.index("isolate") < steps.index("sns")
    record = w.kube.record()
    assert record is not None and record.fenced is None and record.finished is not None


async def test_a_new_runner_resumes_a_deregistration_left_pending() -> None:
    w = World()
    w.state(Phase.DRAINING)
    # The first runner wrote pending and died before deregistering.
    w.targets.fail = AwsError("Transport", "connection reset")
    first = w.runner("ctl-a")
    original = w.targets.deregister

    async def die(registrations: Iterable[Registration]) -> DeregisterOutcome[Registration]:
        raise asyncio.CancelledError

    w.targets.deregister = die  # type: ignore[method-assign]
    with pytest.raises(asyncio.CancelledError):
        await first.reconcile(NODE)
    record = w.kube.record()
    assert record is not None and record.loadbalancer is not None
    assert record.loadbalancer.state is StepState.PENDING and record.runner == "ctl-a"

    w.targets.deregister = original  # type: ignore[method-assign]
    w.targets.fail = None
    # With election off, a fresh record of another replica is followed...
    await w.runner("ctl-b", exclusive=False).reconcile(NODE)
    assert w.targets.deregistered == []
    # ...and taken over once stale; an elected runner takes it over at once.
    await w.runner("ctl-c", exclusive=True).reconcile(NODE)
    record = w.kube.record()
    assert record is not None and record.runner == "ctl-c"
    assert record.loadbalancer is not None and record.loadbalancer.state is StepState.DRAINING
    assert len(w.targets.deregistered) == 2


async def test_a_resumed_post_drain_repeats_no_recorded_step() -> None:
    w = World()
    w.state(Phase.DRAINED)
    crashed = ActionsRecord(
        event=EVENT,
        runner="ctl-a",
        at=T0,
        kind="spot-itn",
        instance=INSTANCE,
        post=T0,
        published=(("sns", "msg-old"),),
    )
    w.kube.annotate(ACTIONS_ANNOTATION, crashed.encode())
    await w.runner("ctl-b").reconcile(NODE)
    record = w.kube.record()
    assert record is not None and record.finished is not None
    assert w.sns.sent == []  # recorded: never published again
    assert len(w.events.sent) == 1
    assert dict(record.published) == {"sns": "msg-old", "eventbridge": "evt-1"}


async def test_one_failing_action_does_not_stop_the_others() -> None:
    w = World()
    w.quarantine.outcome = AwsError("UnauthorizedOperation", "not allowed", service="ec2")
    w.sns.fail = AwsError("NotFound", "Topic does not exist", service="sns", operation="Publish")
    w.targets.fail = AwsError("AccessDenied", "no", service="elbv2", operation="DeregisterTargets")
    w.state(Phase.DRAINED)
    await w.runner().reconcile(NODE)
    record = w.kube.record()
    assert record is not None and record.finished is not None
    assert record.loadbalancer is not None and record.loadbalancer.state is StepState.FAILED
    assert "AccessDenied" in record.loadbalancer.error
    assert record.isolation is not None and record.isolation.state is StepState.FAILED
    assert "UnauthorizedOperation" in record.isolation.error
    published = dict(record.published)
    assert published["sns"].startswith("error: ") and published["eventbridge"] == "evt-1"
    assert w.events.sent[0]["failures"]  # the summary says what failed
    assert w.actions("deregister") == {"failure": 1.0}
    assert w.actions("isolate") == {"failure": 1.0}
    assert w.actions("publish_sns") == {"failure": 1.0}
    # A failed deregistration holds nothing: the drain goes ahead.
    held = deregistration_for(record, EVENT)
    assert held is not None and not held.holds("default/web-0", T0)


async def test_a_withdrawn_event_is_published_not_isolated() -> None:
    w = World()
    w.state(Phase.FENCED)
    runner = w.runner()
    await runner.reconcile(NODE)
    w.kube.annotate(STATE_ANNOTATION, None)  # undone: the notice was withdrawn
    await runner.reconcile(NODE)
    assert w.quarantine.isolated == []
    record = w.kube.record()
    assert record is not None and record.finished is not None
    assert record.isolation is not None and record.isolation.state is StepState.SKIPPED
    assert w.sns.sent[0][0]["outcome"] == "withdrawn"


async def test_the_deadline_passing_runs_the_post_drain_steps() -> None:
    w = World()
    w.state(Phase.DRAINING)
    runner = w.runner()
    await runner.reconcile(NODE)
    w.clock.t = T0 + timedelta(minutes=2, seconds=1)
    await runner.reconcile(NODE)
    assert w.quarantine.isolated == [INSTANCE]
    message = w.sns.sent[0][0]
    assert (message["stage"], message["outcome"]) == ("failed", "failed")
    assert "deadline" in message["error"]


async def test_a_deleted_node_still_gets_its_post_drain_steps() -> None:
    w = World()
    w.state(Phase.DRAINING)
    runner = w.runner()
    await runner.reconcile(NODE)
    writes = w.kube.writes
    w.kube.node = None
    await runner.reconcile(NODE)
    assert w.quarantine.isolated == [INSTANCE]
    assert w.sns.sent[0][0]["error"] == "the node was deleted before its drain finished"
    assert w.sns.sent[0][0]["node"] == NODE
    assert w.kube.writes == writes


async def test_two_runners_without_election_do_each_step_once() -> None:
    w = World()
    w.state(Phase.DRAINED)
    a, b = w.runner("ctl-a", exclusive=False), w.runner("ctl-b", exclusive=False)
    await asyncio.gather(a.reconcile(NODE), b.reconcile(NODE))
    await asyncio.gather(a.reconcile(NODE), b.reconcile(NODE))
    assert w.timeline.steps.count("deregister") == 1
    assert w.timeline.steps.count("isolate") == 1
    assert w.timeline.steps.count("sns") == 1 and w.timeline.steps.count("eventbridge") == 1
    record = w.kube.record()
    assert record is not None and record.finished is not None


async def test_a_failed_final_write_is_retried_without_publishing_again() -> None:
    w = World()
    w.state(Phase.DRAINED)
    runner = w.runner()
    w.kube.failures = 0
    await runner.reconcile(NODE)  # deregistration
    record = w.kube.record()
    assert record is not None
    w.kube.annotate(ACTIONS_ANNOTATION, replace(record, finished=None, post=None, published=()).encode())
    # A record only ever moves forward under one runner: this rewound one is a restarted runner's.
    runner = w.runner()
    w.sns.sent.clear()
    w.events.sent.clear()
    w.timeline.steps.clear()
    # post claim ok, final write fails
    original = w.kube.update_node
    calls = 0

    async def flaky(name: str, change: Any, *, current: NodeView | None = None) -> NodeView:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KubeError(503, "apiserver restarting")
        return await original(name, change, current=current)

    w.kube.update_node = flaky  # type: ignore[method-assign]
    await runner.reconcile(NODE)
    assert len(w.sns.sent) == 1
    again = w.kube.record()
    assert again is not None and again.finished is None
    await runner.reconcile(NODE)
    again = w.kube.record()
    assert again is not None and again.finished is not None
    assert len(w.sns.sent) == 1 and len(w.events.sent) == 1


async def test_dry_run_writes_nothing_and_changes_nothing() -> None:
    w = World()
    w.state(Phase.DRAINING)
    runner = w.runner(dry_run=True)
    await runner.reconcile(NODE)
    w.state(Phase.DRAINED)
    await runner.reconcile(NODE)
    await runner.reconcile(NODE)
    assert w.kube.writes == 0 and w.kube.record() is None
    assert w.targets.deregistered == [] and w.quarantine.isolated == [] and w.sns.sent == []
    assert w.actions("deregister") == {"dry_run": 1.0}
    assert w.actions("isolate") == {"dry_run": 1.0}
    assert w.actions("publish_sns") == {"dry_run": 1.0}


async def test_kinds_without_actions_are_left_alone() -> None:
    w = World()
    runner = replace_kinds(w.runner(), frozenset({Kind.SCHEDULED_MAINTENANCE}))
    w.state(Phase.DRAINED)
    await runner.reconcile(NODE)
    assert w.kube.writes == 0 and w.timeline.steps == []


def replace_kinds(runner: ResponseActions, kinds: frozenset[Kind]) -> ResponseActions:
    runner._lb_kinds = runner._isolation_kinds = runner._publish_kinds = kinds
    return runner


async def test_start_up_check_and_warm_index() -> None:
    w = World()
    assert await w.runner().check() == []
    bad = ResponseActions(
        kube=w.kube,
        nodes=w.index,
        clock=w.clock,
        metrics=w.metrics,
        identity="x",
        exclusive=True,
        dry_run=False,
        isolation=InstanceIsolation(w.quarantine, "sg-missing", clock=w.clock),
        isolation_kinds=ALL,
    )
    assert await bad.check() == [
        "isolation.quarantine_group: quarantine security group 'sg-missing' does not exist"
    ]
    # The duty: warms the index at once and acts on the node once the index has synced.
    w.state(Phase.DRAINING)
    runner = w.runner()
    task = asyncio.create_task(runner.run())
    for _ in range(50):
        await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait({task})
    assert w.targets.refreshes == 1
    record = w.kube.record()
    assert record is not None and record.loadbalancer is not None
    assert orjson.loads(w.kube.node.annotations[ACTIONS_ANNOTATION])["loadbalancer"]["state"] == "draining"  # type: ignore[union-attr]


def test_classic_registration_is_a_target_reference() -> None:
    # Classic Load Balancers name the load balancer where ELBv2 names the target group.
    assert ClassicRegistration("web-classic", INSTANCE).load_balancer_name == "web-classic"


def test_the_queue_is_optional_once_an_action_is_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from kubespot.config.loader import SettingsError
    from kubespot.operator.command import load_settings

    for name in [n for n in os.environ if n.startswith("KUBESPOT_") or n == "QUEUE_URL"]:
        monkeypatch.delenv(name)
    with pytest.raises(SettingsError, match=r"queue\.url: required but not set"):
        load_settings(argparse.Namespace())
    monkeypatch.setenv("KUBESPOT_PUBLISH_EVENT_BUS", "default")
    assert load_settings(argparse.Namespace()).queue.url == ""
    monkeypatch.setenv("KUBESPOT_ISOLATION_ENABLED", "true")
    with pytest.raises(SettingsError, match=r"isolation\.quarantine_group: required when isolation\.enabled"):
        load_settings(argparse.Namespace())


async def test_a_lagging_index_showing_our_own_pending_record_does_not_deregister_again() -> None:
    """The node index delivers the runner's own writes late: a re-run that still sees the pending
    record it wrote (not yet the draining one) must not take it for an interrupted deregistration."""
    w = World()
    w.state(Phase.DRAINING)
    runner = w.runner()
    await runner.reconcile(NODE)
    assert w.targets.deregistered != []
    assert w.kube.node is not None
    done = w.kube.node
    pending = w.targets.record_at_deregistration
    assert pending is not None
    # The index still shows the node as it was after the pending write.
    w.kube.node = replace(done, annotations={**done.annotations, ACTIONS_ANNOTATION: pending.encode()})
    w.clock.t += timedelta(seconds=1)
    count = len(w.targets.deregistered)
    await runner.reconcile(NODE)
    assert len(w.targets.deregistered) == count
    assert w.timeline.steps.count("deregister") == 1


# --- which instance (issue 10: annotations are writable by every agent) ----------------------------

OTHER = "i-0fedcba9876543210"


async def test_the_instance_isolated_is_the_nodes_provider_id_never_an_annotations() -> None:
    """An agent can patch any Node's annotations: one naming another instance in the state's
    ``extra`` and in a record of its own making must not get that instance isolated."""
    w = World()
    w.state(Phase.DRAINED, instance_id=OTHER)
    forged = ActionsRecord(
        event=EVENT, runner="ip-agent/1", at=T0 - timedelta(hours=1), kind="spot-itn", instance=OTHER
    )
    w.kube.annotate(ACTIONS_ANNOTATION, forged.encode())
    await w.runner().reconcile(NODE)
    assert w.timeline.steps.count("isolate") == 1
    assert w.quarantine.isolated == [INSTANCE]
    message = w.sns.sent[0][0]
    assert message["instance_id"] == INSTANCE


async def test_a_node_without_provider_id_gets_no_instance_action() -> None:
    w = World()
    assert w.kube.node is not None
    w.kube.node = replace(w.kube.node, provider_id="")
    # The other instance is a load balancer target: it must not be deregistered either.
    w.targets.registered[OTHER] = (Registration(TG_INSTANCE, OTHER, 30080),)
    w.state(Phase.DRAINING, instance_id=OTHER)  # what an agent wrote: not trusted
    runner = w.runner()
    await runner.reconcile(NODE)
    w.state(Phase.DRAINED, instance_id=OTHER)
    await runner.reconcile(NODE)
    assert w.quarantine.isolated == []
    record = w.kube.record()
    assert record is not None and record.instance == ""
    assert record.isolation is not None and record.isolation.state is StepState.SKIPPED
    assert "providerID" in record.isolation.error
    assert all(r.target_id != OTHER for r in w.targets.deregistered)
