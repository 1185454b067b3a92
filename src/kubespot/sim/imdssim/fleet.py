"""The simulated fleet: instances, their token stores, the faults in force, and the clock.

This is the whole simulation state behind the HTTP server, and the Python API tests and the sandbox
use to make things happen ("interrupt this instance in 5 seconds"). All times are absolute epoch
seconds read from the injected clock; ``at=None`` means now.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable
from typing import Literal, get_args

from kubespot.sim.imdssim.clock import Clock, system_clock
from kubespot.sim.imdssim.events import (
    ASG_STATES,
    DEFAULT_SCHEDULED_DESCRIPTIONS,
    SCHEDULED_CODES,
    SCHEDULED_STATES,
    SPOT_ACTIONS,
    SPOT_LEAD_SECONDS,
    AsgTransition,
    RebalanceRecommendation,
    ScheduledCode,
    ScheduledEvent,
    ScheduledState,
    SpotAction,
    SpotInterruption,
    StateChange,
)
from kubespot.sim.imdssim.faults import FaultSet
from kubespot.sim.imdssim.instance import SimInstance
from kubespot.sim.imdssim.tokens import TokenStore

EventKind = Literal["spot-itn", "rebalance", "scheduled", "asg"]
EVENT_KINDS: tuple[str, ...] = get_args(EventKind)

DEFAULT_NOT_BEFORE_IN = 3600.0
"""Seconds from a scheduled event's appearance to its NotBefore when none is given."""
DEFAULT_EVENT_DURATION = 7200.0
"""Seconds from NotBefore to NotAfter when none is given (EC2 windows are a few hours)."""


class UnknownInstance(KeyError):
    """No instance with that id in the fleet."""


