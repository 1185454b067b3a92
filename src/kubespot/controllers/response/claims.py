"""The runner's writes of a node's ``kubespot.io/actions`` record: claim, update, finish.

Every write is compare-and-set on the Node and names the runner, so a restarted or newly elected
runner continues from the record instead of starting over. With leader election on, this replica is
the only runner and takes a record left by another over at once; with election off, a record
another replica wrote recently is followed (the compare-and-set decides who claims each step) and
taken over once it is stale.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from kubespot.controllers.response.step import LOGGER, Claimed
from kubespot.kube import KubeError, NodeView
from kubespot.model import Clock
from kubespot.records.actions import (
    ACTIONS_ANNOTATION,
    ActionsRecord,
    RecordError,
    StepState,
    decode_record,
    record_patch,
)

log = logging.getLogger(LOGGER)

#: With election off, a record another replica wrote is followed for max_delay plus this long
#: since its last write; past that its runner is taken to be gone and the work is taken over.
STALE_MARGIN = 30.0


class NodeWriter(Protocol):
    """What the writes need of ``kubespot.kube.KubeClient``."""

    async def update_node(
        self,
        name: str,
        change: Callable[[NodeView], Mapping[str, Any] | None],
        *,
        current: NodeView | None = None,
    ) -> NodeView: ...


class RecordWriter:
    """Writes the records of runner ``identity``; ``noted`` hears of every node copy a claim or an
    update left (for the post-drain steps of a node deleted next)."""

    def __init__(
        self,
        kube: NodeWriter,
        *,
        clock: Clock,
        identity: str,
        exclusive: bool,
        max_delay: float,
        noted: Callable[[NodeView, ActionsRecord | None], None],
    ) -> None:
        self._kube = kube
        self._clock = clock
        self.identity = identity
        #: Leader election makes this the only runner: a record left by another is taken over at once.
        self._stale_after = 0.0 if exclusive else max_delay + STALE_MARGIN
        self._noted = noted
        #: The last record this runner wrote per node: the node index may not have seen it yet.
        self._written: dict[str, ActionsRecord] = {}
        #: Records whose final write failed: written again rather than redone (no second publish).
        self._unwritten: dict[tuple[str, str], ActionsRecord] = {}

    def held_by_other(self, record: ActionsRecord, now: datetime) -> bool:
        """Whether another runner, alive as far as ``record`` shows, is working on it."""
        return record.live_other(self.identity, now, self._stale_after)

    def lagging(self, name: str, record: ActionsRecord) -> bool:
        """Whether ``record`` (node ``name``'s, as the index shows it) is an older copy of a record
        this runner has written since."""
        mine = self._written.get(name)
        return mine is not None and record.event == mine.event and _behind(record, mine)

    def forget(self, name: str) -> None:
        """Node ``name`` was deleted."""
        self._written.pop(name, None)

    def unwritten(self, name: str, event_id: str) -> ActionsRecord | None:
        """The finished record of ``event_id`` whose write failed, if any."""
        return self._unwritten.get((name, event_id))

    async def claim(
        self, node: NodeView, event_id: str, build: Callable[[ActionsRecord | None], ActionsRecord]
    ) -> Claimed | None:
        """Write ``build(old)`` unless another live runner has a record of this event (then follow)."""
        now = self._clock.now()
        me = self.identity

        def change(old: ActionsRecord | None) -> ActionsRecord | None:
            if old is not None and old.event == event_id and self.held_by_other(old, now):
                return None
            if old is not None and old.event == event_id and old.finished is not None:
                return None  # finished meanwhile: nothing left to claim
            return replace(build(old), runner=me, at=now)

        return await self._write(node, event_id, change)

    async def update(
        self, node: NodeView, event_id: str, mutate: Callable[[ActionsRecord], ActionsRecord]
    ) -> Claimed | None:
        """Change the record of ``event_id`` (if it is still that event's and not another live
        runner's), renewing the runner's mark."""
        now = self._clock.now()
        me = self.identity

        def change(old: ActionsRecord | None) -> ActionsRecord | None:
            if old is None or old.event != event_id or self.held_by_other(old, now):
                return None
            return replace(mutate(old), runner=me, at=now)

        return await self._write(node, event_id, change)

    async def finish(self, node: NodeView, final: ActionsRecord) -> bool:
        """Write ``final`` over its event's unfinished record. True once written (nothing is left to
        do for the node); False when the node is gone, or when the write failed (logged): ``final``
        is then kept, to be written again rather than redone."""
        key = (node.name, final.event)

        def change(old: ActionsRecord | None) -> ActionsRecord | None:
            # Only over this event's unfinished record: a newer event's record is never overwritten.
            return final if old is not None and old.event == final.event and old.finished is None else None

        try:
            await self._kube.update_node(
                node.name, lambda n: record_patch(n.annotations, change), current=node
            )
        except KubeError as err:
            if err.code == 404:
                self._unwritten.pop(key, None)
                return False
            self._unwritten[key] = final
            log.warning("could not mark the record of node %s finished (will try again): %s", node.name, err)
            return False
        self._unwritten.pop(key, None)
        return True

    async def _write(
        self, node: NodeView, event_id: str, change: Callable[[ActionsRecord | None], ActionsRecord | None]
    ) -> Claimed | None:
        try:
            written = await self._kube.update_node(
                node.name, lambda n: record_patch(n.annotations, change), current=node
            )
        except KubeError as err:
            if err.code != 404:
                log.warning("could not write the actions record of node %s: %s", node.name, err)
            return None
        try:
            record = decode_record(written.annotations.get(ACTIONS_ANNOTATION))
        except RecordError:
            return None
        self._noted(written, record)
        if record is not None and record.runner == self.identity:
            self._written[node.name] = record
        if record is None or record.event != event_id or record.runner != self.identity:
            if record is not None and record.event == event_id:
                log.info(
                    "node %s: following %s, which has its response actions in hand", node.name, record.runner
                )
            return None
        return written, record


def _progress(record: ActionsRecord) -> tuple[datetime, bool, bool, bool]:
    # The writes in the order one runner makes them; deregistration is the one step written twice
    # (pending before AWS is asked, then its outcome).
    lb = record.loadbalancer
    return (
        record.at,
        lb is not None and lb.state is not StepState.PENDING,
        record.post is not None,
        record.finished is not None,
    )


def _behind(record: ActionsRecord, mine: ActionsRecord) -> bool:
    """Whether ``record`` is an older copy of the record ``mine`` (written after it by this runner):
    earlier, or as early (one clock tick) but fewer steps along."""
    return record.runner == mine.runner and _progress(record) < _progress(mine)
