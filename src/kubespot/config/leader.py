"""Which controller replica runs the singleton duties: leader election on a coordination.k8s.io Lease.

Read by ``kubespot.operator.leader``; the loader composes this group with the others. The queue
is shared by every replica whatever this says: only the duties one replica must do for the whole
cluster (the managed-instance gauge, node clean-up) wait for the lease. The timings are client-go's
defaults (kube-controller-manager's and Karpenter's too), and so are the rules between them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import setting
from .loader import InvalidSetting

#: client-go's JitterFactor: an acquiring replica waits up to 2.2 retry periods between attempts,
#: and the renew deadline must leave room for at least one of them.
JITTER_FACTOR = 1.2


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderElectionSettings:
    """The Lease that elects the replica running the controller's singleton duties."""

    enabled: bool = setting(
        True,
        doc=(
            "Elect one replica through a Lease to run the singleton duties (managed-instance gauge, "
            "node clean-up). Off: every replica runs them, which is only right with one replica "
            "(or without RBAC on leases, accepting duplicated work)."
        ),
        env="KUBESPOT_LEADER_ELECTION_ENABLED",
    )
    lease_name: str = setting(
        "kubespot-controller",
        doc=(
            "Name of the coordination.k8s.io Lease. Replicas with the same name and namespace elect "
            "one leader among them; the Helm chart uses the release's controller name so two "
            "releases never share one."
        ),
        env="KUBESPOT_LEADER_ELECTION_LEASE_NAME",
    )
    namespace: str = setting(
        "",
        doc=(
            "Namespace of the Lease. Empty: the controller's own (pod_namespace, which the chart "
            "sets from the Downward API, else the service account's namespace file), else kube-system."
        ),
        env="KUBESPOT_LEADER_ELECTION_NAMESPACE",
    )
    lease_duration: float = setting(
        15.0,
        doc=(
            "How long the other replicas wait, after they last saw the Lease change, before they take "
            "it from a leader that stopped renewing (written as leaseDurationSeconds, rounded up). "
            "It bounds how long the duties stop when the leader dies without releasing the lease "
            "(SIGKILL, node loss); a clean shutdown hands over at once. client-go's default."
        ),
        env="KUBESPOT_LEADER_ELECTION_LEASE_DURATION",
        unit="seconds",
    )
    renew_deadline: float = setting(
        10.0,
        doc=(
            "The leader stops its duties when it has not renewed the Lease for this long (API server "
            "unreachable, say). Shorter than lease_duration, so it has stopped before another replica "
            "may take over. client-go's default."
        ),
        env="KUBESPOT_LEADER_ELECTION_RENEW_DEADLINE",
        unit="seconds",
    )
    retry_period: float = setting(
        2.0,
        doc=(
            "How often the leader renews the Lease and the others try to take it (the latter with "
            "client-go's jitter). One API call per period per replica. client-go's default."
        ),
        env="KUBESPOT_LEADER_ELECTION_RETRY_PERIOD",
        unit="seconds",
    )

    def __post_init__(self) -> None:
        if not self.lease_name.strip():
            raise InvalidSetting("lease_name", "must not be empty")
        if self.lease_duration < 1:
            raise InvalidSetting("lease_duration", "must be at least 1 second (leaseDurationSeconds)")
        if self.retry_period <= 0:
            raise InvalidSetting("retry_period", "must be positive")
        if self.renew_deadline >= self.lease_duration:
            raise InvalidSetting(
                "renew_deadline",
                "must be shorter than lease_duration (the leader stops before others take over)",
            )
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise InvalidSetting(
                "renew_deadline", f"must be longer than {JITTER_FACTOR} x retry_period (client-go's rule)"
            )
