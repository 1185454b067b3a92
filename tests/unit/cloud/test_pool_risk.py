"""The decaying reclaim risk per spot pool (docs/designs/launching.md §2; issue 14 §2).

Karpenter has no such score (aws/karpenter-provider-aws ``pkg/controllers/interruption/controller.go``:
a warning marks the pool unavailable for 3 minutes, a rebalance recommendation only emits an event;
aws #6425 asks for interruption-rate awareness), so these tests pin kubespot's own model.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kubespot.cloud.pool_risk import PoolRisk
from support.clocks import ManualClock


def clock() -> ManualClock:
    return ManualClock(datetime(2026, 1, 1, tzinfo=UTC))


async def test_a_warning_halves_every_half_life_and_is_forgotten() -> None:
    c = clock()
    risk = PoolRisk(c, half_life=600)
    risk.interruption_warning("m5.large", "a")
    assert risk.score("m5.large", "a") == pytest.approx(1.0)
    await c.advance(600)
    assert risk.score("m5.large", "a") == pytest.approx(0.5)
    await c.advance(600 * 12)
    assert risk.score("m5.large", "a") == 0.0
    assert list(risk) == []


async def test_penalty_orders_pools_and_a_zone_reclaim_taints_its_other_pools() -> None:
    c = clock()
    risk = PoolRisk(c, half_life=600, weight=0.25, zone_weight=0.25)
    assert risk.penalty("m5.large", "a") == 1.0
    for t in ("m5.large", "c5.large", "r5.large"):
        risk.interruption_warning(t, "a")
    risk.rebalance_recommendation("m5.large", "b")
    hit = risk.penalty("m5.large", "a")
    same_zone = risk.penalty("m6i.large", "a")
    other_zone = risk.penalty("m6i.large", "b")
    assert hit == pytest.approx(1 + 0.25 * (1 + 0.25 * 3))
    assert same_zone == pytest.approx(1 + 0.25 * 0.25 * 3)
    assert hit > same_zone > other_zone > 1.0
    assert risk.penalty("m6i.large", "c") == 1.0


async def test_penalty_is_capped() -> None:
    risk = PoolRisk(clock(), weight=1.0, cap=2.0)
    for _ in range(10):
        risk.interruption_warning("m5.large", "a")
    assert risk.penalty("m5.large", "a") == 3.0


async def test_launches_count_against_their_pool_only_during_a_storm() -> None:
    c = clock()
    risk = PoolRisk(c, half_life=600, spread=0.5)
    risk.launched("m5.large", "b")
    assert risk.score("m5.large", "b") == 0.0  # calm: launching is not a risk
    risk.interruption_warning("c5.large", "a")
    assert risk.storm()
    risk.launched("m5.large", "b")
    risk.launched("m5.large", "b")
    assert risk.score("m5.large", "b") == pytest.approx(1.0)
    await c.advance(601)
    assert not risk.storm()
