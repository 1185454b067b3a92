"""``ScheduledChanges``: recording a change on its node, re-arming every replica's handler from the
record, letting go of a change removed before it was due, and cleaning the record up once the handler
has settled. Fakes for the API (compare-and-set on annotations), the node index and the handler; the
end-to-end suite runs the same against kubesim and real controller processes. ``NodeIndex.subscribe``
is checked at the end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import pytest

from kubespot.controllers.interruption.scheduled import (
    PRUNE_AFTER,
    SCHEDULED_ANNOTATION,
    Entry,
    ScheduledChanges,
    decode_entries,
    encode_entries,
)
from kubespot.handling.node_handler import Settled
from kubespot.handling.node_index import NodeIndex
from kubespot.kube import NodeView
from kubespot.model import InterruptionEvent
from kubespot.observability.metrics import Metrics
from support import fake_kube
from support.clocks import StillClock
from support.events import scheduled_change

T0 = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
LEAD = timedelta(minutes=10)


class FakeKube(fake_kube.FakeKube):
    """The shared fake API with nodes by name; ``entries`` reads a node's record of scheduled changes,
    ``put`` is another replica's write of it."""

    def entries(self, name: str) -> tuple[Entry, ...]:
        return decode_entries(self.nodes[name].annotations.get(SCHEDULED_ANNOTATION))

    def put(self, name: str, *entries: Entry) -> None:
        self.annotate(SCHEDULED_ANNOTATION, encode_entries(entries), node=name)


