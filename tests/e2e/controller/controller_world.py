"""End-to-end harness for ``kubespot controller``: moto (SQS, EC2, Auto Scaling) and kubesim on
loopback, and the real controller process between them.

``controller_world(...)`` launches tagged instances in moto, loads one kubesim node per instance
(named by its private DNS name, providerID ``aws:///<zone>/<id>``) with workloads settled on the
first ones, creates the queue, and hands over a ``ControllerWorld`` that can put EventBridge-shaped
messages on the queue and start the controller with extra environment.
"""

from __future__ import annotations

import asyncio
import copy
import signal
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions.lifecycle import LifecycleAction
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.conventions import SHUTDOWN_SECONDS
from kubespot.sim.kubesim.testing import deployment, is_ready, node, until
from support.kubespot_process import QUICK_ENV, STARTUP_WITHIN, clean_environ, spawn_kubespot
from support.moto_asg import auto_scaling_group

Obj = dict[str, Any]
AMI = "ami-12c6146b"
MANAGED_TAG = "aws-node-termination-handler/managed"
FAST = ControllerConfig(pod_start_seconds=0.1, lease_renew_seconds=5.0, node_status_seconds=30.0)
STATE_ANNOTATION = "kubespot.io/interruption"


@dataclass
class Instance:
    instance_id: str
    node_name: str
    zone: str


