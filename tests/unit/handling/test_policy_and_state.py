"""The response policy per event kind and setting, and the node state's round trip."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kubespot.config.imds import MonitorSettings
from kubespot.config.node import NodeActionSettings
from kubespot.handling.policy import EXCLUDE_LB_LABEL, IGNORE, plan_for, stops_instance, supersedes
from kubespot.model import InterruptionEvent, Kind, Source
from kubespot.records.interruption import NodeState, Phase, StateError, decode

NOW = datetime(2026, 11, 20, 17, 0, tzinfo=UTC)


def ev(kind: Kind, id_: str = "e1", cancelled: bool = False) -> InterruptionEvent:
    return InterruptionEvent(
        id_, kind, "i-0abc", Source.IMDS, NOW, NOW, NOW + timedelta(seconds=120), cancelled=cancelled
    )


def test_spot_interruption_taints_cordons_and_drains_by_default() -> None:
    plan = plan_for(ev(Kind.SPOT_INTERRUPTION), actions=NodeActionSettings(), monitors=MonitorSettings())
    assert plan.acts and plan.cordon and plan.drain and not plan.dry_run
    assert [t.key for t in plan.taints] == ["kubespot.io/spot-itn"]  # NTH keys only with TAINT_NODE
    assert plan.undo_after is None and plan.labels == ()


def test_taint_node_adds_the_reference_handlers_keys_with_its_effect() -> None:
    actions = NodeActionSettings(taint_node=True, taint_effect="NoExecute", exclude_from_load_balancers=True)
    plan = plan_for(
        ev(Kind.ASG_LIFECYCLE), actions=actions, monitors=MonitorSettings(asg_lifecycle_draining=True)
    )
    assert {(t.key, t.effect) for t in plan.taints} == {
        ("kubespot.io/asg-lifecycle-termination", "NoExecute"),
        ("aws-node-termination-handler/asg-lifecycle-termination", "NoExecute"),
    }
    assert plan.labels == ((EXCLUDE_LB_LABEL, "true"),)


def test_disabled_monitors_ignore_their_kind() -> None:
    off = MonitorSettings(spot_interruption_draining=False)
    assert plan_for(ev(Kind.SPOT_INTERRUPTION), actions=NodeActionSettings(), monitors=off) is IGNORE
    assert (
        plan_for(ev(Kind.REBALANCE_RECOMMENDATION), actions=NodeActionSettings(), monitors=MonitorSettings())
        is IGNORE
    )  # rebalance monitoring is off by default, as in the reference handler


def test_rebalance_cordons_without_drain_and_undoes_later() -> None:
    plan = plan_for(
        ev(Kind.REBALANCE_RECOMMENDATION),
        actions=NodeActionSettings(),
        monitors=MonitorSettings(rebalance_monitoring=True),
    )
    assert plan.cordon and not plan.drain
    assert plan.undo_after == NodeActionSettings().rebalance_undo_after > 0
    drained = plan_for(
        ev(Kind.REBALANCE_RECOMMENDATION),
        actions=NodeActionSettings(),
        monitors=MonitorSettings(rebalance_draining=True),
    )
    assert drained.drain and not drained.out_of_service_after_drain


@pytest.mark.parametrize("kind", [Kind.SPOT_INTERRUPTION, Kind.SCHEDULED_MAINTENANCE])
def test_cordon_only_dry_run_and_out_of_service(kind: Kind) -> None:
    cordon_only = plan_for(ev(kind), actions=NodeActionSettings(cordon_only=True), monitors=MonitorSettings())
    assert cordon_only.cordon and not cordon_only.drain
    oos = plan_for(
        ev(kind),
        actions=NodeActionSettings(enable_out_of_service_taint=True, dry_run=True),
        monitors=MonitorSettings(),
    )
    # Scheduled maintenance without a stop code (here: none at all) leaves the instance running.
    assert oos.out_of_service_after_drain is (kind is Kind.SPOT_INTERRUPTION) and oos.dry_run


@pytest.mark.parametrize(
    ("kind", "raw", "stops"),
    [
        (Kind.SPOT_INTERRUPTION, {}, True),
        (Kind.ASG_LIFECYCLE, {}, True),
        (Kind.STATE_CHANGE, {}, True),
        (Kind.REBALANCE_RECOMMENDATION, {}, False),
        # IMDS codes (EC2 API InstanceStatusEvent.code): stop and retirement stop the instance;
        # reboots and system-maintenance (power or network) leave it running afterwards.
        (Kind.SCHEDULED_MAINTENANCE, {"Code": "instance-stop"}, True),
        (Kind.SCHEDULED_MAINTENANCE, {"Code": "instance-retirement"}, True),
        (Kind.SCHEDULED_MAINTENANCE, {"Code": "system-reboot"}, False),
        (Kind.SCHEDULED_MAINTENANCE, {"Code": "instance-reboot"}, False),
        (Kind.SCHEDULED_MAINTENANCE, {"Code": "system-maintenance"}, False),
        # AWS Health eventTypeCode (the queue's scheduled changes).
        (Kind.SCHEDULED_MAINTENANCE, {"detail": {"eventTypeCode": "AWS_EC2_INSTANCE_STOP_SCHEDULED"}}, True),
        (
            Kind.SCHEDULED_MAINTENANCE,
            {"detail": {"eventTypeCode": "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED"}},
            True,
        ),
        (
            Kind.SCHEDULED_MAINTENANCE,
            {"detail": {"eventTypeCode": "AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED"}},
            False,
        ),
    ],
)
def test_out_of_service_only_for_instances_that_really_stop(
    kind: Kind, raw: dict[str, object], stops: bool
) -> None:
    # node.kubernetes.io/out-of-service makes Kubernetes treat the node as shut down (force-deleted
    # pods, volumes detached): wrong for a node that comes back after a reboot (issue 10).
    event = InterruptionEvent(
        "e", kind, "i-0abc", Source.SQS, NOW, NOW, NOW + timedelta(seconds=120), raw=raw
    )
    assert stops_instance(event) is stops
    plan = plan_for(
        event,
        actions=NodeActionSettings(enable_out_of_service_taint=True),
        monitors=MonitorSettings(rebalance_draining=True, asg_lifecycle_draining=True),
    )
    assert plan.out_of_service_after_drain is stops


def test_a_withdrawn_event_undoes() -> None:
    plan = plan_for(
        ev(Kind.SCHEDULED_MAINTENANCE, cancelled=True),
        actions=NodeActionSettings(),
        monitors=MonitorSettings(),
    )
    assert plan.undo and not plan.cordon and not plan.taints


def test_supersedes() -> None:
    rebalance, spot = ev(Kind.REBALANCE_RECOMMENDATION, "r"), ev(Kind.SPOT_INTERRUPTION, "s")
    assert supersedes(spot, None, now=NOW) and supersedes(spot, rebalance, now=NOW)
    assert not supersedes(rebalance, spot, now=NOW) and not supersedes(spot, spot, now=NOW)
    assert not supersedes(ev(Kind.REBALANCE_RECOMMENDATION, "r2"), rebalance, now=NOW)
    # A spot notice during a maintenance window (system-maintenance has no deadline).
    maintenance = InterruptionEvent(
        "m2", Kind.SCHEDULED_MAINTENANCE, "i-0abc", Source.IMDS, NOW, NOW - timedelta(minutes=5)
    )
    assert supersedes(spot, maintenance, now=NOW) and not supersedes(maintenance, spot, now=NOW)
    # An ASG scale-in (no deadline: the grace period from now) before a scheduled reboot 10 min away.
    asg = InterruptionEvent("a", Kind.ASG_LIFECYCLE, "i-0abc", Source.IMDS, NOW, NOW)
    reboot = InterruptionEvent(
        "b", Kind.SCHEDULED_MAINTENANCE, "i-0abc", Source.IMDS, NOW, NOW, deadline=NOW + timedelta(minutes=10)
    )
    assert supersedes(asg, reboot, now=NOW) and not supersedes(reboot, asg, now=NOW)


def test_state_round_trips_through_its_annotation() -> None:
    state = NodeState(
        "e1",
        "spot-itn",
        Phase.FENCED,
        NOW,
        deadline=NOW + timedelta(seconds=120),
        cordoned_by_us=True,
        taints=("kubespot.io/spot-itn",),
    )
    draining = state.advance(Phase.DRAINING, NOW + timedelta(seconds=1))
    assert decode(draining.encode()) == draining
    assert decode(None) is None and decode("") is None
    naive = '{"event_id":"e","kind":"k","phase":"fenced","since":"2026-11-20T17:00:00"}'
    nope = '{"event_id":"e","kind":"k","phase":"nope","since":"x"}'
    for garbage in ("{", '{"event_id": 1}', nope, naive):
        with pytest.raises(StateError):
            decode(garbage)


# --- voluntary events --------------------------------------------------------------------------------


def test_voluntary_events_keep_budgets_and_get_no_invented_window() -> None:
    """Scale-in, rebalance and maintenance that does not stop the instance are voluntary: the drain
    keeps PodDisruptionBudgets to the end and, without a known end, is bounded by voluntary_timeout
    (an hour by default, so pods' own grace periods fit) instead of a 120 s spot-like window."""
    from dataclasses import replace as with_

    from kubespot.actions.drain_plan import capped_grace
    from kubespot.config.drain import DrainSettings
    from kubespot.handling.policy import voluntary, voluntary_drain
    from kubespot.kube import PodView

    monitors = MonitorSettings(
        asg_lifecycle_draining=True, rebalance_draining=True, scheduled_event_draining=True
    )
    settings = DrainSettings()  # pdb_deadline_action=delete, node_termination_grace_period=120
    no_end = {
        Kind.ASG_LIFECYCLE: True,
        Kind.REBALANCE_RECOMMENDATION: True,
        Kind.SCHEDULED_MAINTENANCE: True,
        Kind.SPOT_INTERRUPTION: False,
        Kind.STATE_CHANGE: False,
    }
    for kind, expected in no_end.items():
        event = with_(ev(kind), deadline=None)
        plan = plan_for(event, actions=NodeActionSettings(), monitors=monitors)
        assert voluntary(event) is plan.voluntary is expected, kind
        chosen, deadline = voluntary_drain(plan, settings, event.deadline, NOW)
        if expected:
            assert chosen.pdb_deadline_action == "keep"
            assert deadline == NOW + timedelta(seconds=settings.voluntary_timeout)
            pod = PodView(namespace="default", name="db-0", uid="u", node_name="n", grace_period_seconds=300)
            left = (deadline - NOW).total_seconds()
            assert capped_grace(pod, settings=chosen, seconds_left=left) is None  # its own 300 s
        else:
            assert (chosen, deadline) == (settings, None)
    # Maintenance that stops the instance has AWS's deadline: involuntary.
    assert not voluntary(ev(Kind.SCHEDULED_MAINTENANCE))
    # A scale-in bounded by its hook keeps that bound (the hook's timeout), budgets still kept.
    hook_end = NOW + timedelta(seconds=300)
    asg = with_(ev(Kind.ASG_LIFECYCLE), deadline=hook_end)
    plan = plan_for(asg, actions=NodeActionSettings(), monitors=monitors)
    chosen, deadline = voluntary_drain(plan, settings, asg.deadline, NOW)
    assert chosen.pdb_deadline_action == "keep" and deadline == hook_end
