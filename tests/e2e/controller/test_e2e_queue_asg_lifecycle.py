"""Auto Scaling terminate lifecycle actions from the queue, started in moto (``start_lifecycle_action``)
and delivered by EventBridge, straight from the hook to SQS, or wrapped in SNS: the node is fenced and
drained, and the action is completed with CONTINUE only after the node's pods are gone; with
HEARTBEAT_INTERVAL heartbeats are recorded while a slow drain runs; DRY_RUN changes nothing (the
action is left alone) and the message is still deleted."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest
from controller_world import (
    ASG_GROUP,
    ControllerWorld,
    asg_controller_world,
    lifecycle_action,
    until_completed,
    workload,
)

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


async def _last_pod_left(world: ControllerWorld, node: str, stop: asyncio.Event) -> float:
    """Wall time at which ``node`` was last seen with pods (sampled every 20 ms until ``stop``)."""
    last = time.time()
    while not stop.is_set():
        if world.pods_on(node):
            last = time.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.02)
    return last


@pytest.mark.parametrize("delivery", ["eventbridge", "direct", "sns"])
async def test_lifecycle_action_completed_after_the_pods_are_gone(
    aws: MotoServer, tmp_path: Path, delivery: str
) -> None:
    async with asg_controller_world(
        aws, workload("web", 3, shutdown=0.5), tmp=tmp_path, delivery=delivery
    ) as world:
        target = world.instances[0]
        assert world.pods_on(target.node_name)
        await world.start_controller()
        stop = asyncio.Event()
        sampler = asyncio.create_task(_last_pod_left(world, target.node_name, stop))
        action = aws.start_lifecycle_action(ASG_GROUP, target.instance_id, decrement_desired_capacity=True)
        try:
            done = await until_completed(aws, action.token, within=20)
        finally:
            stop.set()
        last_pod = await sampler
        assert done.result == "CONTINUE" and done.completed_by == "CompleteLifecycleAction"
        assert not world.pods_on(target.node_name)
        assert done.completed_at is not None and done.completed_at >= last_pod, (
            f"completed at {done.completed_at:.3f}, a pod was still on the node at {last_pod:.3f}"
        )
        state = world.state(target.node_name)
        assert (
            state is not None and state["kind"] == "asg-lifecycle-termination" and state["phase"] == "drained"
        )
        assert world.fenced(target.node_name)

        async def deleted() -> bool:
            return world.queue_depth() == 0

        await until(deleted, within=10)
        assert not world.fenced(world.instances[1].node_name)


async def test_heartbeats_while_a_slow_drain_runs(aws: MotoServer, tmp_path: Path) -> None:
    async with asg_controller_world(aws, workload("slow", 2, shutdown=3.5), tmp=tmp_path) as world:
        target = world.instances[0]
        await world.start_controller(HEARTBEAT_INTERVAL="1")
        action = aws.start_lifecycle_action(ASG_GROUP, target.instance_id, decrement_desired_capacity=True)
        done = await until_completed(aws, action.token, within=25)
        assert done.result == "CONTINUE"
        assert len(done.heartbeats) >= 2, done.heartbeats
        assert done.completed_at is not None
        assert all(action.started_at < beat <= done.completed_at for beat in done.heartbeats)
        assert not world.pods_on(target.node_name)


async def test_lifecycle_dry_run_changes_nothing(aws: MotoServer, tmp_path: Path) -> None:
    async with asg_controller_world(aws, workload("web", 2), tmp=tmp_path) as world:
        target = world.instances[0]
        pods_before = {p["metadata"]["name"] for p in world.pods_on(target.node_name)}
        await world.start_controller(DRY_RUN="true")
        action = aws.start_lifecycle_action(ASG_GROUP, target.instance_id, decrement_desired_capacity=True)

        async def done() -> bool:
            return world.queue_depth() == 0 and world.node_events(target.node_name, "DryRun") > 0

        await until(done, within=15)
        await asyncio.sleep(0.5)  # anything the handler would still do after deleting the message
        assert not world.fenced(target.node_name) and world.state(target.node_name) is None
        assert {p["metadata"]["name"] for p in world.pods_on(target.node_name)} == pods_before
        # Completing the action would terminate the instance: a dry run must leave it waiting.
        after = lifecycle_action(aws, action.token)
        assert after.completed_at is None, f"dry run completed the lifecycle action ({after.completed_by})"
