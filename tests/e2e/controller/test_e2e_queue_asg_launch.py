"""Auto Scaling launch lifecycle hooks over moto (the ``lifecycle`` extension) and kubesim: the
controller completes a launch action with CONTINUE once the new instance's node has joined and is
Ready, and leaves an action whose node never turns Ready to the hook's timeout (its DefaultResult).

Semantics from aws-node-termination-handler: README "Handle ASG Instance Launch Lifecycle
Notifications" (it "will periodically check for a node backed by the EC2 instance to join the
cluster and for the node to have a status of 'ready'", then completes the hook; otherwise the ASG
takes the default action) and pkg/interruptionevent/asg/launch/handler.go (not Ready: the message
is kept for a later look).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from controller_world import (
    ASG_GROUP,
    MANAGED_TAG,
    ControllerWorld,
    Instance,
    asg_controller_world,
    lifecycle_action,
    until_completed,
    workload,
)

from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions.lifecycle import LAUNCHING, LifecycleAction
from kubespot.sim.kubesim.testing import node, until

pytestmark = pytest.mark.slow

LAUNCH_HOOK = "e2e-launch"


def _scale_out(world: ControllerWorld, *, timeout: int) -> tuple[Instance, LifecycleAction]:
    """A launch hook on the group, one more instance, and its launch action started."""
    aws = world.aws
    asg = aws.client("autoscaling")
    asg.put_lifecycle_hook(
        LifecycleHookName=LAUNCH_HOOK,
        AutoScalingGroupName=ASG_GROUP,
        LifecycleTransition=LAUNCHING,
        HeartbeatTimeout=timeout,
        DefaultResult="ABANDON",
    )
    world.route_events(
        "EC2 Instance-terminate Lifecycle Action",
        "EC2 Instance-launch Lifecycle Action",
        source="aws.autoscaling",
    )
    before = {i.instance_id for i in world.instances}
    asg.set_desired_capacity(AutoScalingGroupName=ASG_GROUP, DesiredCapacity=len(before) + 1)
    group = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[ASG_GROUP])["AutoScalingGroups"][0]
    (new_id,) = {i["InstanceId"] for i in group["Instances"]} - before
    ec2 = aws.client("ec2")
    ec2.create_tags(Resources=[new_id], Tags=[{"Key": MANAGED_TAG, "Value": ""}])
    described = ec2.describe_instances(InstanceIds=[new_id])["Reservations"][0]["Instances"][0]
    inst = Instance(new_id, described["PrivateDnsName"], described["Placement"]["AvailabilityZone"])
    action = aws.start_lifecycle_action(ASG_GROUP, new_id, transition=LAUNCHING)
    return inst, action


def _join(world: ControllerWorld, inst: Instance) -> None:
    """The instance's kubelet registers its Node (kubesim's kubelet then posts Ready)."""
    obj: dict[str, Any] = node(inst.node_name)
    obj["spec"]["providerID"] = f"aws:///{inst.zone}/{inst.instance_id}"
    world.kubesim.store.create(world._rt("nodes"), obj)


async def test_launch_action_completed_once_the_node_is_ready(aws: MotoServer, tmp_path: Path) -> None:
    async with asg_controller_world(aws, workload("web", 1), tmp=tmp_path) as world:
        await world.start_controller()
        inst, action = _scale_out(world, timeout=300)
        await asyncio.sleep(3)  # the instance boots: the controller waits for its node meanwhile
        assert lifecycle_action(aws, action.token).completed_at is None, "completed before the node joined"
        joined = time.time()
        _join(world, inst)

        done = await until_completed(aws, action.token, within=20)
        assert (done.result, done.completed_by) == ("CONTINUE", "CompleteLifecycleAction")
        assert done.completed_at is not None and done.completed_at >= joined

        async def deleted() -> bool:
            return world.queue_depth() == 0

        await until(deleted, within=10)


async def test_a_node_never_ready_is_left_to_the_hook_timeout(aws: MotoServer, tmp_path: Path) -> None:
    async with asg_controller_world(aws, workload("web", 1), tmp=tmp_path) as world:
        await world.start_controller()
        _inst, action = _scale_out(world, timeout=30)

        async def given_up() -> bool:
            return "its DefaultResult applies" in world.log_text()

        await until(given_up, within=60)
        log = world.log_text()
        # Looked at again on later receives (the message kept), never completed by the controller.
        assert log.count("no Ready node yet; message left for another look") >= 2, log[-3000:]

        async def deleted() -> bool:
            return world.queue_depth() == 0

        await until(deleted, within=15)
        done = lifecycle_action(aws, action.token)  # moto applies the timeout when the actions are read
        assert (done.result, done.completed_by) == ("ABANDON", "timeout")