@dataclass
class ControllerWorld:
    kubesim: KubeSim
    aws: MotoServer
    queue_url: str
    instances: list[Instance]
    tmp: Path
    procs: list[asyncio.subprocess.Process] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        env = clean_environ("KUBESPOT_", "KUBECONFIG", "AWS_")
        env.update(self.aws.env())
        env.update(QUICK_ENV)
        env.update(
            {
                "KUBESPOT_KUBECONFIG": str(self.kubesim.kubeconfig_path),
                "KUBESPOT_QUEUE_URL": self.queue_url,
                "KUBESPOT_AWS_ENDPOINT_URL": self.aws.endpoint_url,
                "KUBESPOT_AWS_REGION": "us-east-1",
                "KUBESPOT_QUEUE_WAIT_TIME": "1",
                "KUBESPOT_QUEUE_VISIBILITY_TIMEOUT": "6",
            }
        )
        env.update(extra)
        return env

    async def start_controller(self, **extra: str) -> asyncio.subprocess.Process:
        log_path = self.tmp / f"controller-{len(self.procs)}.log"
        with log_path.open("wb") as log:
            proc = await spawn_kubespot("controller", env=self.env(**extra), stdout=log, stderr=log)
        self.procs.append(proc)
        self.logs.append(log_path)

        async def up() -> bool:
            text = log_path.read_text(errors="replace")
            # A controller without a queue (response actions only) says so instead of "consuming".
            return proc.returncode is not None or "consuming" in text or "running without a queue" in text

        await until(up, within=STARTUP_WITHIN)
        assert proc.returncode is None, log_path.read_text(errors="replace")
        return proc

    def log_text(self, index: int = -1) -> str:
        return self.logs[index].read_text(errors="replace")

    # --- the queue ---------------------------------------------------------------------------------

    def send(self, body: Obj | str) -> None:
        text = body if isinstance(body, str) else orjson.dumps(body).decode()
        self.aws.client("sqs").send_message(QueueUrl=self.queue_url, MessageBody=text)

    def queue_depth(self) -> int:
        return sum(self.aws.queue_counts(self.queue_url))

    # --- the cluster -------------------------------------------------------------------------------

    def _rt(self, plural: str) -> Any:
        return self.kubesim.store.registry.lookup("", "v1", plural)

    def node(self, name: str) -> Obj:
        found = self.kubesim.store.find(self._rt("nodes"), None, name)
        assert found is not None, name
        return copy.deepcopy(found)

    def fenced(self, name: str) -> bool:
        spec = self.node(name).get("spec") or {}
        return bool(spec.get("unschedulable")) and any(
            t["key"].startswith("kubespot.io/") for t in spec.get("taints") or ()
        )

    def state(self, name: str) -> Obj | None:
        raw = (self.node(name)["metadata"].get("annotations") or {}).get(STATE_ANNOTATION)
        return None if raw is None else dict(orjson.loads(raw))

    async def until_handled(self, name: str, *, within: float) -> Obj:
        """Wait until the queue is empty and node ``name``'s state records ``drained``: the message
        was handled and deleted; that state."""

        async def handled() -> bool:
            state = self.state(name) or {}
            return self.queue_depth() == 0 and state.get("phase") == "drained"

        await until(handled, within=within)
        state = self.state(name)
        assert state is not None
        return state

    async def until_phase(self, name: str, phase: str, *, within: float) -> Obj:
        """Wait until node ``name``'s state records ``phase``; that state."""

        async def reached() -> bool:
            state = self.state(name)
            return state is not None and state["phase"] == phase

        await until(reached, within=within)
        state = self.state(name)
        assert state is not None
        return state

    def pods_on(self, name: str) -> list[Obj]:
        return [
            p
            for p in self.kubesim.store.list(self._rt("pods"))
            if (p.get("spec") or {}).get("nodeName") == name
            and not any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences") or ())
        ]

    # --- added for the queue scenarios (tests/e2e/controller/test_e2e_queue_*.py) -----------------

    def send_message(self, body: Obj | str) -> str:
        """Like ``send``, returning the SQS MessageId (what the controller logs)."""
        text = body if isinstance(body, str) else orjson.dumps(body).decode()
        return self.aws.client("sqs").send_message(QueueUrl=self.queue_url, MessageBody=text)["MessageId"]

    def queue_counts(self) -> tuple[int, int]:
        """(visible, in flight) messages on the queue."""
        return self.aws.queue_counts(self.queue_url)

    def queue_arn(self) -> str:
        attrs = self.aws.client("sqs").get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["QueueArn"]
        )
        return attrs["Attributes"]["QueueArn"]

    def route_events(self, *detail_types: str, source: str) -> None:
        """An EventBridge rule sending ``source`` events of these detail-types to the queue."""
        events = self.aws.client("events")
        name = "e2e-" + source.replace(".", "-")
        pattern = {"source": [source], "detail-type": list(detail_types)}
        events.put_rule(Name=name, EventPattern=orjson.dumps(pattern).decode())
        events.put_targets(Rule=name, Targets=[{"Id": "queue", "Arn": self.queue_arn()}])

    def node_events(self, name: str, reason: str | None = None) -> int:
        """How many times (summing aggregated counts) an event with ``reason`` was recorded on the node."""
        total = 0
        for ev in self.kubesim.store.list(self._rt("events")):
            involved = ev.get("involvedObject") or {}
            ours = involved.get("kind") == "Node" and involved.get("name") == name
            if ours and (reason is None or ev.get("reason") == reason):
                total += int(ev.get("count") or 1)
        return total

    async def assert_node_events(self, name: str, reason: str, count: int, *, within: float = 5.0) -> None:
        """Exactly ``count`` events with ``reason`` on the node, once they have come: the product
        sends its Node events in the background (so a drain or a record write is never slowed by
        them), and one may land a moment after the state it describes."""

        async def enough() -> bool:
            return self.node_events(name, reason) >= count

        await until(enough, within=within)
        assert self.node_events(name, reason) == count

    async def assert_drained_once(self, name: str) -> None:
        """The drain of node ``name`` was reported once: DrainCompleted recorded, and exactly one
        CordonAndDrain and one DrainStarted (however many messages or replicas saw the event)."""

        async def reported() -> bool:
            return self.node_events(name, "DrainCompleted") > 0

        await until(reported, within=5)
        await self.assert_node_events(name, "CordonAndDrain", 1)
        await self.assert_node_events(name, "DrainStarted", 1)

    def log_records(self, index: int | None = None) -> list[Obj]:
        """The JSON log lines of one controller (``index``) or of all of them, parsed."""
        paths = self.logs if index is None else [self.logs[index]]
        records: list[Obj] = []
        for path in paths:
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith("{"):
                    try:
                        records.append(dict(orjson.loads(line)))
                    except orjson.JSONDecodeError:
                        continue
        return records

    def all_logs(self) -> str:
        return "\n".join(path.read_text(errors="replace") for path in self.logs)


