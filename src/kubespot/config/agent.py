"""Everything ``kubespot agent`` (the per-node DaemonSet) is configured with, composed from the groups.

``load(AgentSettings, argv=..., env=...)`` from ``kubespot.config.loader`` builds it; the generated
configuration reference (``docs/configuration.md``) lists every setting.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field

from .base import setting
from .drain import DrainSettings
from .http_calls import HttpCallSettings
from .imds import ImdsSettings, MonitorSettings
from .kube import KubeSettings
from .loadbalancer import LoadBalancerWaitSettings
from .loader import InvalidSetting
from .node import NodeActionSettings
from .notify import NotifySettings
from .observability import ObservabilitySettings
from .webhook import WebhookSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSettings:
    """The per-node agent: which node and pod it is, and one group of settings per concern."""

    node_name: str = setting(
        MISSING,  # required: the agent cannot guess which Node it guards
        doc=(
            "Name of the Node this agent runs on and acts upon. Required; set it from the Downward "
            "API (spec.nodeName), as the Helm chart does."
        ),
        env="KUBESPOT_NODE_NAME",
        nth="NODE_NAME",
        flag="--node-name",
    )
    pod_name: str | None = setting(
        None,
        doc=(
            "Name of the agent's own pod (Downward API metadata.name), so the drain never evicts the "
            "agent that is running it, and events name their reporter. Unset: found by node and "
            "namespace only."
        ),
        env="KUBESPOT_POD_NAME",
        nth="POD_NAME",
    )
    pod_namespace: str | None = setting(
        None,
        doc="Namespace of the agent's own pod (Downward API metadata.namespace); see pod_name.",
        env="KUBESPOT_POD_NAMESPACE",
        nth="NAMESPACE",
    )
    imds: ImdsSettings = field(default_factory=ImdsSettings)
    monitors: MonitorSettings = field(default_factory=MonitorSettings)
    node_actions: NodeActionSettings = field(default_factory=NodeActionSettings)
    drain: DrainSettings = field(default_factory=DrainSettings)
    kube: KubeSettings = field(default_factory=KubeSettings)
    observability: ObservabilitySettings = field(default_factory=ObservabilitySettings)
    webhook: WebhookSettings = field(default_factory=WebhookSettings)
    # Named notification targets and outgoing HTTP calls (docs/notifications.md).
    notify: NotifySettings = field(default_factory=NotifySettings)
    http_calls: HttpCallSettings = field(default_factory=HttpCallSettings)
    # The drain's wait for the controller's deregistration (docs/designs/response-actions.md).
    loadbalancer_wait: LoadBalancerWaitSettings = field(default_factory=LoadBalancerWaitSettings)

    def __post_init__(self) -> None:
        if not self.node_name.strip():
            raise InvalidSetting("node_name", "must not be empty")
