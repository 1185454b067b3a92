"""Messages one queue carries for others: a node whose instance has no managed tag (with
CHECK_TAG_BEFORE_DRAINING=true, the default) and an instance of another account are not acted on,
and are dropped after KUBESPOT_QUEUE_FOREIGN_MAX_RECEIVES; with the tag check off the same
untagged node is handled."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from controller_world import controller_world, spot_warning, workload

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until

pytestmark = pytest.mark.slow


async def test_unmanaged_and_foreign_account_instances_are_not_acted_on(
    aws: MotoServer, tmp_path: Path
) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2, managed=False) as world:
        target = world.instances[0]
        pods_before = {p["metadata"]["name"] for p in world.pods_on(target.node_name)}
        await world.start_controller(
            CHECK_TAG_BEFORE_DRAINING="true",
            KUBESPOT_QUEUE_FOREIGN_MAX_RECEIVES="2",
            KUBESPOT_QUEUE_VISIBILITY_TIMEOUT="3",
        )
        world.send(spot_warning(target.instance_id, event_id="e2e-unmanaged"))
        other = spot_warning("i-0fedcba9876543210", event_id="e2e-other-account")
        other["account"] = "999999999999"
        other["resources"] = ["arn:aws:ec2:us-east-1:999999999999:instance/i-0fedcba9876543210"]
        world.send(other)

        async def dropped() -> bool:
            return world.queue_depth() == 0

        await until(dropped, within=20)
        log = world.log_text()
        assert f"instance {target.instance_id} has no aws-node-termination-handler/managed tag" in log
        assert "instance i-0fedcba9876543210 is not a node of this cluster" in log
        assert "message deleted (received 2 times)" in log
        assert not world.fenced(target.node_name) and world.state(target.node_name) is None
        assert world.node_events(target.node_name) == 0
        assert {p["metadata"]["name"] for p in world.pods_on(target.node_name)} == pods_before


async def test_untagged_node_is_handled_without_the_tag_check(aws: MotoServer, tmp_path: Path) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2, managed=False) as world:
        target = world.instances[0]
        await world.start_controller(CHECK_TAG_BEFORE_DRAINING="false")
        world.send(spot_warning(target.instance_id))

        await world.until_handled(target.node_name, within=20)
        assert world.fenced(target.node_name) and not world.pods_on(target.node_name)


async def test_a_foreign_message_is_given_back_at_once_for_its_owner(aws: MotoServer, tmp_path: Path) -> None:
    """Another cluster's message is visible again as soon as this controller has looked at it, not
    after its 30 s visibility timeout: the owner's two-minute notice must not wait on ours.

    NTH leaves such a message hidden for its visibility timeout (it deletes it only with
    DELETE_SQS_MSG_IF_NODE_NOT_FOUND); here it is given back with ChangeMessageVisibility(0).
    """
    async with controller_world(aws, workload("web", 1), tmp=tmp_path, instances=1) as world:
        proc = await world.start_controller(
            KUBESPOT_QUEUE_VISIBILITY_TIMEOUT="30",
            KUBESPOT_QUEUE_FOREIGN_MAX_RECEIVES="100",
            KUBESPOT_QUEUE_RECEIVERS="1",
        )
        world.send(spot_warning("i-0fedcba9876543210", event_id="e2e-owned-elsewhere"))

        async def looked_at() -> bool:
            return "is not a node of this cluster: left for its owner (received 1 times)" in world.log_text()

        await until(looked_at, within=15)
        # The owner stands in for the other cluster; this controller leaves the stage, so what the
        # owner sees is what the controller did with the message (a handler cut short by the stop
        # gives its message back at once either way).
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 15)
        sqs = aws.client("sqs")
        received: list[dict[str, object]] = []
        for _ in range(5):
            answer = sqs.receive_message(
                QueueUrl=world.queue_url,
                WaitTimeSeconds=1,
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
            )
            received = answer.get("Messages", [])  # type: ignore[assignment]
            if received:
                break
        assert received, "the message stayed hidden for the controller's visibility timeout"
        assert "e2e-owned-elsewhere" in str(received[0]["Body"])
