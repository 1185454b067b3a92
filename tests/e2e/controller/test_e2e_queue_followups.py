"""Queue mode never wedges (issue 10 §1), through moto's SQS and kubesim with the real controller.

- The EC2 state changes EventBridge sends after every spot interruption ("shutting-down",
  "terminated") and an ASG termination after a spot warning are weaker than the spot event that
  holds the node: they must settle (message deleted) instead of holding an in-flight slot for ever.
  With two slots, two such follow-ups used to stop the replica from receiving anything else.
- Node names are reused (EKS and Karpenter name nodes by private IP): a new Node under an old name
  must be handled for its own interruption, not inherit the old Node's finished handler.
- A controller restart resumes the states on the Nodes (a rebalance's auto-undo survives it), and a
  replica stopped mid-drain releases its hold so the next one takes over at once.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import orjson
import pytest
from controller_world import (
    AMI,
    MANAGED_TAG,
    asg_terminate_eventbridge,
    controller_world,
    rebalance_recommendation,
    spot_warning,
    state_change,
    workload,
)

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import node, until

pytestmark = pytest.mark.slow


async def test_follow_ups_of_a_spot_interruption_do_not_wedge_the_consumer(
    aws: MotoServer, tmp_path: Path
) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=3) as world:
        first, second, _spare = world.instances
        await world.start_controller(KUBESPOT_QUEUE_MAX_IN_FLIGHT="2")
        world.send(spot_warning(first.instance_id, event_id="e2e-spot-1"))

        async def drained() -> bool:
            return (world.state(first.node_name) or {}).get("phase") == "drained" and world.queue_depth() == 0

        await until(drained, within=20)
        # What EventBridge delivers next for the same instance: each is weaker than the spot event.
        world.send(state_change(first.instance_id, "shutting-down", event_id="e2e-shutting-down"))
        world.send(state_change(first.instance_id, "terminated", event_id="e2e-terminated"))
        # (A token of AWS's form: no hook waits on it here, so completing it answers "no such action".)
        token = "6f1b2c3d-0000-4000-8000-000000000001"
        world.send(asg_terminate_eventbridge(first.instance_id, token=token, event_id="e2e-asg-after-spot"))

        async def settled() -> bool:
            return world.queue_depth() == 0

        await until(settled, within=15)
        # The replica still receives: a new interruption on another node is handled.
        world.send(spot_warning(second.instance_id, event_id="e2e-spot-2"))

        async def second_fenced() -> bool:
            return world.fenced(second.node_name) and world.queue_depth() == 0

        await until(second_fenced, within=15)
        text = world.log_text()
        assert "covered by" in text, "the follow-ups settled as covered by the spot event"


async def test_a_new_node_under_a_reused_name_is_handled_for_its_own_interruption(
    aws: MotoServer, tmp_path: Path
) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=3) as world:
        old = world.instances[0]
        await world.start_controller()
        world.send(spot_warning(old.instance_id, event_id="e2e-old"))

        async def drained() -> bool:
            return (world.state(old.node_name) or {}).get("phase") == "drained" and world.queue_depth() == 0

        await until(drained, within=20)
        # The instance is gone; its Node is deleted; a new instance gets the same private IP, so the
        # same node name (EKS/Karpenter naming), with a new UID and providerID.
        nodes = world._rt("nodes")
        old_uid = world.node(old.node_name)["metadata"]["uid"]
        world.kubesim.store.delete(nodes, None, old.node_name)
        launched = aws.client("ec2").run_instances(
            ImageId=AMI,
            MinCount=1,
            MaxCount=1,
            InstanceType="m5.large",
            TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": MANAGED_TAG, "Value": ""}]}],  # type: ignore[list-item]
        )["Instances"][0]
        fresh = node(old.node_name)
        fresh["spec"]["providerID"] = f"aws:///{old.zone}/{launched['InstanceId']}"
        world.kubesim.store.create(nodes, fresh)

        async def replaced() -> bool:
            found = world.kubesim.store.find(nodes, None, old.node_name)
            return found is not None and found["metadata"]["uid"] != old_uid

        await until(replaced, within=5)
        assert world.state(old.node_name) is None and not world.fenced(old.node_name)
        await asyncio.sleep(1.0)  # the controller's node watch sees the new Node
        world.send(spot_warning(launched["InstanceId"], event_id="e2e-new"))

        async def fenced() -> bool:
            return world.fenced(old.node_name) and world.queue_depth() == 0

        await until(fenced, within=15)
        state = world.state(old.node_name) or {}
        assert (state.get("extra") or {}).get("instance_id") == launched["InstanceId"], state


async def test_a_restarted_controller_resumes_a_rebalance_auto_undo(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=3) as world:
        target = world.instances[1]
        env = {
            "ENABLE_REBALANCE_MONITORING": "true",
            "KUBESPOT_NODE_ACTIONS_REBALANCE_UNDO_AFTER": "8",
        }
        first = await world.start_controller(**env)
        world.send(rebalance_recommendation(target.instance_id, event_id="e2e-rebalance-restart"))

        async def cordoned() -> bool:
            return world.fenced(target.node_name) and world.queue_depth() == 0

        await until(cordoned, within=15)
        first.send_signal(signal.SIGTERM)
        await asyncio.wait_for(first.wait(), 20)
        assert world.fenced(target.node_name), "the fence stays while no controller runs"
        await world.start_controller(**env)

        async def undone() -> bool:
            return not world.fenced(target.node_name) and world.state(target.node_name) is None

        await until(undone, within=20)
        assert "resuming the state of" in world.log_text()


async def test_a_replica_stopped_mid_drain_releases_its_hold(aws: MotoServer, tmp_path: Path) -> None:
    # A slow drain: pods take 20 s to shut down, so the first replica is stopped while it drains.
    async with controller_world(aws, workload("web", 2, shutdown=20.0), tmp=tmp_path, instances=3) as world:
        target = world.instances[0]
        first = await world.start_controller()
        world.send(spot_warning(target.instance_id, event_id="e2e-handover"))

        async def draining() -> bool:
            return (world.state(target.node_name) or {}).get("phase") == "draining"

        await until(draining, within=15)
        first.send_signal(signal.SIGTERM)
        await asyncio.wait_for(first.wait(), 30)
        state = world.state(target.node_name) or {}
        assert state.get("phase") == "draining"
        assert not state.get("holder") and not state.get("renewed"), f"hold released at shutdown: {state}"
        started = time.monotonic()
        await world.start_controller()

        async def taken_over() -> bool:
            holder = (world.state(target.node_name) or {}).get("holder")
            return bool(holder)

        await until(taken_over, within=15)
        # Without the release the new replica would follow the old mark until it went stale (30 s).
        assert time.monotonic() - started < 25
        raw = world.node(target.node_name)["metadata"]["annotations"]["kubespot.io/interruption"]
        assert orjson.loads(raw)["event_id"].startswith("spot-itn")
