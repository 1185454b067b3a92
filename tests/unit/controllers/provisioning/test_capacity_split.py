"""The capacity-split annotation (``controllers/provisioning/capacity_split``): the count rule,
the parser, the pool's counts and the narrowing of a new claim, and the NodePool condition of a
malformed value.

Sources: docs/designs/launching.md §6 (kubespot beyond Karpenter: aws/karpenter-provider-aws #2508,
kubernetes-sigs/karpenter #702 closed without it); the rule is Auto Scaling's
``InstancesDistribution`` (``OnDemandBaseCapacity``, ``OnDemandPercentageAboveBaseCapacity``; the
Amazon EC2 Auto Scaling User Guide, "Setup overview for creating a mixed instances group",
Scaling behavior, docs.aws.amazon.com/autoscaling/ec2/userguide/mixed-instances-groups-set-up-overview.html:
the percentage becomes a number of instances, a fraction rounded up in favour of On-Demand).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubespot.controllers.provisioning.capacity_split import (
    CAPACITY_SPLIT_INVALID,
    SPLIT_ANNOTATION,
    CapacitySplit,
    SplitError,
    capacity_counts,
    narrow,
    narrowing,
    parse_split,
    split_of,
    split_validation,
)
from kubespot.controllers.provisioning.nodepool_status import nodepool_status
from kubespot.scheduling.api.conditions import VALIDATION_SUCCEEDED, Condition

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("base", "percent", "total", "on_demand"),
    [
        (0, 100, 5, 5),  # Auto Scaling's defaults: all on-demand
        (0, 0, 5, 0),  # all spot
        (2, 0, 1, 1),  # the base fills first
        (2, 0, 5, 2),
        (2, 30, 3, 3),  # 30 % of 1 above the base is 0.3: rounded up, on-demand
        (2, 30, 5, 3),  # 0.9 -> 1
        (2, 30, 6, 4),  # 1.2 -> 2
        (2, 30, 10, 5),  # 2.4 -> 3
        (0, 50, 3, 2),  # 1.5 -> 2
        (0, 25, 4, 1),  # exactly 1
        (0, 1, 100, 1),
        (0, 1, 101, 2),  # 1.01 -> 2
    ],
)
def test_on_demand_target_rounds_the_fraction_up(base: int, percent: int, total: int, on_demand: int) -> None:
    """Auto Scaling InstancesDistribution: base first, then the percentage of what is above it, a
    fractional instance rounded up in favour of on-demand."""
    assert CapacitySplit(base, percent).on_demand_target(total) == on_demand


@pytest.mark.parametrize(
    ("base", "percent", "on_demand_at"),
    [
        (10, 50, {10: 10, 20: 15, 30: 20, 40: 25}),
        (0, 0, {10: 0, 20: 0, 30: 0, 40: 0}),
        (0, 60, {10: 6, 20: 12, 30: 18, 40: 24}),
        (0, 100, {10: 10, 20: 20, 30: 30, 40: 40}),
        (12, 0, {10: 10, 20: 12, 30: 12, 40: 12}),
    ],
)
def test_the_auto_scaling_guides_examples(base: int, percent: int, on_demand_at: dict[int, int]) -> None:
    """The five examples of the guide's "Example: Scaling behavior" table (group sizes 10 to 40;
    on-demand = base amount + on-demand above it)."""
    split = CapacitySplit(base, percent)
    assert {total: split.on_demand_target(total) for total in on_demand_at} == on_demand_at


def test_ten_claims_one_by_one_follow_the_split() -> None:
    """Each new node takes the capacity type that keeps the pool at the target for its new size:
    base 2 / 30 % gives on-demand, on-demand, on-demand, spot, spot, on-demand, spot, spot,
    on-demand, spot (5 and 5 for 10, as an Auto Scaling group of 10 would run)."""
    split = CapacitySplit(2, 30)
    od = spot = 0
    seen = []
    for _ in range(10):
        kind = split.next_capacity_type(od, spot)
        seen.append(kind)
        od, spot = (od + 1, spot) if kind == "on-demand" else (od, spot + 1)
    assert seen == ["on-demand"] * 3 + ["spot"] * 2 + ["on-demand"] + ["spot"] * 2 + ["on-demand", "spot"]
    # Already over the target (nodes from before the annotation): spot until the target catches up.
    assert split.next_capacity_type(6, 0) == "spot"


@pytest.mark.parametrize(
    ("text", "split"),
    [
        ("onDemandBase=2,onDemandPercentAboveBase=30", CapacitySplit(2, 30)),
        (" onDemandPercentAboveBase = 0 , onDemandBase=1 ", CapacitySplit(1, 0)),
        ("onDemandBase=3", CapacitySplit(3, 100)),
        ("onDemandPercentAboveBase=20", CapacitySplit(0, 20)),
    ],
)
def test_parse_split(text: str, split: CapacitySplit) -> None:
    """The annotation's fields are Auto Scaling's, with its defaults (base 0, 100 %)."""
    assert parse_split(text) == split


@pytest.mark.parametrize(
    "text",
    [
        "",
        "onDemandBase=2,",
        "onDemandBase=-1",
        "onDemandBase=two",
        "onDemandPercentAboveBase=101",
        "onDemandBase=1,onDemandBase=2",
        "spotPercent=50",
        "onDemandBase:2",
    ],
)
def test_malformed_values_are_refused(text: str) -> None:
    with pytest.raises(SplitError):
        parse_split(text)


def pool(annotation: str | None) -> Obj:
    meta: Obj = {"name": "general"}
    if annotation is not None:
        meta["annotations"] = {SPLIT_ANNOTATION: annotation}
    return {"metadata": meta, "spec": {}}


def test_a_malformed_annotation_is_reported_and_the_pool_stays_ready() -> None:
    """launching.md §6: ValidationSucceeded False reason CapacitySplitInvalid with a message, and
    the pool used without a split: Ready follows NodeClassReady alone (a deliberate difference
    from Karpenter's Ready = all dependents, kubernetes-sigs/karpenter pkg/apis/v1/nodepool_status.go,
    since Karpenter ignores the annotation and would keep the pool Ready)."""
    assert split_of(pool("onDemandBase=x")) is None
    assert split_of(pool("onDemandBase=1")) == CapacitySplit(1, 100)
    assert split_validation(pool(None)) is None and split_validation(pool("onDemandBase=1")) is None
    cond = split_validation(pool("onDemandBase=x"))
    assert cond is not None
    assert (cond.type, cond.status, cond.reason) == (VALIDATION_SUCCEEDED, "False", CAPACITY_SPLIT_INVALID)
    assert SPLIT_ANNOTATION in cond.message and "without a split" in cond.message
    ready_class = {
        "metadata": {"name": "default"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    status = nodepool_status(None, cond, ready_class, generation=1, now=NOW)
    by_type = {c["type"]: c for c in status["conditions"]}
    assert by_type[VALIDATION_SUCCEEDED]["reason"] == CAPACITY_SPLIT_INVALID
    assert by_type["Ready"]["status"] == "True"
    # Any other validation failure still makes the pool not Ready (Karpenter's rule).
    other = Condition(VALIDATION_SUCCEEDED, "False", "NodePoolValidationFailed", "bad")
    status = nodepool_status(None, other, ready_class, generation=1, now=NOW)
    assert {c["type"]: c for c in status["conditions"]}["Ready"]["status"] == "False"


def claim(
    kind: list[str] | None = None, *, label: str | None = None, pool_name: str = "general", **extra: Any
) -> Obj:
    labels = {"karpenter.sh/nodepool": pool_name}
    if label:
        labels["karpenter.sh/capacity-type"] = label
    reqs = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": kind or ["on-demand", "spot"]}]
    meta: Obj = {"name": extra.pop("name", "c"), "labels": labels, **extra}
    return {"metadata": meta, "spec": {"requirements": reqs}, "status": {}}


def test_counts_are_the_pools_live_claims_and_its_unclaimed_nodes() -> None:
    """The pool's claims by capacity type (label once launched, else a single-valued requirement);
    deleting claims and other pools' do not count; a node counts unless a claim holds it."""
    claims = [
        claim(label="spot", name="a"),
        claim(["on-demand"], name="b"),
        claim(name="c"),  # open to both, not launched: neither
        claim(["spot"], name="d", deletionTimestamp="2026-01-01T00:00:00Z"),
        claim(["spot"], name="e", pool_name="other"),
    ]
    claims[0]["status"]["nodeName"] = "n-a"
    nodes = [
        {
            "metadata": {
                "name": "n-a",
                "labels": {"karpenter.sh/nodepool": "general", "karpenter.sh/capacity-type": "spot"},
            }
        },
        {
            "metadata": {
                "name": "n-x",
                "labels": {"karpenter.sh/nodepool": "general", "karpenter.sh/capacity-type": "on-demand"},
            }
        },
        {"metadata": {"name": "n-y", "labels": {"karpenter.sh/capacity-type": "on-demand"}}},
    ]
    assert capacity_counts("general", nodes, claims) == {"on-demand": 2, "spot": 1}


