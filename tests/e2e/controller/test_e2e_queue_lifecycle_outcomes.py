"""What the controller does with an Auto Scaling terminate lifecycle action when things go wrong,
over moto (the ``lifecycle`` extension, with its fault injection) and kubesim:

- a drain refused under the settings (an emptyDir pod with DELETE_LOCAL_DATA=false, as
  ``kubectl drain`` without ``--delete-emptydir-data`` refuses) is not DRAINED: the node's state says
  ``drain-failed`` and the action is not completed (it ends at the hook's timeout, with its
  DefaultResult), as aws-node-termination-handler runs its post-drain task (CompleteLifecycleAction)
  only when the drain succeeded (pkg/interruptionevent/draincordon/handler.go);
- a CompleteLifecycleAction that fails (AccessDeniedException, HTTP 400 in the Auto Scaling API's
  Common Errors) keeps the message, and the next delivery completes the action;
- heartbeats stop once AWS answers "No active Lifecycle Action found" (the action was completed by
  someone else), as NTH's heartbeat loop stops on a ValidationError (asg-lifecycle-event.go).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from controller_world import (
    ASG_GROUP,
    ASG_HOOK,
    ControllerWorld,
    asg_controller_world,
    lifecycle_action,
    until_completed,
    workload,
)

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


def _with_empty_dir(obj: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["template"]["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    return obj


async def _message_gone(world: ControllerWorld, within: float) -> None:
    async def gone() -> bool:
        return world.queue_depth() == 0

    await until(gone, within=within)


async def test_a_refused_drain_leaves_the_lifecycle_action_waiting(aws: MotoServer, tmp_path: Path) -> None:
    async with asg_controller_world(aws, _with_empty_dir(workload("scratchy", 2)), tmp=tmp_path) as world:
        target = world.instances[0]
        await world.start_controller(KUBESPOT_DRAIN_DELETE_LOCAL_DATA="false")
        action = aws.start_lifecycle_action(ASG_GROUP, target.instance_id, decrement_desired_capacity=True)

        await world.until_phase(target.node_name, "drain-failed", within=20)
        await _message_gone(world, within=15)
        await asyncio.sleep(0.5)  # a completion would follow the message's end at once
        after = lifecycle_action(aws, action.token)
        assert after.completed_at is None, f"a refused drain completed the action ({after.completed_by})"
        assert world.pods_on(target.node_name), "the refused pods stay"
        assert world.fenced(target.node_name)
        assert "not completed: node" in world.log_text()


async def test_a_failed_completion_keeps_the_message_and_is_retried(aws: MotoServer, tmp_path: Path) -> None:
    async with asg_controller_world(aws, workload("web", 2), tmp=tmp_path) as world:
        target = world.instances[0]
        aws.inject_lifecycle_fault("CompleteLifecycleAction", "AccessDeniedException")
        await world.start_controller(KUBESPOT_AWS_MAX_ATTEMPTS="1")
        action = aws.start_lifecycle_action(ASG_GROUP, target.instance_id, decrement_desired_capacity=True)

        # The first try is refused; the message comes back after its visibility timeout (6 s).
        done = await until_completed(aws, action.token, within=30)
        assert (done.result, done.completed_by) == ("CONTINUE", "CompleteLifecycleAction")
        assert "AccessDeniedException" in world.log_text()
        await _message_gone(world, within=15)


async def test_heartbeats_stop_once_the_action_is_gone(aws: MotoServer, tmp_path: Path) -> None:
    async with asg_controller_world(aws, workload("slow", 2, shutdown=6.0), tmp=tmp_path) as world:
        target = world.instances[0]
        await world.start_controller(HEARTBEAT_INTERVAL="1")
        action = aws.start_lifecycle_action(ASG_GROUP, target.instance_id, decrement_desired_capacity=True)

        async def beating() -> bool:
            return len(lifecycle_action(aws, action.token).heartbeats) >= 1

        await until(beating, within=15)
        # Someone else (an operator, another tool) completes the action while the drain runs.
        aws.client("autoscaling").complete_lifecycle_action(
            AutoScalingGroupName=ASG_GROUP,
            LifecycleHookName=ASG_HOOK,
            LifecycleActionToken=action.token,
            LifecycleActionResult="CONTINUE",
        )

        async def stopped() -> bool:
            return "heartbeats stop" in world.log_text()

        await until(stopped, within=10)
        failures = world.log_text().count("lifecycle heartbeat for")
        await asyncio.sleep(2.5)  # two more intervals: no further RecordLifecycleActionHeartbeat
        assert world.log_text().count("lifecycle heartbeat for") == failures
        assert world.log_text().count("heartbeats stop") == 1


async def test_not_a_node_here_completes_the_action_when_asked_to_delete(
    aws: MotoServer, tmp_path: Path
) -> None:
    """DELETE_SQS_MSG_IF_NODE_NOT_FOUND: NTH runs the post-drain task of an event whose node is not
    found, which for an ASG termination is CompleteLifecycleAction(CONTINUE), then deletes the message
    (pkg/interruptionevent/draincordon/handler.go); so the group is not held up to the hook timeout."""
    async with asg_controller_world(aws, workload("web", 1), tmp=tmp_path) as world:
        gone = world.instances[1]  # a group instance whose node has left the cluster
        world.kubesim.store.delete(world._rt("nodes"), None, gone.node_name)
        await world.start_controller(DELETE_SQS_MSG_IF_NODE_NOT_FOUND="true")
        action = aws.start_lifecycle_action(ASG_GROUP, gone.instance_id, decrement_desired_capacity=True)

        done = await until_completed(aws, action.token, within=15)
        assert (done.result, done.completed_by) == ("CONTINUE", "CompleteLifecycleAction")
        await _message_gone(world, within=10)
