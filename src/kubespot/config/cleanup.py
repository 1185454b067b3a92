"""Clean-up of Node objects left behind by terminated instances (a singleton duty of the controller).

Read by ``kubespot.controllers.housekeeping.singleton``; the loader composes this group with the
others. Off by default: deleting Nodes is the cloud controller manager's job, and this only covers
for clusters where it lags or is missing (self-managed control planes, a node lifecycle controller that never
ran for an instance).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import setting
from .loader import InvalidSetting


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeCleanupSettings:
    """Deleting Nodes that stay NotReady after their EC2 instance is gone."""

    enabled: bool = setting(
        False,
        doc=(
            "Delete a Node that has been NotReady (or Unknown) for not_ready_for and whose instance "
            "(providerID aws:///<zone>/i-...) EC2 reports terminated or shutting-down, or no longer "
            "knows. Only the elected replica does it; queue.check_tag_before_draining and "
            "queue.managed_tag apply as for queue messages (an instance EC2 no longer knows has no "
            "tags to check, so it is then left alone), and under node_actions.dry_run it only logs "
            "and records a DryRun event. The Helm "
            "chart grants delete on nodes only when this is on. Default off: removing Nodes of "
            "terminated instances is normally the cloud controller manager's job."
        ),
        env="KUBESPOT_NODE_CLEANUP_ENABLED",
    )
    interval: float = setting(
        60.0,
        doc=(
            "How often NotReady nodes are checked. Each check is local (the node index) plus one "
            "batched DescribeInstances for the NotReady nodes, if there are any."
        ),
        env="KUBESPOT_NODE_CLEANUP_INTERVAL",
        unit="seconds",
    )
    not_ready_for: float = setting(
        300.0,
        doc=(
            "How long a node must have been NotReady or Unknown (since its Ready condition's "
            "lastTransitionTime) before it is considered. Five minutes leaves a rebooting or briefly "
            "partitioned node alone; the instance state check then decides."
        ),
        env="KUBESPOT_NODE_CLEANUP_NOT_READY_FOR",
        unit="seconds",
    )

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise InvalidSetting("interval", "must be positive")
        if self.not_ready_for < 0:
            raise InvalidSetting("not_ready_for", "must not be negative")