class FakeIndex:
    """What the index shows: the API's nodes, or a pinned older copy (``stale``)."""

    def __init__(self, kube: FakeKube) -> None:
        self.kube = kube
        self.stale: dict[str, NodeView] = {}
        self.listeners: list[Callable[[str], None]] = []

    def by_name(self, name: str) -> NodeView | None:
        return self.stale.get(name) or self.kube.nodes.get(name)

    def nodes(self) -> list[NodeView]:
        return [n for n in (self.by_name(name) for name in self.kube.nodes) if n is not None]

    async def wait_synced(self) -> None:
        return None

    def subscribe(self, listener: Callable[[str], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def changed(self, name: str) -> None:
        for listener in self.listeners:
            listener(name)


class FakeHandler:
    """Records what it is handed; ``settle`` ends an event's handling."""

    def __init__(self) -> None:
        self.handled: list[InterruptionEvent] = []
        #: Whether each handed event was to be announced as a new notice.
        self.announced: list[bool] = []
        self.current: InterruptionEvent | None = None
        self._settled: dict[str, asyncio.Future[Settled]] = {}

    async def handle(self, event: InterruptionEvent, *, announce: bool = True) -> None:
        self.handled.append(event)
        self.announced.append(announce)
        if event.cancelled:
            self.settle(event.id, Settled.WITHDRAWN)

    def _future(self, event_id: str) -> asyncio.Future[Settled]:
        return self._settled.setdefault(event_id, asyncio.get_running_loop().create_future())

    async def settled(self, event_id: str) -> Settled:
        return await asyncio.shield(self._future(event_id))

    def settle(self, event_id: str, how: Settled) -> None:
        if not self._future(event_id).done():
            self._future(event_id).set_result(how)


class Replica:
    def __init__(self, kube: FakeKube, *, dry_run: bool = False, acts: bool = True) -> None:
        self.kube = kube
        self.index = FakeIndex(kube)
        self.clock = StillClock(T0, mono=1000.0)
        self.handlers: dict[str, FakeHandler] = {}
        self.changes = ScheduledChanges(
            kube=kube,  # type: ignore[arg-type]
            nodes=self.index,  # type: ignore[arg-type]
            handler_for=self.handler,  # type: ignore[arg-type]
            clock=self.clock,
            metrics=Metrics(),
            lead_time=LEAD,
            acts=lambda event: acts,
            dry_run=dry_run,
        )

    async def handler(self, name: str) -> FakeHandler:
        return self.handlers.setdefault(name, FakeHandler())

    def handled(self, name: str) -> list[InterruptionEvent]:
        return self.handlers[name].handled if name in self.handlers else []


def change(n: int = 1, *, start: datetime | None = None, node: str = "n1") -> InterruptionEvent:
    return scheduled_change(n, start=start or T0 + timedelta(days=n), noticed=T0, lead=LEAD, node=node)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.fixture
async def running() -> AsyncIterator[Callable[[Replica], None]]:
    tasks: list[asyncio.Task[None]] = []

    def start(replica: Replica) -> None:
        tasks.append(asyncio.create_task(replica.changes.run()))

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def rearmed(
    running: Callable[[Replica], None], *recorded: InterruptionEvent, acts: bool = True
) -> tuple[FakeKube, Replica]:
    """Node n1 with ``recorded`` already on it (as another replica wrote them) and a replica started
    over it, its first re-arming done."""
    kube = FakeKube("n1")
    kube.put("n1", *(Entry.of(e) for e in recorded))
    replica = Replica(kube, acts=acts)
    running(replica)
    await settle()
    return kube, replica


async def test_hold_records_arms_and_removes_the_entry_once_settled() -> None:
    kube = FakeKube("n1")
    replica = Replica(kube)
    event = change()
    assert await replica.changes.hold(kube.nodes["n1"], event)
    assert kube.entries("n1") == (Entry.of(event),)
    assert replica.handled("n1") == [event] and replica.handlers["n1"].announced == [True]
    assert await replica.changes.hold(kube.nodes["n1"], event), "a redelivery"
    assert kube.writes == 1, "the same entry is not written twice"

    replica.handlers["n1"].settle(event.id, Settled.DONE)
    await settle()
    assert kube.entries("n1") == ()
    assert SCHEDULED_ANNOTATION not in kube.nodes["n1"].annotations
    await replica.changes.aclose()


async def test_hold_in_dry_run_writes_nothing_but_arms_the_handler() -> None:
    kube = FakeKube("n1")
    replica = Replica(kube, dry_run=True)
    event = change()
    assert not await replica.changes.hold(kube.nodes["n1"], event)
    assert replica.handled("n1") == [event]
    assert await replica.changes.release("n1", event.id)
    assert kube.writes == 0


async def test_a_failed_write_is_reported_and_the_handler_still_armed() -> None:
    kube = FakeKube("n1")
    kube.failures = 1
    replica = Replica(kube)
    event = change()
    assert not await replica.changes.hold(kube.nodes["n1"], event)
    assert replica.handled("n1") == [event]
    assert kube.entries("n1") == ()
    assert replica.changes.armed("n1") == {}


async def test_every_replica_rearms_from_the_node_with_its_own_lead_time(
    running: Callable[[Replica], None],
) -> None:
    kube = FakeKube("n1", "n2")
    recorded = change()
    kube.put("n1", Entry.of(recorded))
    other = Replica(kube)
    running(other)
    await settle()
    [armed] = other.handled("n1")
    assert armed.id == recorded.id and armed.act_at == recorded.deadline - LEAD  # type: ignore[operator]
    assert armed.node_name == "n1" and not armed.cancelled
    assert other.handlers["n1"].announced == [False], "the replica that took the message announced it"
    assert other.handled("n2") == []

    other.index.changed("n1")  # e.g. a status update: nothing new for the handler
    await settle()
    assert len(other.handled("n1")) == 1

    moved = change(start=recorded.deadline + timedelta(hours=2))  # type: ignore[operator]
    kube.put("n1", Entry.of(moved))  # a Health update taken by another replica
    other.index.changed("n1")
    await settle()
    assert [e.deadline for e in other.handled("n1")] == [recorded.deadline, moved.deadline]


async def test_a_change_removed_before_it_is_due_is_withdrawn(running: Callable[[Replica], None]) -> None:
    event = change()
    kube, replica = await rearmed(running, event)
    assert len(replica.handled("n1")) == 1

    kube.put("n1")  # another replica took the Health "closed" message
    replica.index.changed("n1")
    await settle()
    withdrawn = replica.handled("n1")[-1]
    assert withdrawn.id == event.id and withdrawn.cancelled
    assert replica.changes.armed("n1") == {}


async def test_a_due_change_is_not_withdrawn_when_its_entry_goes(running: Callable[[Replica], None]) -> None:
    event = change()
    kube, replica = await rearmed(running, event)
    # act_at has come: another replica fenced, drained and removed the entry.
    replica.clock.t = event.act_at + timedelta(seconds=1)
    kube.put("n1")
    replica.index.changed("n1")
    await settle()
    assert not any(e.cancelled for e in replica.handled("n1"))
    assert replica.changes.armed("n1") == {}


async def test_our_own_entry_is_not_taken_as_removed_from_an_older_copy(
    running: Callable[[Replica], None],
) -> None:
    kube = FakeKube("n1")
    replica = Replica(kube)
    replica.index.stale["n1"] = kube.nodes["n1"]  # the watch has not delivered our write yet
    running(replica)
    await settle()
    event = change()
    assert await replica.changes.hold(kube.nodes["n1"], event)
    replica.index.changed("n1")
    await settle()
    assert not any(e.cancelled for e in replica.handled("n1"))
    assert event.id in replica.changes.armed("n1")

    # Once the watch has shown our write, a removal is a removal.
    del replica.index.stale["n1"]
    replica.index.changed("n1")
    await settle()
    kube.put("n1")
    replica.index.changed("n1")
    await settle()
    assert replica.handled("n1")[-1].cancelled


async def test_started_and_long_past_changes_are_not_armed_and_are_pruned(
    running: Callable[[Replica], None],
) -> None:
    begun = change(1, start=T0 - timedelta(minutes=5))
    long_past = change(2, start=T0 - PRUNE_AFTER - timedelta(minutes=1))
    pending = change(3)
    kube, replica = await rearmed(running, begun, long_past, pending)
    assert [e.id for e in replica.handled("n1")] == [pending.id]
    assert {e.id for e in kube.entries("n1")} == {begun.id, pending.id}


async def test_a_release_removes_the_entry_once(running: Callable[[Replica], None]) -> None:
    kube = FakeKube("n1")
    replica = Replica(kube)
    event = change()
    await replica.changes.hold(kube.nodes["n1"], event)
    writes = kube.writes
    assert await replica.changes.release("n1", event.id)
    assert kube.entries("n1") == () and kube.writes == writes + 1
    assert await replica.changes.release("n1", event.id)
    assert kube.writes == writes + 1
    kube.failures = 1
    kube.put("n1", Entry.of(event))
    assert not await replica.changes.release("n1", event.id), "the caller keeps the message"
    await replica.changes.aclose()


async def test_a_garbled_record_arms_and_withdraws_nothing(running: Callable[[Replica], None]) -> None:
    event = change()
    kube, replica = await rearmed(running, event)
    node = kube.nodes["n1"]
    kube.nodes["n1"] = NodeView("n1", resource_version="9", annotations={SCHEDULED_ANNOTATION: "{oops"})
    replica.index.changed("n1")
    await settle()
    assert len(replica.handled("n1")) == 1 and not replica.handled("n1")[0].cancelled
    assert event.id in replica.changes.armed("n1")
    kube.nodes["n1"] = node


async def test_a_kind_this_replica_does_not_act_on_is_left_alone(running: Callable[[Replica], None]) -> None:
    kube, replica = await rearmed(running, change(), acts=False)
    assert replica.handled("n1") == []
    assert len(kube.entries("n1")) == 1
    assert not replica.changes.wanted(change())


async def test_a_deleted_node_stops_its_watchers(running: Callable[[Replica], None]) -> None:
    kube, replica = await rearmed(running, change())
    assert replica.changes.armed("n1")
    del kube.nodes["n1"]
    replica.index.changed("n1")
    await settle()
    assert replica.changes.armed("n1") == {}


# --- NodeIndex.subscribe --------------------------------------------------------------------------


async def test_node_index_tells_subscribers_which_node_changed() -> None:
    kube = FakeKube("a", "b")
    index = NodeIndex(kube)  # type: ignore[arg-type]
    seen: list[str] = []
    unsubscribe = index.subscribe(seen.append)
    task = asyncio.create_task(index.run())
    try:
        await index.wait_synced()
        await settle()
        assert sorted(seen) == ["a", "b"]
        kube.put_node(NodeView("b"))
        await kube.delete_node("a")
        await settle()
        assert seen[2:] == ["b", "a"] and index.by_name("a") is None
        del kube.nodes["b"]  # changes the watch misses: it breaks and re-lists
        kube.nodes["c"] = NodeView("c")
        kube.interrupt_watches()
        await settle()
        assert sorted(seen[4:]) == ["b", "c"], "a re-list names what left and what came"
        unsubscribe()
        kube.put_node(NodeView("d"))
        await settle()
        assert len(seen) == 6
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_stale_upcoming_is_not_recorded_over_a_closing_the_index_does_not_show_yet() -> None:
    # Replica A took the Health "closed" and left its tombstone; replica B's node index still shows
    # the node without it when B takes a stale "upcoming": the compare-and-set write, made on the
    # node as the API server has it, sees the tombstone and records nothing (issue 10 review).
    from kubespot.controllers.interruption.scheduled import CLOSED_ANNOTATION, Closed, encode_closed

    kube = FakeKube("n1")
    replica = Replica(kube)
    event = change()
    before = kube.nodes["n1"]
    closed = Closed(event.id, T0 + timedelta(minutes=1), T0 + timedelta(days=3))
    kube.nodes["n1"] = NodeView(
        "n1", resource_version="2", annotations={CLOSED_ANNOTATION: encode_closed({event.id: closed}) or ""}
    )
    assert await replica.changes.hold(before, event), "dealt with: the message can go"
    assert kube.entries("n1") == () and kube.writes == 0
    assert replica.handled("n1") == [] and replica.changes.armed("n1") == {}
