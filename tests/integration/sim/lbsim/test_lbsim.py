"""lbsim against a real kubesim and moto (with the ``elbv2_draining`` extension), over HTTP.

The load balancer routes a steady request stream to ELBv2 targets and judges each request by the
cluster: a pod being deleted refuses new connections. Deleting a pod that is still a target fails
requests until the balancer's health checks or the simulated AWS Load Balancer Controller take it
out; deregistering it first, and waiting until the balancer stops routing to it, fails none.

Bounds on error windows are stated in the model's own parameters (health-check interval and
threshold, controller lag) plus a slack for the event loop and the refresh period; they check the
model, not the machine's speed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Literal

import aiohttp
import pytest

from kubespot.sim.awssim import MotoServer
from kubespot.sim.kubesim.app import KubeSim
from kubespot.sim.kubesim.controllers import ControllerConfig
from kubespot.sim.kubesim.testing import deployment, node, pod, until
from kubespot.sim.lbsim import (
    EXCLUDE_LABEL,
    ControllerModel,
    HealthCheck,
    LoadBalancerSim,
    Reason,
    TargetGroup,
)

if TYPE_CHECKING:
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client

Obj = dict[str, Any]

FAST = ControllerConfig(
    pod_start_seconds=0.05, lease_renew_seconds=0.5, node_status_seconds=1.0, node_ready_seconds=0.05
)
MERGE = {"Content-Type": "application/merge-patch+json"}
PORT = 8080
#: Slack on top of the model's bounds: event-loop scheduling, the watch, the DescribeTargetHealth
#: refresh (0.25 s) and the traffic loop's tick.
SLACK_S = 1.0


class Kube:
    """A running kubesim and an HTTP session on it."""

    def __init__(self, sim: KubeSim, http: aiohttp.ClientSession) -> None:
        self.sim = sim
        self.http = http

    async def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> Obj:
        async with self.http.request(method, path, json=body, headers=headers) as r:
            data: Obj = await r.json()
            assert r.status < 300, (method, path, r.status, data)
            return data

    async def pods(self, selector: str = "app=web") -> list[Obj]:
        data = await self.call("GET", f"/api/v1/namespaces/default/pods?labelSelector={selector}")
        items: list[Obj] = data["items"]
        return items

    async def running_pods(self, count: int, selector: str = "app=web") -> list[Obj]:
        async def probe() -> list[Obj]:
            ready = [
                p
                for p in await self.pods(selector)
                if (p.get("status") or {}).get("phase") == "Running"
                and (p.get("status") or {}).get("podIP")
                and not p["metadata"].get("deletionTimestamp")
            ]
            return ready if len(ready) >= count else []

        return await until(probe, within=15)

    async def gone(self, name: str) -> bool:
        async with self.http.get(f"/api/v1/namespaces/default/pods/{name}") as r:
            return r.status == 404


@pytest.fixture
async def kube() -> AsyncIterator[Kube]:
    async with KubeSim(controllers=FAST) as sim, aiohttp.ClientSession(sim.url) as http:
        yield Kube(sim, http)


def _target_group(
    aws: MotoServer, *, target_type: Literal["ip", "instance"] = "ip", delay: int = 2
) -> tuple[Any, str]:
    ec2 = aws.client("ec2")
    elb = aws.client("elbv2")
    vpc_id = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    arn = elb.create_target_group(
        Name=f"web-{target_type}", Protocol="HTTP", Port=PORT, VpcId=vpc_id, TargetType=target_type
    )["TargetGroups"][0]["TargetGroupArn"]
    elb.modify_target_group_attributes(
        TargetGroupArn=arn, Attributes=[{"Key": "deregistration_delay.timeout_seconds", "Value": str(delay)}]
    )
    return elb, arn


async def _ip_backend(aws: MotoServer, kube: Kube, replicas: int = 3) -> tuple[Any, str, list[Obj]]:
    """Two nodes, a Deployment of ``replicas`` pods, an ip target group with every pod registered."""
    for name in ("n1", "n2"):
        await kube.call("POST", "/api/v1/nodes", node(name))
    await kube.call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web", replicas))
    pods = await kube.running_pods(replicas)
    elb, arn = _target_group(aws)
    targets: Any = [{"Id": p["status"]["podIP"], "Port": PORT} for p in pods]
    await asyncio.to_thread(elb.register_targets, TargetGroupArn=arn, Targets=targets)
    return elb, arn, pods


async def _wait(predicate: Callable[[], object], within: float = 10.0) -> None:
    async def probe() -> object:
        return predicate()

    await until(probe, within=within, interval=0.02)


def _states(elb: ElasticLoadBalancingv2Client, arn: str) -> dict[str, str]:
    health = elb.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
    return {h["Target"]["Id"]: h["TargetHealth"]["State"] for h in health}


# -- ip targets ------------------------------------------------------------------------------------


async def test_steady_stream_to_healthy_pods_fails_nothing(aws: MotoServer, kube: Kube) -> None:
    elb, arn, pods = await _ip_backend(aws, kube)
    lb = LoadBalancerSim(kube_url=kube.sim.url, elbv2=elb, target_groups=[arn], rate=50)
    await lb.start()
    started = time.monotonic()
    await asyncio.sleep(1.5)
    result = await lb.stop()
    elapsed = time.monotonic() - started

    assert result.failed == 0
    assert result.error_window_s == 0
    assert result.first_failure_at is None
    # Steady: about rate x elapsed requests (the loop catches up when it falls behind).
    assert 0.8 * 50 * elapsed <= result.sent <= 50 * elapsed + 2
    # Round-robin over the three pods.
    assert set(result.sent_by_target) == {f"{p['status']['podIP']}:{PORT}" for p in pods}
    counts = list(result.sent_by_target.values())
    assert max(counts) - min(counts) <= 1
    assert sum(s.sent for s in result.per_second) == result.sent
    assert all(t.routed and t.state == "healthy" and t.problem is None for t in lb.targets())
    assert result.to_dict()["sent"] == result.sent


async def test_deleted_pod_fails_requests_until_health_checks_take_it_out(
    aws: MotoServer, kube: Kube
) -> None:
    """No deregistration and no controller: the error window is the health checks' to close."""
    elb, arn, pods = await _ip_backend(aws, kube)
    check = HealthCheck(interval_s=0.5, unhealthy_threshold=2)
    lb = LoadBalancerSim(
        kube_url=kube.sim.url, elbv2=elb, target_groups=[arn], health_check=check, controller=None
    )
    victim = pods[0]
    ip = victim["status"]["podIP"]
    async with lb:
        await asyncio.sleep(0.3)
        await kube.call("DELETE", f"/api/v1/namespaces/default/pods/{victim['metadata']['name']}")
        await _wait(lambda: not lb.routed(ip))
        await asyncio.sleep(0.5)  # the stream goes on without failures once the target is out
    result = lb.result()

    assert result.failed > 0
    assert set(result.failures_by_reason) <= {Reason.POD_TERMINATING, Reason.NO_POD}
    assert set(result.failures_by_reason) >= {Reason.POD_TERMINATING}
    # The first failing check comes at most one interval after the pod stopped answering, the
    # threshold-th one (threshold - 1) intervals later: the balancer kept routing to it meanwhile.
    bound = check.unhealthy_threshold * check.interval_s
    assert (
        (check.unhealthy_threshold - 1) * check.interval_s - 0.1 <= result.error_window_s <= bound + SLACK_S
    )
    assert [(e.target_id, e.healthy) for e in result.health_events] == [(ip, False)]
    assert result.deregistrations == ()
    # AWS still has it registered: only the balancer's own checks took it out.
    assert (await asyncio.to_thread(_states, elb, arn))[ip] == "healthy"


