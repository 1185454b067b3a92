"""The compare-and-set writes of ``NodeHandler`` on its Node: the fence, the holder's renewals, the
phases and the out-of-service taint on the ``kubespot.io/interruption`` record, the undo, and the
release of the hold at shutdown (what each write changes: ``handling.node_patches``).

The record names its holder, who renews it while draining; another live holder is followed, never
overwritten (docs/designs/state-on-the-node.md). An undo removes exactly what kubespot added, never
a taint or cordon someone else set, and is retried until the API server takes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from kubespot.kube import KubeError, NodeView, fencing
from kubespot.model import InterruptionEvent
from kubespot.records.interruption import STATE_ANNOTATION, NodeState, Phase, decode

from .node_context import NodeContext
from .node_patches import HOLD_STALE, fence_patch, out_of_service_patch, state_of, undo_patch
from .policy import Plan
from .timeline_steps import TimelineSteps

log = logging.getLogger("kubespot.handling")

#: While draining, the holder renews its mark on the node this often (``HOLD_STALE``: when others
#: may take over).
HOLD_RENEW = 10.0
#: At shutdown, how long the release of this process's hold on the node may take.
RELEASE_TIMEOUT = 2.0


class Fence:
    """The writes of one node's record. ``undone(event_id)`` is told of each undo that went through."""

    def __init__(self, ctx: NodeContext, *, timeline: TimelineSteps, undone: Callable[[str], None]) -> None:
        self._ctx = ctx
        self._timeline = timeline
        self._undone = undone
        #: Whether this process's mark is on the node's state (released at shutdown).
        self.holding = False

    async def fence(self, event: InterruptionEvent, plan: Plan, *, announce: bool) -> NodeState | None:
        """Taints, labels, cordon and state in one compare-and-set write; retried until the deadline.

        ``announce``: report the fence (event, webhook, latency) if the write changed the node; a
        resumed or repeated fence that finds everything in place reports nothing.
        """
        ctx = self._ctx
        due = max(event.notice_time, event.act_at)
        wrote = False

        def change(node: NodeView) -> Mapping[str, Any] | None:
            nonlocal wrote
            patch = fence_patch(
                node, event, plan, now=ctx.clock.now(), undo_after=plan.undo_after, holder=ctx.identity
            )
            wrote = patch is not None
            return patch

        with fencing():  # ahead of every drain's calls when many nodes are hit at once
            node = await ctx.persist(
                "fence",
                lambda: ctx.kube.update_node(ctx.node, change, current=ctx.node_hint()),
                deadline=event.deadline,
                kind=event.kind,
            )
        if node is None:
            return None
        fenced = ctx.clock.now()
        state = decode(node.annotations.get(STATE_ANNOTATION))
        if state is not None and state.held_by_other(ctx.identity, fenced, HOLD_STALE):
            return state  # another live process holds the node (see fence_patch): the caller follows
        if state is None or state.event_id != event.id:  # pragma: no cover - our own write, just made
            log.error("event %s: the state annotation did not stick", event.id)
            return None
        self.holding = state.holder == ctx.identity
        ctx.set_phase(state.phase.value)
        if not (announce and wrote):
            return state
        ctx.metrics.notice_to_cordon(max(0.0, (fenced - due).total_seconds()), event.kind.value)
        ctx.metrics.action("cordon", "success")
        what = "Cordoned and tainted" if plan.drain else "Cordoned and tainted (no drain)"
        ctx.node_event("CordonAndDrain" if plan.drain else "Cordon", f"{what} by kubespot for {event.id}")
        log.info(
            "event %s: tainted and cordoned %.3fs after the notice", event.id, (fenced - due).total_seconds()
        )
        self._timeline.start(event, fenced)
        return state

    async def renew(self, state: NodeState) -> None:
        """Keep the holder mark fresh while the drain runs, so others keep following.

        Compare-and-set: the mark is renewed only while the node's state is still this event's and
        no other live process holds it (one that took over a mark that looked stale, e.g. after a
        long API outage here, is not overwritten). A lost hold stops the renewals."""
        ctx = self._ctx
        lost = False

        def change(node: NodeView) -> Mapping[str, Any] | None:
            nonlocal lost
            now = ctx.clock.now()
            current = state_of(node)
            if (
                current is None
                or current.event_id != state.event_id
                or current.held_by_other(ctx.identity, now, HOLD_STALE)
            ):
                lost = True
                return None
            renewed = replace(current, holder=ctx.identity, renewed=now)
            return {"metadata": {"annotations": {STATE_ANNOTATION: renewed.encode()}}}

        while True:
            await ctx.clock.sleep(HOLD_RENEW)
            try:
                await ctx.kube.update_node(ctx.node, change, current=ctx.node_hint())
            except KubeError as err:
                log.warning("could not renew the hold on %s: %s", ctx.node, err)
                continue
            if lost:
                log.warning("event %s: another process took the hold on %s", state.event_id, ctx.node)
                self.holding = False
                return

    async def held_elsewhere(self) -> NodeState | None:
        """The node's state if another live process (a controller replica, the agent) is on it."""
        ctx = self._ctx
        node = ctx.node_hint()
        if node is None:
            try:
                node = await ctx.kube.get_node(ctx.node)
            except KubeError:
                return None  # the fence will retry and report
        state = state_of(node)
        if state is not None and state.held_by_other(ctx.identity, ctx.clock.now(), HOLD_STALE):
            return state
        return None

    async def write_state(self, state: NodeState, *, durable: bool = False) -> NodeState:
        """Record ``state`` on the node. ``durable``: retried until it lands or the deadline passes
        (DRAINED: the controller's post-drain actions and the summary wait for it); otherwise one
        try, because only the resume point is lost (a restart would redo this step)."""
        ctx = self._ctx
        annotations = {STATE_ANNOTATION: state.encode()}
        if durable:
            await ctx.persist(
                f"record_{state.phase.value}",
                lambda: ctx.kube.set_annotations(ctx.node, annotations),
                deadline=state.deadline,
                kind=None,
            )
            return state
        try:
            await ctx.kube.set_annotations(ctx.node, annotations)
        except KubeError as err:
            log.warning("could not record phase %s on the node: %s", state.phase.value, err)
        return state

    async def out_of_service(self, event: InterruptionEvent) -> None:
        """Taint the drained node out-of-service, recorded in the state's taints in the same write,
        so an undo (a withdrawn event) or the clean-up after a reboot removes it like the fence's."""
        ctx = self._ctx
        await ctx.persist(
            "out_of_service",
            lambda: ctx.kube.update_node(
                ctx.node, lambda node: out_of_service_patch(node, event.id), current=ctx.node_hint()
            ),
            deadline=event.deadline,
            kind=None,  # the drain is done: a late taint is not a missed deadline
        )

    async def undo(self, event_id: str, why: str, plan: Plan, *, attempts: int | None = None) -> None:
        """Remove what kubespot added for ``event_id`` (taints, labels, its cordon, the state).

        Retried with backoff until it succeeds (``attempts``: give up after that many and raise
        ``KubeError``), so an API outage at the moment of an undo cannot leave the node cordoned.
        """
        ctx = self._ctx
        if plan.dry_run:
            log.info("dry run: would uncordon and remove the taints of %s (%s)", event_id, why)
            ctx.node_event("DryRun", f"Dry run: would uncordon ({why})")
            ctx.set_phase("none")
            return
        wrote = False

        def change(node: NodeView) -> Mapping[str, Any] | None:
            nonlocal wrote
            patch = undo_patch(node, event_id)
            wrote = patch is not None
            return patch

        tries = 0
        delay = 0.5
        while True:
            try:
                await ctx.kube.update_node(ctx.node, change)
                break
            except KubeError as err:
                tries += 1
                ctx.metrics.action("undo", "failure")
                if attempts is not None and tries >= attempts:
                    raise
                log.warning("could not undo %s (%s); retrying in %.1fs", event_id, err, delay)
                if tries == 1:
                    ctx.node_event(
                        "UncordonError", f"Could not undo the fence for {event_id}: {err}", warning=True
                    )
                await ctx.clock.sleep(delay)
                delay = min(ctx.retry_cap, delay * 2)
        self._undone(event_id)
        if not wrote:
            log.info("nothing of %s left to undo (%s)", event_id, why)
            return
        ctx.metrics.action("undo", "success")
        ctx.node_event("Uncordon", f"Uncordoned by kubespot: {why}")
        log.info("undone: %s", why)

    async def release(self) -> None:
        """If this process holds the node (fencing or draining), clear its mark at once so the next
        process (another replica, the restarted agent) takes over without waiting for the mark to go
        stale. One bounded try: a shutdown must not hang on an unreachable API server."""
        if not self.holding:
            return
        ctx = self._ctx
        try:
            async with asyncio.timeout(RELEASE_TIMEOUT):
                await ctx.kube.update_node(ctx.node, self._release_patch, current=ctx.node_hint())
        except (KubeError, TimeoutError) as err:
            log.warning("could not release the hold on %s at shutdown: %s", ctx.node, err)
        self.holding = False

    def _release_patch(self, node: NodeView) -> Mapping[str, Any] | None:
        state = state_of(node)
        if state is None or state.holder != self._ctx.identity or state.phase is Phase.DRAINED:
            return None
        log.info("releasing the hold on %s (%s, %s)", self._ctx.node, state.event_id, state.phase.value)
        released = replace(state, holder="", renewed=None)
        return {"metadata": {"annotations": {STATE_ANNOTATION: released.encode()}}}