def spot_warning(instance_id: str, *, event_id: str = "e2e-1", at: datetime | None = None) -> Obj:
    when = (at or datetime.now(tz=UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "version": "0",
        "id": event_id,
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": when,
        "region": "us-east-1",
        "resources": [f"arn:aws:ec2:us-east-1:123456789012:instance/{instance_id}"],
        "detail": {"instance-id": instance_id, "instance-action": "terminate"},
    }


@asynccontextmanager
async def controller_world(
    aws: MotoServer, *workloads: Obj, tmp: Path, instances: int = 3, managed: bool = True
) -> AsyncIterator[ControllerWorld]:
    ec2 = aws.client("ec2")
    tags = [{"Key": MANAGED_TAG, "Value": ""}] if managed else [{"Key": "team", "Value": "x"}]
    launched = ec2.run_instances(
        ImageId=AMI,
        MinCount=instances,
        MaxCount=instances,
        InstanceType="m5.large",
        InstanceMarketOptions={"MarketType": "spot"},
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],  # type: ignore[list-item]
    )["Instances"]
    found = [
        Instance(i["InstanceId"], i["PrivateDnsName"], i["Placement"]["AvailabilityZone"]) for i in launched
    ]
    async with settled_world(aws, found, *workloads, tmp=tmp) as world:
        yield world


@asynccontextmanager
async def settled_world(
    aws: MotoServer, found: list[Instance], *workloads: Obj, tmp: Path
) -> AsyncIterator[ControllerWorld]:
    """kubesim with one node per instance in ``found`` (workloads settled on the first), and the queue."""
    nodes = []
    for k, inst in enumerate(found):
        # Labelled as Karpenter's spot nodes are (the instances are m5.large spot in moto's eyes
        # only by these labels): the provisioner learns from interruptions on them.
        spot = {
            "karpenter.sh/capacity-type": "spot",
            "node.kubernetes.io/instance-type": "m5.large",
            "topology.kubernetes.io/zone": inst.zone,
        }
        n = node(inst.node_name, unschedulable=k > 0, labels=spot)
        n["spec"]["providerID"] = f"aws:///{inst.zone}/{inst.instance_id}"
        nodes.append(n)
    queue_url = aws.client("sqs").create_queue(QueueName="e2e-interruptions")["QueueUrl"]
    async with KubeSim(objects=[*nodes, *workloads], controllers=FAST) as kubesim:
        world = ControllerWorld(kubesim, aws, queue_url, found, tmp)

        want = sum(int((w.get("spec") or {}).get("replicas") or 0) for w in workloads)

        async def settled() -> bool:
            pods = list(kubesim.store.list(world._rt("pods")))
            return len(pods) >= want and all(is_ready(p) for p in pods)

        await until(settled, within=STARTUP_WITHIN)
        # Spares open once the workloads sit on the first node, so a drain has somewhere to go.
        from kubespot.config.kube import KubeSettings
        from kubespot.kube import connect

        kube = connect(KubeSettings(kubeconfig=str(kubesim.kubeconfig_path)))
        try:
            for inst in found[1:]:
                await kube.uncordon(inst.node_name)
            yield world
        finally:
            await kube.close()
            for proc in world.procs:
                if proc.returncode is None:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        await asyncio.wait_for(proc.wait(), 15)
                    except TimeoutError:
                        proc.kill()
                        await proc.wait()


# --- message builders: each kind the queue carries ---------------------------------------------------

ACCOUNT = "123456789012"
REGION = "us-east-1"
ASG_GROUP = "e2e-ng"
ASG_HOOK = "e2e-terminate"
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"


