"""Everything ``kubespot controller`` (the cluster-wide queue processor) is configured with.

The same groups as the agent where the meaning is the same (which signals to act on, what to do to
a node, how to drain, how to reach the API server, observability, the webhook), plus the queue, AWS,
and the singleton duties (leader election, node clean-up, the AWS response actions: load balancers,
isolation, publishing the summary). ``load(ControllerSettings, ...)`` from
``kubespot.config.loader`` builds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .aws import AwsSettings
from .base import setting
from .cleanup import NodeCleanupSettings
from .drain import DrainSettings
from .http_calls import HttpCallSettings
from .imds import MonitorSettings
from .isolation import IsolationSettings
from .kube import KubeSettings
from .launch import LaunchSettings
from .leader import LeaderElectionSettings
from .loadbalancer import LoadBalancerSettings, LoadBalancerWaitSettings
from .node import NodeActionSettings
from .notify import NotifySettings
from .observability import ObservabilitySettings
from .pricing import PricingSettings
from .provisioning import ProvisioningSettings
from .publish import PublishSettings
from .queue import QueueSettings
from .webhook import WebhookSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerSettings:
    """The queue processor: which pod it is, and one group of settings per concern."""

    pod_name: str | None = setting(
        None,
        doc=(
            "Name of the controller's own pod (Downward API metadata.name, as the Helm chart sets "
            "it): the start of its leader-election identity (unset: the host name) and the "
            "reporting instance of its events."
        ),
        env="KUBESPOT_POD_NAME",
        nth="POD_NAME",
    )
    pod_namespace: str | None = setting(
        None,
        doc=(
            "Namespace of the controller's own pod (Downward API metadata.namespace): where its "
            "leader-election Lease lives unless leader_election.namespace says otherwise."
        ),
        env="KUBESPOT_POD_NAMESPACE",
        nth="NAMESPACE",
    )
    queue: QueueSettings = field(default_factory=QueueSettings)
    aws: AwsSettings = field(default_factory=AwsSettings)
    monitors: MonitorSettings = field(default_factory=MonitorSettings)
    node_actions: NodeActionSettings = field(default_factory=NodeActionSettings)
    drain: DrainSettings = field(default_factory=DrainSettings)
    kube: KubeSettings = field(default_factory=KubeSettings)
    observability: ObservabilitySettings = field(default_factory=ObservabilitySettings)
    webhook: WebhookSettings = field(default_factory=WebhookSettings)
    # Named notification targets and outgoing HTTP calls, made for the events it handles (queue mode).
    notify: NotifySettings = field(default_factory=NotifySettings)
    http_calls: HttpCallSettings = field(default_factory=HttpCallSettings)
    # The drain's wait for deregistration; loadbalancer.enabled turns it on (see ``drain_wait``).
    loadbalancer_wait: LoadBalancerWaitSettings = field(default_factory=LoadBalancerWaitSettings)
    leader_election: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)
    node_cleanup: NodeCleanupSettings = field(default_factory=NodeCleanupSettings)
    # The AWS response actions (docs/designs/response-actions.md), run by the elected replica.
    loadbalancer: LoadBalancerSettings = field(default_factory=LoadBalancerSettings)
    isolation: IsolationSettings = field(default_factory=IsolationSettings)
    publish: PublishSettings = field(default_factory=PublishSettings)
    # The capacity catalog's prices (issue 13), refreshed by the provisioning controller.
    pricing: PricingSettings = field(default_factory=PricingSettings)
    # Karpenter's API objects' status and the catalog's refresh (issue 13), on the elected replica.
    provisioning: ProvisioningSettings = field(default_factory=ProvisioningSettings)
    # Launching capacity for pending pods and the NodeClaim lifecycle (issue 14).
    launch: LaunchSettings = field(default_factory=LaunchSettings)

    @property
    def drain_wait(self) -> LoadBalancerWaitSettings:
        """The wait of this controller's own drains (queue mode): ``loadbalancer_wait`` as set, or,
        when this controller deregisters (``loadbalancer.enabled``) and the group is off, on for the
        kinds it deregisters: its drains then never evict a target pod before its deregistration."""
        if self.loadbalancer_wait.enabled or not self.loadbalancer.enabled:
            return self.loadbalancer_wait
        return replace(self.loadbalancer_wait, enabled=True, kinds=self.loadbalancer.kinds)
