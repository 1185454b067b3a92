"""Spot reclaims: EC2 taking a pool's (or a zone's) spot capacity back, on AWS's timeline.

``reclaim()`` plays what the EC2 User Guide describes ("Spot Instance interruption notices", "EC2
instance rebalance recommendations"; shapes in docs/designs/launching-research.md §5.1 and
``/work/shared/reference/events/``) for every running spot instance of the pool (spot, type,
zone), or of every spot pool of a zone:

1. optionally an "EC2 Instance Rebalance Recommendation" (``detail: {instance-id}``) at once;
2. an "EC2 Spot Instance Interruption Warning" (``detail: {instance-id, instance-action:
   terminate}``) ``rebalance_lead_s`` later (0 by default: AWS may send both together);
3. two minutes after the warning (``delay_s``, default 120 s times the market's ``time_scale``) the
   instance is terminated, its state reason ``Server.SpotInstanceTermination``, its spot request
   closed with status ``instance-terminated-no-capacity``, and "EC2 Instance State-change
   Notification" events go out for ``shutting-down`` and ``terminated``. An instance terminated by
   its owner in the meantime is left alone.

Events are put on the default EventBridge bus (as ``lifecycle._emit`` does for Auto Scaling), so
moto's rules route them to the queues that subscribed. The reclaimed pools' capacity drops to
``capacity_after`` (0 by default) through a market capacity rule, so CreateFleet answers
insufficient capacity there until ``market.set_capacity`` restores it.

Timed steps need something that runs without an EC2 call (the interruption handler polls SQS,
not EC2): a ticker thread in the server process (``start_ticker``, started by ``MotoServer``)
runs the due steps every 50 ms; CreateFleet and the market's routes also run them first.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import threading
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from moto.ec2.models import ec2_backends
from moto.ec2.models.instances import StateReason

from kubespot.sim.awssim.extensions import market

__all__ = [
    "WARNING_LEAD_S",
    "Reclaim",
    "list_reclaims",
    "reclaim",
    "run_due",
    "start_ticker",
    "stop_ticker",
]

#: The interruption warning's lead over termination (User Guide: two minutes).
WARNING_LEAD_S = 120.0
_TICK_S = 0.05
_LIVE = ("pending", "running", "stopping", "stopped")

_seq = itertools.count()
_active: set[tuple[str, str]] = set()
_ticker_lock = threading.Lock()
_ticker: threading.Thread | None = None
_ticker_users = 0
_stop = threading.Event()


@dataclass
class Reclaim:
    """One reclaim: which pools, which instances, and when each step runs."""

    id: str
    zone: str
    #: None: every spot pool of the zone.
    instance_type: str | None
    started_at: float
    warning_at: float
    terminate_at: float
    rebalance: bool
    capacity_after: int
    instances: list[str] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)
    terminated: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(order=True)
class _Step:
    due: float
    seq: int
    kind: str = field(compare=False)  # "rebalance" | "warning" | "terminate"
    instance_id: str = field(compare=False)
    reclaim: Reclaim = field(compare=False)


def _emit(backend: Any, entries: list[tuple[str, dict[str, Any], str, float]]) -> None:
    """Put (detail-type, detail, instance id, time) events from ``aws.ec2`` on the default bus."""
    from moto.events.models import events_backends

    account, region = backend.account_id, backend.region_name
    bus = events_backends[account][region]
    events = [
        {
            "Source": "aws.ec2",
            "DetailType": detail_type,
            "Detail": json.dumps(detail),
            "Resources": [f"arn:aws:ec2:{region}:{account}:instance/{instance_id}"],
            # Unix seconds, as moto's backend takes them (it renders the ISO time for SQS).
            "Time": int(when),
        }
        for detail_type, detail, instance_id, when in entries
    ]
    for start in range(0, len(events), 10):  # PutEvents takes at most 10 entries
        bus.put_events(events[start : start + 10])


def _victims(backend: Any, zone: str, instance_type: str | None) -> list[Any]:
    return [
        i
        for i in backend.all_instances()
        if i.lifecycle == "spot"
        and i.placement.zone == zone
        and (instance_type is None or i.instance_type == instance_type)
        and i.state in ("pending", "running")
    ]


def reclaim(
    account_id: str,
    region: str,
    *,
    zone: str,
    instance_type: str | None = None,
    rebalance: bool = False,
    rebalance_lead_s: float = 0.0,
    delay_s: float | None = None,
    capacity_after: int = 0,
) -> Reclaim:
    """Reclaim the spot pool (``instance_type``, ``zone``), or every spot pool of ``zone``.

    Sends what is due at once before returning (with ``rebalance_lead_s=0``: the rebalance
    recommendations and warnings); the terminations follow ``delay_s`` (default: two minutes
    times the market's time scale) after the warnings.
    """
    if capacity_after < 0:
        raise ValueError(f"capacity_after must be >= 0, not {capacity_after}")
    backend = ec2_backends[account_id][region]
    with market.lock:
        state = market.state(account_id, region)
        start = market.now()
        delay = WARNING_LEAD_S * state.time_scale if delay_s is None else float(delay_s)
        warning_at = start + (max(0.0, rebalance_lead_s) if rebalance else 0.0)
        record = Reclaim(
            id=f"reclaim-{uuid.uuid4().hex[:12]}",
            zone=zone,
            instance_type=instance_type,
            started_at=start,
            warning_at=warning_at,
            terminate_at=warning_at + delay,
            rebalance=rebalance,
            capacity_after=capacity_after,
        )
        market.add_capacity_rule(state, capacity_after, market.SPOT, instance_type or "*", zone)
        for instance in _victims(backend, zone, instance_type):
            record.instances.append(instance.id)
            market.pool(state, market.SPOT, instance.instance_type, zone).reclaimed += 1
            if rebalance:
                heapq.heappush(state.schedule, _Step(start, next(_seq), "rebalance", instance.id, record))
            heapq.heappush(state.schedule, _Step(warning_at, next(_seq), "warning", instance.id, record))
            heapq.heappush(
                state.schedule, _Step(record.terminate_at, next(_seq), "terminate", instance.id, record)
            )
        state.reclaims.append(record)
        _active.add((account_id, region))
    run_due(backend)
    return record


def list_reclaims(account_id: str, region: str) -> list[dict[str, Any]]:
    """Every reclaim of the region, oldest first, with the instances warned and terminated so far."""
    backend = ec2_backends[account_id][region]
    run_due(backend)
    with market.lock:
        return [r.to_dict() for r in market.state(account_id, region).reclaims]


def _terminate(backend: Any, instance: Any) -> None:
    backend.terminate_instances([instance.id])
    instance.state_reason = StateReason(
        "Server.SpotInstanceTermination: Spot instance termination", "Server.SpotInstanceTermination"
    )
    request_id = getattr(instance, "spot_instance_request_id", None)
    request = backend.spot_instance_requests.get(request_id) if request_id else None
    if request is None:
        request = next((r for r in backend.spot_instance_requests.values() if r.instance is instance), None)
    if request is not None:
        request.state = "closed"
        request._status_code = "instance-terminated-no-capacity"
        request.status_message = (
            "Your Spot Instance was terminated because there is no Spot capacity available "
            "that matches your request."
        )


def run_due(backend: Any, now: float | None = None) -> int:
    """Run the reclaim steps due by ``now`` in ``backend``'s region; answers how many ran."""
    with market.lock:
        state = market.state_of_backend(backend)
        if state is None or not state.schedule:
            return 0
        now = market.now() if now is None else now
        events: list[tuple[str, dict[str, Any], str, float]] = []
        ran = 0
        while state.schedule and state.schedule[0].due <= now:
            step = heapq.heappop(state.schedule)
            ran += 1
            instance = backend.get_instance_by_id(step.instance_id)
            if instance is None or instance.state not in _LIVE:
                continue  # terminated by its owner meanwhile: nothing left to reclaim
            if step.kind == "rebalance":
                events.append(
                    (
                        "EC2 Instance Rebalance Recommendation",
                        {"instance-id": instance.id},
                        instance.id,
                        step.due,
                    )
                )
            elif step.kind == "warning":
                step.reclaim.warned.append(instance.id)
                detail = {"instance-id": instance.id, "instance-action": "terminate"}
                events.append(("EC2 Spot Instance Interruption Warning", detail, instance.id, step.due))
            else:
                _terminate(backend, instance)
                step.reclaim.terminated.append(instance.id)
                for name in ("shutting-down", "terminated"):
                    detail = {"instance-id": instance.id, "state": name}
                    events.append(("EC2 Instance State-change Notification", detail, instance.id, now))
        if events:
            _emit(backend, events)
        return ran


def _tick() -> None:
    while not _stop.wait(_TICK_S):
        for account_id, region in list(_active):
            backend = ec2_backends[account_id][region]
            state = market.state_of_backend(backend)
            if state is None or not state.schedule:
                _active.discard((account_id, region))
                continue
            try:
                run_due(backend)
            except Exception:  # the ticker must outlive one bad step
                logging.getLogger(__name__).exception("spot reclaim step failed")


def start_ticker() -> None:
    """Start the thread that runs timed reclaim steps (shared; one per process, counted)."""
    global _ticker, _ticker_users
    with _ticker_lock:
        _ticker_users += 1
        if _ticker is None or not _ticker.is_alive():
            _stop.clear()
            _ticker = threading.Thread(target=_tick, name="awssim-reclaims", daemon=True)
            _ticker.start()


def stop_ticker() -> None:
    """Release one user of the ticker; the last one stops it."""
    global _ticker, _ticker_users
    with _ticker_lock:
        _ticker_users = max(0, _ticker_users - 1)
        if _ticker_users == 0 and _ticker is not None:
            _stop.set()
            _ticker.join(timeout=2)
            _ticker = None
