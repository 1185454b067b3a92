"""The provisioning controller: the status of Karpenter's API objects and the catalog's refresh.

Read by ``kubespot.controllers.provisioning`` (issue 13, docs/designs/provisioning.md decision 2).
The catalog's own refresh interval is ``pricing.refresh_interval``; these settings say whether the
controller runs, how often an EC2NodeClass's selector terms are resolved again, how failures are
retried and when /healthz calls the loop stuck.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import setting
from .loader import InvalidSetting


@dataclass(frozen=True, slots=True, kw_only=True)
class ProvisioningSettings:
    """The EC2NodeClass and NodePool status reconcilers and the catalog refresh."""

    enabled: bool = setting(
        False,
        doc=(
            "Run kubespot's provisioner on the elected replica, in place of Karpenter: resolve "
            "every EC2NodeClass (subnets, security groups, AMIs) and write its status, write each "
            "NodePool's conditions and resources, keep the instance type catalog and prices fresh, "
            "plan pending pods into NodeClaims and launch, register, garbage-collect and terminate "
            "them (the `launch` group of settings; docs/provisioning.md). Needs the `nodeclass`, "
            "`catalog` and `launch` IAM groups (`kubespot aws policy --actions "
            "nodeclass,catalog,launch --cluster NAME --node-role ROLE`) and the chart's provisioning "
            "RBAC (controller.provisioning.enabled). Off by default: with Karpenter installed, two "
            "controllers would write the same NodeClaims and status (docs/migration-from-karpenter.md)."
        ),
        env="KUBESPOT_PROVISIONING_ENABLED",
    )
    nodeclass_resync_interval: float = setting(
        300.0,
        doc=(
            "How often every EC2NodeClass is resolved again although it did not change, so subnets, "
            "security groups and AMIs created, tagged or deprecated in AWS show in its status. "
            "Karpenter re-reads security groups and AMIs every 5 minutes (and subnets every minute, "
            "for their free IP counts, which only the launch of issue 14 will use); a change to the "
            "object itself is resolved at once (watch). Each pass costs about three EC2 calls per "
            "class (plus up to five SSM reads for an alias)."
        ),
        env="KUBESPOT_PROVISIONING_NODECLASS_RESYNC_INTERVAL",
        unit="seconds",
    )
    retry_base: float = setting(
        2.0,
        doc=(
            "First wait before an EC2NodeClass whose resolution failed (throttling, a 5xx, no "
            "answer) or a catalog refresh that failed is tried again; doubled per failure with full "
            "jitter up to retry_cap. The last good status and catalog are kept meanwhile."
        ),
        env="KUBESPOT_PROVISIONING_RETRY_BASE",
        unit="seconds",
    )
    retry_cap: float = setting(
        300.0,
        doc="The longest wait between retries of a failed resolution or catalog refresh.",
        env="KUBESPOT_PROVISIONING_RETRY_CAP",
        unit="seconds",
    )
    stuck_after: float = setting(
        900.0,
        doc=(
            "/healthz fails the `provisioning` check when the status loop has not finished a pass "
            "for this long (a pass runs at least every nodeclass_resync_interval), and the "
            "`catalog` check when the catalog has not been read successfully for this long past "
            "its due time (pricing.refresh_interval)."
        ),
        env="KUBESPOT_PROVISIONING_STUCK_AFTER",
        unit="seconds",
    )
    kubernetes_version: str = setting(
        "",
        doc=(
            "The Kubernetes version (`1.32`) whose images an AMI alias resolves to. Empty: the API "
            "server's (`/version`), read again every 5 minutes as Karpenter does, so a control "
            "plane upgrade reaches the aliases without a restart (a failed read keeps the last "
            "version known)."
        ),
        env="KUBESPOT_PROVISIONING_KUBERNETES_VERSION",
    )

    status_configmap: str = setting(
        "kubespot-status",
        doc=(
            "Name of the ConfigMap, in the controller's own namespace, where the elected replica "
            "publishes the offerings its launch path avoids now (unavailable marks and the "
            "riskiest spot pools), as Cluster Autoscaler's cluster-autoscaler-status; "
            "`kubespot plan --why` reads it."
        ),
        env="KUBESPOT_PROVISIONING_STATUS_CONFIGMAP",
    )

    def __post_init__(self) -> None:
        for name in ("nodeclass_resync_interval", "retry_base", "retry_cap", "stuck_after"):
            if not getattr(self, name) > 0:
                raise InvalidSetting(name, "must be positive")
        if not self.status_configmap:
            raise InvalidSetting("status_configmap", "must not be empty")
        if self.retry_cap < self.retry_base:
            raise InvalidSetting("retry_cap", "must be at least retry_base")
