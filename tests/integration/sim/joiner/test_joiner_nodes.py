"""The joiner over the wire: moto's instances become kubesim Nodes, turn Ready and go away."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import aiohttp
import pytest
from botocore.exceptions import EndpointConnectionError
from joiner_world import CLUSTER, World
from userdata_samples import AL2_SCRIPT, AL2023_MIME, BOTTLEROCKET_TOML

from kubespot.sim.joiner import Ec2Reader, Instance, Joiner, JoinerConfig, KubeWriter
from kubespot.sim.kubesim.testing import condition
from kubespot.sim.kubesim.testing import node as node_body

Obj = dict[str, Any]
SHUTDOWN = {"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}


def _taints(node: Obj | None) -> list[Obj]:
    return [
        t for t in ((node or {}).get("spec") or {}).get("taints") or [] if not t["key"].startswith("node.")
    ]


async def test_al2023_instance_registers_as_kubelet_would(world: World) -> None:
    """pkg/kubelet/kubelet_node_status.go ``initialNode``: hostname/os/arch labels and their beta
    twins, ``--node-labels`` over them, ``registerWithTaints`` (Karpenter's
    ``karpenter.sh/unregistered:NoExecute`` kept), providerID; the instance-type/zone/region labels
    and beta twins of the cloud node controller (cloud-provider controllers/node ``syncNode``);
    capacity from DescribeInstanceTypes with the user data's maxPods; name = PrivateDnsName (EKS)."""
    instance = world.launch(AL2023_MIME, instance_type="m6g.large", zone="us-east-1b")
    world.joiner()
    name = instance["PrivateDnsName"]
    node = await world.until(lambda: world.node(name))
    labels = node["metadata"]["labels"]
    assert {k: labels[k] for k in labels if not k.startswith("kubesim.")} == {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "arm64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "arm64",
        "node.kubernetes.io/instance-type": "m6g.large",
        "beta.kubernetes.io/instance-type": "m6g.large",
        "topology.kubernetes.io/zone": "us-east-1b",
        "failure-domain.beta.kubernetes.io/zone": "us-east-1b",
        "topology.kubernetes.io/region": "us-east-1",
        "failure-domain.beta.kubernetes.io/region": "us-east-1",
        "karpenter.sh/capacity-type": "spot",
        "karpenter.sh/do-not-sync-taints": "true",
        "karpenter.sh/nodepool": "default",
        "team": "checkout",
    }
    assert node["spec"]["providerID"] == f"aws:///us-east-1b/{instance['InstanceId']}"
    assert _taints(node) == [
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
        {"key": "dedicated", "value": "payments", "effect": "NoSchedule"},
    ]
    status = node["status"]
    assert (status["capacity"]["cpu"], status["capacity"]["pods"], status["allocatable"]["pods"]) == (
        "2",
        "17",
        "17",
    )
    assert status["nodeInfo"]["architecture"] == "arm64"
    assert {"type": "InternalIP", "address": instance["PrivateIpAddress"]} in status["addresses"]


async def test_al2_and_bottlerocket_and_the_eks_cluster_tag(world: World) -> None:
    """Both families' labels and taints; instances tagged only ``eks:eks-cluster-name`` are the
    cluster's too (aws:pkg/providers/instance/instance.go ``List`` filters on it since v1.1)."""
    al2 = world.launch(AL2_SCRIPT)
    br = world.launch(BOTTLEROCKET_TOML, tags={"eks:eks-cluster-name": CLUSTER})
    other = world.launch(AL2_SCRIPT, tags={"eks:eks-cluster-name": "someone-else"})
    world.joiner()
    al2_node = await world.until(lambda: world.node(al2["PrivateDnsName"]))
    br_node = await world.until(lambda: world.node(br["PrivateDnsName"]))
    assert al2_node["metadata"]["labels"]["karpenter.sh/nodepool"] == "db"
    assert _taints(al2_node) == [
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
        {"key": "db", "value": "only", "effect": "NoSchedule"},
    ]
    assert al2_node["status"]["capacity"]["pods"] == "20"
    assert br_node["metadata"]["labels"]["karpenter.sh/nodepool"] == "br"
    assert {"key": "karpenter.sh/unregistered", "effect": "NoExecute"} in _taints(br_node)
    assert br_node["status"]["capacity"]["pods"] == "11"
    await asyncio.sleep(0.2)  # a few more polls: the other cluster's instance never joins this one
    assert world.node(other["PrivateDnsName"]) is None


