"""Every wait for one queue message is bounded by its event's deadline plus ``held_margin``, and a
message held past its bound is reported (issue 10 §1): a stuck step must not hold an in-flight slot
for ever while /healthz stays green. Fakes for the node index and the instance lookup; the real
controller's behaviour end to end is in tests/e2e/controller/test_e2e_queue_followups.py."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from kubespot.aws.sqs import QueueMessage
from kubespot.config.drain import DrainSettings
from kubespot.config.imds import MonitorSettings
from kubespot.config.loader import InvalidSetting
from kubespot.config.node import NodeActionSettings
from kubespot.config.queue import QueueSettings
from kubespot.controllers.interruption.queue_handler import QueueHandler
from kubespot.controllers.interruption.sqs.consumer import Lease, Outcome
from kubespot.handling.node_index import NodeIndex
from kubespot.model.clock import SystemClock
from kubespot.observability.metrics import Metrics
from support.fake_kube import FakeKube


class NoInstances:
    async def lookup(self, instance_ids: list[str]) -> dict[str, Any]:
        return {}


class NoLifecycle:
    async def complete_lifecycle_action(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def record_heartbeat(self, *args: Any, **kwargs: Any) -> None:
        return None


def spot(instance_id: str, at: datetime) -> str:
    return orjson.dumps(
        {
            "version": "0",
            "id": "unit-spot",
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "account": "123456789012",
            "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": "us-east-1",
            "resources": [],
            "detail": {"instance-id": instance_id, "instance-action": "terminate"},
        }
    ).decode()


def handler(margin: float) -> QueueHandler:
    kube = FakeKube()
    nodes = NodeIndex(kube)  # type: ignore[arg-type]  # never run: the test fills nothing in
    return QueueHandler(
        kube=kube,  # type: ignore[arg-type]
        nodes=nodes,
        instances=NoInstances(),
        lifecycle=NoLifecycle(),
        queue=QueueSettings(held_margin=margin),
        monitors=MonitorSettings(),
        actions=NodeActionSettings(),
        drain=DrainSettings(),
        clock=SystemClock(),
        metrics=Metrics(),
    )


async def test_a_stuck_step_releases_the_message_at_its_bound_and_is_reported_meanwhile() -> None:
    # The spot warning was sent 118 s ago (EventBridge's time has whole seconds): its deadline is
    # 1 to 2 s away; the margin adds 1 s.
    now = datetime.now(tz=UTC)
    sent = now - timedelta(seconds=118)
    q = handler(margin=1.0)
    # The node index never syncs (a frozen watch): the handling is stuck in its first step.
    message = QueueMessage("m-1", "r-1", spot("i-0abc", sent), 1, sent)
    lease = Lease(message, 0.0, 30)
    task = asyncio.ensure_future(q.handle(message, lease))
    await asyncio.sleep(0.2)
    assert not task.done() and q.overdue() == [], "within its bound: not overdue"
    outcome = await asyncio.wait_for(task, 6)
    assert outcome is Outcome.DONE, "released once the instance is surely gone"
    assert q.overdue() == []


async def test_a_step_that_ignores_cancellation_shows_as_overdue() -> None:
    q = handler(margin=0.0)
    now = datetime.now(tz=UTC)
    release = asyncio.Event()

    async def stubborn(*args: Any) -> Outcome:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue  # a step that swallows cancellation (a bug): only the report can tell
        return Outcome.DONE

    q._event_within = stubborn  # type: ignore[method-assign]
    sent = now - timedelta(seconds=119.7)
    message = QueueMessage("m-2", "r-2", spot("i-0abc", sent), 1, sent)
    task = asyncio.ensure_future(q.handle(message, Lease(message, 0.0, 30)))
    try:
        await asyncio.sleep(1.0)
        late = q.overdue()
        assert len(late) == 1 and "m-2" in late[0]
        assert "kubespot_queue_messages_overdue 1.0" in q._metrics.render()[0].decode()
    finally:
        release.set()
    await asyncio.wait_for(task, 2)
    assert q.overdue() == []


def test_only_states_with_work_left_are_resumed_at_start_up() -> None:
    # A controller restart resumes fences and drains in progress (or failed, to retry) and rebalance
    # undos; a drained node has nothing left, and resuming it would rewrite its holder (a write per
    # drained node at every restart: review of issue 10).
    from kubespot.controllers.interruption.queue_handler import _needs_resume
    from kubespot.kube import NodeView
    from kubespot.records.interruption import STATE_ANNOTATION, NodeState, Phase

    def node(phase: Phase, undo: bool = False) -> NodeView:
        t = datetime(2026, 11, 25, tzinfo=UTC)
        state = NodeState("e", "spot-itn", phase, t, undo_at=t if undo else None)
        return NodeView("n", annotations={STATE_ANNOTATION: state.encode()})

    assert _needs_resume(node(Phase.DRAINING)) and _needs_resume(node(Phase.FENCED))
    assert _needs_resume(node(Phase.DRAIN_FAILED)) and _needs_resume(node(Phase.DRAINED, undo=True))
    assert not _needs_resume(node(Phase.DRAINED)) and not _needs_resume(NodeView("n"))
    assert not _needs_resume(NodeView("n", annotations={STATE_ANNOTATION: "garbage"}))


def test_a_setting_too_large_for_a_duration_fails_at_start_up_not_per_message() -> None:
    """aws/karpenter-provider-aws pkg/controllers/interruption/controller.go Reconcile: a message
    the controller cannot handle is an error of that message only; a setting every message would
    trip on must be refused once, when the handler is built, never by every message's ``handle()``."""
    kube = FakeKube()
    with pytest.raises(InvalidSetting, match="node_termination_grace_period"):
        QueueHandler(
            kube=kube,  # type: ignore[arg-type]
            nodes=NodeIndex(kube),  # type: ignore[arg-type]
            instances=NoInstances(),
            lifecycle=NoLifecycle(),
            queue=QueueSettings(),
            monitors=MonitorSettings(),
            actions=NodeActionSettings(),
            drain=DrainSettings(node_termination_grace_period=10**14),
            clock=SystemClock(),
            metrics=Metrics(),
        )


async def test_a_bound_past_the_last_representable_time_holds_the_message_instead_of_failing() -> None:
    """aws/karpenter-provider-aws pkg/controllers/interruption/controller.go Reconcile handles each
    message on its own and never lets one fail for a reason outside it: a ``held_margin`` whose
    bound lies past year 9999 means "hold it as long as it takes", not an OverflowError for every
    message."""
    now = datetime.now(tz=UTC)
    q = handler(margin=3e11)
    message = QueueMessage("m-3", "r-3", spot("i-0abc", now), 1, now)
    task = asyncio.ensure_future(q.handle(message, Lease(message, 0.0, 30)))
    await asyncio.sleep(0.2)
    try:
        assert not task.done(), task.exception() if task.done() else None
        assert q.overdue() == [], "held within its (saturated) bound"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
