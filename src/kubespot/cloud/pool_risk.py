"""``PoolRisk``: how likely a spot pool (instance type, zone) is to be reclaimed soon, learned from
what the interruption half sees (pure; time comes from a ``Clock``).

Karpenter reacts to an interruption warning by avoiding the pool for 3 minutes and to a rebalance
recommendation not at all (aws/karpenter-provider-aws ``pkg/controllers/interruption``); its users
report relaunches into pools being reclaimed, a median spot lifetime of four minutes in a bad hour
(aws #6425). kubespot keeps a decaying score per pool instead:

- an interruption warning adds 1 to its pool, a rebalance recommendation 0.5 (a recommendation
  often precedes a warning, and sometimes comes alone);
- each pool's score halves every ``half_life`` seconds, so a pool reclaimed an hour ago is nearly
  forgiven and one reclaimed twice in five minutes is not;
- a zone's score is the sum of its pools': a zone-wide reclaim makes every pool of the zone look
  riskier, including the ones not hit yet;
- while any reclaim is fresh (``storm``), every launch adds ``spread`` to its own pool, so the
  replacements of a reclaim spread over pools instead of piling into the next cheapest one.

``penalty(type, zone)`` turns the score into a price factor the launch path multiplies spot prices
by when ordering pools: ``1 + weight * (pool + zone_weight * zone)``, capped at ``1 + cap``. Prices
shown to users stay the real ones; only the order changes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from kubespot.model import Clock

__all__ = ["PoolRisk", "RiskSignal"]

#: Score added per signal (interruption warnings are the ground truth; recommendations a hint).
WARNING = 1.0
REBALANCE = 0.5
#: A storm lasts while the newest reclaim signal is younger than this many half-lives.
STORM_HALF_LIVES = 1.0


@dataclass(frozen=True, slots=True)
class RiskSignal:
    """One pool's score now (for metrics and explanations)."""

    instance_type: str
    zone: str
    score: float


class PoolRisk:
    """Decaying per-pool reclaim scores."""

    def __init__(
        self,
        clock: Clock,
        *,
        half_life: float = 3600.0,
        weight: float = 0.25,
        zone_weight: float = 0.25,
        spread: float = 0.5,
        cap: float = 2.0,
    ) -> None:
        self.clock = clock
        self.half_life = half_life
        self.weight = weight
        self.zone_weight = zone_weight
        self.spread = spread
        self.cap = cap
        #: (type, zone) -> (score, monotonic time it was last brought up to date).
        self._pools: dict[tuple[str, str], tuple[float, float]] = {}
        self._last_reclaim: float | None = None

    def interruption_warning(self, instance_type: str, zone: str) -> None:
        self._add(instance_type, zone, WARNING)
        self._last_reclaim = self.clock.monotonic()

    def rebalance_recommendation(self, instance_type: str, zone: str) -> None:
        self._add(instance_type, zone, REBALANCE)
        self._last_reclaim = self.clock.monotonic()

    def launched(self, instance_type: str, zone: str) -> None:
        """A spot instance launched into the pool: during a storm it counts against the pool, so
        the next replacement prefers another."""
        if self.storm():
            self._add(instance_type, zone, self.spread)

    def storm(self) -> bool:
        """A reclaim signal arrived within the last ``half_life``."""
        last = self._last_reclaim
        return last is not None and self.clock.monotonic() - last < STORM_HALF_LIVES * self.half_life

    def score(self, instance_type: str, zone: str) -> float:
        return self._now(instance_type, zone)

    def zone_score(self, zone: str) -> float:
        return sum(self._now(t, z) for t, z in list(self._pools) if z == zone)

    def penalty(self, instance_type: str, zone: str) -> float:
        """The factor spot prices of the pool are multiplied by when pools are ordered (≥ 1)."""
        if not self._pools:
            return 1.0
        risk = self.score(instance_type, zone) + self.zone_weight * self.zone_score(zone)
        return 1.0 + min(self.cap, self.weight * risk)

    def __iter__(self) -> Iterator[RiskSignal]:
        for t, z in list(self._pools):
            s = self._now(t, z)
            if s > 0:
                yield RiskSignal(t, z, s)

    def _add(self, instance_type: str, zone: str, amount: float) -> None:
        key = (instance_type, zone)
        self._pools[key] = (self._now(instance_type, zone) + amount, self.clock.monotonic())

    def _now(self, instance_type: str, zone: str) -> float:
        key = (instance_type, zone)
        entry = self._pools.get(key)
        if entry is None:
            return 0.0
        score, at = entry
        now = self.clock.monotonic()
        decayed = score * math.exp(-math.log(2) * (now - at) / self.half_life)
        if decayed < 1e-3:
            del self._pools[key]  # forgotten: keeps the table as small as the recent past
            return 0.0
        self._pools[key] = (decayed, now)
        return decayed
