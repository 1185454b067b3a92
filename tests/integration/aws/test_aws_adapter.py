"""kubespot.aws against moto over HTTP: SQS round trips, coalesced DescribeInstances, lifecycle actions.

Clients are built from ``AwsSettings`` and the SDK's credential chain (``aws_env`` puts moto's fake
credentials and endpoint in the environment), as the controller builds them.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubespot.aws import (
    CALLS,
    AwsClients,
    AwsError,
    InstanceDirectory,
    LifecycleActionGone,
    LifecycleActions,
    Queue,
    QueueMessage,
)
from kubespot.config.aws import AwsSettings
from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import lifecycle
from support.moto_asg import auto_scaling_group

AMI = "ami-12c6146b"
GROUP = "ng-spot"
HOOK = "kubespot-terminate"


@pytest.fixture
async def clients(aws_env: MotoServer) -> AsyncIterator[AwsClients]:
    """Two attempts per call, where conftest's has one: the retry tests here need one retry."""
    settings = AwsSettings(region=aws_env.region, endpoint_url=aws_env.endpoint_url, max_attempts=2)
    async with AwsClients(settings) as c:
        yield c


def _queue(aws: MotoServer, name: str = "interruptions", **attributes: str) -> str:
    return aws.client("sqs").create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]


def _send(aws: MotoServer, url: str, n: int) -> None:
    sqs = aws.client("sqs")
    for start in range(0, n, 10):
        entries: Any = [
            {"Id": str(i), "MessageBody": json.dumps({"n": i})} for i in range(start, min(n, start + 10))
        ]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)


async def _received(
    aws: MotoServer, clients: AwsClients, n: int, *, visibility_timeout: int = 30
) -> tuple[str, Queue, list[QueueMessage]]:
    """A new queue with ``n`` messages sent, all of them received (in batches of at most ten):
    its URL, the adapter's queue and the messages."""
    url = _queue(aws)
    _send(aws, url, n)
    queue = Queue(clients, url)
    got: list[QueueMessage] = []
    while len(got) < n:
        batch = await queue.receive(max_messages=10, wait_time=1, visibility_timeout=visibility_timeout)
        assert batch, "queue ran dry early"
        assert len(batch) <= 10
        got.extend(batch)
    return url, queue, got


def _depth(aws: MotoServer, url: str) -> tuple[int, int]:
    return aws.queue_counts(url)


# -- SQS ---------------------------------------------------------------------------------------------


async def test_receive_then_delete_in_batches(aws_env: MotoServer, clients: AwsClients) -> None:
    url, queue, got = await _received(aws_env, clients, 25)
    assert sorted(json.loads(m.body)["n"] for m in got) == list(range(25))
    now = datetime.now(tz=UTC)
    for m in got:
        assert m.receive_count == 1
        assert m.sent_at is not None and now - timedelta(minutes=1) < m.sent_at <= now + timedelta(seconds=1)
        assert m.message_id and m.receipt_handle

    assert await queue.delete(got) == []
    assert clients.counts[("sqs", "DeleteMessageBatch")] == 3  # 10 + 10 + 5
    assert _depth(aws_env, url) == (0, 0)


async def test_concurrent_deletes_are_coalesced(aws_env: MotoServer, clients: AwsClients) -> None:
    url, queue, got = await _received(aws_env, clients, 30)
    # Thirty handlers finishing together, each deleting its own message.
    results = await asyncio.gather(*(queue.delete([m]) for m in got))
    assert all(r == [] for r in results)
    assert clients.counts[("sqs", "DeleteMessageBatch")] <= 4
    assert _depth(aws_env, url) == (0, 0)


async def test_redelivery_counts_up(aws_env: MotoServer, clients: AwsClients) -> None:
    url = _queue(aws_env)
    _send(aws_env, url, 1)
    queue = Queue(clients, url)
    (first,) = await queue.receive(wait_time=1, visibility_timeout=1)
    assert first.receive_count == 1
    await asyncio.sleep(1.3)
    (second,) = await queue.receive(wait_time=2, visibility_timeout=30)
    assert second.message_id == first.message_id
    assert second.receive_count == 2
    assert second.receipt_handle != first.receipt_handle


async def test_extend_keeps_the_message_hidden_and_zero_releases_it(
    aws_env: MotoServer, clients: AwsClients
) -> None:
    url, queue, got = await _received(aws_env, clients, 12, visibility_timeout=2)
    assert await queue.extend(got, 30) == []
    assert clients.counts[("sqs", "ChangeMessageVisibilityBatch")] == 2  # 10 + 2
    await asyncio.sleep(2.5)  # past the original 2 s: without the extension they would be back
    assert await queue.receive(wait_time=0) == []
    assert _depth(aws_env, url) == (0, 12)

    assert await queue.extend(got[:1], 0) == []
    (again,) = await queue.receive(wait_time=1)
    assert again.message_id == got[0].message_id
    assert again.receive_count == 2