@pytest.mark.parametrize("kubelet", [True, False], ids=["kubesim-kubelet", "joiner-alone"])
async def test_ready_after_ready_delay(world_with: Any, kubelet: bool) -> None:
    """Registered Ready False (``KubeletNotReady``, the CNI not up), Ready True ``ready_delay`` later,
    whether kubesim's kubelet also plays the node (it reads the joiner's ready-seconds annotation)
    or not (the joiner posts it)."""
    async with world_with(kubelet=kubelet) as world:
        instance = world.launch(AL2023_MIME)
        name = instance["PrivateDnsName"]
        joiner = world.joiner(ready_delay=0.8)
        await world.until(lambda: world.node(name))
        registered = joiner.registered_at(instance["InstanceId"])
        assert registered is not None
        conditions = world.node(name)["status"]["conditions"]  # type: ignore[index]
        assert [c["reason"] for c in conditions if c["type"] == "Ready"] == ["KubeletNotReady"]
        await asyncio.sleep(max(0.0, registered + 0.4 - time.time()))
        assert world.ready(name) == "False"  # kubesim's 0.05 s node_ready_seconds does not apply
        await world.until(lambda: world.ready(name) == "True")
        assert time.time() - registered >= 0.8


async def test_boot_delay_counts_from_launch_time(world: World) -> None:
    """No Node before LaunchTime + boot_delay (EC2 reports LaunchTime to the second), one soon after."""
    instance = world.launch(AL2023_MIME)
    launched = instance["LaunchTime"].timestamp()
    joiner = world.joiner(boot_delay=1.2)
    name = instance["PrivateDnsName"]
    while time.time() < launched + 1.1:
        assert world.node(name) is None
        await asyncio.sleep(0.05)
    await world.until(lambda: world.node(name), within=2.0)
    registered = joiner.registered_at(instance["InstanceId"])
    assert registered is not None and registered - launched >= 1.2


def test_jitter_is_seeded_per_instance() -> None:
    """Boot time = boot_delay + a jitter drawn per (seed, instance id): reproducible, in range."""

    def boot_times(seed: int) -> list[float]:
        joiner = Joiner(None, None, JoinerConfig(cluster=CLUSTER, boot_delay=2.0, jitter=1.0, seed=seed))  # type: ignore[arg-type]
        return [joiner.boot_time(f"i-{n:017x}") for n in range(20)]

    assert boot_times(7) == boot_times(7)
    assert boot_times(7) != boot_times(8)
    assert all(2.0 <= t <= 3.0 for t in boot_times(7))
    assert len(set(boot_times(7))) == 20


async def test_terminated_instance_node_goes_not_ready_then_deleted(world: World) -> None:
    """The kubelet of a terminating instance stops (kubesim's heartbeats stop), the node is marked Ready
    Unknown (``NodeStatusUnknown``, pkg/controller/nodelifecycle ``tryUpdateNodeHealth``), and once
    the instance is terminated the Node is deleted (cloud-provider controllers/nodelifecycle
    ``MonitorNodes``: not Ready and the instance gone)."""
    instance = world.launch(AL2023_MIME)
    name = instance["PrivateDnsName"]
    world.joiner()
    await world.until(lambda: world.ready(name) == "True")
    states: list[str | None] = []
    world.sim.store.add_listener(
        lambda ev: (
            states.append((ev.type, world.ready(name) if ev.type != "DELETED" else None))  # type: ignore[arg-type]
            if ev.rkey == ("", "nodes") and ev.obj["metadata"]["name"] == name
            else None
        )
    )
    world.ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
    await world.until(lambda: world.node(name) is None, within=2.0)
    assert ("MODIFIED", "Unknown") in states and states[-1] == ("DELETED", None)


async def test_a_terminated_instance_node_stays_ready_through_the_grace_then_goes(world_with: Any) -> None:
    """review 15c #6. pkg/controller/nodelifecycle ``tryUpdateNodeHealth``: heartbeats that stop
    turn Ready Unknown only after ``--node-monitor-grace-period`` (50 s from v1.32, scaled here to
    1.5 s: wide enough that a busy machine still looks within it); cloud-provider
    controllers/nodelifecycle ``MonitorNodes`` skips a Ready Node, so the Node of a terminated
    instance stays until then and is deleted after. ``MonitorNodes`` reads Ready from the Node,
    whoever wrote it: kubesim's own node lifecycle controller is kept out of the way (its fast
    0.6 s grace would write Unknown first), so the joiner's grace is the one studied."""
    async with world_with(node_monitor_grace_seconds=600.0) as world:
        instance = world.launch(AL2023_MIME)
        name = instance["PrivateDnsName"]
        world.joiner(node_monitor_grace=1.5)
        await world.until(lambda: world.ready(name) == "True")
        world.ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
        started = time.monotonic()
        await asyncio.sleep(0.25)
        assert world.ready(name) == "True"  # within the grace: nobody has judged it yet
        await world.until(lambda: world.node(name) is None, within=8.0)
        assert time.monotonic() - started >= 1.5


