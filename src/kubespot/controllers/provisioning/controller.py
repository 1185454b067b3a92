"""The provisioning controller's parts, built from the operator's shared clients, and its health.

``build`` wires the catalog (``aws.catalog.Catalog``, refreshed by ``CatalogRefresh``), the EC2
cloud provider over it (``aws.cloud.AwsCloud``, told what each class resolved to), the resolver and
the ``StatusLoop``. ``checks`` is its /healthz part: ``provisioning`` fails when the status loop
has not finished a pass for ``stuck_after``; ``catalog`` when no refresh has succeeded for
``pricing.refresh_interval`` + ``stuck_after`` (none ever: ``stuck_after`` after the first
attempt, however often it was retried). Both hold on a replica that does not lead (the loops run on
the leader only; a loop that stops clears what the check reads) and during the first
``stuck_after`` after a loop started.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from kubespot.aws import AwsClients
from kubespot.aws.catalog import Catalog
from kubespot.aws.cloud import AwsCloud
from kubespot.config.pricing import PricingSettings
from kubespot.config.provisioning import ProvisioningSettings
from kubespot.kube import KubeClient
from kubespot.kube.custom import CustomObjects
from kubespot.model import Clock
from kubespot.observability.health import Check

from .catalog_refresh import CatalogRefresh
from .k8s_version import KubernetesVersion
from .resolver import NodeClassResolver
from .status_loop import StatusLoop

__all__ = ["NODECLASSES", "NODEPOOLS", "Provisioning", "build"]

NODEPOOLS = "apis/karpenter.sh/v1/nodepools"
NODECLASSES = "apis/karpenter.k8s.aws/v1/ec2nodeclasses"


@dataclass
class Provisioning:
    """The controller's parts."""

    settings: ProvisioningSettings
    pricing: PricingSettings
    clock: Clock
    refresh: CatalogRefresh
    cloud: AwsCloud
    status: StatusLoop

    def checks(self, now: datetime) -> tuple[Check, ...]:
        stuck = timedelta(seconds=self.settings.stuck_after)
        loop = self.status
        if loop.started is None:
            status_check = Check("provisioning", True, "not running here (not the leader)", None)
        elif loop.last_pass is None:
            ok = now - loop.started <= stuck
            status_check = Check("provisioning", ok, "no pass finished yet", None)
        else:
            ok = now - loop.last_pass <= stuck
            detail = f"last pass {loop.last_pass.isoformat()}" + ("" if ok else ": stuck")
            status_check = Check("provisioning", ok, detail, loop.last_pass)
        refresh = self.refresh
        if refresh.first_attempt is None:
            catalog_check = Check("catalog", True, "not refreshed here (not the leader)", None)
        else:
            # The first attempt (not the latest retry, which moves every retry_cap at most) starts
            # the bound; after a success the next refresh is due refresh_interval later and may
            # take stuck_after to succeed.
            deadline = refresh.first_attempt + stuck
            if refresh.last_success is not None:
                due = timedelta(seconds=self.pricing.refresh_interval)
                deadline = max(deadline, refresh.last_success + due + stuck)
            ok = now <= deadline
            errors = refresh.errors()
            detail = "; ".join(f"{k}: {v}" for k, v in sorted(errors.items())) or "fresh"
            if refresh.last_success is None:
                detail = f"never refreshed since {refresh.first_attempt.isoformat()}: {detail}"
            catalog_check = Check("catalog", ok, detail, refresh.last_success)
        return status_check, catalog_check


def build(
    *,
    kube: KubeClient,
    aws: AwsClients,
    settings: ProvisioningSettings,
    pricing: PricingSettings,
    clock: Clock,
    region: str,
) -> Provisioning:
    catalog = Catalog(aws, region, pricing, clock=clock)
    cloud = AwsCloud(catalog)
    nodeclasses = CustomObjects(kube, NODECLASSES)
    k8s_version = KubernetesVersion(
        nodeclasses.server_version, clock=clock, pinned=settings.kubernetes_version
    )
    loop = StatusLoop(
        nodeclasses=nodeclasses,
        nodepools=CustomObjects(kube, NODEPOOLS),
        resolver=NodeClassResolver(aws, k8s_version),
        settings=settings,
        clock=clock,
        on_resolved=cloud.set_resolved,
    )
    return Provisioning(settings, pricing, clock, CatalogRefresh(catalog, settings, clock=clock), cloud, loop)
