"""Interruption signals a simulated instance can carry, as absolute-time state.

Each signal knows when it becomes visible and renders the exact IMDS body for a given instant, so
"what does IMDS show at time t" is a pure function of the instance and t.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from kubespot.sim.imdssim.timefmt import event_date, iso_utc

SpotAction = Literal["terminate", "stop", "hibernate"]
SPOT_ACTIONS: tuple[str, ...] = get_args(SpotAction)

ScheduledCode = Literal[
    "instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop"
]
SCHEDULED_CODES: tuple[str, ...] = get_args(ScheduledCode)

ScheduledState = Literal["active", "completed", "canceled"]
SCHEDULED_STATES: tuple[str, ...] = get_args(ScheduledState)

# Values the Auto Scaling target-lifecycle-state item can take.
ASG_STATES: tuple[str, ...] = (
    "Pending",
    "InService",
    "Standby",
    "Terminated",
    "Detached",
    "Warmed:Pending",
    "Warmed:Running",
    "Warmed:Stopped",
    "Warmed:Hibernated",
    "Warmed:Terminated",
)

SPOT_LEAD_SECONDS = 120.0
"""A spot interruption notice comes two minutes before the action."""

DEFAULT_SCHEDULED_DESCRIPTIONS: dict[str, str] = {
    "instance-reboot": "scheduled reboot",
    "system-reboot": "scheduled reboot",
    "system-maintenance": "scheduled maintenance",
    "instance-retirement": "scheduled retirement",
    "instance-stop": "scheduled stop",
}


@dataclass
class SpotInterruption:
    """A spot interruption notice: visible from ``notice_at``; the action happens at ``action_at``."""

    action: SpotAction
    notice_at: float
    action_at: float

    def instance_action(self) -> dict[str, str]:
        return {"action": self.action, "time": iso_utc(self.action_at)}

    def summary(self) -> dict[str, Any]:
        return {**self.instance_action(), "notice_at": iso_utc(self.notice_at)}


@dataclass
class RebalanceRecommendation:
    notice_at: float

    def body(self) -> dict[str, str]:
        return {"noticeTime": iso_utc(self.notice_at)}


@dataclass
class StateChange:
    at: float
    state: ScheduledState


@dataclass
class ScheduledEvent:
    """A scheduled maintenance event whose state can change over time (active → canceled/completed)."""

    event_id: str
    code: ScheduledCode
    description: str
    appear_at: float
    not_before: float
    not_after: float
    not_before_deadline: float | None = None
    state_changes: list[StateChange] = field(default_factory=list)

    def state_at(self, now: float) -> ScheduledState:
        state: ScheduledState = "active"
        for change in sorted(self.state_changes, key=lambda c: c.at):
            if change.at <= now:
                state = change.state
        return state

    def body(self, now: float) -> dict[str, str]:
        state = self.state_at(now)
        # EC2 prefixes the description of finished events, e.g. "[Completed] scheduled reboot".
        prefix = {"active": "", "completed": "[Completed] ", "canceled": "[Canceled] "}[state]
        out = {
            "Code": self.code,
            "Description": prefix + self.description,
            "EventId": self.event_id,
            "NotAfter": event_date(self.not_after),
            "NotBefore": event_date(self.not_before),
            "State": state,
        }
        if self.not_before_deadline is not None:
            out["NotBeforeDeadline"] = event_date(self.not_before_deadline)
        return out

    def summary(self, now: float) -> dict[str, Any]:
        return {
            **self.body(now),
            "appear_at": iso_utc(self.appear_at),
            "state_changes": [{"at": iso_utc(c.at), "state": c.state} for c in self.state_changes],
        }


@dataclass
class AsgTransition:
    """From ``at`` on, the Auto Scaling target lifecycle state is ``state``."""

    at: float
    state: str