async def test_a_kept_node_is_left_to_the_test_and_forgotten_once_deleted(world: World) -> None:
    """``keep_node``: a test plays a cloud node lifecycle controller slower than the collector it
    studies; the Node goes Ready Unknown (``tryUpdateNodeHealth``) but is not deleted by the joiner,
    and once someone else deletes it the joiner forgets the instance."""
    instance = world.launch(AL2023_MIME)
    name = instance["PrivateDnsName"]
    joiner = world.joiner()
    await world.until(lambda: world.ready(name) == "True")
    joiner.keep_node(instance["InstanceId"])
    world.ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
    await world.until(lambda: world.ready(name) == "Unknown", within=2.0)
    went = (condition(world.node(name), "Ready") or {}).get("lastTransitionTime")
    await asyncio.sleep(1.2)  # several polls, across a second boundary
    assert world.node(name) is not None
    # Written once: tryUpdateNodeHealth moves lastTransitionTime only when the status changes.
    assert (condition(world.node(name), "Ready") or {}).get("lastTransitionTime") == went
    rt = world.sim.store.registry.lookup("", "v1", "nodes")
    assert rt is not None
    world.sim.store.delete(rt, None, name, grace_period_seconds=0)
    await world.until(lambda: joiner.registered_at(instance["InstanceId"]) is None, within=2.0)
    assert world.node(name) is None


