"""Interruption events for tests that need a plausible one and care only about its number."""

from __future__ import annotations

from datetime import datetime, timedelta

from kubespot.model import InterruptionEvent, Kind, Source


def spot_itn(n: int, *, at: datetime, description: str = "Spot ITN received") -> InterruptionEvent:
    """Spot interruption number ``n`` as the IMDS source reports it: noticed ``at``, 2 min to go."""
    return InterruptionEvent(
        id=f"spot-itn-{n:04d}",
        kind=Kind.SPOT_INTERRUPTION,
        instance_id=f"i-{n:04d}",
        source=Source.IMDS,
        notice_time=at,
        act_at=at,
        deadline=at + timedelta(seconds=120),
        description=description,
    )
