"""kubespot.aws.elbv2 and classic_elb against moto over HTTP: the reverse index, its refreshes,
deregistration grouped per target group, and the states that follow.

Calls are counted by ``AwsClients.counts`` (every call the adapter makes goes through it).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from kubespot.aws import AwsClients, ClassicLoadBalancers, ClassicRegistration, Registration, TargetDirectory
from kubespot.config.aws import AwsSettings
from kubespot.sim.awssim import MotoServer

AMI = "ami-12c6146b"
CLUSTER_TAG = "elbv2.k8s.aws/cluster"


class ManualClock:
    """monotonic() only moves when a test says so; sleep() moves it."""

    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> datetime:
        return datetime.now(tz=UTC)

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)
        await asyncio.sleep(0)


def _vpc(aws: MotoServer) -> str:
    vpcs = aws.client("ec2").describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
    return vpcs[0]["VpcId"]


def _instances(aws: MotoServer, n: int) -> list[str]:
    answer = aws.client("ec2").run_instances(ImageId=AMI, MinCount=n, MaxCount=n, InstanceType="m5.large")
    return [i["InstanceId"] for i in answer["Instances"]]


def _group(aws: MotoServer, name: str, *, target_type: str = "instance", port: int = 80) -> str:
    kwargs: dict[str, Any] = {
        "Name": name,
        "Protocol": "HTTP",
        "Port": port,
        "VpcId": _vpc(aws),
        "TargetType": target_type,
    }
    return aws.client("elbv2").create_target_group(**kwargs)["TargetGroups"][0]["TargetGroupArn"]


def _tag(aws: MotoServer, arn: str, key: str, value: str) -> None:
    aws.client("elbv2").add_tags(ResourceArns=[arn], Tags=[{"Key": key, "Value": value}])


def _register(aws: MotoServer, arn: str, *targets: tuple[str, int | None]) -> None:
    aws.client("elbv2").register_targets(
        TargetGroupArn=arn,
        Targets=[{"Id": i, **({"Port": p} if p is not None else {})} for i, p in targets],  # type: ignore[misc]
    )


def _registered(aws: MotoServer, arn: str) -> set[tuple[str, int]]:
    """Targets registered and not deregistering."""
    answer = aws.client("elbv2").describe_target_health(TargetGroupArn=arn)
    return {
        (d["Target"]["Id"], d["Target"]["Port"])
        for d in answer["TargetHealthDescriptions"]
        if d["TargetHealth"]["State"] not in ("draining", "unhealthy.draining")
    }


def _delay(aws: MotoServer, arn: str, seconds: int) -> None:
    aws.client("elbv2").modify_target_group_attributes(
        TargetGroupArn=arn,
        Attributes=[{"Key": "deregistration_delay.timeout_seconds", "Value": str(seconds)}],
    )


def _web_admin_pods(aws: MotoServer, pods_name: str) -> tuple[str, str, str]:
    """Three target groups: "web" (instances on 80), "admin" (instances on 8443) and ``pods_name``
    (IP targets on 8080); their ARNs."""
    return (
        _group(aws, "web"),
        _group(aws, "admin", port=8443),
        _group(aws, pods_name, target_type="ip", port=8080),
    )


# -- the index ------------------------------------------------------------------------------------


async def test_index_by_instance_and_by_ip(aws: MotoServer, clients: AwsClients) -> None:
    i1, i2 = _instances(aws, 2)
    web, admin, pods = _web_admin_pods(aws, "k8s-web-pods")
    _register(aws, web, (i1, None), (i2, None))
    # A port override. (AWS also lets one target be registered on several ports of a group; moto
    # keeps one registration per target id, so that case is not exercised here.)
    _register(aws, admin, (i1, 9443))
    _register(aws, pods, ("10.0.1.15", 8080), ("10.0.2.20", 8080))

    directory = TargetDirectory(clients)
    found = await directory.lookup([i1, "10.0.1.15", "10.9.9.9", "i-0123456789abcdef0"])
    assert set(found) == {i1, "10.0.1.15"}
    assert sorted(found[i1]) == sorted([Registration(web, i1, 80), Registration(admin, i1, 9443)])
    (pod,) = found["10.0.1.15"]
    assert (pod.target_group_arn, pod.port, pod.target_type) == (pods, 8080, "ip")
    assert pod.target_group_name == "k8s-web-pods"
    assert found[i1][0].target_type == "instance"
    # One listing, one DescribeTargetHealth per group; the misses asked nothing more (fresh index).
    assert clients.counts[("elbv2", "DescribeTargetGroups")] == 1
    assert clients.counts[("elbv2", "DescribeTargetHealth")] == 3
    assert clients.counts[("elbv2", "DescribeTags")] == 0
    assert directory.refreshes == 1


async def test_tag_filter_keeps_only_matching_groups(aws: MotoServer, clients: AwsClients) -> None:
    (instance,) = _instances(aws, 1)
    arns = {name: _group(aws, name) for name in ("prod-a", "prod-b", "dev", "untagged")}
    _tag(aws, arns["prod-a"], CLUSTER_TAG, "prod")
    _tag(aws, arns["prod-b"], CLUSTER_TAG, "prod")
    _tag(aws, arns["dev"], CLUSTER_TAG, "dev")
    _tag(aws, arns["untagged"], "team", "web")
    # Enough groups for two DescribeTags batches (20 ARNs each).
    extra = [_group(aws, f"other-{n:02d}") for n in range(20)]
    for arn in [*arns.values(), *extra]:
        _register(aws, arn, (instance, None))

    prod = TargetDirectory(clients, tag_key=CLUSTER_TAG, tag_value="prod")
    found = await prod.lookup([instance])
    assert {r.target_group_arn for r in found[instance]} == {arns["prod-a"], arns["prod-b"]}
    assert clients.counts[("elbv2", "DescribeTags")] == 2  # 24 groups in batches of 20
    assert clients.counts[("elbv2", "DescribeTargetHealth")] == 2  # only the matching groups

    any_cluster = TargetDirectory(clients, tag_key=CLUSTER_TAG)
    found = await any_cluster.lookup([instance])
    assert {r.target_group_arn for r in found[instance]} == {arns["prod-a"], arns["prod-b"], arns["dev"]}

    # Tag matches are remembered across rebuilds: a forced refresh lists and describes again, but
    # asks no tags for groups it already checked.
    before = clients.counts[("elbv2", "DescribeTags")]
    await prod.refresh()
    assert clients.counts[("elbv2", "DescribeTags")] == before
    assert prod.refreshes == 2

    with pytest.raises(ValueError, match="tag_value needs tag_key"):
        TargetDirectory(clients, tag_value="prod")


async def test_a_burst_of_lookups_shares_one_refresh(aws: MotoServer, clients: AwsClients) -> None:
    instances = _instances(aws, 20)
    groups = [_group(aws, f"tg-{n}") for n in range(5)]
    for n, instance in enumerate(instances):
        _register(aws, groups[n % 5], (instance, None))
    clock = ManualClock()
    directory = TargetDirectory(clients, clock=clock, ttl=45, miss_refresh_after=5)

    # Fifty concurrent lookups (each node's handler asking for its own instance, and some misses).
    asked = [*instances, *[f"10.0.0.{n}" for n in range(30)]]
    answers = await asyncio.gather(*(directory.lookup([target]) for target in asked))
    assert all(len(a[i]) == 1 for i, a in zip(instances, answers, strict=False))
    assert all(a == {} for a in answers[20:])
    assert directory.refreshes == 1
    assert clients.counts[("elbv2", "DescribeTargetGroups")] == 1
    assert clients.counts[("elbv2", "DescribeTargetHealth")] == 5

    # A miss in an index younger than miss_refresh_after asks nothing.
    clock.t += 4
    assert await directory.lookup(["10.0.0.200"]) == {}
    assert directory.refreshes == 1

    # Older than that: a miss rebuilds once, and finds a target registered since.
    new_pod = _group(aws, "pods", target_type="ip", port=8080)
    _register(aws, new_pod, ("10.0.3.3", None))
    clock.t += 2
    misses = await asyncio.gather(*(directory.lookup(["10.0.3.3", "10.0.0.201"]) for _ in range(10)))
    assert all(set(m) == {"10.0.3.3"} for m in misses)
    assert directory.refreshes == 2
    # The next miss, right after, is answered from the new index.
    assert await directory.lookup(["10.0.0.202"]) == {}
    assert directory.refreshes == 2

    # Past the TTL a hit rebuilds too.
    clock.t += 46
    assert set(await directory.lookup([instances[0]])) == {instances[0]}
    assert directory.refreshes == 3


async def test_failed_refresh_keeps_the_old_index(aws_env: MotoServer) -> None:
    aws = aws_env
    (instance,) = _instances(aws, 1)
    _register(aws, _group(aws, "web"), (instance, None))
    settings = AwsSettings(region=aws.region, endpoint_url=aws.endpoint_url, max_attempts=1)
    clock = ManualClock()
    async with AwsClients(settings) as clients:
        directory = TargetDirectory(clients, clock=clock, retry_after=5)
        assert set(await directory.lookup([instance])) == {instance}
        await clients.close()  # every call fails from now on
        clock.t += 100
        # Stale beats nothing: the old index answers, and the failure is not retried at once.
        assert set(await directory.lookup([instance])) == {instance}
        assert set(await directory.lookup([instance])) == {instance}
        assert directory.refreshes == 2


# -- deregistration -------------------------------------------------------------------------------


async def test_deregister_one_call_per_target_group(aws: MotoServer, clients: AwsClients) -> None:
    victim, survivor = _instances(aws, 2)
    web, admin, pods = _web_admin_pods(aws, "pods")
    _register(aws, web, (victim, None), (survivor, None))
    _register(aws, admin, (victim, 9443))
    _register(aws, pods, ("10.0.1.15", 8080), ("10.0.1.16", 8080), ("10.0.2.20", 8080))

    directory = TargetDirectory(clients)
    found = await directory.lookup([victim, "10.0.1.15", "10.0.1.16"])
    registrations = [r for regs in found.values() for r in regs]
    assert len(registrations) == 4

    outcome = await directory.deregister([*registrations, *registrations])  # duplicates are folded
    assert outcome.ok
    assert sorted(outcome.deregistered) == sorted(registrations)
    assert outcome.gone == ()
    assert clients.counts[("elbv2", "DeregisterTargets")] == 3  # web, admin, pods
    assert _registered(aws, web) == {(survivor, 80)}
    assert _registered(aws, admin) == set()
    assert _registered(aws, pods) == {("10.0.2.20", 8080)}

    # The caller waits for "draining or gone": draining for the deregistration delay (300 s).
    states = await directory.target_states(registrations)
    assert set(states) == set(registrations)
    assert all(s.deregistering and s.draining_started and not s.gone for s in states.values())
    assert {s.reason for s in states.values()} == {"Target.DeregistrationInProgress"}
    assert await directory.draining_started(registrations)
    assert await directory.wait_draining(registrations, max_wait=1)

    still = Registration(web, survivor, 80)
    (state,) = (await directory.target_states([still])).values()
    assert state.state == "healthy" and not state.draining_started
    assert not await directory.draining_started([still, *registrations])
    assert not await directory.wait_draining([still], max_wait=0.3, interval=0.1)


async def test_draining_ends_in_gone(aws: MotoServer, clients: AwsClients) -> None:
    (instance,) = _instances(aws, 1)
    quick = _group(aws, "quick")
    _delay(aws, quick, 1)
    _register(aws, quick, (instance, None))
    directory = TargetDirectory(clients)
    (reg,) = (await directory.lookup([instance]))[instance]
    assert (await directory.deregister([reg])).deregistered == (reg,)
    (state,) = (await directory.target_states([reg])).values()
    assert state.deregistering
    await asyncio.sleep(1.2)
    (state,) = (await directory.target_states([reg])).values()
    assert state.gone and not state.deregistering and state.reason == "Target.NotRegistered"
    assert state.draining_started


async def test_deregistering_what_is_not_registered_succeeds(aws: MotoServer, clients: AwsClients) -> None:
    """AWS accepts it (stock moto answered InvalidTarget; either way nothing fails)."""
    registered, never = _instances(aws, 2)
    web = _group(aws, "web")
    _register(aws, web, (registered, None))
    directory = TargetDirectory(clients)

    ghost = Registration(web, never, 80)
    live = Registration(web, registered, 80)
    outcome = await directory.deregister([ghost])
    assert outcome.ok and set(outcome.deregistered) | set(outcome.gone) == {ghost}

    # Unknown first: the registered target is still deregistered, each target accounted for once.
    outcome = await directory.deregister([ghost, live])
    assert outcome.ok
    assert set(outcome.deregistered) | set(outcome.gone) == {ghost, live}
    assert live in outcome.deregistered
    assert _registered(aws, web) == set()
    (state,) = (await directory.target_states([ghost])).values()
    assert state.gone and state.draining_started

    # A deleted target group: nothing to do.
    doomed = _group(aws, "doomed")
    aws.client("elbv2").delete_target_group(TargetGroupArn=doomed)
    outcome = await directory.deregister([Registration(doomed, registered, 80)])
    assert outcome.ok and len(outcome.gone) == 1
    (state,) = (await directory.target_states([Registration(doomed, registered, 80)])).values()
    assert state.gone and state.reason == "TargetGroupNotFound"


# -- Classic Load Balancers -----------------------------------------------------------------------


async def test_classic_load_balancers(aws: MotoServer, clients: AwsClients) -> None:
    victim, other = _instances(aws, 2)
    elb = aws.client("elb")
    for name in ("legacy-web", "legacy-api"):
        elb.create_load_balancer(
            LoadBalancerName=name,
            Listeners=[{"Protocol": "HTTP", "LoadBalancerPort": 80, "InstancePort": 8080}],
            AvailabilityZones=[f"{aws.region}a"],
        )
        elb.register_instances_with_load_balancer(
            LoadBalancerName=name, Instances=[{"InstanceId": victim}, {"InstanceId": other}]
        )

    classic = ClassicLoadBalancers(clients)
    found = await classic.lookup([victim, "i-0123456789abcdef0"])
    assert set(found) == {victim}
    assert sorted(found[victim]) == [
        ClassicRegistration("legacy-api", victim),
        ClassicRegistration("legacy-web", victim),
    ]
    assert clients.counts[("elb", "DescribeLoadBalancers")] == 1

    outcome = await classic.deregister(found[victim])
    assert outcome.ok and sorted(outcome.deregistered) == sorted(found[victim])
    assert clients.counts[("elb", "DeregisterInstancesFromLoadBalancer")] == 2
    for lb in elb.describe_load_balancers()["LoadBalancerDescriptions"]:
        assert [i["InstanceId"] for i in lb["Instances"]] == [other]
    await classic.refresh()
    assert await classic.lookup([victim]) == {}
    assert classic.refreshes == 2