def test_narrow_only_to_a_capacity_type_the_claim_allows() -> None:
    """Only where the claim allows it: a claim pinned to on-demand (pods that need it, a pool
    without spot, no spot offering left) stays so and counts as on-demand."""
    split = CapacitySplit(0, 0)  # all spot
    counts = {"on-demand": 0, "spot": 0}
    body = claim()
    assert narrow(body, split, counts) == "spot"
    assert body["spec"]["requirements"][0]["values"] == ["spot"]
    pinned = claim(["on-demand"])
    assert narrow(pinned, split, counts) is None
    assert pinned["spec"]["requirements"][0]["values"] == ["on-demand"]
    assert counts == {"on-demand": 1, "spot": 1}
    base = CapacitySplit(1, 0)
    counts = {"on-demand": 0, "spot": 0}
    spot_only = claim(["spot"])
    assert narrow(spot_only, base, counts) is None and counts == {"on-demand": 0, "spot": 1}


def test_a_narrowing_says_to_which_type_and_why() -> None:
    """kubespot's event for the split (launching.md §6; Auto Scaling's target rounded up in favour
    of on-demand): the capacity type, the split, the pool's counts before the claim and the target
    with it; a claim that allowed one type only is not narrowed, so nothing is told."""
    split = CapacitySplit(2, 30)
    counts = {"on-demand": 3, "spot": 1}
    told = narrowing(claim(), split, counts)
    assert told is not None and told.capacity_type == "spot"
    assert told.message == (
        "Narrowed to spot by kubespot.io/capacity-split (onDemandBase=2, onDemandPercentAboveBase=30): "
        "the NodePool runs 3 on-demand and 1 spot node(s); of 5 with this one, 3 should be on-demand "
        "and 3 already are"
    )
    assert counts == {"on-demand": 3, "spot": 2}
    told = narrowing(claim(), CapacitySplit(2, 30), {"on-demand": 1, "spot": 0})
    assert told is not None and told.capacity_type == "on-demand"
    assert told.message.endswith("of 2 with this one, 2 should be on-demand")
    assert narrowing(claim(["on-demand"]), split, {"on-demand": 0, "spot": 0}) is None
