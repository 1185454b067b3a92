"""QueueConsumer against moto over HTTP: batching, leases kept alive, outcomes, the in-flight cap, drain.

Short long-polls (1 s) and the minimum visibility timeout (3 s) keep the file fast; the behaviour
under test does not depend on the values.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from kubespot.aws import AwsClients, Queue, QueueMessage
from kubespot.config.aws import AwsSettings
from kubespot.config.queue import QueueSettings
from kubespot.controllers.interruption.sqs.consumer import Lease, Outcome, QueueConsumer
from kubespot.model import SystemClock
from kubespot.sim.awssim import MotoServer

Handler = Callable[[QueueMessage, Lease], Awaitable[Outcome]]


@pytest.fixture
async def clients(aws_env: MotoServer) -> AsyncIterator[AwsClients]:
    settings = AwsSettings(region=aws_env.region, endpoint_url=aws_env.endpoint_url, max_attempts=2)
    async with AwsClients(settings) as c:
        yield c


def _queue(aws: MotoServer, n: int = 0) -> str:
    sqs = aws.client("sqs")
    url = sqs.create_queue(QueueName="interruptions")["QueueUrl"]
    _send(aws, url, n)
    return url


def _send(aws: MotoServer, url: str, n: int, start: int = 0) -> None:
    sqs = aws.client("sqs")
    for first in range(start, start + n, 10):
        entries: Any = [
            {"Id": str(i), "MessageBody": json.dumps({"n": i})}
            for i in range(first, min(start + n, first + 10))
        ]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)


def _depth(aws: MotoServer, url: str) -> tuple[int, int]:
    return aws.queue_counts(url)


def _settings(url: str, **overrides: Any) -> QueueSettings:
    values: dict[str, Any] = {"url": url, "receivers": 4, "wait_time": 1, "visibility_timeout": 3}
    values.update(overrides)
    return QueueSettings(**values)


@asynccontextmanager
async def _running(
    clients: AwsClients, url: str, handle: Handler, **overrides: Any
) -> AsyncIterator[QueueConsumer]:
    consumer = QueueConsumer(
        Queue(clients, url), settings=_settings(url, **overrides), handle=handle, clock=SystemClock()
    )
    task = asyncio.create_task(consumer.run())
    try:
        yield consumer
    finally:
        await consumer.drain(timeout=5)
        await asyncio.wait_for(task, timeout=5)


async def _until(condition: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def test_300_messages_handled_once_deleted_in_batches(aws_env: MotoServer, clients: AwsClients) -> None:
    url = _queue(aws_env, 300)
    seen: Counter[str] = Counter()
    bodies: set[int] = set()

    async def handle(message: QueueMessage, lease: Lease) -> Outcome:
        seen[message.message_id] += 1
        bodies.add(json.loads(message.body)["n"])
        await asyncio.sleep(0)
        return Outcome.DONE

    started = time.monotonic()
    async with _running(clients, url, handle) as consumer:
        await _until(lambda: consumer.stats.deleted >= 300, 30, "300 deletes")
        elapsed = time.monotonic() - started
    assert bodies == set(range(300))
    assert set(seen.values()) == {1}
    assert consumer.stats.received == 300 and consumer.stats.deleted == 300
    assert consumer.stats.errors == 0 and consumer.stats.in_flight == 0
    assert _depth(aws_env, url) == (0, 0)
    receives = clients.counts[("sqs", "ReceiveMessage")]
    deletes = clients.counts[("sqs", "DeleteMessageBatch")]
    # 30 full receives plus the pollers' empty ones at the end; deletes coalesced across handlers.
    assert receives <= 30 + 4 * 8
    assert deletes <= 45
    print(
        f"\n300 messages in {elapsed:.2f} s ({300 / elapsed:.0f}/s); {receives} receives, {deletes} deletes"
    )


async def test_slow_handler_keeps_its_message_hidden(aws_env: MotoServer, clients: AwsClients) -> None:
    url = _queue(aws_env, 1)
    calls: list[QueueMessage] = []
    leases: list[Lease] = []

    async def handle(message: QueueMessage, lease: Lease) -> Outcome:
        calls.append(message)
        leases.append(lease)
        await asyncio.sleep(8)  # well past the 3 s visibility timeout
        return Outcome.DONE

    async with _running(clients, url, handle, receivers=3) as consumer:
        await _until(lambda: consumer.stats.deleted == 1, 15, "the slow message's delete")
    assert len(calls) == 1, "the message was delivered again while it was being handled"
    assert calls[0].receive_count == 1
    assert leases[0].renewals >= 4 and not leases[0].lost
    assert _depth(aws_env, url) == (0, 0)
    # Renewals are the only visibility calls, and there were few of them: one per renewal, plus
    # one that may have been out when the handler finished (not counted: its lease was gone) and
    # any that failed on a busy machine (retried at the next tick).
    calls_made = clients.counts[("sqs", "ChangeMessageVisibilityBatch")]
    assert leases[0].renewals <= calls_made <= leases[0].renewals + 1 + consumer.stats.renew_errors


async def test_renewals_are_batched_across_messages(aws_env: MotoServer, clients: AwsClients) -> None:
    url = _queue(aws_env, 30)

    async def handle(message: QueueMessage, lease: Lease) -> Outcome:
        await asyncio.sleep(4)
        return Outcome.DONE

    async with _running(clients, url, handle) as consumer:
        await _until(lambda: consumer.stats.deleted == 30, 15, "30 deletes")
    assert consumer.stats.renewals >= 30  # each message renewed at least once
    # Far fewer calls than renewals: due leases share ChangeMessageVisibilityBatch calls.
    assert clients.counts[("sqs", "ChangeMessageVisibilityBatch")] <= consumer.stats.renewals / 3


async def test_leave_lets_the_message_come_back(aws_env: MotoServer, clients: AwsClients) -> None:
    url = _queue(aws_env, 1)
    counts: list[int] = []

    async def handle(message: QueueMessage, lease: Lease) -> Outcome:
        counts.append(message.receive_count)
        return Outcome.LEAVE if message.receive_count == 1 else Outcome.DONE

    async with _running(clients, url, handle) as consumer:
        await _until(lambda: consumer.stats.deleted == 1, 10, "the redelivered message's delete")
    assert counts == [1, 2]
    assert consumer.stats.left == 1
    assert _depth(aws_env, url) == (0, 0)


async def test_retry_makes_the_message_visible_at_once(aws_env: MotoServer, clients: AwsClients) -> None:
    url = _queue(aws_env, 1)
    seen: list[float] = []

    async def handle(message: QueueMessage, lease: Lease) -> Outcome:
        seen.append(time.monotonic())
        return Outcome.RETRY if message.receive_count < 3 else Outcome.DONE

    async with _running(clients, url, handle, visibility_timeout=30) as consumer:
        await _until(lambda: consumer.stats.deleted == 1, 5, "the third delivery's delete")
    assert len(seen) == 3
    assert seen[-1] - seen[0] < 3  # not the 30 s visibility timeout


async def test_handler_exception_is_logged_and_left(
    aws_env: MotoServer, clients: AwsClients, caplog: pytest.LogCaptureFixture
) -> None:
    url = _queue(aws_env, 5)
    counts: Counter[int] = Counter()

    async def handle(message: QueueMessage, lease: Lease) -> Outcome:
        n = json.loads(message.body)["n"]
        counts[n] += 1
        if n == 0 and message.receive_count == 1:
            raise RuntimeError("boom")
        return Outcome.DONE

    with caplog.at_level(logging.ERROR, logger="kubespot.controllers.interruption.sqs.consumer"):
        async with _running(clients, url, handle) as consumer:
            await _until(lambda: consumer.stats.deleted == 4, 5, "the other four deletes")
            _send(aws_env, url, 3, start=10)  # the consumer keeps going after the failure
            await _until(lambda: consumer.stats.deleted == 8, 10, "the failed message's second try")
    assert counts[0] == 2 and all(counts[n] == 1 for n in (1, 2, 3, 4, 10, 11, 12))
    assert consumer.stats.errors == 1 and consumer.stats.left == 1
    failed = [r for r in caplog.records if "handler failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info is not None
    assert _depth(aws_env, url) == (0, 0)


async def test_max_in_flight_is_never_exceeded(aws_env: MotoServer, clients: AwsClients) -> None:
    url = _queue(aws_env, 40)
    running = 0
    peak = 0

    async def handle(message: QueueMessage, lease: Lease) -> Outcome:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            await asyncio.sleep(0.1)
        finally:
            running -= 1
        return Outcome.DONE

    async with _running(clients, url, handle, max_in_flight=5) as consumer:
        await _until(lambda: consumer.stats.deleted == 40, 15, "40 deletes")
    assert peak == 5
    assert consumer.stats.received == 40  # none received beyond the cap and left hanging
    assert _depth(aws_env, url) == (0, 0)


async def test_receive_errors_are_retried_not_fatal(aws_env: MotoServer, clients: AwsClients) -> None:
    url = f"{aws_env.endpoint_url}/{aws_env.account_id}/not-yet"

    async def handle(message: QueueMessage, lease: Lease) -> Outcome:
        return Outcome.DONE

    async with _running(clients, url, handle, receivers=1) as consumer:
        await _until(lambda: consumer.stats.receive_errors >= 2, 5, "two failed receives")
        aws_env.client("sqs").create_queue(QueueName="not-yet")
        _send(aws_env, url, 1)
        await _until(lambda: consumer.stats.deleted == 1, 10, "recovery after the queue appeared")


async def test_drain_finishes_quick_handlers_and_releases_the_rest(
    aws_env: MotoServer, clients: AwsClients
) -> None:
    url = _queue(aws_env, 6)
    started: set[int] = set()

    async def handle(message: QueueMessage, lease: Lease) -> Outcome:
        n = json.loads(message.body)["n"]
        started.add(n)
        await asyncio.sleep(0.3 if n % 2 else 60)
        return Outcome.DONE

    consumer = QueueConsumer(
        Queue(clients, url),
        settings=_settings(url, visibility_timeout=60),
        handle=handle,
        clock=SystemClock(),
    )
    task = asyncio.create_task(consumer.run())
    await _until(lambda: len(started) == 6, 15, "six handlers")
    t0 = time.monotonic()
    # 3 s: room for the quick ones' deletes on a busy machine, far from the slow ones' 60 s.
    await consumer.drain(timeout=3.0)
    await asyncio.wait_for(task, timeout=5)
    assert time.monotonic() - t0 < 8
    assert consumer.stats.deleted == 3 and consumer.stats.left == 3
    assert consumer.stats.in_flight == 0
    # The three cut short are visible again at once, not after the 60 s visibility timeout.
    assert _depth(aws_env, url) == (3, 0)
