"""The scheduler's Unschedulable message (controllers/scheduler/fiterror.py), pure."""

from __future__ import annotations

from kubespot.sim.kubesim.controllers.scheduler.fiterror import message


def test_reasons_sort_as_strings_and_preemption_counts_unresolvable_nodes() -> None:
    """pkg/scheduler/framework/types.go FitError.Error: "<count> <reason>" strings sorted with
    sort.Strings ("10 ..." before "2 ..."), then DefaultPreemption's "preemption: " message where
    nodes rejected UnschedulableAndUnresolvable are "not helpful" (preemption.go)."""
    text = message(12, {"Insufficient cpu": 2, "node(s) were unschedulable": 10}, unresolvable=10)
    assert text == (
        "0/12 nodes are available: 10 node(s) were unschedulable, 2 Insufficient cpu. "
        "preemption: 0/12 nodes are available: 10 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )


def test_a_pre_filter_rejection_replaces_the_histogram() -> None:
    """types.go FitError.Error: with Diagnosis.PreFilterMsg set the per-node reasons are not repeated."""
    assert message(
        3, {"ignored": 3}, unresolvable=3, pre_filter="pod has unbound immediate PersistentVolumeClaims"
    ) == (
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


def test_a_post_filter_message_of_its_own_replaces_the_default() -> None:
    """types.go FitError.Error appends Diagnosis.PostFilterMsg as " <msg>." when there is one; the
    preemption in progress elsewhere supplies its own (e.g. preemptionPolicy Never)."""
    own = "preemption: not eligible due to preemptionPolicy=Never."
    assert message(2, {"Insufficient cpu": 2}, unresolvable=0, post_filter=own) == (
        "0/2 nodes are available: 2 Insufficient cpu. " + own
    )
    assert message(2, {"Insufficient cpu": 2}, unresolvable=0, post_filter="") == (
        "0/2 nodes are available: 2 Insufficient cpu."
    )
