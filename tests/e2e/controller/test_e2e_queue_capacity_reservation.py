"""An interruptible Capacity Reservation's instance interruption warning, delivered as AWS does: an
EC2 event matched by the rule `kubespot aws bootstrap` creates, routed by EventBridge to the queue.
The controller fences and drains the node as for a spot warning, with the event's termination time
as the deadline (EC2 User Guide, "Monitor interruptible Capacity Reservations with EventBridge and
CloudTrail"; Karpenter's interruption controller cordons and drains on it too)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from controller_world import controller_world, workload

from kubespot.aws.bootstrap import RULE_KINDS
from kubespot.sim.awssim import MotoServer

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "eventbridge"
DETAIL_TYPE = "EC2 Capacity Reservation Instance Interruption Warning"


async def test_capacity_reservation_warning_drains_the_node_by_its_termination_time(
    aws: MotoServer, tmp_path: Path
) -> None:
    async with controller_world(aws, workload("web", 2), tmp=tmp_path, instances=2) as world:
        target, other = world.instances
        (rule,) = [k for k in RULE_KINDS if k.title == DETAIL_TYPE]
        events = aws.client("events")
        events.put_rule(Name="e2e-cr-interruption", EventPattern=orjson.dumps(rule.pattern).decode())
        events.put_targets(Rule="e2e-cr-interruption", Targets=[{"Id": "queue", "Arn": world.queue_arn()}])
        await world.start_controller()

        sample = json.loads((FIXTURE / "capacity-reservation-interruption-warning.json").read_text())
        terminates = (datetime.now(tz=UTC) + timedelta(seconds=110)).replace(microsecond=0)
        detail = dict(
            sample["detail"],
            **{"instance-id": target.instance_id, "instance-termination-time": terminates.isoformat()},
        )
        put = events.put_events(
            Entries=[
                {
                    "Source": sample["source"],
                    "DetailType": sample["detail-type"],
                    "Detail": json.dumps(detail),
                    "Resources": [f"arn:aws:ec2:us-east-1:123456789012:instance/{target.instance_id}"],
                }
            ]
        )
        assert put["FailedEntryCount"] == 0

        state = await world.until_handled(target.node_name, within=20)
        assert state["kind"] == "spot-itn"
        assert datetime.fromisoformat(state["deadline"]) == terminates
        assert world.fenced(target.node_name) and not world.pods_on(target.node_name)
        assert not world.fenced(other.node_name)
