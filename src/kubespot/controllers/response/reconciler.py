"""One node brought forward: its pre-drain steps, its post-drain steps, or nothing, as its state says.

The node's state annotation (``kubespot.io/interruption``) names the event, its kind and phase; the
record (``kubespot.io/actions``) what was done about it. While the state is fenced or draining, the
pre-drain steps run (they claim the record: the drain waits for it). Once the state says drained,
the deadline passed, the node was deleted, or the state was removed (a withdrawn event), the
reconciler claims the post-drain steps, runs each that is due in order and marks the record
finished. A step recorded is never run again; a node deleted before its post-drain steps gets them
from the last copy seen (nothing can be written then). Under dry run only ``DryRun`` reports the
plan.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TypeVar

from kubespot.controllers.response.claims import NodeWriter, RecordWriter
from kubespot.controllers.response.dry_run import DryRun
from kubespot.controllers.response.loop import NodeSource
from kubespot.controllers.response.step import (
    LOGGER,
    Claimed,
    PostDrain,
    PostDrainStep,
    PreDrain,
    PreDrainStep,
    Step,
    Why,
)
from kubespot.kube import NodeView
from kubespot.model import Clock, Kind
from kubespot.model.summary import ActionSummary
from kubespot.observability.logs import log_context
from kubespot.records.actions import ACTIONS_ANNOTATION, ActionsRecord, RecordError, decode_record
from kubespot.records.interruption import STATE_ANNOTATION, NodeState, Phase, StateError, decode

log = logging.getLogger(LOGGER)

#: A state unchanged for longer than this, with no record of its event, is left alone: a controller
#: started long after an event must not isolate a node or publish a stale summary.
IGNORE_OLDER_THAN = timedelta(hours=1)

T = TypeVar("T")


@dataclass
class _Seen:
    """The last copy of a node the runner had work for (for when it is deleted)."""

    node: NodeView
    state: NodeState | None
    record: ActionsRecord | None


class Reconciler:
    """Brings nodes forward through the ``pre`` (pre-drain) and ``post`` (post-drain) steps, each
    list in its order, as runner ``identity``; with ``dry_run``, only says what they would do."""

    def __init__(
        self,
        nodes: NodeSource,
        kube: NodeWriter,
        *,
        pre: Sequence[PreDrainStep],
        post: Sequence[PostDrainStep],
        clock: Clock,
        identity: str,
        exclusive: bool,
        max_delay: float,
        dry_run: DryRun | None,
    ) -> None:
        self._nodes = nodes
        self._pre = pre
        self._post = post
        self._clock = clock
        self._writer = RecordWriter(
            kube, clock=clock, identity=identity, exclusive=exclusive, max_delay=max_delay, noted=self._noted
        )
        self._dry_run = dry_run
        #: Nodes with work left: swept, and remembered for their deletion.
        self._seen: dict[str, _Seen] = {}
        self._garbled: dict[str, str] = {}

    def interesting(self, name: str) -> bool:
        """Cheap filter for the node index's stream of changes (heartbeats included)."""
        if name in self._seen:
            return True
        node = self._nodes.by_name(name)
        return node is not None and (
            STATE_ANNOTATION in node.annotations or ACTIONS_ANNOTATION in node.annotations
        )

    def watched(self) -> Collection[str]:
        """The nodes to look at again even when they do not change."""
        return list(self._seen)

    async def reconcile(self, name: str) -> None:
        """Bring node ``name`` forward: pre-drain, post-drain, or nothing, as its state says."""
        node = self._nodes.by_name(name)
        if node is None:
            seen = self._seen.pop(name, None)
            self._garbled.pop(name, None)
            self._writer.forget(name)
            if self._dry_run is not None:
                self._dry_run.forget(name)
            elif seen is not None:
                await self._node_gone(seen)
            return
        state = self._read(node, STATE_ANNOTATION, decode)
        record = self._read(node, ACTIONS_ANNOTATION, decode_record)
        if record is not None and self._writer.lagging(name, record):
            # The index still shows an older copy of our own write (a pending record we have since
            # moved on from): acting on it would deregister twice. Its echo brings us back here.
            return
        now = self._clock.now()
        wanted = state is not None and self._wanted(state.kind)
        if wanted and state is not None and (record is None or record.event != state.event_id):
            # Too old to act on (see IGNORE_OLDER_THAN), unless it is still draining.
            wanted = state.phase is not Phase.DRAINED or now - state.since <= IGNORE_OLDER_THAN
        # Watched (swept, remembered for its deletion) while work is left for it.
        active = (
            wanted
            and state is not None
            and (record is None or record.event != state.event_id or record.finished is None)
        )
        if active or (record is not None and record.finished is None):
            self._seen[name] = _Seen(node, state if wanted else None, record)
        else:
            self._seen.pop(name, None)
        if self._dry_run is not None:
            if wanted and state is not None:
                await self._dry_run.report(node, state)
            return
        if state is None or not wanted:
            # Removed, not garbled: a hand-edited state is no withdrawal.
            removed = state is None and STATE_ANNOTATION not in node.annotations
            if removed and record is not None and record.finished is None:
                with log_context(event_id=record.event, kind=record.kind, node=name):
                    await self._post_drain(name, node, None, record, Why.WITHDRAWN)
            return
        with log_context(event_id=state.event_id, kind=state.kind, node=name):
            if record is None or record.event != state.event_id:
                claimed = await self._pre_drain(node, state, None)
                if claimed is None:
                    return
                node, record = claimed
            elif record.finished is None and (left := [s.name for s in self._pre if s.pending(record)]):
                if self._writer.held_by_other(record, now):
                    return  # another runner is at it right now
                log.info(
                    "resuming the %s of node %s left pending by %s", " and ".join(left), name, record.runner
                )
                claimed = await self._pre_drain(node, state, record)
                if claimed is None:
                    return
                node, record = claimed
            if record.finished is not None:
                return
            if state.phase is Phase.DRAINED:
                await self._post_drain(name, node, state, record, Why.DRAINED)
            elif state.deadline is not None and self._clock.now() >= state.deadline:
                await self._post_drain(name, node, state, record, Why.DEADLINE)

    def _wanted(self, kind: str) -> bool:
        """Whether any step acts on events of ``kind``."""
        try:
            k = Kind(kind)
        except ValueError:
            return False
        return any(k in step.kinds for step in (*self._pre, *self._post))

    def _noted(self, node: NodeView, record: ActionsRecord | None) -> None:
        seen = self._seen.get(node.name)
        if seen is not None:
            # Remembered as written, for the post-drain steps if the node is deleted next.
            seen.node, seen.record = node, record

    # --- reading the node ----------------------------------------------------------------------

    def _read(self, node: NodeView, key: str, decoder: Callable[[str | None], T | None]) -> T | None:
        """Annotation ``key`` decoded; None when it is absent or unreadable (hand-edited, another
        version). Logged once per text: the node index reports every heartbeat."""
        text = node.annotations.get(key)
        try:
            return decoder(text)
        except (StateError, RecordError) as err:
            seen = f"{node.name}\x00{text}"
            if self._garbled.get(node.name) != seen:
                self._garbled[node.name] = seen
                log.warning("node %s: ignoring an annotation kubespot cannot read: %s", node.name, err)
            return None

    # --- pre-drain -----------------------------------------------------------------------------

    async def _pre_drain(
        self, node: NodeView, state: NodeState, resume: ActionsRecord | None
    ) -> Claimed | None:
        """Record the event and run the pre-drain steps due (on ``resume``: those it left pending);
        the node and record as written, or None when another runner has it (or the record could not
        be written)."""
        now = self._clock.now()
        kind = Kind(state.kind)
        instance = node.instance_id or ""
        base = resume or ActionsRecord(
            event=state.event_id,
            runner=self._writer.identity,
            at=now,
            kind=state.kind,
            instance=instance,
            source=str(state.extra.get("source") or ""),
            fenced=state.since if state.phase is not Phase.DRAINED else None,
        )
        unwanted = [step for step in self._pre if kind not in step.kinds]

        def start(old: ActionsRecord | None) -> ActionsRecord:
            # This event's record as it stands (a resumed one), else a new one replacing the old;
            # without the entries of steps this kind does not call for (nothing for the drain to wait on).
            record = old if old is not None and old.event == base.event else base
            for step in unwanted:
                record = step.forget(record)
            return record

        due = [s for s in self._pre if kind in s.kinds and (resume is None or s.pending(resume))]
        if not due:
            return await self._writer.claim(node, state.event_id, start)
        ctx = PreDrain(node, state, now, instance, start, self._writer)
        claimed: Claimed | None = None
        for step in due:
            claimed = await step.run(ctx)
            if claimed is None:
                return None
            ctx = replace(ctx, node=claimed[0])
        return claimed

    # --- post-drain ----------------------------------------------------------------------------

    async def _post_drain(
        self,
        name: str,
        node: NodeView | None,
        state: NodeState | None,
        record: ActionsRecord,
        why: Why,
        *,
        last: NodeView | None = None,
    ) -> None:
        """Run the post-drain steps due (each once), then mark the record finished. ``node`` None: it
        was deleted (``last`` is its last copy), nothing can be written."""
        now = self._clock.now()
        if record.post is not None and self._writer.held_by_other(record, now):
            return  # another runner is at it
        kept = self._writer.unwritten(name, record.event)
        if kept is not None and node is not None:
            await self._finish(node, kept)
            return
        if node is not None:
            claimed = await self._writer.update(
                node, record.event, lambda old: replace(old, post=old.post or now)
            )
            if claimed is None:
                return
            node, record = claimed
        kind = Kind(record.kind) if record.kind in {k.value for k in Kind} else None
        if kind is None:
            return
        copy = node or last
        # The Node's providerID, never the record's ``instance``: an annotation anyone may write.
        ctx = PostDrain(name, node, state, why, (copy.instance_id if copy is not None else None) or "")
        # Every step's line, in order (the pre-drain ones from the record), for the summary.
        lines = _lines(self._pre, record)
        for step in self._post:
            if step.due(kind, record):
                record = await step.run(ctx, record, tuple(lines))
            lines += _lines([step], record)
        final = replace(record, finished=self._clock.now())
        log.info("response actions for %s on node %s finished (%s)", record.event, name, why.value)
        if node is not None:
            await self._finish(node, final)

    async def _finish(self, node: NodeView, final: ActionsRecord) -> None:
        if await self._writer.finish(node, final):
            self._seen.pop(node.name, None)  # nothing left to do, even if the node is deleted next

    async def _node_gone(self, seen: _Seen) -> None:
        """The node was deleted: run what is left of the post-drain steps (nothing can be recorded)."""
        record = seen.record
        if record is None or record.finished is not None:
            return
        why = Why.WITHDRAWN if seen.state is None else Why.DELETED
        with log_context(event_id=record.event, kind=record.kind, node=seen.node.name):
            log.info("node %s was deleted before its response actions finished", seen.node.name)
            await self._post_drain(
                seen.node.name,
                None,
                seen.state,
                replace(record, runner=self._writer.identity),
                why,
                last=seen.node,
            )


def _lines(steps: Sequence[Step], record: ActionsRecord) -> list[ActionSummary]:
    """The summary lines of ``steps``, from what ``record`` holds of them."""
    return [line for step in steps if (line := step.summary(record)) is not None]