async def test_controller_deregisters_a_terminating_pod_after_its_lag(aws: MotoServer, kube: Kube) -> None:
    """Health checks too slow to matter: the AWS Load Balancer Controller's lag bounds the window."""
    elb, arn, pods = await _ip_backend(aws, kube)
    lag = 1.0
    lb = LoadBalancerSim(
        kube_url=kube.sim.url,
        elbv2=elb,
        target_groups=[arn],
        health_check=HealthCheck(interval_s=120),
        controller=ControllerModel(lag_s=lag),
    )
    victim = pods[1]
    ip = victim["status"]["podIP"]
    async with lb:
        await asyncio.sleep(0.3)
        await kube.call("DELETE", f"/api/v1/namespaces/default/pods/{victim['metadata']['name']}")
        await _wait(lambda: not lb.routed(ip))
        assert (await asyncio.to_thread(_states, elb, arn))[ip] == "draining"
        await asyncio.sleep(0.5)
    result = lb.result()

    assert result.failed > 0
    assert lag - 0.1 <= result.error_window_s <= lag + SLACK_S
    [dereg] = result.deregistrations
    assert (dereg.target_id, dereg.port, dereg.ok) == (ip, PORT, True)
    assert dereg.reason in (Reason.POD_TERMINATING, Reason.NO_POD)
    assert result.health_events == ()