async def test_stale_receipts_are_reported_per_message(aws_env: MotoServer, clients: AwsClients) -> None:
    url, queue, got = await _received(aws_env, clients, 2)
    assert await queue.delete(got[:1]) == []
    bogus = type(got[1])(
        message_id="not-a-message",
        receipt_handle="bm90IGEgcmVjZWlwdA==",
        body="",
        receive_count=1,
        sent_at=None,
    )
    failed = await queue.delete([got[1], bogus])
    assert failed == ["not-a-message"]
    assert _depth(aws_env, url) == (0, 0)


async def test_cancelled_receive_gives_its_messages_back(aws_env: MotoServer, clients: AwsClients) -> None:
    """A long poll abandoned (shutdown) must not hide what it still receives for the whole timeout."""
    url = _queue(aws_env)
    queue = Queue(clients, url)
    poll = asyncio.create_task(queue.receive(wait_time=3, visibility_timeout=300))
    await asyncio.sleep(0.3)
    poll.cancel()
    with pytest.raises(asyncio.CancelledError):
        await poll
    _send(aws_env, url, 1)  # wakes the abandoned poll on its thread, which takes the message
    deadline = time.monotonic() + 5
    got = []
    while not got and time.monotonic() < deadline:
        got = await queue.receive(wait_time=1, visibility_timeout=30)
    assert len(got) == 1, "the message stayed hidden behind the abandoned poll"


async def test_unknown_queue_is_an_aws_error(aws_env: MotoServer, clients: AwsClients) -> None:
    queue = Queue(clients, f"{aws_env.endpoint_url}/{aws_env.account_id}/no-such-queue")
    with pytest.raises(AwsError) as caught:
        await queue.receive(wait_time=0)
    err = caught.value
    assert err.code in ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")
    assert not err.retryable and not err.throttled
    assert err.operation == "ReceiveMessage"
    assert aws_env.secret_access_key not in str(err)


async def test_unreachable_endpoint_is_a_transport_error(aws_env: MotoServer) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    settings = AwsSettings(region="us-east-1", endpoint_url=f"http://127.0.0.1:{port}", max_attempts=1)
    async with AwsClients(settings) as c:
        with pytest.raises(AwsError) as caught:
            await Queue(c, f"http://127.0.0.1:{port}/123456789012/q").receive(wait_time=0)
    assert caught.value.code == "Transport"
    assert caught.value.retryable


# -- EC2 ---------------------------------------------------------------------------------------------


