"""Scheduled changes due days ahead, kept on their Node until kubespot has dealt with them.

This module owns the ``kubespot.io/scheduled`` annotation: a short JSON list of the scheduled changes
(AWS Health EC2 maintenance) the controller took off the queue and has not acted on yet, each with
what it takes to rebuild the ``InterruptionEvent``. The interruption queue keeps a message for
minutes (300 s from ``kubespot aws bootstrap``) while the change is due in days, so once the entry is
written the message is deleted and the Node is the record.

Every controller replica re-arms the node's handler from the entries it sees (once the node index has
synced, then on each change of a node): the handler keeps a pending event on its timer, and when
several replicas wake at act_at the state annotation's compare-and-set lets one fence and the others
follow, as for any notice. An entry goes once its event is settled (done, withdrawn, superseded,
failed), when a Health "closed" message withdraws it (replicas that had it armed and not yet due
withdraw it too when it disappears), and, as a backstop, ``PRUNE_AFTER`` past its start time. It is
never acted on once its start time has passed: the maintenance has begun by then.

Writes are compare-and-set on the node and idempotent by event id, so any replica may add, replace
(a Health update moves ``startTime``) or remove an entry. In dry run nothing is written: the old
behaviour (the message stays on the queue as the reminder) applies.

SQS does not keep order, and a Health event's messages may come back after a newer one (a
redelivery, another replica's slow receive). A "closed" message leaves a tombstone on the node
(``kubespot.io/scheduled-closed``: the event id, the closed message's time, kept until the change's
start time has long passed), so an "upcoming" message sent before it (EventBridge ``time``) is
outdated and never re-arms the cancelled change, on any replica and after restarts; an update older
than the recorded one is outdated likewise (``outdated``). The tombstones have their own annotation
so an older kubespot reading ``kubespot.io/scheduled`` never mistakes one for a change to act on.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import orjson

from kubespot.handling.node_changes import NodeChanges
from kubespot.handling.node_handler import NodeHandler
from kubespot.handling.node_index import NodeIndex
from kubespot.kube import KubeClient, KubeError, NodeView
from kubespot.model import Clock, InterruptionEvent, Kind, Source
from kubespot.observability.logs import log_context
from kubespot.observability.metrics import Metrics
from kubespot.records.annotation_json import text_field, utc_time

log = logging.getLogger("kubespot.handling.scheduled")

SCHEDULED_ANNOTATION = "kubespot.io/scheduled"
#: Health events closed (cancelled) before their start: id → the closed message's time and a prune time.
CLOSED_ANNOTATION = "kubespot.io/scheduled-closed"
#: Tombstones kept per node (the latest to expire stay).
CLOSED_KEPT = 16
#: Entries kept per node: an instance rarely has more than one or two scheduled changes at a time,
#: and the annotation must stay small (every node watch carries it).
SCHEDULED_KEPT = 8
#: How long past its start time an entry may stay (if no replica saw its event settle) before any
#: write or sweep drops it.
PRUNE_AFTER = timedelta(hours=1)
SUMMARY_CHARS = 120
#: A replica withdraws an armed event whose entry disappeared only while the event is at least this
#: far from due: a due event is the fence's business (the entry goes when another replica settles it).
WITHDRAW_MARGIN = timedelta(seconds=5)
#: An entry this replica wrote and has not yet seen through its node watch is not taken as removed
#: when absent from an older copy of the node, for up to this long.
UNSEEN_GRACE = 30.0
#: Every node with entries is looked at this often even without a change (pruning, expiry).
SWEEP_SECONDS = 300.0
REMOVE_ATTEMPTS = 5


class RecordError(ValueError):
    """The annotation is not a list kubespot wrote (hand-edited, or from another version)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One scheduled change as recorded on its node."""

    id: str
    kind: Kind
    instance_id: str
    source: Source
    notice: datetime
    #: When the recording replica planned to act (``start - scheduled_lead_time``); informative: a
    #: replica re-arming applies its own lead time to ``deadline`` (see ``event``).
    act_at: datetime
    #: The change's start time (Health ``startTime``).
    deadline: datetime | None
    summary: str = ""

    @classmethod
    def of(cls, event: InterruptionEvent) -> Entry:
        summary = " ".join(event.description.split())
        if len(summary) > SUMMARY_CHARS:
            summary = summary[: SUMMARY_CHARS - 1] + "…"
        return cls(
            id=event.id,
            kind=event.kind,
            instance_id=event.instance_id,
            source=event.source,
            notice=event.notice_time,
            act_at=event.act_at,
            deadline=event.deadline,
            summary=summary,
        )

    @property
    def when(self) -> datetime:
        """The moment the entry is about: its start time (act_at when it has none)."""
        return self.deadline or self.act_at

    def stale(self, now: datetime) -> bool:
        """Long past: dropped by any write or sweep."""
        return self.when + PRUNE_AFTER < now

    def expired(self, now: datetime) -> bool:
        """Its start time has passed: too late to act on (the maintenance has begun)."""
        return self.deadline is not None and self.deadline <= now

    def same_schedule(self, other: Entry) -> bool:
        return (self.act_at, self.deadline) == (other.act_at, other.deadline)

    def event(self, *, node_name: str, lead_time: timedelta | None = None) -> InterruptionEvent:
        """The event to hand to the node's handler. ``lead_time``: this replica's
        ``scheduled_lead_time``, applied to the start time (a changed setting moves pending events)."""
        act_at = self.act_at
        if lead_time is not None and self.kind is Kind.SCHEDULED_MAINTENANCE and self.deadline is not None:
            act_at = self.deadline - lead_time
        return InterruptionEvent(
            id=self.id,
            kind=self.kind,
            instance_id=self.instance_id,
            source=self.source,
            notice_time=self.notice,
            act_at=act_at,
            deadline=self.deadline,
            node_name=node_name,
            description=self.summary or f"{self.kind.value} recorded on the node",
        )

    def to_json(self) -> dict[str, str]:
        data = {
            "id": self.id,
            "kind": self.kind.value,
            "instance": self.instance_id,
            "source": self.source.value,
            "notice": self.notice.isoformat(),
            "act_at": self.act_at.isoformat(),
        }
        if self.deadline is not None:
            data["deadline"] = self.deadline.isoformat()
        if self.summary:
            data["summary"] = self.summary
        return data


def decode_entries(text: str | None) -> tuple[Entry, ...]:
    """The entries in an annotation value (empty when absent); RecordError when it is garbage."""
    if not text:
        return ()
    try:
        data = orjson.loads(text)
        if not isinstance(data, list):
            raise ValueError("not a list")
        return tuple(_entry(item) for item in data)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"annotation {SCHEDULED_ANNOTATION} is not a kubespot record: {exc}") from None


def encode_entries(entries: Iterable[Entry]) -> str | None:
    """The annotation value, soonest first; None when there is nothing to keep (remove it)."""
    ordered = sorted(entries, key=lambda e: (e.act_at, e.id))
    if not ordered:
        return None
    return orjson.dumps([e.to_json() for e in ordered]).decode()


def pruned(entries: Iterable[Entry], now: datetime) -> tuple[Entry, ...]:
    return tuple(e for e in entries if not e.stale(now))


def with_entry(entries: Iterable[Entry], entry: Entry, now: datetime) -> tuple[Entry, ...]:
    """``entries`` with ``entry`` added or replacing the one with its id (a Health update), the long
    past ones pruned, and at most ``SCHEDULED_KEPT`` kept: those furthest in the past go first."""
    kept = [e for e in pruned(entries, now) if e.id != entry.id] + [entry]
    kept.sort(key=lambda e: (e.when, e.id))
    return tuple(kept[-SCHEDULED_KEPT:])


def without_entry(entries: Iterable[Entry], event_id: str, now: datetime) -> tuple[Entry, ...]:
    return tuple(e for e in pruned(entries, now) if e.id != event_id)


def record_patch(
    node: NodeView, change: Callable[[tuple[Entry, ...]], tuple[Entry, ...]]
) -> Mapping[str, Any] | None:
    """The merge patch that applies ``change`` to the node's entries; None when nothing changes.
    An unparsable record is overwritten (it was logged when read)."""
    old_text = node.annotations.get(SCHEDULED_ANNOTATION)
    try:
        old = decode_entries(old_text)
    except RecordError:
        old = ()
    new_text = encode_entries(change(old))
    if new_text == old_text:
        return None
    return {"metadata": {"annotations": {SCHEDULED_ANNOTATION: new_text}}}


@dataclass(frozen=True, slots=True)
class Closed:
    """A tombstone: the Health event ``id`` was closed by a message sent at ``at``."""

    id: str
    #: The "closed" message's time (EventBridge ``time``): an "upcoming" sent no later is outdated.
    at: datetime
    #: Dropped after this: the change's start time plus ``PRUNE_AFTER`` (by then no "upcoming" is
    #: acted on anyway: its start time has passed).
    until: datetime


def decode_closed(text: str | None) -> dict[str, Closed]:
    """The tombstones in an annotation value; garbage reads as none (it only ever adds caution)."""
    if not text:
        return {}
    try:
        data = orjson.loads(text)
        if not isinstance(data, dict):
            return {}
        return {
            key: Closed(key, utc_time(value["at"]), utc_time(value["until"]))
            for key, value in data.items()
            if isinstance(value, dict)
        }
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return {}


def encode_closed(tombstones: Mapping[str, Closed]) -> str | None:
    if not tombstones:
        return None
    ordered = sorted(tombstones.values(), key=lambda c: (c.until, c.id))
    return orjson.dumps(
        {c.id: {"at": c.at.isoformat(), "until": c.until.isoformat()} for c in ordered}
    ).decode()


def with_closed(tombstones: Mapping[str, Closed], closed: Closed, now: datetime) -> dict[str, Closed]:
    """``tombstones`` with ``closed`` (the latest closing time kept per id), the expired ones dropped
    and at most ``CLOSED_KEPT`` kept, those expiring last."""
    kept = {key: c for key, c in tombstones.items() if c.until >= now}
    before = kept.get(closed.id)
    if before is None or before.at < closed.at:
        kept[closed.id] = closed
    ordered = sorted(kept.values(), key=lambda c: (c.until, c.id))[-CLOSED_KEPT:]
    return {c.id: c for c in ordered}


def closed_of(event: InterruptionEvent) -> Closed:
    """The tombstone a "closed" message leaves."""
    when = event.deadline or event.act_at
    return Closed(event.id, event.notice_time, max(when, event.notice_time) + PRUNE_AFTER)


def is_outdated(event: InterruptionEvent, entries: Iterable[Entry], tombstones: Mapping[str, Closed]) -> str:
    """Why an "upcoming" (or updated) scheduled change is older than what the node already knows, or
    "" when it is not: its event was closed by a later message, or a later update is recorded."""
    if event.kind is not Kind.SCHEDULED_MAINTENANCE or event.cancelled:
        return ""
    closed = tombstones.get(event.id)
    if closed is not None and event.notice_time <= closed.at:
        return f"closed by a message of {closed.at.isoformat()}"
    for entry in entries:
        if entry.id == event.id and entry.notice > event.notice_time:
            return f"a later update ({entry.notice.isoformat()}) is recorded"
    return ""


def _closed_since(entry: Entry, tombstones: Mapping[str, Closed]) -> bool:
    """Whether ``entry`` was recorded from a message older than its event's closing."""
    closed = tombstones.get(entry.id)
    return closed is not None and entry.notice <= closed.at