async def test_deregistering_first_fails_nothing(aws: MotoServer, kube: Kube) -> None:
    """What kubespot does: deregister, wait until draining reaches the balancer, then delete the pod."""
    elb, arn, pods = await _ip_backend(aws, kube)
    lb = LoadBalancerSim(
        kube_url=kube.sim.url,
        elbv2=elb,
        target_groups=[arn],
        health_check=HealthCheck(interval_s=0.5),
        controller=ControllerModel(lag_s=1.0),
    )
    victim = pods[2]
    ip, name = victim["status"]["podIP"], victim["metadata"]["name"]
    async with lb:
        await asyncio.sleep(0.3)
        await asyncio.to_thread(
            elb.deregister_targets, TargetGroupArn=arn, Targets=[{"Id": ip, "Port": PORT}]
        )
        assert (await asyncio.to_thread(_states, elb, arn))[ip] == "draining"
        await _wait(lambda: not lb.routed(ip))
        assert {t.target_id: t.state for t in lb.targets()}[ip] == "draining"
        await kube.call("DELETE", f"/api/v1/namespaces/default/pods/{name}")

        async def pod_gone() -> bool:
            return await kube.gone(name)

        await until(pod_gone, within=10)
        await asyncio.sleep(0.5)
        # The delay (2 s) runs out: the target is gone from AWS and from the balancer.
        await _wait(lambda: ip not in {t.target_id for t in lb.targets()})
    result = lb.result()

    assert result.sent > 50
    assert result.failed == 0
    assert result.error_window_s == 0
    assert result.deregistrations == ()  # the controller had nothing left to do
    assert f"{ip}:{PORT}" in result.sent_by_target  # it did serve before deregistration


async def test_no_target_left_fails_every_request(aws: MotoServer, kube: Kube) -> None:
    elb, arn, pods = await _ip_backend(aws, kube, replicas=1)
    ip = pods[0]["status"]["podIP"]
    lb = LoadBalancerSim(kube_url=kube.sim.url, elbv2=elb, target_groups=[arn], controller=None)
    async with lb:
        await asyncio.to_thread(
            elb.deregister_targets, TargetGroupArn=arn, Targets=[{"Id": ip, "Port": PORT}]
        )
        await _wait(lambda: not lb.routed(ip))
        lb.reset_counts()
        await asyncio.sleep(0.3)
    result = lb.result()
    assert result.sent > 0
    assert result.failed == result.sent
    assert result.failures_by_reason == {Reason.NO_TARGET: result.sent}


# -- instance targets --------------------------------------------------------------------------------


async def test_instance_targets_follow_their_nodes(aws: MotoServer, kube: Kube) -> None:
    """Instance targets are nodes (by providerID) serving the Deployment's pods on that node."""
    instances = {f"n{i}": f"i-0{i}{i}{i}{i}{i}{i}{i}{i}{i}{i}{i}{i}{i}{i}{i}{i}" for i in (1, 2, 3)}
    for name, instance in instances.items():
        body = node(name)
        body["spec"]["providerID"] = f"aws:///us-east-1a/{instance}"
        await kube.call("POST", "/api/v1/nodes", body)
        await kube.call(
            "POST", "/api/v1/namespaces/default/pods", pod(f"web-{name}", node=name, labels={"app": "web"})
        )
    await kube.running_pods(3)
    elb, arn = _target_group(aws, target_type="instance")
    await asyncio.to_thread(
        elb.register_targets, TargetGroupArn=arn, Targets=[{"Id": i} for i in instances.values()]
    )
    check = HealthCheck(interval_s=0.5, unhealthy_threshold=2)
    lb = LoadBalancerSim(
        kube_url=kube.sim.url,
        elbv2=elb,
        target_groups=[TargetGroup(arn, namespace="default", selector={"app": "web"})],
        health_check=check,
        controller=ControllerModel(lag_s=1.0),
    )
    async with lb:
        await asyncio.sleep(0.5)
        steady = lb.result()
        assert steady.failed == 0
        assert set(steady.sent_by_target) == {f"{i}:{PORT}" for i in instances.values()}

        # n1 with deregistration first: its instance is terminated once the balancer stopped routing.
        await asyncio.to_thread(elb.deregister_targets, TargetGroupArn=arn, Targets=[{"Id": instances["n1"]}])
        await _wait(lambda: not lb.routed(instances["n1"]))
        lb.mark_node_down("n1")
        await kube.call("DELETE", "/api/v1/nodes/n1")
        await asyncio.sleep(0.5)
        assert lb.result().failed == 0

        # n2 without: the instance dies, then its Node is deleted (the cloud controller's part).
        lb.reset_counts()
        lb.mark_node_down("n2")
        await asyncio.sleep(0.2)
        await kube.call("DELETE", "/api/v1/nodes/n2")
        await _wait(lambda: not lb.routed(instances["n2"]))
        await asyncio.sleep(0.5)
        without = lb.result()
        assert without.failed > 0
        assert set(without.failures_by_reason) <= {Reason.NODE_DOWN, Reason.NODE_GONE}
        assert without.error_window_s <= check.unhealthy_threshold * check.interval_s + SLACK_S

        # The controller leaves out a node labelled exclude-from-external-load-balancers.
        lb.reset_counts()
        await kube.call("PATCH", "/api/v1/nodes/n3", {"metadata": {"labels": {EXCLUDE_LABEL: ""}}}, MERGE)
        await _wait(lambda: not lb.routed(instances["n3"]))
    excluded = [d for d in lb.result().deregistrations if d.target_id == instances["n3"]]
    assert [(d.reason, d.ok) for d in excluded] == [("node-excluded", True)]
    assert (await asyncio.to_thread(_states, elb, arn))[instances["n3"]] == "draining"


