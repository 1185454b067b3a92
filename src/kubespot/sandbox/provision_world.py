"""The provisioning world: a cluster with no nodes, an EC2 spot market, and a real controller that
launches capacity for it. Used by ``kubespot sandbox --scenario provision`` and by
``benchmarks/provision_loop.py``.

Owns building that world and taking it down again, nothing about what happens in it:

- kubesim (scheduler on, no nodes unless ``existing_nodes`` asks for synthetic ones) with the
  chart's Karpenter CRDs, an ``EC2NodeClass`` and two
  NodePools: ``general`` (spot and on-demand) and ``on-demand`` (on-demand only, tainted
  ``dedicated=database:NoSchedule`` so that only the database lands there);
- awssim's ``MotoServer`` (in this process, on a thread) with its spot market: a VPC with one subnet
  per zone in three zones and a security group, tagged for ``karpenter.sh/discovery``, an instance
  profile, and the interruption queue and its EventBridge rules as ``kubespot aws bootstrap``
  creates them (the same function does it);
- the node joiner (in this process): each running instance tagged for the cluster becomes a Node
  after a (scaled) boot delay and goes away when the instance terminates, on upstream's node
  lifecycle timings (scaled): Ready Unknown after the node monitor grace, deleted at the cloud node
  lifecycle controller's next pass;
- one ``kubespot controller`` process with ``provisioning.enabled``, the queue, the cluster's name,
  endpoint and service CIDR, short batch windows and the launch settings the caller passes.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from kubespot.aws.bootstrap import Clients, Request, bootstrap
from kubespot.sim.awssim import MotoServer
from kubespot.sim.joiner import Ec2Reader, Joiner, JoinerConfig, KubeWriter
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig

from .cluster import controller_config
from .processes import AgentProcess
from .timing import Timing, num

Obj = dict[str, Any]

CLUSTER = "kubespot-sandbox"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
SERVICE_CIDR = "10.100.0.0/16"
#: The cluster CA nodes are told (base64 PEM, as DescribeCluster returns it; nothing checks it here).
SANDBOX_CA_BUNDLE = base64.b64encode(
    b"-----BEGIN CERTIFICATE-----\nkubespot-sandbox\n-----END CERTIFICATE-----\n"
).decode()
INSTANCE_PROFILE = "KubespotSandboxNodeProfile"
#: The types both NodePools may launch: a short list keeps the catalog, the simulation and the
#: market's pools few, and the sizes differ enough for the bin packing to choose.
INSTANCE_TYPES = ("m5.large", "m5.xlarge", "m5.2xlarge", "c5.xlarge", "c5.2xlarge", "r5.xlarge", "r5.2xlarge")
GENERAL_POOL = "general"
ON_DEMAND_POOL = "on-demand"
#: The on-demand pool's taint: only pods that tolerate it (the database) go there.
DEDICATED_TAINT = {"key": "dedicated", "value": "database", "effect": "NoSchedule"}
#: Real-world seconds from LaunchTime to the kubelet's registration and on to Ready (an AL2023 EKS
#: node typically registers 30-40 s after launch).
BOOT_SECONDS = 35.0
READY_SECONDS = 5.0
#: The batch windows (Karpenter: idle 1 s, max 10 s), real seconds: not scaled, they are the
#: provisioner's own pace and scaling them would only make the batches smaller.
BATCH_IDLE = 1.0
BATCH_MAX = 10.0
#: Karpenter's unavailable-offerings cache (3 minutes), on the story's clock.
UNAVAILABLE_TTL_SECONDS = 180.0
CRDS = Path(__file__).resolve().parents[3] / "deploy" / "helm" / "kubespot" / "crds"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CONTROLLER_START_TIMEOUT = 60.0


class WorldError(Exception):
    """The world could not be built (not a verdict)."""


def _crd_dir() -> Path:
    """The chart's CRDs: beside the sources in a checkout, else in the installed package's share."""
    if CRDS.is_dir():
        return CRDS
    raise WorldError(f"the chart's CRDs are not at {CRDS} (run from a checkout of kubespot)")


def kube_config(t: Timing) -> ControllerConfig:
    """kubesim's controllers on the story's clock (the other scenarios' timings,
    ``cluster.controller_config``); Nodes become Ready when the joiner says so (its ready-seconds
    annotation), after ``READY_SECONDS`` on that clock otherwise."""
    return replace(controller_config(t), node_ready_seconds=t.s(READY_SECONDS))


def nodeclass(name: str = "default", *, user_data: str | None = None) -> Obj:
    """The world's EC2NodeClass (AL2023, the discovery-tagged subnets and group); ``user_data``
    becomes its ``spec.userData``, merged into what the controller renders."""
    discovery = [{"tags": {"karpenter.sh/discovery": CLUSTER}}]
    spec: Obj = {
        "subnetSelectorTerms": discovery,
        "securityGroupSelectorTerms": discovery,
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        # An existing instance profile (a role would also do: the controller makes its profile).
        "instanceProfile": INSTANCE_PROFILE,
    }
    if user_data is not None:
        spec["userData"] = user_data
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def nodepool(
    name: str,
    capacity_types: list[str],
    *,
    taints: list[Obj] | None = None,
    weight: int = 0,
    instance_types: tuple[str, ...] = INSTANCE_TYPES,
    cpu_limit: str = "2000",
    labels: Mapping[str, str] | None = None,
    node_class: str = "default",
) -> Obj:
    spec: Obj = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class},
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity_types},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(instance_types)},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(ZONES)},
        ],
    }
    if taints:
        spec["taints"] = taints
    pool: Obj = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"spec": spec}, "limits": {"cpu": cpu_limit}},
    }
    if labels:
        pool["spec"]["template"]["metadata"] = {"labels": dict(labels)}
    if weight:
        pool["spec"]["weight"] = weight
    return pool


@dataclass
class ProvisionWorld:
    """One world (module docstring). ``start()``, then ``start_controller(env)``; ``stop()`` always."""

    workdir: Path
    timing: Timing
    aws: MotoServer
    kubesim: KubeSim | None = None
    queue_url: str = ""
    controller: AgentProcess | None = None
    joiner: Joiner | None = None
    _joiner_task: asyncio.Task[None] | None = None
    _writer: KubeWriter | None = None
    _http: aiohttp.ClientSession | None = None
    subnets: dict[str, str] = field(default_factory=dict)
    #: The types the NodePools allow (the benchmark adds larger ones for its thousands of pods).
    instance_types: tuple[str, ...] = INSTANCE_TYPES
    #: The NodePools to create (None: ``general`` and ``on-demand``; the end-to-end tests bring
    #: their own, one set per test, and may start with none).
    nodepools: tuple[Obj, ...] | None = None
    #: Synthetic nodes (and pods on each) kubesim starts with, not the provisioner's (the
    #: benchmark's API-load figure for a big cluster).
    existing_nodes: int = 0
    existing_pods_per_node: int = 0

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def api_url(self) -> str:
        assert self.kubesim is not None
        return self.kubesim.url

    async def start(self) -> None:
        """kubesim with the CRDs and pools, the AWS side, the joiner (the controller comes apart)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        t = self.timing
        self.kubesim = KubeSim(
            controllers=kube_config(t),
            kubeconfig_path=self.kubeconfig,
            nodes=self.existing_nodes,
            pods_per_node=self.existing_pods_per_node,
        )
        await self.kubesim.start()
        self._http = aiohttp.ClientSession(base_url=self.kubesim.url)
        for path in sorted(_crd_dir().glob("*.yaml")):
            await self.create(CRD_PATH, yaml.safe_load(path.read_text()))
        await self.create("/apis/karpenter.k8s.aws/v1/ec2nodeclasses", nodeclass())
        for pool in self.default_nodepools() if self.nodepools is None else self.nodepools:
            await self.create("/apis/karpenter.sh/v1/nodepools", pool)
        await asyncio.to_thread(self._aws_side)
        self._writer = KubeWriter(self.kubesim.url)
        self.joiner = Joiner(
            Ec2Reader(self.aws.endpoint_url, CLUSTER),
            self._writer,
            JoinerConfig(
                cluster=CLUSTER,
                boot_delay=t.s(BOOT_SECONDS),
                ready_delay=t.s(READY_SECONDS),
                poll_interval=0.25,
                concurrency=32,
                # Upstream's node lifecycle timings on the story's clock, as kubesim's own node
                # lifecycle controller gets them (``kube_config``): a terminated instance's Node stays
                # Ready through the grace, then goes Unknown and is deleted at the cloud node
                # lifecycle controller's next pass.
                node_monitor_grace=t.node_monitor_grace,
                node_monitor_period=t.node_monitor_period,
            ),
        )
        self._joiner_task = asyncio.ensure_future(self.joiner.run())

    def default_nodepools(self) -> tuple[Obj, ...]:
        """``general`` (spot and on-demand, weight 10) and ``on-demand`` (tainted for the database)."""
        return (
            nodepool(GENERAL_POOL, ["spot", "on-demand"], weight=10, instance_types=self.instance_types),
            nodepool(
                ON_DEMAND_POOL, ["on-demand"], taints=[DEDICATED_TAINT], instance_types=self.instance_types
            ),
        )

    def _aws_side(self) -> None:
        """VPC, subnets, security group, instance profile, queue and rules (moto, blocking calls)."""
        aws = self.aws
        aws.set_market_time_scale(1.0 / self.timing.scale)
        ec2 = aws.client("ec2")
        discovery: Any = [{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        for i, zone in enumerate(ZONES):
            subnet = ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i * 64}.0/18", AvailabilityZone=zone)
            self.subnets[zone] = subnet["Subnet"]["SubnetId"]
        ec2.create_tags(Resources=list(self.subnets.values()), Tags=discovery)
        group = ec2.create_security_group(GroupName=f"{CLUSTER}-nodes", Description="nodes", VpcId=vpc)
        ec2.create_tags(Resources=[group["GroupId"]], Tags=discovery)
        iam = aws.client("iam")
        with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
            iam.create_instance_profile(InstanceProfileName=INSTANCE_PROFILE)
        # What `kubespot aws bootstrap` creates, by the same code, with the simulated account's keys.
        outcome = bootstrap(
            Request(cluster=CLUSTER), Clients(sqs=aws.client("sqs"), events=aws.client("events"))
        )
        assert outcome.queue_url is not None
        self.queue_url = outcome.queue_url

    async def create(self, path: str, body: Obj) -> Obj:
        assert self._http is not None
        async with self._http.post(path, json=body) as r:
            if r.status not in (200, 201):
                raise WorldError(f"POST {path}: {r.status} {await r.text()}")
            return dict(await r.json())

    async def get(self, path: str) -> Obj:
        assert self._http is not None
        async with self._http.get(path) as r:
            if r.status != 200:
                raise WorldError(f"GET {path}: {r.status} {await r.text()}")
            return dict(await r.json())

    async def patch(self, path: str, body: Obj) -> Obj:
        assert self._http is not None
        headers = {"Content-Type": "application/merge-patch+json"}
        async with self._http.patch(path, json=body, headers=headers) as r:
            if r.status != 200:
                raise WorldError(f"PATCH {path}: {r.status} {await r.text()}")
            return dict(await r.json())

    async def delete(self, path: str) -> None:
        assert self._http is not None
        async with self._http.delete(path) as r:
            if r.status not in (200, 202):
                raise WorldError(f"DELETE {path}: {r.status} {await r.text()}")

    def controller_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        t = self.timing
        return {
            **self.aws.env(),
            "KUBESPOT_KUBECONFIG": str(self.kubeconfig),
            "KUBESPOT_AWS_ENDPOINT_URL": self.aws.endpoint_url,
            "KUBESPOT_AWS_REGION": self.aws.region,
            "KUBESPOT_QUEUE_URL": self.queue_url,
            # queue.check_tag_before_draining stays on (the default): the provisioner's instances
            # carry no NTH managed tag but a NodePool tag and this cluster's, which count as managed.
            "KUBESPOT_PROVISIONING_ENABLED": "true",
            "KUBESPOT_PROVISIONING_KUBERNETES_VERSION": "1.32",
            "KUBESPOT_CLUSTER_NAME": CLUSTER,
            "KUBESPOT_CLUSTER_ENDPOINT": self.api_url,
            "KUBESPOT_CLUSTER_CIDR": SERVICE_CIDR,
            # What EKS's DescribeCluster would give once: moto has no such cluster, and without it
            # every launch asks again (a round trip before each CreateFleet that EKS never costs).
            "KUBESPOT_CLUSTER_CA_BUNDLE": SANDBOX_CA_BUNDLE,
            "KUBESPOT_LAUNCH_BATCH_IDLE_DURATION": num(BATCH_IDLE),
            "KUBESPOT_LAUNCH_BATCH_MAX_DURATION": num(BATCH_MAX),
            # Karpenter's 3 minutes, on the story's clock like the reclaim's two.
            "KUBESPOT_LAUNCH_UNAVAILABLE_OFFERINGS_TTL": num(t.s(UNAVAILABLE_TTL_SECONDS)),
            "KUBESPOT_LAUNCH_SPOT_RISK_HALF_LIFE": num(t.s(3600.0)),
            # The client's 50 requests/s are a rate of the story: compressed like its durations, or a
            # reclaim of a dozen nodes could not be drained inside the scaled two-minute notice.
            "KUBESPOT_KUBE_API_QPS": num(50.0 * t.scale),
            # The market terminates a warned instance two minutes scaled after the warning: the
            # queue processor's deadline (the warning's time plus the notice) must say the same.
            **t.queue_env(),
            "KUBESPOT_LEADER_ELECTION_ENABLED": "false",
            "KUBESPOT_OBSERVABILITY_EMIT_KUBERNETES_EVENTS": "true",
            "KUBESPOT_OBSERVABILITY_JSON_LOGGING": "true",
            "KUBESPOT_OBSERVABILITY_LOG_LEVEL": "info",
            **(extra or {}),
        }

    async def start_controller(self, extra: Mapping[str, str] | None = None) -> AgentProcess:
        """The controller process; returns once its provisioner has written the status of every
        NodePool and EC2NodeClass (Ready)."""
        proc = self.controller = AgentProcess(
            node="controller",
            env=self.controller_env(extra),
            log_path=self.workdir / "controller.log",
            role="controller",
            drop_env=("AWS_", "KUBESPOT_"),
        )
        await proc.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONTROLLER_START_TIMEOUT
        while loop.time() < deadline:
            if not proc.running:
                raise WorldError(f"the controller exited at start; its log:\n{proc.log_tail()}")
            classes = (await self.get("/apis/karpenter.k8s.aws/v1/ec2nodeclasses"))["items"]
            pools = (await self.get("/apis/karpenter.sh/v1/nodepools"))["items"]
            if all(ready(c) for c in classes) and all(ready(p) for p in pools):
                return proc
            await asyncio.sleep(0.2)
        raise WorldError(
            f"the NodePools or EC2NodeClasses were not Ready {CONTROLLER_START_TIMEOUT:.0f}s after the "
            "controller started; "
            f"its log:\n{proc.log_tail()}"
        )

    async def stop(self) -> None:
        if self.controller is not None:
            await self.controller.stop()
        if self._joiner_task is not None:
            self._joiner_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._joiner_task
        if self._writer is not None:
            await self._writer.close()
        if self._http is not None:
            await self._http.close()
        if self.kubesim is not None:
            await self.kubesim.stop()


def ready(obj: Obj) -> bool:
    """Whether a NodePool or EC2NodeClass has the Ready condition True (the controller wrote it)."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def exhaust_spot(aws: MotoServer) -> None:
    """The spot market runs dry: every spot pool keeps the instances it runs and has no room left
    (new pools included), so the next spot launches answer insufficient capacity."""
    pools = (await asyncio.to_thread(aws.pool_stats))["Pools"]
    await asyncio.to_thread(aws.set_pool_capacity, 0, capacity_type="spot")
    for p in pools:
        if p["CapacityType"] == "spot" and p["Used"]:
            await asyncio.to_thread(
                aws.set_pool_capacity,
                p["Used"],
                capacity_type="spot",
                instance_type=p["InstanceType"],
                zone=p["AvailabilityZone"],
            )