def pruned_closed(node: NodeView, now: datetime) -> Mapping[str, Any] | None:
    """The merge patch dropping the node's expired tombstones (None: nothing to drop)."""
    old_text = node.annotations.get(CLOSED_ANNOTATION)
    new_text = encode_closed({k: c for k, c in decode_closed(old_text).items() if c.until >= now})
    if new_text == old_text:
        return None
    return {"metadata": {"annotations": {CLOSED_ANNOTATION: new_text}}}


def _entry(item: Any) -> Entry:
    if not isinstance(item, dict):
        raise TypeError(f"entry is {type(item).__name__}, expected an object")
    deadline = item.get("deadline")
    return Entry(
        id=text_field(item, "id"),
        kind=Kind(item["kind"]),
        instance_id=str(item.get("instance") or ""),
        source=Source(item.get("source") or Source.SQS.value),
        notice=utc_time(item["notice"]),
        act_at=utc_time(item["act_at"]),
        deadline=None if deadline is None else utc_time(deadline),
        summary=str(item.get("summary") or ""),
    )


# --- the controller's side: record, re-arm, clean up -------------------------------------------------


@dataclass
class _Armed:
    """An event this replica handed to a node's handler because of an entry."""

    event: InterruptionEvent
    #: Monotonic time it was armed.
    since: float
    #: The entry has been on the node as the index shows it since then (so its absence now means it
    #: was removed, not that the index has not caught up with our own write yet).
    seen: bool = False
    #: The resourceVersion of our own write of the entry ("" when it came from the node).
    written: str = ""
    settled: bool = False
    watcher: asyncio.Task[None] | None = None