async def test_all_targets_failing_checks_fail_open(aws: MotoServer, kube: Kube) -> None:
    """ALB routes to every registered target when all fail their health checks."""
    elb, arn, pods = await _ip_backend(aws, kube, replicas=1)
    ip = pods[0]["status"]["podIP"]
    check = HealthCheck(interval_s=0.3, unhealthy_threshold=2)
    lb = LoadBalancerSim(
        kube_url=kube.sim.url, elbv2=elb, target_groups=[arn], health_check=check, controller=None
    )
    async with lb:
        await kube.call("DELETE", f"/api/v1/namespaces/default/pods/{pods[0]['metadata']['name']}")
        await _wait(lambda: not lb.routed(ip))
        lb.reset_counts()
        await asyncio.sleep(0.3)
    result = lb.result()
    assert result.failed == result.sent > 0
    # Still sent to the (dead) target rather than refused for want of one.
    assert Reason.NO_TARGET not in result.failures_by_reason
    assert result.sent_by_target == {f"{ip}:{PORT}": result.sent}


async def test_propagation_delays_the_end_of_routing(aws: MotoServer, kube: Kube) -> None:
    """With ``propagation_s`` the balancer keeps routing to a draining target for that long."""
    elb, arn, pods = await _ip_backend(aws, kube, replicas=2)
    ip = pods[0]["status"]["podIP"]
    propagation = 1.0
    lb = LoadBalancerSim(kube_url=kube.sim.url, elbv2=elb, target_groups=[arn], propagation_s=propagation)
    async with lb:
        await asyncio.to_thread(
            elb.deregister_targets, TargetGroupArn=arn, Targets=[{"Id": ip, "Port": PORT}]
        )
        deregistered = time.monotonic()
        await lb.refresh()  # AWS says draining now; the balancer acts on it only after propagation
        assert lb.routed(ip)
        await _wait(lambda: not lb.routed(ip))
        assert time.monotonic() - deregistered >= propagation - 0.05
    assert lb.result().failed == 0


async def test_view_survives_dropped_watches_and_compaction(aws: MotoServer, kube: Kube) -> None:
    """The pod watch resumes (or re-lists after 410 Gone) and still sees the deletion."""
    elb, arn, pods = await _ip_backend(aws, kube, replicas=2)
    victim = pods[0]
    ip = victim["status"]["podIP"]
    lb = LoadBalancerSim(kube_url=kube.sim.url, elbv2=elb, target_groups=[arn], controller=None)
    async with lb:
        async with kube.http.post("/kubesim/v1/compact") as r:
            assert r.status < 300
        async with kube.http.post("/kubesim/v1/drop-watches") as r:
            assert r.status < 300
        await kube.call("DELETE", f"/api/v1/namespaces/default/pods/{victim['metadata']['name']}")
        await _wait(lambda: lb.cluster.ip_target_problem(ip) is not None)
        assert {t.target_id: t.problem for t in lb.targets()}[ip] in (Reason.POD_TERMINATING, Reason.NO_POD)
