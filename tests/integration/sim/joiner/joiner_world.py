"""The node joiner's test world: moto (the session's server, reset) + a kubesim on fast timings.

``World`` holds: an EC2 client on moto, a running kubesim (scheduler, kubelets and node
lifecycle on the sub-second timings of tests/integration/sim/kubesim/conftest.py), and ``joiner(...)``,
which starts a ``Joiner`` on both (polling every 50 ms) for the rest of the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

from kubespot.sim.awssim import MotoServer
from kubespot.sim.joiner import Ec2Reader, Joiner, JoinerConfig, KubeWriter
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.testing import condition, until

Obj = dict[str, Any]
CLUSTER = "demo"
AMI = "ami-12c6146b"  # one of moto's built-in AMIs


class World:
    def __init__(self, aws: MotoServer, sim: KubeSim) -> None:
        self.aws = aws
        self.sim = sim
        self.ec2 = aws.client("ec2")
        self._tasks: list[asyncio.Task[None]] = []
        self._writers: list[KubeWriter] = []

    def launch(
        self,
        user_data: str | bytes | None = None,
        *,
        instance_type: str = "m5.large",
        tags: dict[str, str] | None = None,
        zone: str | None = None,
        volumes: dict[str, int] | None = None,
    ) -> Obj:
        """RunInstances as Karpenter's CreateFleet would leave the instance: tagged for the cluster;
        ``volumes``: device name -> GiB, the launch template's block device mappings."""
        tags = {f"kubernetes.io/cluster/{CLUSTER}": "owned"} if tags is None else tags
        args: Obj = {
            "ImageId": AMI,
            "MinCount": 1,
            "MaxCount": 1,
            "InstanceType": instance_type,
            "TagSpecifications": [
                {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
            ],
        }
        if user_data is not None:
            args["UserData"] = user_data  # boto3 base64-encodes RunInstances' UserData itself
        if zone is not None:
            args["Placement"] = {"AvailabilityZone": zone}
        if volumes:
            args["BlockDeviceMappings"] = [
                {"DeviceName": device, "Ebs": {"VolumeSize": size, "VolumeType": "gp3"}}
                for device, size in volumes.items()
            ]
        instance: Obj = self.ec2.run_instances(**args)["Instances"][0]
        return instance

    def joiner(self, *, kube_timeout: float = 2.0, ec2: Ec2Reader | None = None, **changes: Any) -> Joiner:
        """A joiner (boot 0 s, Ready 0.1 s later, polls every 50 ms, a vanished machine's Node
        Unknown and deleted at once unless changed) running until the end. The node lifecycle
        timings default to upstream's 50 s and 5 s; these tests study other things, and those that
        study the timings set them (scaled)."""
        fast = JoinerConfig(
            cluster=CLUSTER,
            boot_delay=0.0,
            ready_delay=0.1,
            poll_interval=0.05,
            node_monitor_grace=0.0,
            node_monitor_period=0.0,
        )
        config = dataclasses.replace(fast, **changes)
        kube = KubeWriter(self.sim.url, timeout=kube_timeout)
        self._writers.append(kube)
        joiner = Joiner(ec2 or Ec2Reader(self.aws.endpoint_url, CLUSTER), kube, config)
        self._tasks.append(asyncio.ensure_future(joiner.run()))
        return joiner

    def node(self, name: str) -> Obj | None:
        rt = self.sim.store.registry.lookup("", "v1", "nodes")
        return self.sim.store.find(rt, None, name)  # type: ignore[arg-type]

    def ready(self, name: str) -> str | None:
        return (condition(self.node(name), "Ready") or {}).get("status")

    async def until(self, predicate: Callable[[], Any], within: float = 5.0) -> Any:
        async def probe() -> Any:
            return predicate()

        return await until(probe, within=within, interval=0.02)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for writer in self._writers:
            await writer.close()
