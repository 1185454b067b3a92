"""How a node is drained: which pods move, how, and what happens when the deadline comes first.

Read by ``kubespot.actions.drain``; the loader composes this group with the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .base import setting
from .loader import InvalidSetting

PdbDeadlineAction = Literal["delete", "keep"]


@dataclass(frozen=True, kw_only=True)
class DrainSettings:
    """The drain engine's policy."""

    delete_local_data: bool = setting(
        True,
        doc=(
            "Evict pods using emptyDir volumes (their data is lost, as it would be when the instance "
            "dies). False refuses to drain a node with such pods, as `kubectl drain` without "
            "--delete-emptydir-data does."
        ),
        env="KUBESPOT_DRAIN_DELETE_LOCAL_DATA",
        nth="DELETE_LOCAL_DATA",
    )
    ignore_daemon_sets: bool = setting(
        True,
        doc=(
            "Leave DaemonSet pods in place (their controller would recreate them on the node anyway, "
            "and they usually serve the node until the end). False refuses to drain a node running "
            "DaemonSet pods, as `kubectl drain` without --ignore-daemonsets does."
        ),
        env="KUBESPOT_DRAIN_IGNORE_DAEMON_SETS",
        nth="IGNORE_DAEMON_SETS",
    )
    pod_termination_grace_period: int = setting(
        -1,
        doc=(
            "Grace period given to every evicted pod. -1 uses each pod's own "
            "terminationGracePeriodSeconds. Either way the grace is cut so the pod finishes before the "
            "deadline."
        ),
        env="KUBESPOT_DRAIN_POD_TERMINATION_GRACE_PERIOD",
        # NTH's deprecated GRACE_PERIOD counts only when the newer name is absent (pkg/config/config.go).
        nth=("POD_TERMINATION_GRACE_PERIOD", "GRACE_PERIOD"),
        unit="seconds",
    )
    node_termination_grace_period: int = setting(
        120,
        doc=(
            "Time a drain may take when the event gives no deadline and is not voluntary (a manual "
            "drain; voluntary events use voluntary_timeout). 120 s is the spot notice, so such "
            "drains behave like the real thing."
        ),
        env="KUBESPOT_DRAIN_NODE_TERMINATION_GRACE_PERIOD",
        nth="NODE_TERMINATION_GRACE_PERIOD",
        unit="seconds",
    )
    voluntary_timeout: int = setting(
        3600,
        doc=(
            "Longest drain for a voluntary event without a known end: a rebalance drain, an Auto "
            "Scaling scale-in seen through IMDS, scheduled maintenance that does not stop the "
            "instance. Such drains respect PodDisruptionBudgets to the end (pdb_deadline_action "
            "does not apply) and give pods their own grace periods. An Auto Scaling termination "
            "from the queue is bounded by its hook instead (heartbeat timeout, or the global "
            "timeout while heartbeats are sent). 3600 s is AWS's default hook heartbeat timeout."
        ),
        env="KUBESPOT_DRAIN_VOLUNTARY_TIMEOUT",
        unit="seconds",
    )
    pdb_deadline_action: Literal["delete", "keep"] = setting(
        "delete",
        doc=(
            "What to do with a pod whose PodDisruptionBudget still blocks eviction when the time left "
            "is less than its grace period plus the safety margin. `delete`: delete it gracefully "
            "(logged, with a Warning event): a shutdown the app can finish beats the hard kill it gets "
            "when the instance vanishes. `keep`: respect the budget to the end; the pod dies with the "
            "instance."
        ),
        env="KUBESPOT_DRAIN_PDB_DEADLINE_ACTION",
        flag="--pdb-deadline-action",
    )
    safety_margin: float = setting(
        5.0,
        doc=(
            "Seconds kept free before the deadline: pod grace periods are cut so pods are gone this "
            "long before it, and the PDB deadline action fires this long before the last moment. "
            "Covers API latency, kubelet reaction and clock skew between the instance and AWS."
        ),
        env="KUBESPOT_DRAIN_SAFETY_MARGIN",
        flag="--safety-margin",
        unit="seconds",
    )
    eviction_concurrency: int = setting(
        50,
        doc=(
            "Eviction and delete requests in flight at once. The client-side QPS limit still applies; "
            "this bounds the requests queued behind it so a 110-pod node does not open 110 connections."
        ),
        env="KUBESPOT_DRAIN_EVICTION_CONCURRENCY",
        unit="requests",
    )
    retry_backoff_base: float = setting(
        0.5,
        doc=(
            "First wait before retrying an eviction refused with 429 (a PodDisruptionBudget), doubled "
            "on each refusal up to the cap, with full jitter. A budget usually frees up when a "
            "replacement turns Ready, seconds later; kubectl waits a fixed 5 s."
        ),
        env="KUBESPOT_DRAIN_RETRY_BACKOFF_BASE",
        unit="seconds",
    )
    retry_backoff_cap: float = setting(
        4.0,
        doc="Longest wait between two eviction attempts of one pod.",
        env="KUBESPOT_DRAIN_RETRY_BACKOFF_CAP",
        unit="seconds",
    )
    critical_last: tuple[str, ...] = setting(
        ("system-cluster-critical", "system-node-critical"),
        doc=(
            "Priority classes evicted in a last tier, after every other pod is gone (as Karpenter "
            "does), so DNS, CNI and log shippers serve the others while they leave. They start earlier "
            "only if waiting would leave them less than their grace period. Empty: one tier "
            '(KUBESPOT_DRAIN_CRITICAL_LAST="" included).'
        ),
        env="KUBESPOT_DRAIN_CRITICAL_LAST",
        empty_is_value=True,
    )

    def __post_init__(self) -> None:
        if self.pdb_deadline_action not in ("delete", "keep"):
            raise InvalidSetting(
                "pdb_deadline_action", f"must be 'delete' or 'keep', got {self.pdb_deadline_action!r}"
            )
        if self.pod_termination_grace_period < -1:
            raise InvalidSetting("pod_termination_grace_period", "must be -1 (the pod's own) or >= 0")
        if self.voluntary_timeout <= 0:
            raise InvalidSetting("voluntary_timeout", "must be > 0")
        if self.node_termination_grace_period <= 0:
            raise InvalidSetting("node_termination_grace_period", "must be > 0")
        if self.safety_margin < 0:
            raise InvalidSetting("safety_margin", "must be >= 0")
        if self.eviction_concurrency < 1:
            raise InvalidSetting("eviction_concurrency", "must be >= 1")
        if not 0 < self.retry_backoff_base <= self.retry_backoff_cap:
            raise InvalidSetting("retry_backoff_base", "must be > 0 and <= retry_backoff_cap")
