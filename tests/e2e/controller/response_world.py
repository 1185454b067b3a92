"""AWS pieces for the response-action scenarios (tests/e2e/controller/test_e2e_response_*.py): instances
whose interfaces carry known security groups, ELBv2 target groups holding the pods' IPs and the
instances, SQS queues subscribed to an SNS topic or targeted by an EventBridge rule, and readers of
the ``kubespot.io/actions`` record and of target states.

``response_world(...)`` is ``controller_world`` with instances launched on explicit network
interfaces (moto then reports an interface's groups as they are, and isolation can be observed).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
from controller_world import (
    AMI,
    MANAGED_TAG,
    ControllerWorld,
    Instance,
    Obj,
    settled_world,
)

from kubespot.records.actions import ACTIONS_ANNOTATION
from kubespot.records.interruption import STATE_ANNOTATION, NodeState, Phase
from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.testing import until
from support.moto_sqs import received, sqs_queue


@dataclass
class Network:
    vpc: str
    subnet: str
    nodes_sg: str
    quarantine_sg: str


@asynccontextmanager
async def response_world(
    aws: MotoServer, *workloads: Obj, tmp: Path, instances: int = 2
) -> AsyncIterator[tuple[ControllerWorld, Network]]:
    ec2 = aws.client("ec2")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    subnet = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"][0]["SubnetId"]
    nodes_sg = ec2.create_security_group(GroupName="e2e-nodes", Description="nodes", VpcId=vpc)["GroupId"]
    quarantine = ec2.create_security_group(GroupName="e2e-quarantine", Description="q", VpcId=vpc)["GroupId"]
    found: list[Instance] = []
    for _ in range(instances):
        (launched,) = ec2.run_instances(
            ImageId=AMI,
            MinCount=1,
            MaxCount=1,
            InstanceType="m5.large",
            InstanceMarketOptions={"MarketType": "spot"},
            TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": MANAGED_TAG, "Value": ""}]}],
            NetworkInterfaces=[{"DeviceIndex": 0, "SubnetId": subnet, "Groups": [nodes_sg]}],
        )["Instances"]
        found.append(
            Instance(
                launched["InstanceId"], launched["PrivateDnsName"], launched["Placement"]["AvailabilityZone"]
            )
        )
    async with settled_world(aws, found, *workloads, tmp=tmp) as world:
        yield world, Network(vpc, subnet, nodes_sg, quarantine)


# --- load balancers -------------------------------------------------------------------------------


def target_group(
    aws: MotoServer, vpc: str, name: str, *, target_type: Literal["instance", "ip"], delay: int = 60
) -> str:
    elbv2 = aws.client("elbv2")
    arn = elbv2.create_target_group(Name=name, Protocol="HTTP", Port=8080, VpcId=vpc, TargetType=target_type)[
        "TargetGroups"
    ][0]["TargetGroupArn"]
    # Long enough for the test to see the targets draining (moto's extension models the delay).
    elbv2.modify_target_group_attributes(
        TargetGroupArn=arn,
        Attributes=[{"Key": "deregistration_delay.timeout_seconds", "Value": str(delay)}],
    )
    return str(arn)


def register(aws: MotoServer, arn: str, *ids: str) -> None:
    aws.client("elbv2").register_targets(TargetGroupArn=arn, Targets=[{"Id": i} for i in ids])


def target_states(aws: MotoServer, arn: str) -> dict[str, str]:
    """Target id -> state (healthy, draining, ...) as DescribeTargetHealth lists the group."""
    answer = aws.client("elbv2").describe_target_health(TargetGroupArn=arn)
    return {d["Target"]["Id"]: d["TargetHealth"]["State"] for d in answer["TargetHealthDescriptions"]}


def pod_ips(world: ControllerWorld, node_name: str) -> dict[str, str]:
    """``namespace/name`` -> pod IP of the (non-DaemonSet) pods on the node."""
    return {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["status"]["podIP"]
        for p in world.pods_on(node_name)
        if (p.get("status") or {}).get("podIP")
    }


# --- the record and the state ----------------------------------------------------------------------


def record(world: ControllerWorld, node_name: str) -> dict[str, Any] | None:
    raw = (world.node(node_name)["metadata"].get("annotations") or {}).get(ACTIONS_ANNOTATION)
    return None if raw is None else dict(orjson.loads(raw))


async def finished_record(world: ControllerWorld, node_name: str, *, within: float = 30) -> dict[str, Any]:
    """The node's actions record once it says ``finished`` (waiting up to ``within`` seconds)."""

    async def finished() -> dict[str, Any]:
        rec = record(world, node_name)
        return rec if rec and rec.get("finished") else {}

    return await until(finished, within=within)


def agent_state(event_id: str, instance_id: str, phase: Phase, *, since: Any, deadline: Any) -> str:
    """The state annotation an agent writes when it fences (or drains) a node for a spot notice."""
    return NodeState(
        event_id=event_id,
        kind="spot-itn",
        phase=phase,
        since=since,
        deadline=deadline,
        cordoned_by_us=True,
        taints=("kubespot.io/spot-itn",),
        holder="ip-agent/1",
        renewed=since,
        extra={"source": "imds", "instance_id": instance_id},
    ).encode()


STATE = STATE_ANNOTATION


# --- summaries -------------------------------------------------------------------------------------


def sns_to_queue(aws: MotoServer, topic_name: str, queue_name: str) -> tuple[str, str]:
    """(topic ARN, queue URL): the queue subscribed to the topic."""
    sns = aws.client("sns")
    topic = sns.create_topic(Name=topic_name)["TopicArn"]
    url, arn = sqs_queue(aws, queue_name)
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    return str(topic), url


def bus_to_queue(aws: MotoServer, bus: str, queue_name: str, *, source: str = "kubespot") -> str:
    """A custom bus with a rule sending ``source`` events to a new queue; the queue URL."""
    events = aws.client("events")
    events.create_event_bus(Name=bus)
    url, arn = sqs_queue(aws, queue_name)
    events.put_rule(Name=f"{bus}-summaries", EventBusName=bus, EventPattern=json.dumps({"source": [source]}))
    events.put_targets(Rule=f"{bus}-summaries", EventBusName=bus, Targets=[{"Id": "q", "Arn": arn}])
    return url


def interface_groups(aws: MotoServer, instance_id: str) -> dict[str, set[str]]:
    ec2 = aws.client("ec2")
    answer = ec2.describe_network_interfaces(
        Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}]
    )["NetworkInterfaces"]
    return {eni["NetworkInterfaceId"]: {g["GroupId"] for g in eni["Groups"]} for eni in answer}


# Re-exported for the scenarios.
__all__ = [
    "STATE",
    "Network",
    "Phase",
    "agent_state",
    "bus_to_queue",
    "finished_record",
    "interface_groups",
    "pod_ips",
    "received",
    "record",
    "register",
    "response_world",
    "sns_to_queue",
    "sqs_queue",
    "target_group",
    "target_states",
]
