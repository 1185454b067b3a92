"""The joiner and stopped instances (the Node stays, shut down; back Ready when started again) and
the ephemeral storage its Nodes report (from the volume the kubelet's filesystem is on)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from joiner_world import AMI, World
from userdata_samples import AL2023_MIME, BOTTLEROCKET_TOML

from kubespot.sim.joiner import Ec2Reader, Instance
from kubespot.sim.joiner.capacity import InstanceTypeFacts, resources
from kubespot.sim.kubesim.controllers.kubelet import kubelet_of

Obj = dict[str, Any]
SHUTDOWN = {"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}
GIB_KI = 1024 * 1024


def _shutdown_tainted(node: Obj | None) -> bool:
    return SHUTDOWN in ((node or {}).get("spec") or {}).get("taints", [])


async def test_stopped_instance_keeps_its_node_shut_down_and_comes_back_ready(world: World) -> None:
    """staging/src/k8s.io/cloud-provider/controllers/nodelifecycle/node_lifecycle_controller.go
    ``MonitorNodes``: a not-Ready Node whose instance still exists is not deleted; one whose instance is
    shut down gets ``ShutdownTaint`` (node.cloudprovider.kubernetes.io/shutdown:NoSchedule), which is
    removed once the Node is Ready again. cloud-provider-aws pkg/providers/v1/aws.go
    ``InstanceExistsByProviderID`` (false only when terminated) and ``InstanceShutdownByProviderID``
    (true when stopped). The kubelet stops with the machine: Ready Unknown (pkg/controller/nodelifecycle
    ``tryUpdateNodeHealth``); started again, it posts Ready False, then True."""
    instance = world.launch(AL2023_MIME)
    name, instance_id = instance["PrivateDnsName"], instance["InstanceId"]
    world.joiner()
    await world.until(lambda: world.ready(name) == "True")
    world.ec2.stop_instances(InstanceIds=[instance_id])
    await world.until(lambda: _shutdown_tainted(world.node(name)), within=2.0)
    assert world.ready(name) == "Unknown"
    await asyncio.sleep(0.2)  # several polls: a stopped instance's Node is never deleted
    assert world.node(name) is not None and world.ready(name) == "Unknown"

    readies: list[str | None] = []
    world.sim.store.add_listener(
        lambda ev: (
            readies.append(world.ready(name))
            if ev.rkey == ("", "nodes") and ev.obj["metadata"]["name"] == name
            else None
        )
    )
    world.ec2.start_instances(InstanceIds=[instance_id])
    await world.until(lambda: world.ready(name) == "True" and not _shutdown_tainted(world.node(name)))
    assert "False" in readies  # the kubelet came back NotReady before Ready
    assert kubelet_of(world.sim.controllers).is_running(name)  # heartbeats again: stays Ready


async def test_stopped_then_terminated_instance_node_is_deleted(world: World) -> None:
    """``MonitorNodes`` deletes the Node once ``InstanceExistsByProviderID`` is false (terminated)."""
    instance = world.launch(AL2023_MIME)
    name = instance["PrivateDnsName"]
    world.joiner()
    await world.until(lambda: world.ready(name) == "True")
    world.ec2.stop_instances(InstanceIds=[instance["InstanceId"]])
    await world.until(lambda: _shutdown_tainted(world.node(name)), within=2.0)
    world.ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
    await world.until(lambda: world.node(name) is None, within=2.0)


async def test_ephemeral_storage_is_the_kubelet_volumes_size(world: World) -> None:
    """The kubelet reports the filesystem of its root directory (cAdvisor): on AL2/AL2023 the root
    volume (the instance's RootDeviceName), on Bottlerocket the data volume /dev/xvdb
    (karpenter-provider-aws pkg/providers/amifamily/bottlerocket.go ``EphemeralBlockDevice``); sizes
    from DescribeVolumes. Allocatable less the 10 % nodefs.available threshold and 1 GiB."""
    root = world.launch(AL2023_MIME, volumes={"/dev/sda1": 80})  # moto's AMI's root device
    bottlerocket = world.launch(BOTTLEROCKET_TOML, volumes={"/dev/xvda": 4, "/dev/sda1": 4, "/dev/xvdb": 50})
    world.joiner()
    root_node = await world.until(lambda: world.node(root["PrivateDnsName"]))
    br_node = await world.until(lambda: world.node(bottlerocket["PrivateDnsName"]))
    assert root_node["status"]["capacity"]["ephemeral-storage"] == f"{80 * GIB_KI}Ki"
    assert root_node["status"]["allocatable"]["ephemeral-storage"] == f"{int(80 * GIB_KI * 0.9) - GIB_KI}Ki"
    assert br_node["status"]["capacity"]["ephemeral-storage"] == f"{50 * GIB_KI}Ki"


async def test_volume_size_falls_back_to_the_ami_then_the_default(world: World) -> None:
    """No volume attached at the device: the AMI's block device mapping for it (DescribeImages; moto's
    AMIs map 15 GiB to their root device); an AMI EC2 does not know, or no mapping: None, and the
    Node gets the EKS AMIs' 20 GiB (Karpenter's default root volume, amifamily ``DefaultEBS``)."""
    reader = Ec2Reader(world.aws.endpoint_url, "demo")
    unmapped = Instance("i-1", "running", "m5.large", "us-east-1a", "", "", 0.0, AMI, "/dev/sda1", ())
    assert await reader.volume_gib(unmapped, "/dev/sda1") == 15
    assert await reader.volume_gib(unmapped, "/dev/xvdb") is None
    gone = Instance("i-2", "running", "m5.large", "us-east-1a", "", "", 0.0, "ami-00000000", "/dev/xvda", ())
    assert await reader.volume_gib(gone, "/dev/xvda") is None
    facts = InstanceTypeFacts("m5.large", 2, 8192, "amd64", 3, 10)
    assert resources(facts, None, None)[0]["ephemeral-storage"] == f"{20 * GIB_KI}Ki"


async def test_a_node_deleted_while_stopped_registers_again_on_start(world: World) -> None:
    """pkg/kubelet/kubelet_node_status.go ``registerWithAPIServer``: a kubelet that starts and finds no
    Node of its name creates it (``initialNode``), so an instance started after its Node was deleted
    (by hand, or by a controller) joins again as a new Node, NotReady and then Ready."""
    instance = world.launch(AL2023_MIME)
    name = instance["PrivateDnsName"]
    world.joiner()
    await world.until(lambda: world.ready(name) == "True")
    first_uid = world.node(name)["metadata"]["uid"]  # type: ignore[index]
    world.ec2.stop_instances(InstanceIds=[instance["InstanceId"]])
    await world.until(lambda: _shutdown_tainted(world.node(name)), within=2.0)
    async with aiohttp.ClientSession() as http, http.delete(f"{world.sim.url}/api/v1/nodes/{name}") as r:
        assert r.status == 200, await r.text()
    await world.until(lambda: world.node(name) is None)
    world.ec2.start_instances(InstanceIds=[instance["InstanceId"]])
    await world.until(lambda: world.ready(name) == "True", within=2.0)
    node = world.node(name)
    assert node is not None and node["metadata"]["uid"] != first_uid
    assert not _shutdown_tainted(node)
