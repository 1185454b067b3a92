"""Condition sets as operatorpkg keeps them (``kubespot.scheduling.api.condition_set``).

Source: awslabs/operatorpkg ``status/condition_set.go`` at HEAD (``7a13865``): ``For`` (root, then
the dependents, set Unknown when missing), ``Set`` (``observedGeneration``; ``lastTransitionTime``
on a status change only; the first stamp of a root or dependent is the object's
``creationTimestamp``; no change, no re-sort; a deleting object's other conditions bumped to the
generation; sorted by transition time, root last) and ``recomputeRootCondition``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubespot.scheduling.api.condition_set import merge_conditions
from kubespot.scheduling.api.conditions import Condition

CREATED = "2026-10-31T12:00:00Z"
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _by(conds: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {str(c["type"]): c for c in conds}


def test_for_starts_root_and_dependents_unknown_at_the_objects_creation() -> None:
    """``For`` sets the missing root and dependents ``SetUnknown`` (AwaitingReconciliation); ``Set``
    stamps a root or dependent met for the first time with ``GetCreationTimestamp``, any other
    condition with now."""
    conds = merge_conditions(
        None,
        [Condition("Extra", "True", "Extra")],
        dependents=("A", "B"),
        generation=1,
        now=T0,
        created=CREATED,
    )
    by = _by(conds)
    for t in ("A", "B"):
        assert (by[t]["status"], by[t]["reason"], by[t]["lastTransitionTime"]) == (
            "Unknown",
            "AwaitingReconciliation",
            CREATED,
        ), t
    # The root, recomputed after each dependent, is still Unknown since the creation.
    ready = by["Ready"]
    assert (ready["status"], ready["reason"], ready["message"], ready["lastTransitionTime"]) == (
        "Unknown",
        "ReconcilingDependents",
        "A=Unknown, B=Unknown",
        CREATED,
    )
    assert by["Extra"]["lastTransitionTime"] == "2026-11-01T00:00:00Z"  # not a dependent: now
    # Sorted by transition time, oldest first, the root last.
    assert [c["type"] for c in conds] == ["A", "B", "Extra", "Ready"]


def test_order_follows_transitions_and_an_unchanged_condition_does_not_move() -> None:
    """``Set`` re-sorts by ``lastTransitionTime`` (stable) with the root last, and returns early
    when the condition equals the stored one (``reflect.DeepEqual``): nothing moves then."""
    first = merge_conditions(
        None,
        [Condition("A", "True", "A"), Condition("B", "True", "B")],
        dependents=("A", "B"),
        generation=1,
        now=T0,
        created=CREATED,
    )
    assert [c["type"] for c in first] == ["A", "B", "Ready"]
    later = T0 + timedelta(minutes=5)
    # A goes False: its transition is the newest, so it moves behind B.
    second = merge_conditions(
        first, [Condition("A", "False", "Broken", "x")], dependents=("A", "B"), generation=1, now=later
    )
    assert [c["type"] for c in second] == ["B", "A", "Ready"]
    assert _by(second)["Ready"]["lastTransitionTime"] == "2026-11-01T00:05:00Z"
    # Setting B again as it is changes nothing at all.
    again = merge_conditions(
        second,
        [Condition("B", "True", "B")],
        dependents=("A", "B"),
        generation=1,
        now=later + timedelta(hours=1),
    )
    assert again == second


def test_a_new_reason_or_generation_keeps_the_transition_time() -> None:
    """``Set``: ``LastTransitionTime`` is copied when the status is the same, whatever the reason,
    message or generation; the condition carries the object's generation."""
    old = merge_conditions(
        None, [Condition("A", "False", "One", "1")], dependents=("A",), generation=1, now=T0, created=CREATED
    )
    new = merge_conditions(
        old,
        [Condition("A", "False", "Two", "2")],
        dependents=("A",),
        generation=4,
        now=T0 + timedelta(hours=3),
    )
    a = _by(new)["A"]
    assert (a["reason"], a["message"], a["observedGeneration"]) == ("Two", "2", 4)
    assert a["lastTransitionTime"] == "2026-11-01T00:00:00Z"


def test_a_deleting_objects_conditions_all_move_to_its_generation() -> None:
    """``Set`` on an object with a ``deletionTimestamp`` bumps every other condition's
    ``observedGeneration`` (the API server bumps a custom resource's generation when it marks it
    deleting: k8s.io/apiserver ``pkg/registry/generic/registry/store.go`` ``markAsDeleting``), so
    ``Ready`` does not fall to Unknown for a generation nobody reconciled."""
    old = merge_conditions(
        None,
        [Condition("A", "True", "A"), Condition("B", "True", "B")],
        dependents=("A", "B"),
        generation=1,
        now=T0,
        created=CREATED,
    )
    later = T0 + timedelta(minutes=1)
    kept = merge_conditions(
        old, [Condition("A", "True", "A")], dependents=("A", "B"), generation=2, now=later, deleting=True
    )
    by = _by(kept)
    assert by["B"]["observedGeneration"] == 2 and by["Ready"]["status"] == "True"
    # Not deleting: B stays at generation 1, so Ready waits for it (ReconcilingDependents).
    plain = _by(
        merge_conditions(old, [Condition("A", "True", "A")], dependents=("A", "B"), generation=2, now=later)
    )
    assert plain["B"]["observedGeneration"] == 1
    assert (plain["Ready"]["status"], plain["Ready"]["reason"]) == ("Unknown", "ReconcilingDependents")
