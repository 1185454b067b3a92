"""The NodeClaim controller launching through EC2: ``AwsCloud`` over awssim's spot market (CreateFleet,
TerminateInstances), the node joiner playing each instance's kubelet (its Node registered from the
user data, with the unregistered taint), kubesim serving the CRDs (``nodeclaim_world``).

Each test names the kubernetes-sigs/karpenter (core) or aws/karpenter-provider-aws (aws) function
it follows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from nodeclaim_world import CLAIM, Env, conditions, gone, is_, running

from kubespot.aws import AwsClients
from kubespot.aws.cloud import AwsCloud
from kubespot.cloud.unavailable import UnavailableOfferings
from kubespot.config.aws import AwsSettings
from kubespot.model import SystemClock
from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import spot_prices
from kubespot.sim.joiner import Ec2Reader, Joiner, JoinerConfig, KubeWriter
from kubespot.sim.kubesim.testing import until
from support.aws_launch import CLUSTER, SETTINGS, Types, resolved_nodeclass, spot_pins


@pytest.fixture
async def clients(aws_env: MotoServer) -> AsyncIterator[AwsClients]:
    settings = AwsSettings(region=aws_env.region, endpoint_url=aws_env.endpoint_url, max_attempts=1)
    async with AwsClients(settings) as c:
        yield c


@pytest.fixture
async def env(aws_env: MotoServer, clients: AwsClients) -> AsyncIterator[Env]:
    types = Types(aws_env.region)
    unavailable = UnavailableOfferings(SystemClock())
    cloud = AwsCloud(types, clients, launch=SETTINGS, unavailable=unavailable)
    resolved, _ = resolved_nodeclass(aws_env)
    cloud.set_resolved("default", resolved)
    with spot_prices.pin_prices(spot_pins(types)):
        async with running(cloud=cloud, unavailable=unavailable) as e:
            writer = KubeWriter(e.sim.url, timeout=2.0)
            config = JoinerConfig(cluster=CLUSTER, boot_delay=0.0, ready_delay=0.1, poll_interval=0.05)
            joiner = asyncio.ensure_future(
                Joiner(Ec2Reader(aws_env.endpoint_url, CLUSTER), writer, config).run()
            )
            try:
                yield e
            finally:
                joiner.cancel()
                await asyncio.gather(joiner, return_exceptions=True)
                await writer.close()


async def test_a_claim_launched_by_createfleet_joins_turns_ready_and_is_terminated(
    env: Env, aws_env: MotoServer
) -> None:
    """core lifecycle launch.go, registration.go, initialization.go and controller.go finalize over
    aws cloudprovider.go Create (CreateFleet) and Delete (TerminateInstances until the instance is
    shutting down, then NodeClaimNotFound)."""
    await env.create_claim()
    claim = await env.until(CLAIM, is_("Ready", "True"), within=8.0)
    assert claim is not None
    pid = claim["status"]["providerID"]
    instance_id = pid.rsplit("/", 1)[1]
    assert pid == f"aws:///{aws_env.region}a/{instance_id}"  # the cheapest spot pool: c5.large in a
    assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "c5.large"
    assert claim["status"]["capacity"]["cpu"] == "2"
    node_name = claim["status"]["nodeName"]
    node = await env.get(f"/api/v1/nodes/{node_name}")
    assert node is not None and node["spec"]["providerID"] == pid
    assert node["metadata"]["labels"]["karpenter.sh/initialized"] == "true"
    assert all(t["key"] != "karpenter.sh/unregistered" for t in node["spec"].get("taints") or [])
    assert {c: conditions(claim)[c]["status"] for c in ("Launched", "Registered", "Initialized")} == {
        "Launched": "True",
        "Registered": "True",
        "Initialized": "True",
    }
    ec2 = aws_env.client("ec2")
    (reservation,) = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    tags = {t["Key"]: t["Value"] for t in reservation["Instances"][0]["Tags"]}
    assert tags["karpenter.sh/nodeclaim"] == "general-abc"

    await env.call("DELETE", CLAIM)
    await env.until(CLAIM, gone, within=8.0)
    assert await env.get(f"/api/v1/nodes/{node_name}") is None
    (reservation,) = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    assert reservation["Instances"][0]["State"]["Name"] in ("shutting-down", "terminated")


async def test_a_restart_after_a_lost_status_write_launches_nothing_more(
    env: Env, aws_env: MotoServer
) -> None:
    """Deliberate difference (docs/designs/launching.md §3): Karpenter's launch.go keeps a launch
    in memory only and aws garbagecollection/controller.go terminates the instance 30 s later; here
    the instance tagged ``karpenter.sh/nodeclaim`` at launch is found again after a restart
    (``cloud.list``, aws instance.go List's filters) and no second CreateFleet is sent."""
    ec2 = aws_env.client("ec2")

    async def tagged() -> list[str]:
        found = ec2.describe_instances(
            Filters=[
                {"Name": "tag:karpenter.sh/nodeclaim", "Values": ["general-abc"]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )["Reservations"]
        return [i["InstanceId"] for r in found for i in r["Instances"]]

    rule = env.sim.faults.add(verb="update", path="nodeclaims/.*/status", error_code=500, error_rate=1.0)
    await env.create_claim()
    (launched,) = await until(tagged, within=5.0)
    await env.stop_loop()  # the operator dies between CreateFleet and the status write
    env.sim.faults.remove(rule.id)
    creates: list[str] = []
    real_create = env.cloud.create

    async def counted(spec: Any) -> Any:
        creates.append(spec.name)
        return await real_create(spec)

    env.cloud.create = counted
    env.start_loop()
    claim = await env.until(CLAIM, is_("Launched", "True"), within=5.0)
    assert claim is not None and claim["status"]["providerID"].endswith(f"/{launched}")
    assert await tagged() == [launched]
    assert creates == []  # taken from the cloud's list at start, not even asked to launch
    # With its type's facts, as a launch writes them.
    assert claim["status"]["capacity"]["cpu"] == "2"
    assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "c5.large"