class Fleet:
    """Every simulated instance served by one ImdsSim, plus shared rules (require-v2, faults)."""

    def __init__(
        self,
        instances: Iterable[SimInstance] = (),
        *,
        clock: Clock = system_clock,
        require_v2: bool = False,
        rng: Callable[[], float] | None = None,
    ) -> None:
        self.clock = clock
        self.require_v2 = require_v2
        """Server-wide default; an instance's own ``require_v2`` wins when set."""
        self.faults = FaultSet(rng or random.Random().random)
        self._instances: dict[str, SimInstance] = {}
        self._tokens: dict[str, TokenStore] = {}
        self._event_ids = itertools.count(1)
        for instance in instances:
            self.add(instance)

    # --- membership -------------------------------------------------------------------------------

    def add(self, instance: SimInstance) -> SimInstance:
        if instance.instance_id in self._instances:
            raise ValueError(f"instance {instance.instance_id} already exists")
        self._instances[instance.instance_id] = instance
        self._tokens[instance.instance_id] = TokenStore(self.clock)
        return instance

    def remove(self, instance_id: str) -> None:
        self.get(instance_id)
        del self._instances[instance_id]
        del self._tokens[instance_id]

    def get(self, instance_id: str) -> SimInstance:
        try:
            return self._instances[instance_id]
        except KeyError:
            raise UnknownInstance(instance_id) from None

    def __contains__(self, instance_id: object) -> bool:
        return instance_id in self._instances

    def __len__(self) -> int:
        return len(self._instances)

    def instances(self) -> list[SimInstance]:
        return list(self._instances.values())

    @property
    def default(self) -> SimInstance | None:
        """The instance served at the root path: the first one added."""
        return next(iter(self._instances.values()), None)

    def tokens(self, instance_id: str) -> TokenStore:
        self.get(instance_id)
        return self._tokens[instance_id]

    def requires_v2(self, instance: SimInstance) -> bool:
        return self.require_v2 if instance.require_v2 is None else instance.require_v2

    # --- signals ----------------------------------------------------------------------------------

    def _at(self, at: float | None) -> float:
        return self.clock() if at is None else at

    def fire_spot_itn(
        self,
        instance_id: str,
        action: SpotAction = "terminate",
        *,
        at: float | None = None,
        lead_seconds: float = SPOT_LEAD_SECONDS,
    ) -> SpotInterruption:
        """A spot interruption notice visible from ``at``; the action time is ``lead_seconds`` later."""
        if action not in SPOT_ACTIONS:
            raise ValueError(f"spot action must be one of {', '.join(SPOT_ACTIONS)}, got {action!r}")
        if lead_seconds < 0:
            raise ValueError("lead_seconds must not be negative")
        notice_at = self._at(at)
        itn = SpotInterruption(action=action, notice_at=notice_at, action_at=notice_at + lead_seconds)
        self.get(instance_id).spot.append(itn)
        return itn

    def fire_rebalance(self, instance_id: str, *, at: float | None = None) -> RebalanceRecommendation:
        notice = RebalanceRecommendation(notice_at=self._at(at))
        self.get(instance_id).rebalance.append(notice)
        return notice

    def add_scheduled_event(
        self,
        instance_id: str,
        code: ScheduledCode = "system-reboot",
        *,
        at: float | None = None,
        not_before: float | None = None,
        not_after: float | None = None,
        not_before_deadline: float | None = None,
        description: str | None = None,
        event_id: str | None = None,
    ) -> ScheduledEvent:
        """A scheduled maintenance event that appears at ``at`` in state ``active``."""
        if code not in SCHEDULED_CODES:
            raise ValueError(
                f"scheduled event code must be one of {', '.join(SCHEDULED_CODES)}, got {code!r}"
            )
        instance = self.get(instance_id)
        appear_at = self._at(at)
        start = appear_at + DEFAULT_NOT_BEFORE_IN if not_before is None else not_before
        end = start + DEFAULT_EVENT_DURATION if not_after is None else not_after
        if end < start:
            raise ValueError("NotAfter must not be before NotBefore")
        event_id = event_id or f"instance-event-0e{next(self._event_ids):015x}"
        if any(e.event_id == event_id for e in instance.scheduled):
            raise ValueError(f"scheduled event {event_id} already exists on {instance_id}")
        event = ScheduledEvent(
            event_id=event_id,
            code=code,
            description=description or DEFAULT_SCHEDULED_DESCRIPTIONS[code],
            appear_at=appear_at,
            not_before=start,
            not_after=end,
            not_before_deadline=not_before_deadline,
        )
        instance.scheduled.append(event)
        return event

    def set_scheduled_state(
        self, instance_id: str, event_id: str, state: ScheduledState, *, at: float | None = None
    ) -> ScheduledEvent:
        """From ``at`` on, the event shows ``state`` (``canceled``/``completed``, or back to ``active``)."""
        if state not in SCHEDULED_STATES:
            raise ValueError(f"scheduled state must be one of {', '.join(SCHEDULED_STATES)}, got {state!r}")
        for event in self.get(instance_id).scheduled:
            if event.event_id == event_id:
                event.state_changes.append(StateChange(at=self._at(at), state=state))
                return event
        raise KeyError(f"no scheduled event {event_id} on {instance_id}")

    def set_asg_state(
        self, instance_id: str, state: str = "Terminated", *, at: float | None = None
    ) -> AsgTransition:
        """From ``at`` on, target-lifecycle-state shows ``state``.

        The instance joins an Auto Scaling group if it was not in one.
        """
        if state not in ASG_STATES:
            raise ValueError(f"ASG lifecycle state must be one of {', '.join(ASG_STATES)}, got {state!r}")
        instance = self.get(instance_id)
        instance.autoscaling = True
        transition = AsgTransition(at=self._at(at), state=state)
        instance.asg.append(transition)
        return transition

    def clear_events(self, instance_id: str, kind: EventKind | None = None) -> None:
        """Forget signals of one kind (or all), visible or pending."""
        if kind is not None and kind not in EVENT_KINDS:
            raise ValueError(f"event kind must be one of {', '.join(EVENT_KINDS)}, got {kind!r}")
        instance = self.get(instance_id)
        if kind in (None, "spot-itn"):
            instance.spot.clear()
        if kind in (None, "rebalance"):
            instance.rebalance.clear()
        if kind in (None, "scheduled"):
            instance.scheduled.clear()
        if kind in (None, "asg"):
            instance.asg.clear()
