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
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import is_ready, node, until

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
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBESPOT_", "KUBECONFIG", "AWS_"))}
        env.update(self.aws.env())
        env.update(
            {
                "KUBESPOT_KUBECONFIG": str(self.kubesim.kubeconfig_path),
                "KUBESPOT_QUEUE_URL": self.queue_url,
                "KUBESPOT_AWS_ENDPOINT_URL": self.aws.endpoint_url,
                "KUBESPOT_AWS_REGION": "us-east-1",
                "KUBESPOT_QUEUE_WAIT_TIME": "1",
                "KUBESPOT_QUEUE_VISIBILITY_TIMEOUT": "6",
                "KUBESPOT_DRAIN_SAFETY_MARGIN": "0.5",
                "KUBESPOT_DRAIN_RETRY_BACKOFF_BASE": "0.05",
                "KUBESPOT_DRAIN_RETRY_BACKOFF_CAP": "0.3",
                "KUBESPOT_OBSERVABILITY_EMIT_KUBERNETES_EVENTS": "true",
                "KUBESPOT_OBSERVABILITY_JSON_LOGGING": "true",
                "KUBESPOT_OBSERVABILITY_LOG_LEVEL": "debug",
            }
        )
        env.update(extra)
        return env

    async def start_controller(self, **extra: str) -> asyncio.subprocess.Process:
        log_path = self.tmp / f"controller-{len(self.procs)}.log"
        with log_path.open("wb") as log:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kubespot", "controller", env=self.env(**extra), stdout=log, stderr=log
            )
        self.procs.append(proc)
        self.logs.append(log_path)

        async def up() -> bool:
            return proc.returncode is not None or "consuming" in log_path.read_text(errors="replace")

        await until(up, within=30)
        assert proc.returncode is None, log_path.read_text(errors="replace")
        return proc

    def log_text(self, index: int = -1) -> str:
        return self.logs[index].read_text(errors="replace")

    # --- the queue ---------------------------------------------------------------------------------

    def send(self, body: Obj | str) -> None:
        text = body if isinstance(body, str) else orjson.dumps(body).decode()
        self.aws.client("sqs").send_message(QueueUrl=self.queue_url, MessageBody=text)

    def queue_depth(self) -> int:
        attrs = self.aws.client("sqs").get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

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

    def pods_on(self, name: str) -> list[Obj]:
        return [
            p
            for p in self.kubesim.store.list(self._rt("pods"))
            if (p.get("spec") or {}).get("nodeName") == name
            and not any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences") or ())
        ]


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
    nodes = []
    for k, inst in enumerate(found):
        n = node(inst.node_name, unschedulable=k > 0)
        n["spec"]["providerID"] = f"aws:///{inst.zone}/{inst.instance_id}"
        nodes.append(n)
    queue_url = aws.client("sqs").create_queue(QueueName="e2e-interruptions")["QueueUrl"]
    async with KubeSim(objects=[*nodes, *workloads], controllers=FAST) as kubesim:
        world = ControllerWorld(kubesim, aws, queue_url, found, tmp)

        want = sum(int((w.get("spec") or {}).get("replicas") or 0) for w in workloads)

        async def settled() -> bool:
            pods = list(kubesim.store.list(world._rt("pods")))
            return len(pods) >= want and all(is_ready(p) for p in pods)

        await until(settled, within=15)
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
