"""The plan's explanations of the offerings the launch path avoids (issue 14 §2): the
unavailable-offerings cache's marks (aws/karpenter-provider-aws ``pkg/cache/unavailableofferings.go``
``MarkUnavailable``, 3-minute TTL) with what marked them and the time left, and the pool risk
(``cloud.pool_risk``, kubespot's own, docs/designs/launching.md) with its score; as text and JSON.
"""

from __future__ import annotations

from datetime import UTC, datetime

from kubespot.cloud.avoided import avoided_offerings
from kubespot.cloud.pool_risk import PoolRisk
from kubespot.cloud.unavailable import UnavailableOfferings
from kubespot.scheduling.plan import Plan, PlannedClaim
from kubespot.scheduling.report import plan_json, pod_story, pod_story_json
from kubespot.scheduling.requirements import Requirements
from support.clocks import StillClock


def plan() -> Plan:
    claim = PlannedClaim(
        pool="general",
        capacity_type="spot",
        instance_types=["m5.xlarge"],
        price_per_hour=0.08,
        zones=["us-east-1b"],
        pods=["shop/web"],
        requests={"cpu": 1000},
        requirements=Requirements([]),
        why="cheapest",
        considered=2,
        dropped={"no available offering": 1},
    )
    return Plan(existing={"shop/old": "ip-1"}, claims=[claim], unschedulable={"shop/huge": ["too big"]})


def marks() -> tuple[UnavailableOfferings, PoolRisk, StillClock]:
    clock = StillClock(datetime(2026, 1, 1, tzinfo=UTC), mono=1000.0)
    unavailable = UnavailableOfferings(clock, ttl=180.0)
    unavailable.mark("spot", "m5.large", "us-east-1a", "InsufficientInstanceCapacity")
    clock.mono += 60.0
    unavailable.mark_capacity_type("spot", "AuthFailure.ServiceLinkedRoleCreationNotPermitted")
    risk = PoolRisk(clock)
    risk.interruption_warning("m5.xlarge", "us-east-1c")
    return unavailable, risk, clock


def test_avoided_offerings_are_told_with_their_reason_time_left_and_score() -> None:
    unavailable, risk, _ = marks()
    avoided = avoided_offerings(unavailable, risk)
    assert [(a.kind, a.instance_type, a.zone) for a in avoided] == [
        ("unavailable", "*", "*"),
        ("unavailable", "m5.large", "us-east-1a"),
        ("reclaim risk", "m5.xlarge", "us-east-1c"),
    ]
    assert [a.seconds_left for a in avoided[:2]] == [180, 120]
    text = pod_story(plan(), "shop/web", avoided)
    assert text is not None
    assert "Offerings avoided now (3):" in text
    assert "spot m5.large in us-east-1a: unavailable (InsufficientInstanceCapacity) for another 120 s" in text
    assert "spot (every pool): unavailable (AuthFailure.ServiceLinkedRoleCreationNotPermitted)" in text
    assert "spot m5.xlarge in us-east-1c: reclaim risk 1, tried after safer pools" in text
    told = pod_story_json(plan(), "shop/web", avoided)
    assert told is not None
    assert told["avoided_offerings"][1] == {
        "kind": "unavailable",
        "capacity_type": "spot",
        "instance_type": "m5.large",
        "zone": "us-east-1a",
        "reason": "InsufficientInstanceCapacity",
        "seconds_left": 120,
    }
    assert told["avoided_offerings"][2]["score"] == 1.0
    assert len(plan_json(plan(), None, avoided)["avoided_offerings"]) == 3


def test_only_stories_a_launch_decides_mention_them_and_an_empty_memory_says_none() -> None:
    unavailable, risk, _ = marks()
    avoided = avoided_offerings(unavailable, risk)
    existing = pod_story(plan(), "shop/old", avoided)
    assert existing is not None and "avoided" not in existing
    told = pod_story_json(plan(), "shop/old", avoided)
    assert told is not None and "avoided_offerings" not in told
    huge = pod_story(plan(), "shop/huge", avoided)
    assert huge is not None and "Offerings avoided now (3):" in huge
    clock = StillClock(datetime(2026, 1, 1, tzinfo=UTC))
    empty = avoided_offerings(UnavailableOfferings(clock), PoolRisk(clock))
    assert empty == []
    story = pod_story(plan(), "shop/web", empty)
    assert story is not None and "Offerings avoided: none now." in story


def test_the_list_is_bounded() -> None:
    clock = StillClock(datetime(2026, 1, 1, tzinfo=UTC))
    unavailable = UnavailableOfferings(clock)
    for i in range(50):
        unavailable.mark("spot", f"m5.{i}xlarge", "us-east-1a", "InsufficientInstanceCapacity")
    assert len(avoided_offerings(unavailable, None, limit=20)) == 20
