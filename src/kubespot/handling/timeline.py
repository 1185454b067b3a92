"""What one event's handling did, step by step, for its summary, metrics and events (pure, no I/O).

The node handler runs the timeline (docs/designs/response-actions.md, Decision 3): fence, pre-drain
actions (the ``started`` notification, outgoing HTTP calls, the wait for load-balancer
deregistration), drain, post-drain actions (HTTP calls, the ``finished`` or ``failed``
notification). A ``Run`` collects each step's ``ActionSummary`` as it ends, so any message built
along the way carries everything done so far.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from kubespot.actions.drain import DrainResult
from kubespot.actions.drain import Outcome as PodOutcome
from kubespot.model import InterruptionEvent
from kubespot.model.summary import (
    ActionResult,
    ActionSummary,
    InterruptionSummary,
    Outcome,
    PodCounts,
    Stage,
)

#: The pre-drain HTTP calls get this share of the time left before the deadline, within the bounds
#: below: the drain must start soon, and each call is bounded by its own timeout and attempts too.
PRE_DRAIN_SHARE = 0.1
PRE_DRAIN_MIN = 1.0
PRE_DRAIN_MAX = 30.0
#: Results that go into the summary's ``failures`` (a skipped or dry-run action is no failure).
_FAILED = frozenset({ActionResult.FAILURE, ActionResult.TIMEOUT})


def pre_drain_budget(seconds_left: float | None, *, window: float) -> float:
    """Seconds the pre-drain calls may hold the drain back: ``PRE_DRAIN_SHARE`` of the time left
    (``window``, the drain's own limit, when the event has no deadline), between the two bounds."""
    left = window if seconds_left is None else seconds_left
    return min(PRE_DRAIN_MAX, max(PRE_DRAIN_MIN, PRE_DRAIN_SHARE * left))


@dataclass
class Run:
    """One event's handling by this process, from its fence (or its resumption) on."""

    started: datetime
    actions: list[ActionSummary] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    pods: PodCounts | None = None
    #: Why handling failed (the ``failed`` stage); None while it has not.
    error: str | None = None
    #: Whether the pre-drain actions are still to run: not for a resumed drain, which may have run
    #: them before the restart (as its ``started`` message was sent then).
    pre_drain: bool = True

    def add(self, actions: Iterable[ActionSummary]) -> None:
        for action in actions:
            self.actions.append(action)
            if action.result in _FAILED:
                self.failures.append(f"{action.name}: {action.result.value} ({action.detail})")

    def summary(
        self,
        event: InterruptionEvent,
        *,
        node: str,
        stage: Stage,
        now: datetime,
        outcome: Outcome | None = None,
        dry_run: bool = False,
    ) -> InterruptionSummary:
        """The summary at ``stage``; ``outcome`` defaults to what the stage implies."""
        return InterruptionSummary.for_event(
            event,
            node=node,
            stage=stage,
            outcome=outcome,
            started=self.started,
            finished=None if stage is Stage.STARTED else now,
            actions=tuple(self.actions),
            pods=self.pods,
            failures=tuple(self.failures),
            error=self.error if stage is Stage.FAILED else None,
            dry_run=dry_run,
        )


def drain_summary(result: DrainResult | None, *, started: datetime, now: datetime) -> ActionSummary:
    """The drain as one action: success when every pod that had to leave is gone in time."""
    if result is None:
        return ActionSummary(
            name="drain",
            result=ActionResult.FAILURE,
            started=started,
            duration=(now - started).total_seconds(),
            detail="the API server could not be reached before the deadline",
        )
    end = result.finished_at or now
    if result.dry_run:
        verdict, outcome = "dry run", ActionResult.DRY_RUN
    elif result.refused:
        verdict, outcome = "refused", ActionResult.FAILURE
    else:
        verdict, outcome = (
            ("emptied", ActionResult.SUCCESS) if result.emptied else ("incomplete", ActionResult.FAILURE)
        )
    counts = ", ".join(f"{n} {outcome_name}" for outcome_name, n in sorted(result.counts().items()))
    return ActionSummary(
        name="drain",
        result=outcome,
        started=result.started_at,
        duration=(end - result.started_at).total_seconds(),
        detail=f"{verdict}: {counts or 'no pods'}",
    )


def drain_error(result: DrainResult | None) -> str | None:
    """Why the drain counts as a failure of the handling, or None when it does not."""
    if result is None:
        return "the node could not be drained: the API server was unreachable until the deadline"
    if result.dry_run or result.emptied:
        return None
    if result.refused:
        blocking = [f"{p.namespace}/{p.name}" for p in result.pods if p.outcome is PodOutcome.REFUSED]
        return "the drain was refused: pods that may not be moved under the settings: " + ", ".join(
            blocking[:5]
        )
    left = sum(1 for p in result.pods if p.must_leave and p.gone_at is None)
    return f"the drain ended with {left} pods still on the node at the deadline"


def pod_counts(result: DrainResult) -> PodCounts:
    return PodCounts.from_outcomes(result.counts())


def counts_extra(counts: PodCounts) -> dict[str, int]:
    """The counts for the state's ``extra["pods"]``: the non-zero ones by ``PodCounts`` field name (a
    drained empty node still says so), so every node watch carries a few bytes, not a table."""
    fields = {k: v for k, v in counts.to_dict().items() if k != "moved" and v}
    return fields or {"evicted": 0}


def stage_event(stage: str, outcomes: Iterable[ActionSummary]) -> tuple[str, str, bool] | None:
    """The Kubernetes event for a stage's HTTP calls: (reason, message, warning), or None without any.

    Reasons are the reference handler's ``PreDrain``/``PostDrain``, ``...Error`` when one failed.
    """
    done = list(outcomes)
    if not done:
        return None
    failed = any(a.result in _FAILED for a in done)
    base = "PreDrain" if stage == "pre-drain" else "PostDrain"
    text = "; ".join(f"{a.name}: {a.result.value} ({a.detail})" for a in done)
    return (base + "Error" if failed else base), f"{stage} actions: {text}", failed