def _stamp(at: datetime | None) -> str:
    return (at or datetime.now(tz=UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ec2_event(detail_type: str, instance_id: str, detail: Obj, *, event_id: str, at: datetime | None) -> Obj:
    return {
        "version": "0",
        "id": event_id,
        "detail-type": detail_type,
        "source": "aws.ec2",
        "account": ACCOUNT,
        "time": _stamp(at),
        "region": REGION,
        "resources": [f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{instance_id}"],
        "detail": detail,
    }


def rebalance_recommendation(
    instance_id: str, *, event_id: str = "e2e-rebalance", at: datetime | None = None
) -> Obj:
    return _ec2_event(
        "EC2 Instance Rebalance Recommendation",
        instance_id,
        {"instance-id": instance_id},
        event_id=event_id,
        at=at,
    )


def state_change(
    instance_id: str, state: str, *, event_id: str = "e2e-state", at: datetime | None = None
) -> Obj:
    return _ec2_event(
        "EC2 Instance State-change Notification",
        instance_id,
        {"instance-id": instance_id, "state": state},
        event_id=event_id,
        at=at,
    )


def health_scheduled_change(
    instance_ids: list[str],
    start: datetime,
    *,
    status: str = "upcoming",
    code: str = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
    arn: str = "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/E2E",
    event_id: str = "e2e-health",
) -> Obj:
    """An AWS Health EC2 scheduled change (startTime in Health's RFC 1123 form, whole seconds)."""
    rfc1123 = "%a, %d %b %Y %H:%M:%S GMT"
    return {
        "version": "0",
        "id": event_id,
        "detail-type": "AWS Health Event",
        "source": "aws.health",
        "account": ACCOUNT,
        "time": _stamp(None),
        "region": REGION,
        "resources": list(instance_ids),
        "detail": {
            "eventArn": arn,
            "service": "EC2",
            "eventTypeCode": code,
            "eventTypeCategory": "scheduledChange",
            "startTime": start.astimezone(UTC).strftime(rfc1123),
            "endTime": (start.astimezone(UTC) + timedelta(hours=1)).strftime(rfc1123),
            "statusCode": status,
            "eventRegion": REGION,
            "eventDescription": [{"language": "en_US", "latestDescription": "e2e scheduled retirement"}],
            "affectedEntities": [{"entityValue": i, "tags": {}} for i in instance_ids],
        },
    }


def asg_terminate_eventbridge(
    instance_id: str,
    *,
    token: str = "e2e-token-1",
    group: str = ASG_GROUP,
    hook: str = ASG_HOOK,
    event_id: str = "e2e-asg",
) -> Obj:
    """EventBridge's "EC2 Instance-terminate Lifecycle Action" (as moto's lifecycle extension emits)."""
    return {
        "version": "0",
        "id": event_id,
        "detail-type": "EC2 Instance-terminate Lifecycle Action",
        "source": "aws.autoscaling",
        "account": ACCOUNT,
        "time": _stamp(None),
        "region": REGION,
        "resources": [
            f"arn:aws:autoscaling:{REGION}:{ACCOUNT}:autoScalingGroup:e2e:autoScalingGroupName/{group}"
        ],
        "detail": {
            "LifecycleActionToken": token,
            "AutoScalingGroupName": group,
            "LifecycleHookName": hook,
            "EC2InstanceId": instance_id,
            "LifecycleTransition": TERMINATING,
            "Origin": "AutoScalingGroup",
            "Destination": "EC2",
        },
    }


def asg_terminate_direct(
    instance_id: str, *, token: str = "e2e-token-1", group: str = ASG_GROUP, hook: str = ASG_HOOK
) -> Obj:
    """The notification Auto Scaling sends straight to a hook's SQS target."""
    return {
        "Origin": "AutoScalingGroup",
        "LifecycleHookName": hook,
        "Destination": "EC2",
        "AccountId": ACCOUNT,
        "RequestId": "e2e-request-1",
        "LifecycleTransition": TERMINATING,
        "AutoScalingGroupName": group,
        "Service": "AWS Auto Scaling",
        "Time": datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "EC2InstanceId": instance_id,
        "LifecycleActionToken": token,
    }


def sns_wrapped(inner: Obj, *, topic: str = f"arn:aws:sns:{REGION}:{ACCOUNT}:e2e-asg") -> Obj:
    """``inner`` as an SNS topic delivers it to a subscribed queue (not raw)."""
    return {
        "Type": "Notification",
        "MessageId": "e2e-sns-1",
        "TopicArn": topic,
        "Subject": "Auto Scaling:  Lifecycle action 'TERMINATING'",
        "Message": orjson.dumps(inner).decode(),
        "Timestamp": datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "SignatureVersion": "1",
        "Signature": "e2e",
        "SigningCertURL": "https://sns.us-east-1.amazonaws.com/e2e.pem",
        "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
    }


# --- workloads and endpoints -----------------------------------------------------------------------


def workload(name: str, replicas: int, *, shutdown: float = 0.2, grace: int | None = None) -> Obj:
    """A Deployment in ``default`` whose pods exit ``shutdown`` seconds after SIGTERM."""
    obj = deployment(name, replicas, namespace="default", grace=grace)
    template = obj["spec"]["template"]
    template.setdefault("metadata", {}).setdefault("annotations", {})[SHUTDOWN_SECONDS] = str(shutdown)
    return obj


async def http_get(url: str) -> str:
    def get() -> str:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return bytes(answer.read()).decode()

    return await asyncio.to_thread(get)


def metric_value(text: str, name: str, **labels: str) -> float:
    """The sum of ``name`` samples whose labels include ``labels`` (0 when there is none)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


# --- an Auto Scaling group whose instances are the nodes -------------------------------------------


@asynccontextmanager
async def asg_controller_world(
    aws: MotoServer,
    *workloads: Obj,
    tmp: Path,
    instances: int = 2,
    delivery: str = "eventbridge",
    hook_timeout: int = 300,
) -> AsyncIterator[ControllerWorld]:
    """Like ``controller_world``, with the instances launched by group ``ASG_GROUP`` (tagged managed)
    and its terminate hook ``ASG_HOOK`` delivering to the queue: ``delivery`` is "eventbridge" (a rule
    for aws.autoscaling), "direct" (the hook's notification target is the queue) or "sns" (the target
    is a topic the queue subscribes to). Start an action with ``aws.start_lifecycle_action``."""
    ec2 = aws.client("ec2")
    asg = aws.client("autoscaling")
    ids = auto_scaling_group(aws, ASG_GROUP, desired=instances, max_size=instances + 2, template="e2e-nodes")
    ec2.create_tags(Resources=ids, Tags=[{"Key": MANAGED_TAG, "Value": ""}])
    described = [i for r in ec2.describe_instances(InstanceIds=ids)["Reservations"] for i in r["Instances"]]
    found = sorted(
        (
            Instance(i["InstanceId"], i["PrivateDnsName"], i["Placement"]["AvailabilityZone"])
            for i in described
        ),
        key=lambda inst: inst.instance_id,
    )
    async with settled_world(aws, found, *workloads, tmp=tmp) as world:
        hook: dict[str, Any] = {
            "LifecycleHookName": ASG_HOOK,
            "AutoScalingGroupName": ASG_GROUP,
            "LifecycleTransition": TERMINATING,
            "HeartbeatTimeout": hook_timeout,
            "DefaultResult": "ABANDON",
        }
        if delivery == "eventbridge":
            world.route_events("EC2 Instance-terminate Lifecycle Action", source="aws.autoscaling")
        elif delivery == "direct":
            hook["NotificationTargetARN"] = world.queue_arn()
        elif delivery == "sns":
            sns = aws.client("sns")
            topic = sns.create_topic(Name="e2e-asg")["TopicArn"]
            sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=world.queue_arn())
            hook["NotificationTargetARN"] = topic
        else:
            raise ValueError(f"unknown delivery {delivery!r}")
        if "NotificationTargetARN" in hook:
            hook["RoleARN"] = f"arn:aws:iam::{ACCOUNT}:role/e2e-asg-notify"
        asg.put_lifecycle_hook(**hook)
        yield world


def lifecycle_action(aws: MotoServer, token: str) -> LifecycleAction:
    """The lifecycle action started with ``token``, as moto has it now."""
    return next(a for a in aws.lifecycle_actions() if a.token == token)


async def until_completed(aws: MotoServer, token: str, *, within: float) -> LifecycleAction:
    """Wait until the lifecycle action ``token`` is completed; the action then."""

    async def done() -> LifecycleAction | None:
        action = lifecycle_action(aws, token)
        return action if action.completed_at is not None else None

    found = await until(done, within=within)
    assert found is not None
    return found
