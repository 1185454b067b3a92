"""What interruptions teach the provisioner (docs/designs/launching.md §2).

Sources: aws/karpenter-provider-aws ``pkg/controllers/interruption/controller.go`` (a spot
interruption warning marks the (spot, instance type, zone) offering unavailable, read from the
NodeClaim's labels; a rebalance recommendation only emits an event); SQS standard queues deliver
at least once (AWS SQS developer guide, "At-least-once delivery"), hence the dedupe by event id.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubespot.cloud.signals import capacity_signals, spot_pool
from kubespot.config.launch import LaunchSettings
from kubespot.model.events import InterruptionEvent, Kind, Source
from support.clocks import ManualClock

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SPOT_NODE = {
    "karpenter.sh/capacity-type": "spot",
    "node.kubernetes.io/instance-type": "m5.large",
    "topology.kubernetes.io/zone": "us-east-1a",
}


def event(kind: Kind, id_: str = "e-1") -> InterruptionEvent:
    return InterruptionEvent(
        id=id_,
        kind=kind,
        instance_id="i-0abc",
        source=Source.SQS,
        notice_time=NOW,
        act_at=NOW,
        deadline=NOW + timedelta(minutes=2),
    )


def test_a_warning_marks_the_pool_and_raises_its_risk_once() -> None:
    s = capacity_signals(LaunchSettings(), ManualClock(NOW))
    assert s.observe(event(Kind.SPOT_INTERRUPTION), SPOT_NODE)
    assert not s.observe(event(Kind.SPOT_INTERRUPTION), SPOT_NODE), "a redelivered message counts once"
    why = s.unavailable.why("spot", "m5.large", "us-east-1a")
    assert why is not None and why.reason == "SpotInterruptionWarning"
    assert s.risk.score("m5.large", "us-east-1a") == 1.0


def test_a_rebalance_recommendation_raises_the_risk_only() -> None:
    s = capacity_signals(LaunchSettings(), ManualClock(NOW))
    assert s.observe(event(Kind.REBALANCE_RECOMMENDATION), SPOT_NODE)
    assert not s.unavailable.is_unavailable("spot", "m5.large", "us-east-1a")
    assert s.risk.score("m5.large", "us-east-1a") == 0.5


def test_on_demand_nodes_and_other_kinds_teach_nothing() -> None:
    s = capacity_signals(LaunchSettings(), ManualClock(NOW))
    on_demand = {**SPOT_NODE, "karpenter.sh/capacity-type": "on-demand"}
    assert not s.observe(event(Kind.SPOT_INTERRUPTION), on_demand)
    assert not s.observe(event(Kind.SCHEDULED_MAINTENANCE, "e-2"), SPOT_NODE)
    assert len(s.unavailable) == 0 and list(s.risk) == []


def test_spot_nodes_of_other_tools_are_recognised() -> None:
    """EKS managed node groups label ``eks.amazonaws.com/capacityType: SPOT`` (EKS user guide,
    "Managed node groups: capacity types"); older nodes carry the beta type and zone labels."""
    eks = {
        "eks.amazonaws.com/capacityType": "SPOT",
        "beta.kubernetes.io/instance-type": "c5.xlarge",
        "failure-domain.beta.kubernetes.io/zone": "us-east-1b",
    }
    assert spot_pool(eks) == ("c5.xlarge", "us-east-1b")
    assert spot_pool({"node.kubernetes.io/instance-type": "c5.xlarge"}) is None
