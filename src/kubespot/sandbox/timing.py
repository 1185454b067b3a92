"""The sandbox's clock: the real-world durations its story is told in, and their compression.

Every duration in the sandbox is written once here in real-world seconds (the 120 s spot notice,
pod shutdown times, the agent's lead and undo times) and divided by ``--time-scale``, so one knob
makes a run short while keeping every proportion that decides whether a drain fits its deadline.
Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: EC2's notice: the spot instance-action time is two minutes after the notice appears.
SPOT_NOTICE_SECONDS = 120.0
#: The agent handles a scheduled event this long before NotBefore. The product default is 300 s; the
#: sandbox tells a shorter story so a run stays short, and still well above the spot window.
SCHEDULED_LEAD_SECONDS = 150.0
#: How long before its fence time the scheduled reboot is announced (EC2 gives days; the agent must
#: wait, not drain at once, and this gap is what shows it).
SCHEDULED_ANNOUNCED_EARLY_SECONDS = 40.0
#: How long the simulated reboot keeps the node down.
REBOOT_SECONDS = 20.0
#: Undo of a rebalance fence with no interruption after it (product default 1800 s).
REBALANCE_UNDO_SECONDS = 120.0
#: The agent's IMDS poll interval (its default).
POLL_INTERVAL_SECONDS = 1.0
#: The drain's safety margin and PDB retry backoff (the agent's defaults).
SAFETY_MARGIN_SECONDS = 5.0
RETRY_BACKOFF_BASE_SECONDS = 0.5
RETRY_BACKOFF_CAP_SECONDS = 4.0
#: Binding to Ready for pods that do not say otherwise.
POD_START_SECONDS = 2.0
#: After the reboot, the agent must have cleaned up within this long.
CLEANUP_WITHIN_SECONDS = 40.0

#: The default compression: the 120 s notice becomes 30 s and a full run about a minute.
DEFAULT_TIME_SCALE = 4.0
#: Below these real durations timings stop being meaningful on a loaded 2-core machine.
MIN_POLL_INTERVAL = 0.05
MIN_GRACE_SECONDS = 1


@dataclass(frozen=True)
class Timing:
    """Real-world durations divided by ``scale`` (all in real seconds)."""

    scale: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.scale) and 0.5 <= self.scale <= 60):
            raise ValueError(f"time scale must be between 0.5 and 60, got {self.scale}")

    def s(self, story_seconds: float) -> float:
        """``story_seconds`` of the real world, compressed."""
        return story_seconds / self.scale

    def grace(self, story_seconds: int) -> int:
        """A terminationGracePeriodSeconds (whole seconds in the API), compressed, at least 1 s."""
        return max(MIN_GRACE_SECONDS, math.ceil(story_seconds / self.scale))

    @property
    def spot_notice(self) -> float:
        return self.s(SPOT_NOTICE_SECONDS)

    @property
    def scheduled_lead(self) -> float:
        return self.s(SCHEDULED_LEAD_SECONDS)

    @property
    def scheduled_announced_early(self) -> float:
        return self.s(SCHEDULED_ANNOUNCED_EARLY_SECONDS)

    @property
    def reboot(self) -> float:
        return self.s(REBOOT_SECONDS)

    @property
    def rebalance_undo(self) -> float:
        return self.s(REBALANCE_UNDO_SECONDS)

    @property
    def poll_interval(self) -> float:
        return max(MIN_POLL_INTERVAL, self.s(POLL_INTERVAL_SECONDS))

    @property
    def pod_start(self) -> float:
        return self.s(POD_START_SECONDS)

    @property
    def cleanup_within(self) -> float:
        # Never less than a few real seconds: a restarted agent process needs ~1 s to import.
        return max(5.0, self.s(CLEANUP_WITHIN_SECONDS))

    def agent_env(self) -> dict[str, str]:
        """The agent settings the sandbox compresses (names from kubespot.config)."""
        return {
            "KUBESPOT_IMDS_POLL_INTERVAL": _num(self.poll_interval),
            "KUBESPOT_IMDS_SCHEDULED_LEAD_TIME": _num(self.scheduled_lead),
            "KUBESPOT_NODE_ACTIONS_REBALANCE_UNDO_AFTER": _num(self.rebalance_undo),
            "KUBESPOT_DRAIN_SAFETY_MARGIN": _num(self.s(SAFETY_MARGIN_SECONDS)),
            "KUBESPOT_DRAIN_RETRY_BACKOFF_BASE": _num(self.s(RETRY_BACKOFF_BASE_SECONDS)),
            "KUBESPOT_DRAIN_RETRY_BACKOFF_CAP": _num(self.s(RETRY_BACKOFF_CAP_SECONDS)),
        }


def _num(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")
