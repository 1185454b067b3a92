"""The client-side token bucket: burst first, then the sustained rate, first come first served."""

from __future__ import annotations

from kubespot.kube import TokenBucket


class FakeTime:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_burst_is_free_then_callers_queue_at_the_rate() -> None:
    now = FakeTime()
    bucket = TokenBucket(qps=10, burst=3, monotonic=now)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    waits = [bucket.reserve() for _ in range(3)]
    assert waits == [0.1, 0.2, 0.30000000000000004] or all(
        abs(w - e) < 1e-9 for w, e in zip(waits, (0.1, 0.2, 0.3), strict=True)
    )


def test_tokens_refill_over_time_up_to_the_burst() -> None:
    now = FakeTime()
    bucket = TokenBucket(qps=2, burst=2, monotonic=now)
    bucket.reserve(), bucket.reserve()
    now.t = 100.0
    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]
    assert bucket.reserve() > 0


def test_zero_qps_is_unlimited() -> None:
    bucket = TokenBucket(qps=0, burst=1, monotonic=FakeTime())
    assert all(bucket.reserve() == 0.0 for _ in range(1000))


async def test_urgent_calls_go_before_ordinary_ones_already_waiting() -> None:
    import asyncio

    bucket = TokenBucket(qps=20, burst=1)
    order: list[str] = []

    async def always_ready() -> None:
        return None

    async def ordinary(name: str) -> None:
        await bucket.acquire_ordinary(always_ready)
        order.append(name)

    first = asyncio.create_task(ordinary("a"))  # takes the only token
    await asyncio.sleep(0)
    second = asyncio.create_task(ordinary("b"))  # waits for the next free token
    await asyncio.sleep(0.01)
    await bucket.acquire()  # urgent: books the next token, ahead of "b"
    order.append("urgent")
    await asyncio.gather(first, second)
    assert order == ["a", "urgent", "b"]


async def test_ordinary_calls_wait_for_ready() -> None:
    import asyncio

    bucket = TokenBucket(qps=0, burst=1)
    gate = asyncio.Event()

    async def ready() -> None:
        await gate.wait()

    task = asyncio.create_task(bucket.acquire_ordinary(ready))
    await asyncio.sleep(0.01)
    assert not task.done()
    gate.set()
    await asyncio.wait_for(task, 1)