def _run_instances(
    aws: MotoServer, n: int, *, spot: bool = False, tags: dict[str, str] | None = None
) -> list[str]:
    ec2 = aws.client("ec2")
    ids: list[str] = []
    while len(ids) < n:
        kwargs: dict[str, Any] = {
            "ImageId": AMI,
            "MinCount": min(200, n - len(ids)),
            "MaxCount": min(200, n - len(ids)),
            "InstanceType": "m5.large",
        }
        if tags:
            kwargs["TagSpecifications"] = [
                {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
            ]
        if spot:
            kwargs["InstanceMarketOptions"] = {"MarketType": "spot"}
        ids.extend(i["InstanceId"] for i in ec2.run_instances(**kwargs)["Instances"])
    return ids


async def test_concurrent_lookups_share_one_describe(aws_env: MotoServer, clients: AwsClients) -> None:
    ids = _run_instances(aws_env, 600, tags={"kubespot/managed": "yes", "team": "a"})
    directory = InstanceDirectory(clients, cache_ttl=30)
    slices = [ids[i::25] for i in range(25)]  # 25 callers, 24 distinct ids each
    answers = await asyncio.gather(*(directory.lookup(s) for s in slices))
    assert directory.api_calls <= 2
    assert clients.counts[("ec2", "DescribeInstances")] == directory.api_calls
    for wanted, answer in zip(slices, answers, strict=True):
        assert set(answer) == set(wanted)
    info = answers[0][slices[0][0]]
    assert info.tags == {"kubespot/managed": "yes", "team": "a"}
    assert info.state == "running"
    assert info.private_dns_name.endswith(".internal")
    assert info.availability_zone.startswith(aws_env.region)
    assert info.lifecycle is None
    assert info.provider_id == f"aws:///{info.availability_zone}/{info.instance_id}"

    # Within the TTL: answered from the cache, no call.
    before = directory.api_calls
    again = await directory.lookup(ids[:50])
    assert set(again) == set(ids[:50])
    assert directory.api_calls == before


async def test_unknown_and_malformed_ids_are_absent(aws_env: MotoServer, clients: AwsClients) -> None:
    known = _run_instances(aws_env, 5, spot=True)
    unknown = ["i-0123456789abcdef0", "i-0fedcba9876543210", "i-0aaaaaaaaaaaaaaaa", "i-deadbeef"]
    directory = InstanceDirectory(clients, cache_ttl=30)
    answer = await directory.lookup([*known, *unknown, "bogus", ""])
    assert set(answer) == set(known)
    assert all(i.lifecycle == "spot" for i in answer.values())
    # By ids, minus what each NotFound names, then the filter: a handful of calls, never one per id.
    assert directory.api_calls <= 5
    # Absences are cached too (briefly): asking again costs nothing.
    before = directory.api_calls
    assert await directory.lookup(unknown) == {}
    assert directory.api_calls == before


async def test_one_unknown_id_is_dropped_and_the_rest_answered(
    aws_env: MotoServer, clients: AwsClients
) -> None:
    known = _run_instances(aws_env, 3)
    directory = InstanceDirectory(clients, cache_ttl=0)
    answer = await directory.lookup([*known, "i-0123456789abcdef0"])
    assert set(answer) == set(known)
    assert directory.api_calls == 2  # failed by ids, then by ids without the one AWS named


async def test_lookup_errors_reach_every_waiter(aws_env: MotoServer) -> None:
    settings = AwsSettings(region="us-east-1", endpoint_url=aws_env.endpoint_url, max_attempts=1)
    async with AwsClients(settings) as c:
        directory = InstanceDirectory(c)
        await c.close()  # every call now fails
        results = await asyncio.gather(
            *(directory.lookup([f"i-0{n:016x}"]) for n in range(5)), return_exceptions=True
        )
    assert all(isinstance(r, AwsError) for r in results)


# -- Auto Scaling ------------------------------------------------------------------------------------


def _group(aws: MotoServer) -> list[str]:
    ids = auto_scaling_group(aws, GROUP, desired=2)
    aws.client("autoscaling").put_lifecycle_hook(
        LifecycleHookName=HOOK,
        AutoScalingGroupName=GROUP,
        LifecycleTransition=lifecycle.TERMINATING,
        HeartbeatTimeout=300,
        DefaultResult="ABANDON",
    )
    return ids


async def test_heartbeat_and_complete_a_started_action(aws_env: MotoServer, clients: AwsClients) -> None:
    victim, other = _group(aws_env)
    action = aws_env.start_lifecycle_action(GROUP, victim, emit=False)
    hooks = LifecycleActions(clients)
    await hooks.record_heartbeat(GROUP, HOOK, victim, action.token)
    await hooks.complete_lifecycle_action(GROUP, HOOK, victim, action.token)
    (recorded,) = aws_env.lifecycle_actions()
    assert len(recorded.heartbeats) == 1
    assert recorded.result == "CONTINUE"
    assert recorded.completed_by == "CompleteLifecycleAction"

    # Already completed: gone, not a failure to retry.
    with pytest.raises(LifecycleActionGone) as caught:
        await hooks.complete_lifecycle_action(GROUP, HOOK, victim, action.token)
    assert not caught.value.retryable
    # By instance id alone, for an instance with no action.
    with pytest.raises(LifecycleActionGone):
        await hooks.record_heartbeat(GROUP, HOOK, other)
    with pytest.raises(LifecycleActionGone):
        await hooks.complete_lifecycle_action(GROUP, HOOK, other, None, "ABANDON")


async def test_complete_by_instance_id(aws_env: MotoServer, clients: AwsClients) -> None:
    victim, _ = _group(aws_env)
    aws_env.start_lifecycle_action(GROUP, victim, emit=False)
    await LifecycleActions(clients).complete_lifecycle_action(GROUP, HOOK, victim, None, "ABANDON")
    (recorded,) = aws_env.lifecycle_actions()
    assert recorded.result == "ABANDON"


# -- the call list -----------------------------------------------------------------------------------


async def test_every_call_made_is_in_calls(aws_env: MotoServer, clients: AwsClients) -> None:
    url = _queue(aws_env)
    _send(aws_env, url, 3)
    queue = Queue(clients, url)
    got = await queue.receive(wait_time=1)
    await queue.extend(got, 10)
    await queue.delete(got)
    await InstanceDirectory(clients).lookup(_run_instances(aws_env, 1))
    assert set(clients.counts) <= CALLS
    with pytest.raises(ValueError, match=r"not in kubespot\.aws\.CALLS"):
        await clients.call("sqs", "PurgeQueue", QueueUrl=url)
