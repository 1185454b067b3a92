"""``avoided_offerings``: what the launch path avoids now (the ``UnavailableOfferings`` marks and the
``PoolRisk`` scores), as the plan's explanations show it (``scheduling.explain.AvoidedOffering``).
Bounded: the marks first (the longest left first), then the riskiest pools, ``limit`` in all.
"""

from __future__ import annotations

from kubespot.scheduling.explain import AVOIDED_RISK, AVOIDED_UNAVAILABLE, AvoidedOffering
from kubespot.scheduling.labels import SPOT

from .pool_risk import PoolRisk
from .unavailable import UnavailableOfferings

__all__ = ["avoided_offerings"]


def avoided_offerings(
    unavailable: UnavailableOfferings | None,
    risk: PoolRisk | None,
    *,
    limit: int = 20,
    risk_limit: int | None = None,
) -> list[AvoidedOffering]:
    """``risk_limit``: at most this many risky pools (the riskiest) within ``limit``."""
    out: list[AvoidedOffering] = []
    if unavailable is not None:
        now = unavailable.clock.monotonic()
        for mark in sorted(unavailable, key=lambda m: (-m.until, m.key)):
            ct, it, zone = mark.key
            out.append(
                AvoidedOffering(
                    AVOIDED_UNAVAILABLE, ct, it, zone, mark.reason, round(max(mark.until - now, 0.0))
                )
            )
    if risk is not None:
        ranked = sorted(risk, key=lambda s: (-s.score, s.instance_type, s.zone))
        for signal in ranked if risk_limit is None else ranked[:risk_limit]:
            out.append(
                AvoidedOffering(
                    AVOIDED_RISK, SPOT, signal.instance_type, signal.zone, score=round(signal.score, 3)
                )
            )
    return out[:limit]
