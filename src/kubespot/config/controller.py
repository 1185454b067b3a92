"""Everything ``kubespot controller`` (the cluster-wide queue processor) is configured with.

The same groups as the agent where the meaning is the same (which signals to act on, what to do to
a node, how to drain, how to reach the API server, observability, the webhook), plus the queue and
AWS. ``load(ControllerSettings, ...)`` from ``kubespot.config.loader`` builds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .aws import AwsSettings
from .drain import DrainSettings
from .imds import MonitorSettings
from .kube import KubeSettings
from .node import NodeActionSettings
from .observability import ObservabilitySettings
from .queue import QueueSettings
from .webhook import WebhookSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerSettings:
    """The queue processor: one group of settings per concern."""

    queue: QueueSettings = field(default_factory=QueueSettings)
    aws: AwsSettings = field(default_factory=AwsSettings)
    monitors: MonitorSettings = field(default_factory=MonitorSettings)
    node_actions: NodeActionSettings = field(default_factory=NodeActionSettings)
    drain: DrainSettings = field(default_factory=DrainSettings)
    kube: KubeSettings = field(default_factory=KubeSettings)
    observability: ObservabilitySettings = field(default_factory=ObservabilitySettings)
    webhook: WebhookSettings = field(default_factory=WebhookSettings)