async def test_restricted_labels_keep_the_kubelet_from_starting(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """cmd/kubelet/app/options/options.go ``ValidateKubeletFlags``: a ``node-role.kubernetes.io`` label
    in ``--node-labels`` fails the kubelet's start, so no Node ever registers (the NodeRestriction
    admission plugin would refuse it too); the instance's neighbour joins."""
    bad = AL2023_MIME.replace("team=payments", "node-role.kubernetes.io/worker=")
    refused = world.launch(bad)
    fine = world.launch(AL2023_MIME)
    with caplog.at_level(logging.WARNING, logger="kubespot.sim.joiner"):
        joiner = world.joiner()
        await world.until(lambda: world.node(fine["PrivateDnsName"]))
        await world.until(lambda: joiner.refusal(refused["InstanceId"]))
        await asyncio.sleep(0.2)
    assert world.node(refused["PrivateDnsName"]) is None
    assert "[node-role.kubernetes.io/worker]" in joiner.refusal(refused["InstanceId"])
    assert any("refuses to start" in r.getMessage() for r in caplog.records)


async def test_unparseable_user_data_registers_without_extras(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """User data of no known family: the Node joins with the kubelet's own labels only, and it is logged."""
    instance = world.launch("#cloud-config\nruncmd: [echo hi]\nthis is: [not closed\n")
    with caplog.at_level(logging.WARNING, logger="kubespot.sim.joiner"):
        world.joiner()
        node = await world.until(lambda: world.node(instance["PrivateDnsName"]))
    assert not _taints(node)
    assert not [k for k in node["metadata"]["labels"] if k.startswith("karpenter.sh/") or k == "team"]
    assert any(
        instance["InstanceId"] in r.getMessage() and "without extra labels" in r.getMessage()
        for r in caplog.records
    )


async def test_kube_errors_and_timeouts_are_retried(
    world_with: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Node creation answered 500 twice, then the Ready patch slower than the client's timeout: the
    joiner logs each, retries on later polls, and the Node ends Ready (kubesim's kubelet off, so
    Ready is the joiner's own write)."""
    async with world_with(kubelet=False) as world:
        world.sim.faults.add("verb=create,resource=nodes,rate=1,code=500,count=2")
        world.sim.faults.add("verb=patch,resource=nodes/status,latency=800,count=1")
        instance = world.launch(AL2023_MIME)
        name = instance["PrivateDnsName"]
        with caplog.at_level(logging.WARNING, logger="kubespot.sim.joiner"):
            world.joiner(kube_timeout=0.3)
            await world.until(lambda: world.ready(name) == "True", within=4.0)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("HTTP 500: create node" in m for m in messages) == 2
    assert any("TimeoutError" in m and "/status" in m for m in messages), messages


async def test_ec2_errors_are_retried(world: World, caplog: pytest.LogCaptureFixture) -> None:
    """DescribeInstances failing (an unreachable endpoint) skips the poll; the next one registers."""
    reader = Ec2Reader(world.aws.endpoint_url, CLUSTER)
    failures = [2]
    real = reader.instances

    async def flaky() -> dict[str, Instance]:
        if failures[0]:
            failures[0] -= 1
            raise EndpointConnectionError(endpoint_url=world.aws.endpoint_url)
        return await real()

    reader.instances = flaky  # type: ignore[method-assign]
    instance = world.launch(AL2023_MIME)
    with caplog.at_level(logging.WARNING, logger="kubespot.sim.joiner"):
        world.joiner(ec2=reader)
        await world.until(lambda: world.node(instance["PrivateDnsName"]))
    assert failures == [0]
    assert sum("DescribeInstances failed" in r.getMessage() for r in caplog.records) == 2


async def test_finalizers_hold_the_node_and_a_reused_name_boots_afresh(world: World) -> None:
    """A Node held by a finalizer (Karpenter's ``karpenter.sh/termination``) is only marked for deletion;
    the joiner asks again each poll and, once it is gone, kubesim's kubelet of that name is no longer
    stopped: a new machine given the same private DNS name (EC2 reuses IPs) registers and turns Ready."""
    instance = world.launch(AL2023_MIME)
    name = instance["PrivateDnsName"]
    world.joiner()
    await world.until(lambda: world.ready(name) == "True")
    await world_patch(world, name, {"metadata": {"finalizers": ["karpenter.sh/termination"]}})
    world.ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
    await world.until(lambda: (world.node(name) or {}).get("metadata", {}).get("deletionTimestamp"))
    await asyncio.sleep(0.2)
    assert world.node(name) is not None  # held
    await world_patch(world, name, {"metadata": {"finalizers": None}})
    await world.until(lambda: world.node(name) is None)
    await asyncio.sleep(0.15)  # a poll or two: the joiner clears the stopped kubelet after the delete
    url = f"{world.sim.url}/api/v1/nodes"
    async with aiohttp.ClientSession() as http, http.post(url, json=node_body(name, ready=False)) as r:
        assert r.status == 201, await r.text()
    await world.until(lambda: world.ready(name) == "True", within=2.0)


async def world_patch(world: World, name: str, body: Obj) -> None:
    async with aiohttp.ClientSession() as http:
        headers = {"Content-Type": "application/merge-patch+json"}
        async with http.patch(f"{world.sim.url}/api/v1/nodes/{name}", json=body, headers=headers) as r:
            assert r.status == 200, await r.text()


async def test_by_default_upstream_timings_unknown_after_50_s_deleted_at_the_next_5_s_pass(
    world_with: Any,
) -> None:
    """``JoinerConfig``'s defaults are upstream's, on a clock the test moves: pkg/controller/
    nodelifecycle ``tryUpdateNodeHealth`` turns Ready Unknown ``--node-monitor-grace-period`` (50 s
    in v1.32, kubernetes/kubernetes#126287) after the heartbeats stop, and cloud-provider
    controllers/nodelifecycle ``Run`` runs ``MonitorNodes`` every ``--node-monitor-period`` (5 s,
    ``wait.UntilWithContext``), which deletes a not-Ready Node whose instance no longer exists at
    its next pass, not at once."""
    # kubesim's own node lifecycle controller kept out of the way: the joiner's timings are studied.
    async with world_with(node_monitor_grace_seconds=600.0) as world:
        instance = world.launch(AL2023_MIME)
        name = instance["PrivateDnsName"]
        base = time.time() + 1.0
        now = [base]
        async with KubeWriter(world.sim.url, timeout=2.0) as kube:
            config = JoinerConfig(cluster=CLUSTER, boot_delay=0.0, ready_delay=0.0)
            assert (config.node_monitor_grace, config.node_monitor_period) == (50.0, 5.0)
            joiner = Joiner(Ec2Reader(world.aws.endpoint_url, CLUSTER), kube, config, clock=lambda: now[0])

            async def at(offset: float) -> None:
                now[0] = base + offset
                await joiner.tick()

            await at(0.0)  # registers; a MonitorNodes pass (the next one at +5)
            await at(0.1)  # Ready True
            assert world.ready(name) == "True"
            world.ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
            await at(1.0)  # the machine is gone: its kubelet stops
            await at(50.9)  # 49.9 s without heartbeats; a pass (the next at +55.9): nothing to do
            assert world.ready(name) == "True"
            await at(51.0)  # the grace is over: Ready Unknown, but no pass is due
            assert world.ready(name) == "Unknown"
            await at(55.8)
            assert world.node(name) is not None
            await at(55.9)  # the pass: not Ready, the instance terminated: deleted
            assert world.node(name) is None


@pytest.mark.parametrize("gone", ["terminated", "stopped"])
async def test_a_node_that_never_became_ready_is_handled_at_the_next_pass(world_with: Any, gone: str) -> None:
    """staging/src/k8s.io/cloud-provider/controllers/nodelifecycle/node_lifecycle_controller.go
    ``MonitorNodes`` skips only a Node whose Ready is True: a Node still Ready False (its CNI never
    came up) whose instance is terminated is deleted at the next pass, and one whose instance is
    stopped gets the shutdown taint then, without waiting for ``--node-monitor-grace-period`` (which
    only decides when pkg/controller/nodelifecycle ``tryUpdateNodeHealth`` writes Unknown)."""
    async with world_with(node_monitor_grace_seconds=600.0) as world:  # kubesim's own kept out
        instance = world.launch(AL2023_MIME)
        name = instance["PrivateDnsName"]
        base = time.time() + 1.0
        now = [base]
        async with KubeWriter(world.sim.url, timeout=2.0) as kube:
            config = JoinerConfig(cluster=CLUSTER, boot_delay=0.0, ready_delay=30.0)
            joiner = Joiner(Ec2Reader(world.aws.endpoint_url, CLUSTER), kube, config, clock=lambda: now[0])

            async def at(offset: float) -> None:
                now[0] = base + offset
                await joiner.tick()

            await at(0.0)  # registers, Ready False; a MonitorNodes pass (the next one at +5)
            assert world.ready(name) == "False"
            if gone == "terminated":
                world.ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
            else:
                world.ec2.stop_instances(InstanceIds=[instance["InstanceId"]])
            await at(1.0)  # the machine is gone: its kubelet stops; no pass is due
            assert world.node(name) is not None and world.ready(name) == "False"
            await at(5.0)  # the pass: the Node is not Ready True
            if gone == "terminated":
                assert world.node(name) is None
            else:
                node = world.node(name)
                assert node is not None and world.ready(name) == "False"
                assert SHUTDOWN in node["spec"]["taints"]
                await at(51.0)  # the grace is over: Unknown, and the Node stays (the instance exists)
                assert world.ready(name) == "Unknown" and world.node(name) is not None


async def test_a_monitor_pass_reads_the_nodes_once_not_one_get_per_down_instance(world_with: Any) -> None:
    """review 16f #3: cloud-provider ``MonitorNodes`` reads Ready from its informer's lister, so a
    pass costs no API read per Node; the joiner reads every Node's Ready with one LIST a pass (5 000
    instances terminated together cost 50 000 GETs over a grace before)."""
    async with world_with(node_monitor_grace_seconds=600.0) as world:
        instances = [world.launch(AL2023_MIME) for _ in range(3)]
        base = time.time() + 1.0
        now = [base]
        async with KubeWriter(world.sim.url, timeout=2.0) as kube:
            config = JoinerConfig(cluster=CLUSTER, boot_delay=0.0, ready_delay=30.0)
            joiner = Joiner(Ec2Reader(world.aws.endpoint_url, CLUSTER), kube, config, clock=lambda: now[0])
            calls: list[tuple[str, str]] = []
            send = kube._call

            async def counted(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
                calls.append((method, path))
                return await send(method, path, *args, **kwargs)

            kube._call = counted  # type: ignore[method-assign]
            await joiner.tick()  # registers all three, Ready False
            world.ec2.terminate_instances(InstanceIds=[i["InstanceId"] for i in instances])
            now[0] = base + 5.0
            calls.clear()
            await joiner.tick()  # the pass: three Nodes not Ready True, their instances gone
            assert all(world.node(i["PrivateDnsName"]) is None for i in instances)
            reads = [(m, p) for m, p in calls if m == "GET" and p.startswith("/api/v1/nodes")]
            assert reads == [("GET", "/api/v1/nodes")], calls
