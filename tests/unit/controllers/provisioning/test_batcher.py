"""The provisioning batcher's window: idle, max, repeated keys, and the immediate close of the
fallback path; and the pending-pod watch that feeds it.

Source: kubernetes-sigs/karpenter ``pkg/controllers/provisioning/batcher.go`` (``Trigger``: a UID
already in the window is ignored; ``Wait``: until ``BATCH_IDLE_DURATION`` without a trigger or
``BATCH_MAX_DURATION``; the UID set cleared when it returns). ``trigger_now`` is kubespot's
(docs/designs/launching.md §2).
"""

from __future__ import annotations

import asyncio
import time

from kubespot.controllers.provisioning.batcher import Batcher


async def _keep_triggering(batcher: Batcher, keys: list[str], every: float) -> None:
    for key in keys:
        batcher.trigger(key)
        await asyncio.sleep(every)


async def test_the_window_closes_after_idle_with_every_key() -> None:
    """batcher.go Wait: triggers closer together than the idle time keep the window open; it
    closes idle seconds after the last one, with all of them."""
    batcher = Batcher(idle=0.1, max_duration=2.0)
    started = time.monotonic()
    feeder = asyncio.create_task(_keep_triggering(batcher, [f"p{i}" for i in range(5)], 0.04))
    keys = await batcher.wait()
    elapsed = time.monotonic() - started
    await feeder
    assert keys == {f"p{i}" for i in range(5)}
    assert batcher.last_close == "idle"
    # 4 gaps of 0.04 s then 0.1 s idle: well under max, and not closed at the first idle gap.
    assert 0.25 <= elapsed < 1.0


async def test_the_window_closes_at_max_however_often_pods_arrive() -> None:
    """batcher.go Wait: BATCH_MAX_DURATION bounds the window even with a steady stream."""
    batcher = Batcher(idle=0.1, max_duration=0.3)
    started = time.monotonic()
    feeder = asyncio.create_task(_keep_triggering(batcher, [f"p{i}" for i in range(100)], 0.03))
    keys = await batcher.wait()
    elapsed = time.monotonic() - started
    feeder.cancel()
    assert batcher.last_close == "max"
    assert 0.3 <= elapsed < 0.6
    assert 4 <= len(keys) <= 15


async def test_a_repeated_key_does_not_extend_the_window() -> None:
    """batcher.go Trigger: a UID already in the window is ignored, so one pod's updates (status
    writes by the scheduler) do not hold the batch open."""
    batcher = Batcher(idle=0.1, max_duration=2.0)
    started = time.monotonic()
    feeder = asyncio.create_task(_keep_triggering(batcher, ["same"] * 20, 0.04))
    keys = await batcher.wait()
    elapsed = time.monotonic() - started
    feeder.cancel()
    assert keys == {"same"}
    assert elapsed < 0.2  # closed ~0.1 s after the first trigger, not after the twentieth


async def test_keys_are_cleared_between_windows() -> None:
    batcher = Batcher(idle=0.05, max_duration=1.0)
    batcher.trigger("a")
    assert await batcher.wait() == {"a"}
    assert not batcher.pending
    batcher.trigger("a")  # the same pod again, in a new window: a new trigger
    assert await asyncio.wait_for(batcher.wait(), 0.5) == {"a"}


async def test_trigger_now_closes_the_window_without_the_idle_wait() -> None:
    """kubespot's fallback path: a NodeClaim deleted for insufficient capacity re-plans at once."""
    batcher = Batcher(idle=0.5, max_duration=5.0)
    batcher.trigger("p1")
    waiter = asyncio.create_task(batcher.wait())
    await asyncio.sleep(0.02)
    started = time.monotonic()
    batcher.trigger_now("claim-gone")
    keys = await waiter
    assert time.monotonic() - started < 0.1
    assert keys == {"p1", "claim-gone"} and batcher.last_close == "now"
    # The next window waits for its idle time again.
    batcher.trigger("p2")
    started = time.monotonic()
    assert await batcher.wait() == {"p2"}
    assert time.monotonic() - started >= 0.45 and batcher.last_close == "idle"


async def test_wait_blocks_until_a_first_trigger() -> None:
    batcher = Batcher(idle=0.05, max_duration=1.0)
    waiter = asyncio.create_task(batcher.wait())
    await asyncio.sleep(0.15)
    assert not waiter.done()
    batcher.trigger("p")
    assert await asyncio.wait_for(waiter, 0.5) == {"p"}


async def test_the_pending_watch_triggers_provisionable_pods_and_requeues_them() -> None:
    """kubernetes-sigs/karpenter pkg/controllers/provisioning/controller.go PodController.Reconcile:
    a provisionable pod triggers the batcher and is requeued every 10 s while it stays so; a pod
    that got bound (or was deleted) stops."""
    from datetime import UTC, datetime
    from typing import Any

    from kubespot.controllers.provisioning.pending import PendingWatch
    from kubespot.kube.custom import ObjectList
    from support.clocks import ManualClock, settle

    def pod(uid: str, node: str = "", unschedulable: bool = True) -> dict[str, Any]:
        conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
        return {
            "metadata": {"name": uid, "namespace": "default", "uid": uid},
            "spec": {"nodeName": node} if node else {},
            "status": {"conditions": conditions if unschedulable else []},
        }

    changes: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()

    class Pods:
        async def list(self) -> ObjectList:
            return ObjectList((pod("a"), pod("b", node="n1"), pod("c", unschedulable=False)), "1")

        async def watch(self, rv: str) -> Any:
            while True:
                op, obj = await changes.get()
                yield op, obj, None

    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    seen: list[str] = []
    watch = PendingWatch(Pods(), seen.append, clock=clock, requeue=10.0)  # type: ignore[arg-type]
    task = asyncio.create_task(watch.run())
    try:
        await settle()
        assert seen == ["a"]  # b is bound, c not marked Unschedulable by kube-scheduler yet
        await changes.put(("MODIFIED", pod("c")))
        await settle()
        assert seen == ["a", "c"] and watch.waiting == {"a", "c"}
        await clock.advance(10.0)
        assert sorted(seen[2:]) == ["a", "c"]  # requeued
        await changes.put(("MODIFIED", pod("a", node="n2")))  # bound
        await changes.put(("DELETED", pod("c")))
        await settle()
        await clock.advance(10.0)
        assert len(seen) == 4 and watch.waiting == set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_window_counts_from_the_first_trigger_even_one_made_during_a_pass() -> None:
    """kubespot's measurement of the fallback path (docs/PERFORMANCE.md): ``window`` runs from the
    first trigger of a window, so a ``trigger_now`` that arrived while a pass ran (nobody waiting)
    reports the time it waited for that pass, not zero (batcher.go Wait has no such figure)."""
    batcher = Batcher(idle=5.0, max_duration=10.0)
    batcher.trigger_now("nodeclaim/general-a")
    await asyncio.sleep(0.1)  # a pass under way: nobody waits yet
    keys = await batcher.wait()
    assert keys == {"nodeclaim/general-a"} and batcher.last_close == "now"
    assert 0.1 <= batcher.window < 1.0
