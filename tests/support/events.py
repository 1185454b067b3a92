"""Interruption events for tests that need a plausible one and care only about its number (and, for
a scheduled change, its timing)."""

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


def imds_event(
    kind: Kind,
    ident: str,
    now: datetime,
    *,
    act_in: float = 0.0,
    deadline_in: float | None = None,
    description: str = "",
    instance_id: str = "i-1",
) -> InterruptionEvent:
    """Event ``ident`` of ``kind`` on ``instance_id`` as the IMDS source reports it: noticed ``now``,
    acted on ``act_in`` seconds later, due ``deadline_in`` seconds after ``now`` (None: no deadline)."""
    return InterruptionEvent(
        id=ident,
        kind=kind,
        instance_id=instance_id,
        source=Source.IMDS,
        notice_time=now,
        act_at=now + timedelta(seconds=act_in),
        deadline=None if deadline_in is None else now + timedelta(seconds=deadline_in),
        description=description,
    )


def scheduled_change(
    n: int,
    *,
    start: datetime,
    noticed: datetime,
    lead: timedelta,
    node: str | None = None,
    description: str = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED (upcoming)",
) -> InterruptionEvent:
    """Scheduled maintenance number ``n`` as the queue reports it (an AWS Health event): ``noticed``,
    due to ``start``, acted on ``lead`` before that."""
    return InterruptionEvent(
        id=f"scheduled-maintenance-{n:024x}",
        kind=Kind.SCHEDULED_MAINTENANCE,
        instance_id="i-0abc",
        source=Source.SQS,
        notice_time=noticed,
        act_at=start - lead,
        deadline=start,
        node_name=node,
        description=description,
    )
