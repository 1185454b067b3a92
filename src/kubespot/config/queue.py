"""The controller's SQS queue: where it is, how it is consumed, and what happens to each message.

Read by ``kubespot.controllers.interruption.sqs``; the loader composes this group with the others. Names and
defaults follow aws-node-termination-handler's queue mode where it has them (accepted as aliases),
except where its defaults are what users report as broken (a fixed 20 s visibility timeout, ten
workers): those are kubespot's own settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .base import setting
from .loader import InvalidSetting

#: The reference handler's tag marking the instances (and Auto Scaling groups) it handles.
MANAGED_TAG = "aws-node-termination-handler/managed"
#: EC2's spot interruption notice, in seconds: fixed by AWS (EC2 User Guide, "Spot Instance
#: interruption notices"); the most ``interruption_notice`` may be.
SPOT_NOTICE = 120.0


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueSettings:
    """The interruption queue and the lifecycle of its messages."""

    url: str = setting(
        "",
        doc=(
            "URL of the SQS queue EventBridge fills with interruption events (see `kubespot aws "
            "bootstrap`). Required by `kubespot controller`, unless an AWS response action is on "
            "(loadbalancer, isolation, publish): then it may run without a queue, acting on the nodes "
            "the agents fence."
        ),
        env="KUBESPOT_QUEUE_URL",
        nth="QUEUE_URL",
        flag="--queue-url",
    )
    receivers: int = setting(
        4,
        doc=(
            "Concurrent long-poll ReceiveMessage loops (10 messages each). A burst of 1 000 "
            "interruptions is read in about 25 round trips; 4 loops take it in well under a second "
            "while an idle controller makes 4 requests per 20 s."
        ),
        env="KUBESPOT_QUEUE_RECEIVERS",
        unit="loops",
    )
    max_in_flight: int = setting(
        1000,
        doc=(
            "Messages being handled at once; receiving pauses at this many. Each is an asyncio task "
            "waiting on API calls, not a thread, so 1 000 (an AZ-wide spot reclaim) costs little. "
            "The reference handler's WORKERS=10 is its practical limit of ~100 interruptions per "
            "2 minutes, so that name is deliberately not an alias."
        ),
        env="KUBESPOT_QUEUE_MAX_IN_FLIGHT",
        unit="messages",
    )
    wait_time: int = setting(
        20,
        doc="Long-poll wait of each ReceiveMessage (0..20; 20, the maximum, is the cheapest when idle).",
        env="KUBESPOT_QUEUE_WAIT_TIME",
        unit="seconds",
    )
    visibility_timeout: int = setting(
        30,
        doc=(
            "Visibility timeout set on receipt and renewed while the message's work goes on (at a "
            "third of it), so a message is hidden exactly as long as it is being handled and comes "
            "back quickly if the controller dies. The reference handler sets a fixed 20 s and lets "
            "long drains' messages reappear and be handled twice."
        ),
        env="KUBESPOT_QUEUE_VISIBILITY_TIMEOUT",
        nth="SQS_MSG_VISIBILITY_TIMEOUT_SEC",
        unit="seconds",
    )
    malformed_action: Literal["leave", "delete"] = setting(
        "leave",
        doc=(
            "What to do with a message that is not an event kubespot understands: leave it (it "
            "reappears and, after the queue's maxReceiveCount, moves to the dead-letter queue for a "
            "human to read) or delete it. Either way it is logged with its message id."
        ),
        env="KUBESPOT_QUEUE_MALFORMED_ACTION",
    )
    delete_if_node_not_found: bool = setting(
        False,
        doc=(
            "Delete a message about an instance that is not a node of this cluster at once. Off: "
            "give it back to the queue at once (visibility 0) for the cluster that owns the instance "
            "(several clusters may share a queue), hidden 1, 2, 4… s more each time it comes back "
            "here, until it has been received foreign_max_receives times."
        ),
        env="KUBESPOT_QUEUE_DELETE_IF_NODE_NOT_FOUND",
        nth="DELETE_SQS_MSG_IF_NODE_NOT_FOUND",
    )
    foreign_max_receives: int = setting(
        5,
        doc=(
            "A message about an instance that is not a node here is deleted after this many "
            "receives (its ApproximateReceiveCount), so events for other clusters or long-gone "
            "instances never loop on the queue for ever, while the owner has had several chances."
        ),
        env="KUBESPOT_QUEUE_FOREIGN_MAX_RECEIVES",
        unit="receives",
    )
    check_tag_before_draining: bool = setting(
        True,
        doc=(
            "Act only on instances carrying managed_tag, so one queue can serve several clusters "
            "or leave unmanaged instances alone. Default true, as in the reference handler."
        ),
        env="KUBESPOT_QUEUE_CHECK_TAG_BEFORE_DRAINING",
        # NTH's deprecated CHECK_ASG_TAG_BEFORE_DRAINING counts only when the newer name is absent.
        nth=("CHECK_TAG_BEFORE_DRAINING", "CHECK_ASG_TAG_BEFORE_DRAINING"),
    )
    managed_tag: str = setting(
        MANAGED_TAG,
        doc="The tag key that marks an instance as handled by this controller (any value).",
        env="KUBESPOT_QUEUE_MANAGED_TAG",
        # NTH's deprecated MANAGED_ASG_TAG counts only when the newer name is absent.
        nth=("MANAGED_TAG", "MANAGED_ASG_TAG"),
    )
    use_provider_id: bool = setting(
        False,
        doc=(
            "Accepted for the reference handler's configurations. kubespot always matches an "
            "instance to its node by providerID (aws:///<zone>/<instance-id>) first and by private "
            "DNS name second, so this changes nothing."
        ),
        env="KUBESPOT_QUEUE_USE_PROVIDER_ID",
        nth="USE_PROVIDER_ID",
    )
    describe_cache_ttl: float = setting(
        30.0,
        doc=(
            "How long DescribeInstances answers (instance → private DNS name, tags, state) are "
            "reused. Instance identity never changes; 30 s bounds how stale a tag check can be."
        ),
        env="KUBESPOT_QUEUE_DESCRIBE_CACHE_TTL",
        unit="seconds",
    )
    complete_lifecycle_action_delay: float = setting(
        -1.0,
        doc=(
            "Extra wait after the node's pods are gone before CompleteLifecycleAction(CONTINUE) "
            "(-1: none). The action is never completed before the pods are gone or the deadline "
            "has passed."
        ),
        env="KUBESPOT_QUEUE_COMPLETE_LIFECYCLE_ACTION_DELAY",
        nth="COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS",
        unit="seconds",
    )
    heartbeat_interval: float = setting(
        -1.0,
        doc=(
            "Send RecordLifecycleActionHeartbeat this often while a drain for an Auto Scaling "
            "lifecycle hook runs (-1: never), to keep the hook from timing out."
        ),
        env="KUBESPOT_QUEUE_HEARTBEAT_INTERVAL",
        nth="HEARTBEAT_INTERVAL",
        unit="seconds",
    )
    heartbeat_until: float = setting(
        -1.0,
        doc="Stop heartbeats this long after the hook started (-1: as long as the drain runs).",
        env="KUBESPOT_QUEUE_HEARTBEAT_UNTIL",
        nth="HEARTBEAT_UNTIL",
        unit="seconds",
    )

    interruption_notice: float = setting(
        SPOT_NOTICE,
        doc=(
            "Seconds from an EC2 interruption warning's time to the instance's end, where the event "
            "does not say when that is (a spot interruption warning never does; a Capacity "
            "Reservation interruption warning without a usable instance-termination-time): AWS's "
            "two minutes. The deadline of the drain is the warning's time plus this. Change it only "
            "for a simulated EC2 that runs faster than AWS (`kubespot sandbox` sets its compressed "
            "notice); it can never exceed 120."
        ),
        env="KUBESPOT_QUEUE_INTERRUPTION_NOTICE",
        unit="seconds",
    )

    held_margin: float = setting(
        60.0,
        doc=(
            "How long past an event's deadline (for an event without one: the drain window after it "
            "is due) the controller still waits for its node's handling before it lets the message "
            "go: the instance is gone by then. Every wait for one message is bounded so; a message "
            "still held after its bound is reported by kubespot_queue_messages_overdue and /healthz."
        ),
        env="KUBESPOT_QUEUE_HELD_MARGIN",
        unit="seconds",
    )

    def __post_init__(self) -> None:
        if self.url and not self.url.startswith(("http://", "https://")):
            raise InvalidSetting("url", "must be an SQS queue URL (https://sqs.<region>.amazonaws.com/...)")
        if self.receivers < 1:
            raise InvalidSetting("receivers", "must be at least 1")
        if self.max_in_flight < 1:
            raise InvalidSetting("max_in_flight", "must be at least 1")
        if not 0 <= self.wait_time <= 20:
            raise InvalidSetting("wait_time", "must be 0..20 (SQS's long-poll limit)")
        if not 3 <= self.visibility_timeout <= 43200:
            raise InvalidSetting("visibility_timeout", "must be 3..43200 seconds")
        if self.malformed_action not in ("leave", "delete"):
            raise InvalidSetting("malformed_action", "must be leave or delete")
        if self.foreign_max_receives < 1:
            raise InvalidSetting("foreign_max_receives", "must be at least 1")
        if not 0 < self.interruption_notice <= SPOT_NOTICE:
            # EC2's notice is a fixed two minutes: a longer one would let drains run past the
            # instance's real end. The setting exists only for a simulated EC2 that runs faster.
            raise InvalidSetting(
                "interruption_notice",
                f"must be positive and at most {SPOT_NOTICE:g} s (EC2's fixed two-minute notice; "
                "a shorter one is only for a simulated EC2 that runs faster than AWS)",
            )
        if self.describe_cache_ttl < 0:
            raise InvalidSetting("describe_cache_ttl", "must not be negative")
        if self.heartbeat_interval == 0:
            raise InvalidSetting("heartbeat_interval", "must be positive, or -1 for never")
