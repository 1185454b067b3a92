"""Everything ``kubespot controller`` (the cluster-wide queue processor) is configured with.

The same groups as the agent where the meaning is the same (which signals to act on, what to do to
a node, how to drain, how to reach the API server, observability, the webhook), plus the queue and
AWS. ``load(ControllerSettings, ...)`` from ``kubespot.config.loader`` builds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .aws import AwsSettings
from .base import setting
from .drain import DrainSettings
from .imds import MonitorSettings
from .kube import KubeSettings
from .loader import InvalidSetting
from .node import NodeActionSettings
from .observability import ObservabilitySettings
from .queue import QueueSettings
from .webhook import WebhookSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerSettings:
    """The queue processor: which replica it is, and one group of settings per concern."""

    pod_name: str | None = setting(
        None,
        doc=(
            "Name of this replica's pod (Downward API metadata.name): its identity as holder of the "
            "singleton Lease. Unset: the host name."
        ),
        env="KUBESPOT_POD_NAME",
    )
    pod_namespace: str = setting(
        "kube-system",
        doc="Namespace of this replica's pod (Downward API metadata.namespace), where its Lease lives.",
        env="KUBESPOT_POD_NAMESPACE",
    )
    lease_name: str = setting(
        "kubespot-controller",
        doc=(
            "Name of the coordination.k8s.io Lease that elects one replica for singleton duties "
            "(gauges of managed instances, clean-up sweeps). The queue work itself is shared by all "
            "replicas."
        ),
        env="KUBESPOT_LEASE_NAME",
    )
    lease_duration: float = setting(
        15.0,
        doc="Seconds a Lease holder is trusted without renewing (renewed every third of it).",
        env="KUBESPOT_LEASE_DURATION",
        unit="seconds",
    )
    queue: QueueSettings = field(default_factory=QueueSettings)
    aws: AwsSettings = field(default_factory=AwsSettings)
    monitors: MonitorSettings = field(default_factory=MonitorSettings)
    node_actions: NodeActionSettings = field(default_factory=NodeActionSettings)
    drain: DrainSettings = field(default_factory=DrainSettings)
    kube: KubeSettings = field(default_factory=KubeSettings)
    observability: ObservabilitySettings = field(default_factory=ObservabilitySettings)
    webhook: WebhookSettings = field(default_factory=WebhookSettings)

    def __post_init__(self) -> None:
        if self.lease_duration <= 0:
            raise InvalidSetting("lease_duration", "must be positive")
        if not self.lease_name.strip():
            raise InvalidSetting("lease_name", "must not be empty")
