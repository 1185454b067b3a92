"""Dry run (``node_actions.dry_run``): what the steps would do, said once per event and side of the
drain; nothing is written to AWS or to the node (no record: a drain beside a dry-run controller
finds none). Each plan is logged, counted (``result="dry_run"``) and recorded as a ``DryRun`` event.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kubespot.controllers.response.events import NodeEvents
from kubespot.controllers.response.step import LOGGER, Step
from kubespot.kube import NodeView
from kubespot.model import Clock, Kind
from kubespot.model.summary import ActionResult
from kubespot.observability.metrics import Metrics
from kubespot.records.interruption import NodeState, Phase

log = logging.getLogger(LOGGER)


class DryRun:
    """Says what the ``pre`` (pre-drain) and ``post`` (post-drain) steps would do."""

    def __init__(
        self,
        pre: Sequence[Step],
        post: Sequence[Step],
        *,
        clock: Clock,
        metrics: Metrics,
        events: NodeEvents,
    ) -> None:
        self._pre = pre
        self._post = post
        self._clock = clock
        self._metrics = metrics
        self._events = events
        #: Per (node, event): the sides of the drain already said.
        self._said: dict[tuple[str, str], set[str]] = {}

    async def report(self, node: NodeView, state: NodeState) -> None:
        """The pre-drain plan at once, the post-drain one once the drain is over (or out of time)."""
        said = self._said.setdefault((node.name, state.event_id), set())
        kind = Kind(state.kind)
        instance = node.instance_id or ""
        pre = [step for step in self._pre if kind in step.kinds]
        if "pre" not in said and pre:
            said.add("pre")
            await self._say(node, instance, pre)
        drained = state.phase is Phase.DRAINED or (
            state.deadline is not None and self._clock.now() >= state.deadline
        )
        if "post" not in said and drained:
            said.add("post")
            await self._say(node, instance, [step for step in self._post if kind in step.kinds])

    def forget(self, name: str) -> None:
        """Node ``name`` was deleted."""
        for key in [k for k in self._said if k[0] == name]:
            del self._said[key]

    async def _say(self, node: NodeView, instance: str, steps: Sequence[Step]) -> None:
        for step in steps:
            for action, what in await step.rehearse(node, instance):
                log.info("dry run: node %s: %s", node.name, what)
                self._metrics.action(action, ActionResult.DRY_RUN.value)
                self._events.emit(node, "DryRun", f"Dry run: {what}")