class ScheduledChanges:
    """Records scheduled changes on their nodes and keeps every replica's handlers armed from them.

    ``hold`` and ``release`` are the queue handler's; ``run()`` re-arms from the nodes until cancelled
    (the controller runs it as a supervised task); ``aclose()`` stops the watchers.
    """

    def __init__(
        self,
        *,
        kube: KubeClient,
        nodes: NodeIndex,
        handler_for: Callable[[str], Awaitable[NodeHandler]],
        clock: Clock,
        metrics: Metrics,
        lead_time: timedelta,
        acts: Callable[[InterruptionEvent], bool],
        dry_run: bool,
    ) -> None:
        self._kube = kube
        self._nodes = nodes
        self._handler_for = handler_for
        self._clock = clock
        self._metrics = metrics
        self._lead_time = lead_time
        #: Whether this replica acts on an event of that kind at all (its kind may be switched off).
        self._acts = acts
        self.dry_run = dry_run
        #: Per node, per event id: what this replica armed from an entry.
        self._armed: dict[str, dict[str, _Armed]] = {}
        self._changes = NodeChanges(nodes)
        #: Nodes whose record could not be read, with the text that was logged (logged once).
        self._garbled: dict[str, str] = {}
        #: Per node: the tombstones this replica wrote (until the node watch shows them).
        self._closed: dict[str, dict[str, Closed]] = {}

    def armed(self, node_name: str) -> Mapping[str, InterruptionEvent]:
        """The events armed on ``node_name`` from its record (for logs and tests)."""
        return {key: armed.event for key, armed in self._armed.get(node_name, {}).items()}

    def wanted(self, event: InterruptionEvent) -> bool:
        """Whether ``event`` belongs on its node's record: a scheduled change not due yet."""
        return (
            event.kind is Kind.SCHEDULED_MAINTENANCE
            and not event.cancelled
            and event.act_at > self._clock.now()
            and self._acts(event)
        )

    # --- the queue handler's side ------------------------------------------------------------------

    async def hold(self, node: NodeView, event: InterruptionEvent) -> bool:
        """Record ``event`` on ``node`` and arm the node's handler with it. False when it is not
        recorded (dry run, or the write failed: logged): the handler is armed all the same, and the
        caller keeps the message as the reminder."""
        handler = await self._handler_for(node.name)
        if self.dry_run:
            await handler.handle(event)
            return False
        entry = Entry.of(event)
        armed = self._armed.setdefault(node.name, {})
        before = armed.get(event.id)
        if before is not None and before.settled and Entry.of(before.event).same_schedule(entry):
            # A redelivery of a change already dealt with: writing it again would only be removed again.
            await handler.handle(event)
            return True
        # Known before the write, so the node change our own write causes is not taken for news.
        mine = armed[event.id] = _Armed(event, self._clock.monotonic(), seen=before.seen if before else False)
        now = self._clock.now()
        stale = ""

        def change(n: NodeView) -> Mapping[str, Any] | None:
            # Checked on the node the write applies to, not on this replica's copy, which may not
            # show yet the "closed" another replica recorded a moment ago.
            nonlocal stale
            try:
                recorded = decode_entries(n.annotations.get(SCHEDULED_ANNOTATION))
            except RecordError:
                recorded = ()
            stale = is_outdated(event, recorded, decode_closed(n.annotations.get(CLOSED_ANNOTATION)))
            return None if stale else record_patch(n, lambda old: with_entry(old, entry, now))

        try:
            written = await self._kube.update_node(node.name, change, current=node)
        except KubeError as err:
            if before is not None:
                armed[event.id] = before
            else:
                armed.pop(event.id, None)
            log.warning("could not record %s on node %s: %s", event.id, node.name, err)
            self._metrics.action("scheduled_record", "failure")
            await handler.handle(event)
            return False
        if stale:
            if before is not None:
                armed[event.id] = before
            else:
                armed.pop(event.id, None)
            log.info("scheduled change %s on node %s is outdated (%s): not armed", event.id, node.name, stale)
            self._metrics.action("message", "outdated")
            return True
        mine.written = written.resource_version
        if before is not None and before.watcher is not None and not before.watcher.done():
            mine.watcher = before.watcher  # same event id: the same settlement to wait for
        await handler.handle(event)
        self._watch(node.name, mine, handler)
        self._metrics.action("scheduled_record", "written")
        return True

    def outdated(self, node: NodeView, event: InterruptionEvent) -> bool:
        """Whether ``event`` (a scheduled change from the queue) is older than what ``node`` records:
        a stale "upcoming" after the "closed" one, or an update older than the recorded one. Such a
        message is done with: it must neither re-arm nor move the change (logged)."""
        if event.kind is not Kind.SCHEDULED_MAINTENANCE or event.cancelled:
            return False
        try:
            entries = decode_entries(node.annotations.get(SCHEDULED_ANNOTATION))
        except RecordError:
            entries = ()
        why = is_outdated(event, entries, self._tombstones(node))
        if why:
            log.info(
                "scheduled change %s on node %s: outdated message (%s); ignored", event.id, node.name, why
            )
            self._metrics.action("scheduled_record", "outdated")
        return bool(why)

    def _tombstones(self, node: NodeView) -> dict[str, Closed]:
        """The node's tombstones, with this replica's own not yet seen through the node watch."""
        found = decode_closed(node.annotations.get(CLOSED_ANNOTATION))
        for closed in self._closed.get(node.name, {}).values():
            if closed.id not in found or found[closed.id].at < closed.at:
                found[closed.id] = closed
        return found

    async def release(
        self, node_name: str, event_id: str, *, closed: InterruptionEvent | None = None
    ) -> bool:
        """Remove ``event_id``'s entry from the node (a Health "closed" message: ``closed``, which
        also leaves its tombstone, see the module's docstring). False when the write failed (logged):
        the caller keeps the message to try again."""
        if self.dry_run:
            return True
        try:
            if closed is not None:
                await self._close(node_name, closed_of(closed))
            else:
                await self._remove(node_name, event_id)
        except KubeError as err:
            log.warning("could not remove %s from the record of node %s: %s", event_id, node_name, err)
            self._metrics.action("scheduled_record", "failure")
            return False
        return True

    # --- every replica: re-arm from the nodes -----------------------------------------------------

    async def run(self) -> None:
        """Re-arm from the records on the nodes once the index has synced, then on each node change
        (and every ``SWEEP_SECONDS``, to prune); runs until cancelled."""
        if self.dry_run:
            log.info("dry run: scheduled changes are not recorded on nodes; the queue keeps them")
            await asyncio.Event().wait()
        sweeper = asyncio.create_task(self._sweep())
        try:
            async with contextlib.aclosing(self._changes.batches()) as batches:
                async for names in batches:
                    for name in names:
                        try:
                            await self.reconcile(name)
                        except asyncio.CancelledError:
                            raise
                        except Exception:  # one node's trouble must not stop the others being re-armed
                            log.exception("re-arming the scheduled changes of node %s failed", name)
        finally:
            sweeper.cancel()
            await asyncio.wait({sweeper})
            await self.aclose()

    async def aclose(self) -> None:
        watchers = [
            armed.watcher
            for per_node in self._armed.values()
            for armed in per_node.values()
            if armed.watcher is not None
        ]
        for task in watchers:
            task.cancel()
        if watchers:
            await asyncio.wait(watchers)

    async def _sweep(self) -> None:
        while True:
            await self._clock.sleep(SWEEP_SECONDS)
            self._changes.mark(self._armed)
            self._changes.mark(
                n.name
                for n in self._nodes.nodes()
                if SCHEDULED_ANNOTATION in n.annotations or CLOSED_ANNOTATION in n.annotations
            )

    async def reconcile(self, name: str) -> None:
        """Bring this replica in line with node ``name``'s record: arm what is recorded and not armed
        (or armed with another schedule), withdraw what was removed before it was due, prune."""
        node = self._nodes.by_name(name)
        armed = self._armed.get(name, {})
        if node is None:  # deleted: its handler has nothing left to fence
            for gone in armed.values():
                self._stop(gone)
            self._armed.pop(name, None)
            self._garbled.pop(name, None)
            self._closed.pop(name, None)
            return
        text = node.annotations.get(SCHEDULED_ANNOTATION)
        try:
            entries = decode_entries(text)
        except RecordError as err:
            if self._garbled.get(name) != text:
                self._garbled[name] = text or ""
                log.warning("node %s: ignoring its record of scheduled changes: %s", name, err)
            return  # garbage is not a removal: nothing is withdrawn for it
        self._garbled.pop(name, None)
        now = self._clock.now()
        present = {entry.id: entry for entry in entries}
        tombstones = self._tombstones(node)
        for event_id, was in list(armed.items()):
            if event_id in present or node.resource_version == was.written:
                was.seen = True
            if event_id in present and not _closed_since(present[event_id], tombstones):
                continue
            if event_id in present:  # recorded from a stale message, closed since: withdrawn
                await self._forget(name, was, now)
                continue
            if not was.seen and self._clock.monotonic() - was.since < UNSEEN_GRACE:
                continue  # an older copy of the node than our own write
            await self._forget(name, was, now)
        for entry in entries:
            if entry.expired(now):
                continue  # the change has begun: too late to fence for it
            if _closed_since(entry, tombstones):
                continue  # written from a stale message (e.g. by an older replica): closed since
            await self._arm(name, entry)
        if any(entry.stale(now) for entry in entries):
            try:
                await self._kube.update_node(
                    name, lambda n: record_patch(n, lambda old: pruned(old, now)), current=node
                )
                self._metrics.action("scheduled_record", "pruned")
            except KubeError as err:
                log.warning("could not prune the record of node %s: %s", name, err)
        if any(c.until < now for c in decode_closed(node.annotations.get(CLOSED_ANNOTATION)).values()):
            try:
                await self._kube.update_node(name, lambda n: pruned_closed(n, now), current=node)
            except KubeError as err:
                log.warning("could not prune the closed changes of node %s: %s", name, err)

    async def _arm(self, name: str, entry: Entry) -> None:
        event = entry.event(node_name=name, lead_time=self._lead_time)
        armed = self._armed.setdefault(name, {})
        was = armed.get(entry.id)
        if was is not None and (was.event.act_at, was.event.deadline) == (event.act_at, event.deadline):
            return
        if not self._acts(event):
            return  # this replica does not act on that kind: leave the entry to those that do
        handler = await self._handler_for(name)
        with log_context(event_id=event.id, kind=event.kind.value, node=name, instance_id=event.instance_id):
            # The replica that took the message announced it; this one only re-reads the record.
            await handler.handle(event, announce=False)
            log.info(
                "scheduled change %s re-armed from node %s: acting at %s",
                event.id,
                name,
                event.act_at.isoformat(),
            )
        self._metrics.action("scheduled_record", "rearmed")
        now_armed = armed[entry.id] = _Armed(event, self._clock.monotonic(), seen=True)
        if was is not None and was.watcher is not None and not was.watcher.done():
            now_armed.watcher = was.watcher
        self._watch(name, now_armed, handler)

    async def _forget(self, name: str, was: _Armed, now: datetime) -> None:
        """The entry was removed: stop watching it, and withdraw the event from the handler if it is
        still pending there (another replica took a Health "closed" message for it)."""
        self._stop(was)
        self._armed.get(name, {}).pop(was.event.id, None)
        if was.settled or was.event.act_at <= now + WITHDRAW_MARGIN:
            return  # due or dealt with: the handler finishes what it started
        handler = await self._handler_for(name)
        current = handler.current
        if current is not None and current.id == was.event.id:
            return
        with log_context(event_id=was.event.id, kind=was.event.kind.value, node=name):
            log.info("scheduled change %s was removed from node %s before it was due", was.event.id, name)
            await handler.handle(replace(was.event, cancelled=True, act_at=now))
        self._metrics.action("scheduled_record", "withdrawn")

    def _watch(self, name: str, armed: _Armed, handler: NodeHandler) -> None:
        """Remove the entry once the handler has settled its event (a task per armed event)."""
        if armed.watcher is not None and not armed.watcher.done():
            return
        # A fresh context: the task outlives the message (or node change) that started it.
        armed.watcher = asyncio.create_task(self._settle(name, armed, handler), context=contextvars.Context())

    async def _settle(self, name: str, armed: _Armed, handler: NodeHandler) -> None:
        event_id = armed.event.id
        with log_context(event_id=event_id, node=name):
            how = await handler.settled(event_id)
            current = self._armed.get(name, {}).get(event_id)
            if current is not None:
                current.settled = True
            delay = 0.5
            for attempt in range(1, REMOVE_ATTEMPTS + 1):
                try:
                    if await self._remove(name, event_id):
                        log.info("scheduled change %s %s: removed from the record of %s", event_id, how, name)
                    return
                except KubeError as err:
                    if attempt == REMOVE_ATTEMPTS:
                        # Harmless if left: the handlers know it is done (state, undone ids), and it
                        # is pruned after its start time.
                        log.warning("could not remove %s from the record of %s: %s", event_id, name, err)
                        return
                    await self._clock.sleep(delay)
                    delay *= 2

    async def _close(self, name: str, closed: Closed) -> None:
        """Remove the entry and leave the tombstone, in one compare-and-set write. Raises KubeError."""
        now = self._clock.now()
        mine = self._closed.setdefault(name, {})
        mine[closed.id] = closed
        for key in [k for k, c in mine.items() if c.until < now]:
            del mine[key]

        def change(node: NodeView) -> Mapping[str, Any] | None:
            patch = record_patch(node, lambda old: without_entry(old, closed.id, now))
            old_text = node.annotations.get(CLOSED_ANNOTATION)
            new_text = encode_closed(with_closed(decode_closed(old_text), closed, now))
            if new_text == old_text:
                return patch
            annotations = dict((patch or {}).get("metadata", {}).get("annotations", {}))
            annotations[CLOSED_ANNOTATION] = new_text
            return {"metadata": {"annotations": annotations}}

        try:
            await self._kube.update_node(name, change, current=self._nodes.by_name(name))
        except KubeError as err:
            if err.code != 404:  # a node gone has nothing left to re-arm
                raise
        self._metrics.action("scheduled_record", "closed")

    async def _remove(self, name: str, event_id: str) -> bool:
        """Remove the entry (compare-and-set; True when there was one). Raises KubeError."""
        now = self._clock.now()
        removed = False

        def change(old: tuple[Entry, ...]) -> tuple[Entry, ...]:
            nonlocal removed
            removed = any(e.id == event_id for e in old)
            return without_entry(old, event_id, now)

        try:
            await self._kube.update_node(
                name, lambda n: record_patch(n, change), current=self._nodes.by_name(name)
            )
        except KubeError as err:
            if err.code == 404:
                return False  # the node is gone, and its record with it
            raise
        if removed:
            self._metrics.action("scheduled_record", "removed")
        return removed

    @staticmethod
    def _stop(armed: _Armed) -> None:
        if armed.watcher is not None:
            armed.watcher.cancel()
