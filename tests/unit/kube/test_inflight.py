"""The cap on API calls in flight: at most N at once, urgent (fencing) waiters first, cancellation safe."""

from __future__ import annotations

import asyncio

from kubespot.kube.inflight import InFlight


async def test_at_most_limit_hold_a_slot_and_the_others_wait_in_order() -> None:
    slots = InFlight(2)
    order: list[str] = []
    release = asyncio.Event()

    async def call(name: str) -> None:
        async with slots.slot():
            order.append(name)
            await release.wait()

    tasks = [asyncio.create_task(call(n)) for n in "abcd"]
    await asyncio.sleep(0)
    assert order == ["a", "b"] and slots.busy == 2 and slots.waiting == 2
    release.set()
    await asyncio.gather(*tasks)
    assert order == ["a", "b", "c", "d"] and slots.busy == 0 and slots.waiting == 0


async def test_an_urgent_waiter_takes_the_next_free_slot_ahead_of_ordinary_ones() -> None:
    slots = InFlight(1)
    order: list[str] = []
    gate = asyncio.Event()

    async def call(name: str, *, urgent: bool = False) -> None:
        async with slots.slot(urgent=urgent):
            order.append(name)
            await gate.wait()

    first = asyncio.create_task(call("first"))
    await asyncio.sleep(0)
    ordinary = [asyncio.create_task(call(f"o{i}")) for i in range(3)]
    await asyncio.sleep(0)
    fence = asyncio.create_task(call("fence", urgent=True))
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(first, fence, *ordinary)
    assert order == ["first", "fence", "o0", "o1", "o2"]


async def test_a_cancelled_waiter_gives_up_its_place_and_a_slot_is_never_lost() -> None:
    slots = InFlight(1)
    await slots.acquire()
    waiter = asyncio.create_task(slots.acquire())
    other = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    slots.release()  # goes to `other`, not to the cancelled waiter
    await asyncio.wait_for(other, 1)
    assert slots.busy == 1 and slots.waiting == 0
    slots.release()
    assert slots.busy == 0
    # Handed over just as the receiver was cancelled: the slot moves on instead of leaking.
    await slots.acquire()
    late = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)
    slots.release()
    late.cancel()
    await asyncio.gather(late, return_exceptions=True)
    assert slots.busy == 0
