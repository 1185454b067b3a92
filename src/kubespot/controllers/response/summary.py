"""The ``InterruptionSummary`` the runner publishes for one event, from its record and the state.

The runner publishes when the state says drained (or the deadline passed, or the node was deleted,
or the event was withdrawn), not after the handling process's own post-drain steps: the summary
carries the AWS actions and, when the state's ``extra`` holds them, the drain's pod counts. Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime

from kubespot.controllers.response.step import Why
from kubespot.model import Kind, Source
from kubespot.model.summary import ActionResult, ActionSummary, InterruptionSummary, Outcome, PodCounts, Stage
from kubespot.records.actions import ActionsRecord
from kubespot.records.interruption import NodeState, Phase

#: Where the drain counts may sit in the state's ``extra`` (written by the drain when it ends).
DRAIN_COUNTS_KEYS = ("pods", "drain")
_POD_FIELDS = frozenset(f.name for f in dataclasses.fields(PodCounts))


def interruption_summary(
    node: str,
    record: ActionsRecord,
    state: NodeState | None,
    why: Why,
    actions: Sequence[ActionSummary],
    instance: str,
    now: datetime,
) -> InterruptionSummary:
    try:
        source = Source(record.source or (state.extra.get("source") if state else "") or Source.IMDS.value)
    except ValueError:
        source = Source.IMDS
    drained = state is not None and state.phase is Phase.DRAINED
    if why is Why.WITHDRAWN:
        stage, outcome, error = Stage.FINISHED, Outcome.WITHDRAWN, None
    elif drained:
        stage, outcome, error = Stage.FINISHED, Outcome.DONE, None
    else:
        stage, outcome = Stage.FAILED, Outcome.FAILED
        error = (
            "the node was deleted before its drain finished"
            if why is Why.DELETED
            else "the deadline passed before the drain finished"
        )
    failures = tuple(
        f"{a.name}: {a.detail}" for a in actions if a.result in (ActionResult.FAILURE, ActionResult.TIMEOUT)
    )
    return InterruptionSummary(
        event_id=record.event,
        kind=Kind(record.kind),
        node=node,
        instance_id=instance,
        source=source,
        stage=stage,
        outcome=outcome,
        description=f"{record.kind} of {instance or 'an instance'} on node {node}",
        deadline=state.deadline if state is not None else None,
        started=record.fenced or (state.since if state is not None else None),
        finished=now,
        actions=tuple(actions),
        pods=_pod_counts(state),
        failures=failures,
        error=error,
    )


def _pod_counts(state: NodeState | None) -> PodCounts | None:
    """The drain's counts, if the state carries them (the drain adds them to ``extra`` when it ends)."""
    if state is None:
        return None
    for key in DRAIN_COUNTS_KEYS:
        raw = state.extra.get(key)
        if isinstance(raw, Mapping) and raw:
            try:
                fields = {k: int(v) for k, v in raw.items() if k in _POD_FIELDS}
                return (
                    PodCounts(**fields)
                    if fields
                    else PodCounts.from_outcomes({str(k): int(v) for k, v in raw.items()})
                )
            except (TypeError, ValueError):
                return None
    return None
