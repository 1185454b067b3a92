"""The sandbox's clock: the real-world durations its story is told in, and their compression.

Every duration in the sandbox is written once here in real-world seconds (the 120 s spot notice,
pod shutdown times, the agent's lead and undo times) and divided by ``--time-scale``, so one knob
makes a run short while keeping every proportion that decides whether a drain fits its deadline.
Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kubespot.sim.joiner import NODE_MONITOR_GRACE_SECONDS as NODE_MONITOR_GRACE_SECONDS
from kubespot.sim.joiner import NODE_MONITOR_PERIOD_SECONDS as NODE_MONITOR_PERIOD_SECONDS

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

# The load-balancer scenario (docs/sandbox.md, "load-balancer"): the simulated balancer's model and
# kubespot's settings for it, in real-world seconds like everything above.
#: Requests per second the simulated balancer sends. Not compressed: it is a count per real second,
#: and the summary compares counts.
REQUEST_RATE = 50.0
#: Its health checks: every 10 s, 2 failures take a target out, 5 passes bring it back (ALB's
#: thresholds; the interval a common setting between ALB's 30 s default and its 5 s minimum).
HEALTH_CHECK_INTERVAL_SECONDS = 10.0
HEALTH_CHECK_UNHEALTHY = 2
HEALTH_CHECK_HEALTHY = 5
#: The AWS Load Balancer Controller deregisters a pod this long after the API shows it terminating.
LB_CONTROLLER_LAG_SECONDS = 5.0
#: ALB and NLB keep routing to a target this long after AWS reports it draining.
LB_PROPAGATION_SECONDS = 2.0
#: kubespot's loadbalancer.settle and loadbalancer.max_delay (the product's defaults).
LB_SETTLE_SECONDS = 5.0
LB_MAX_DELAY_SECONDS = 30.0
#: The target group's deregistration_delay.timeout_seconds (AWS's default is 300 s; 30 s is usual
#: for pods that finish their requests quickly).
DEREGISTRATION_DELAY_SECONDS = 30.0
#: How often the simulated balancer reads DescribeTargetHealth: real seconds, never compressed.
LB_REFRESH_SECONDS = 0.25
#: Real seconds ``settle`` keeps above the balancer's refresh period plus propagation, whatever the
#: time scale: the settle must cover them (that is its whole point), and on a loaded 2-core machine
#: a DescribeTargetHealth answer or an event-loop turn can take a few hundred milliseconds.
SETTLE_SLACK = 1.5

# kube-controller-manager's ``--node-monitor-grace-period`` (50 s from v1.32: a vanished kubelet's
# Node turns Ready Unknown this long after its last heartbeat; kubesim's node lifecycle controller
# and the node joiner both; the sandbox's ``--node-monitor-grace-period`` changes it) and
# cloud-controller-manager's ``--node-monitor-period`` (5 s: how often its node lifecycle controller
# deletes the Nodes of terminated instances; the node joiner plays it): the joiner's upstream
# defaults, one definition.
#: The kubelet's node lease renewal interval (upstream's 10 s; kubesim's ``lease_renew_seconds``).
KUBELET_LEASE_RENEW_SECONDS = 10.0
#: The shortest ``--node-monitor-grace-period`` the sandbox takes: a few renewals, as upstream asks
#: ("must be N times more than kubelet's nodeStatusUpdateFrequency", pkg/controller/nodelifecycle/
#: config/types.go), or healthy nodes flap Unknown and get unreachable NoExecute taints. 4 renewals
#: is upstream's default before v1.32 (40 s).
MIN_NODE_MONITOR_GRACE_SECONDS = 4 * KUBELET_LEASE_RENEW_SECONDS

#: The default compression: the 120 s notice becomes 30 s and a full run about a minute.
DEFAULT_TIME_SCALE = 4.0
#: The load-balancer scenario's: the agent keeps 30 real seconds of the notice for the drain after
#: its wait for deregistration (``command.lb_time_scale_problem``), so the notice must stay longer.
LB_DEFAULT_TIME_SCALE = 2.0
#: Below these real durations timings stop being meaningful on a loaded 2-core machine.
MIN_POLL_INTERVAL = 0.05
MIN_GRACE_SECONDS = 1


@dataclass(frozen=True)
class Timing:
    """Real-world durations divided by ``scale`` (all in real seconds)."""

    scale: float
    #: Real-world seconds of the node monitor grace (``NODE_MONITOR_GRACE_SECONDS``), compressed
    #: like the rest by ``node_monitor_grace``.
    story_node_monitor_grace: float = NODE_MONITOR_GRACE_SECONDS

    def __post_init__(self) -> None:
        # At least 1: the controller's queue.interruption_notice is never longer than EC2's two
        # minutes, so a simulated EC2 may run faster than AWS but not slower.
        if not (math.isfinite(self.scale) and 1 <= self.scale <= 60):
            raise ValueError(f"time scale must be between 1 and 60, got {self.scale}")
        grace = self.story_node_monitor_grace
        if not (math.isfinite(grace) and grace >= MIN_NODE_MONITOR_GRACE_SECONDS):
            raise ValueError(
                f"the node monitor grace period must be a finite number of seconds of at least "
                f"{MIN_NODE_MONITOR_GRACE_SECONDS:g} (4 kubelet lease renewals of "
                f"{KUBELET_LEASE_RENEW_SECONDS:g} s; a shorter one makes healthy nodes flap Unknown), "
                f"got {grace:g}"
            )

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
    def node_monitor_grace(self) -> float:
        return self.s(self.story_node_monitor_grace)

    @property
    def node_monitor_period(self) -> float:
        return self.s(NODE_MONITOR_PERIOD_SECONDS)

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
        # Never less than ten real seconds: a restarted agent process needs ~1 s to import on a
        # quiet machine and several on a loaded 2-core one (5 s was seen missed there).
        return max(10.0, self.s(CLEANUP_WITHIN_SECONDS))

    @property
    def lb_settle(self) -> float:
        """kubespot's settle: the product default compressed, but never closer than ``SETTLE_SLACK``
        real seconds to the time the balancer needs to stop routing (refresh + propagation)."""
        return max(
            self.s(LB_SETTLE_SECONDS), self.s(LB_PROPAGATION_SECONDS) + LB_REFRESH_SECONDS + SETTLE_SLACK
        )

    @property
    def lb_max_delay(self) -> float:
        return self.s(LB_MAX_DELAY_SECONDS)

    @property
    def deregistration_delay(self) -> int:
        """Whole seconds (the attribute is an integer on AWS), at least 2 so ``draining`` is seen."""
        return max(2, math.ceil(self.s(DEREGISTRATION_DELAY_SECONDS)))

    def agent_env(self) -> dict[str, str]:
        """The agent settings the sandbox compresses (names from kubespot.config)."""
        return {
            "KUBESPOT_IMDS_POLL_INTERVAL": num(self.poll_interval),
            "KUBESPOT_IMDS_SCHEDULED_LEAD_TIME": num(self.scheduled_lead),
            "KUBESPOT_NODE_ACTIONS_REBALANCE_UNDO_AFTER": num(self.rebalance_undo),
            **self.drain_env(),
        }

    def drain_env(self) -> dict[str, str]:
        """The drain's margin and retry waits, compressed: the agent's and the controller's alike."""
        return {
            "KUBESPOT_DRAIN_SAFETY_MARGIN": num(self.s(SAFETY_MARGIN_SECONDS)),
            "KUBESPOT_DRAIN_RETRY_BACKOFF_BASE": num(self.s(RETRY_BACKOFF_BASE_SECONDS)),
            "KUBESPOT_DRAIN_RETRY_BACKOFF_CAP": num(self.s(RETRY_BACKOFF_CAP_SECONDS)),
        }

    def queue_env(self) -> dict[str, str]:
        """The controller's queue settings for a compressed EC2: an interruption warning's instance
        ends ``spot_notice`` after the warning's time (awssim's reclaims scale it the same way), so
        the drain's deadline is that, not AWS's two real minutes; the drain compressed too."""
        return {"KUBESPOT_QUEUE_INTERRUPTION_NOTICE": num(self.spot_notice), **self.drain_env()}


def num(value: float) -> str:
    """A setting's value for the environment: at most three decimals, no trailing zeros."""
    return f"{value:.3f}".rstrip("0").rstrip(".")
