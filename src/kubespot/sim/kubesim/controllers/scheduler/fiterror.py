"""Upstream's FitError message (pkg/scheduler/framework/types.go ``FitError.Error``).

"0/N nodes are available: <histogram>." where the histogram counts every reason of every node's
status (a node can give several, e.g. "Insufficient cpu" and "Insufficient memory") as
"<count> <reason>" strings sorted as strings (``sortReasonsHistogram``: so "10 x" sorts before
"2 y"), joined by ", ". The PostFilter's (preemption's) message follows as " preemption: ...".
A PreFilter rejection replaces the histogram with that plugin's message alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

NO_NODES = "no nodes available to schedule pods"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
PREEMPTION_NO_VICTIMS = "No preemption victims found for incoming pod"


def histogram(reasons: Mapping[str, int]) -> str:
    return ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))


def no_victims(num_all: int, unresolvable: int) -> str:
    """DefaultPreemption's message when it finds no candidate (preemption.go): nodes rejected as
    UnschedulableAndUnresolvable are "not helpful", the others have no victims."""
    preemption: Counter[str] = Counter()
    if unresolvable:
        preemption[PREEMPTION_NOT_HELPFUL] = unresolvable
    if num_all - unresolvable:
        preemption[PREEMPTION_NO_VICTIMS] = num_all - unresolvable
    return f"preemption: 0/{num_all} nodes are available: {histogram(preemption)}."


def message(
    num_all: int,
    reasons: Mapping[str, int],
    *,
    unresolvable: int,
    pre_filter: str = "",
    post_filter: str | None = None,
) -> str:
    """The FitError message. ``post_filter``: the PostFilter's (preemption's) own message, if it
    ran and has one; by default the one of a preemption that finds no victims (``no_victims``)."""
    text = f"0/{num_all} nodes are available: {pre_filter or histogram(reasons)}."
    post = no_victims(num_all, unresolvable) if post_filter is None else post_filter
    return f"{text} {post}" if post else text
