"""The provisioning controller's parts, built from the operator's shared clients, and its health.

``build`` wires the catalog (``aws.catalog.Catalog``, refreshed by ``CatalogRefresh``), the EC2
cloud provider over it (``aws.cloud.AwsCloud``, told what each class resolved to), the resolver and
the ``StatusLoop``; and the provisioner (issue 14): the pending-pod watch feeding the batcher, the
``Provisioner`` with its NodeClaim watch and nominations, the ``UnavailableOfferings`` cache its
simulations filter the catalog through, the ``NodePoolCounter`` handing its figures to the
status loop, and the ``DoomWatch`` that starts a pass the moment a node is fenced or its NodeClaim
deleted (pre-spin; the fence half only with ``launch.learn_from_interruptions``). ``checks`` is
its /healthz part: ``provisioning`` fails when the status loop has not finished a pass for
``stuck_after``; ``catalog`` when no refresh has succeeded for
``pricing.refresh_interval`` + ``stuck_after`` (none ever: ``stuck_after`` after the first
attempt, however often it was retried); ``provisioner`` when a provisioning pass has been under
way for longer than ``stuck_after`` (between passes it holds: a quiet cluster has nothing to
plan). Under ``dry_run`` (``node_actions.dry_run``) the provisioner creates no NodeClaim (it says
what it would create), no EC2NodeClass gets the termination finalizer and instance profiles are
only read. All hold on a replica that does not lead (the loops run on the leader only; a loop that
stops clears what the check reads) and during the first ``stuck_after`` after a loop started.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from kubespot.aws import AwsClients
from kubespot.aws.catalog import Catalog
from kubespot.aws.cloud import AwsCloud
from kubespot.aws.instance_profiles import InstanceProfiles
from kubespot.cloud import UnavailableOfferings
from kubespot.cloud.signals import CapacitySignals, capacity_signals
from kubespot.config.launch import LaunchSettings
from kubespot.config.pricing import PricingSettings
from kubespot.config.provisioning import ProvisioningSettings
from kubespot.kube import KubeClient
from kubespot.kube.custom import CustomObjects
from kubespot.kube.events import EventRecorder
from kubespot.kube.informer import Informers
from kubespot.model import Clock
from kubespot.observability.health import Check, silence
from kubespot.observability.metrics import Metrics

from .avoided_publisher import AvoidedPublisher
from .batcher import Batcher
from .catalog_refresh import CatalogRefresh
from .doomed import DoomWatch
from .k8s_version import KubernetesVersion
from .nodeclass_termination import NodeClassTermination
from .nodepool_counter import NodePoolCounter
from .nominations import Nominations
from .pending import PODS, PendingWatch
from .provisioner import NODECLAIMS, Provisioner
from .resolver import NodeClassResolver
from .status_loop import StatusLoop

__all__ = ["NODECLASSES", "NODEPOOLS", "Provisioning", "build"]

NODEPOOLS = "apis/karpenter.sh/v1/nodepools"
#: How often a pod still provisionable triggers a batch again (Karpenter's PodController: 10 s).
REQUEUE = 10.0
NODECLASSES = "apis/karpenter.k8s.aws/v1/ec2nodeclasses"
NODES = "api/v1/nodes"


@dataclass
class Provisioning:
    """The controller's parts."""

    settings: ProvisioningSettings
    pricing: PricingSettings
    clock: Clock
    refresh: CatalogRefresh
    cloud: AwsCloud
    status: StatusLoop
    #: Issue 14's parts (None in tests that build the status half alone).
    provisioner: Provisioner | None = None
    pending: PendingWatch | None = None
    counter: NodePoolCounter | None = None
    unavailable: UnavailableOfferings | None = None
    #: Nodes turning doomed trigger a pass at once (pre-spin, launching.md §7).
    doom: DoomWatch | None = None
    #: The status ConfigMap of what the launch path avoids (``kubespot plan --why`` reads it).
    publisher: AvoidedPublisher | None = None
    #: What the provisioner, the pending-pod watch and the DoomWatch read the cluster from.
    informers: Informers | None = None

    def checks(self, now: datetime) -> tuple[Check, ...]:
        stuck = timedelta(seconds=self.settings.stuck_after)
        loop = self.status
        if loop.started is None:
            status_check = Check("provisioning", True, "not running here (not the leader)", None)
        elif loop.last_pass is None and (unserved := loop.unserved()):
            # Waiting for a CRD to be installed is no stuck loop (see ``Informer`` on health).
            waiting = ", ".join(unserved)
            status_check = Check(
                "provisioning", True, f"waiting: {waiting} not served (CRD not installed?)", None
            )
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
        if self.provisioner is None:
            return status_check, catalog_check
        checks = (status_check, catalog_check, self._provisioner_check(now, stuck))
        if self.informers is None:
            return checks
        informers = self.informers
        return (*checks, silence("informers", informers.behind(), now=now, limit=informers.health_limit))

    def _provisioner_check(self, now: datetime, stuck: timedelta) -> Check:
        p = self.provisioner
        assert p is not None
        if p.started is None:
            return Check("provisioner", True, "not running here (not the leader)", None)
        if p.pass_started is not None and now - p.pass_started > stuck:
            return Check(
                "provisioner",
                False,
                f"a pass under way since {p.pass_started.isoformat()}: stuck",
                p.last_pass,
            )
        detail = f"last pass {p.last_pass.isoformat()}" if p.last_pass is not None else "no pass yet"
        return Check("provisioner", True, detail, p.last_pass)


def build(
    *,
    kube: KubeClient,
    aws: AwsClients,
    settings: ProvisioningSettings,
    pricing: PricingSettings,
    clock: Clock,
    region: str,
    launch: LaunchSettings | None = None,
    recorder: EventRecorder | None = None,
    capacity: CapacitySignals | None = None,
    metrics: Metrics | None = None,
    status_namespace: str = "kube-system",
    informers: Informers | None = None,
    dry_run: bool = False,
) -> Provisioning:
    launch = launch or LaunchSettings()
    # The operator hands the process's informers (shared with its other readers of those kinds).
    informers = informers if informers is not None else Informers(kube)
    # The operator hands the process's one cache and risk store (``Shared.capacity``: the
    # interruption handler marks them); built alone (tests), the parts get their own.
    if capacity is None:
        capacity = capacity_signals(launch, clock)
    unavailable = capacity.unavailable
    catalog = Catalog(aws, region, pricing, clock=clock)
    # The cloud marks the pools its launches fail in the same cache the provisioner's simulations
    # read, so a re-plan after insufficient capacity leaves them out (launching.md §2).
    cloud = AwsCloud(catalog, aws, launch=launch, unavailable=unavailable, risk=capacity.risk, clock=clock)
    nodeclasses = CustomObjects(kube, NODECLASSES)
    k8s_version = KubernetesVersion(
        nodeclasses.server_version, clock=clock, pinned=settings.kubernetes_version
    )
    # Profiles for spec.role are scoped by the cluster's name: none made without one.
    profiles = (
        InstanceProfiles(aws, launch.cluster_name, region, clock=clock, dry_run=dry_run)
        if launch.cluster_name
        else None
    )
    loop = StatusLoop(
        # The class's launch templates go with it, and idle ones are collected (templates of no
        # cluster name: none to scope them by, none deleted). A dry run adds no finalizer (a
        # write) and so never finalizes a class, nor collects its templates.
        termination=None
        if dry_run
        else NodeClassTermination(
            nodeclasses,
            # The claims naming a class being deleted, from the process's cache (no LIST per resync).
            informers.get(NODECLAIMS),
            profiles,
            cloud.templates if launch.cluster_name else None,
            clock=clock,
            recorder=recorder,
        ),
        nodeclasses=nodeclasses,
        nodepools=CustomObjects(kube, NODEPOOLS),
        resolver=NodeClassResolver(aws, k8s_version, profiles),
        settings=settings,
        clock=clock,
        on_resolved=cloud.set_resolved,
        # NodePools and EC2NodeClasses from the caches the provisioner's passes read: one watch each.
        informers=informers,
    )
    batcher = Batcher(idle=launch.batch_idle_duration, max_duration=launch.batch_max_duration)
    provisioner = Provisioner(
        kube=kube,
        cloud=cloud,
        batcher=batcher,
        nominations=Nominations(recorder),
        clock=clock,
        unavailable=unavailable,
        retry_after=launch.batch_max_duration,
        prespin=launch.learn_from_interruptions,
        metrics=metrics,
        risk=capacity.risk,
        informers=informers,
        dry_run=dry_run,
    )
    return Provisioning(
        settings,
        pricing,
        clock,
        CatalogRefresh(catalog, settings, clock=clock),
        cloud,
        loop,
        provisioner=provisioner,
        # Fed by the informers the passes read: a trigger always comes after the cache has the change.
        pending=PendingWatch(informers.get(PODS), batcher.trigger, clock=clock, requeue=REQUEUE),
        # Counted from the same caches, not a LIST of every Node and NodeClaim every 5 s.
        counter=NodePoolCounter(
            informers.get(NODES), informers.get(NODECLAIMS), loop.set_counts, clock=clock
        ),
        unavailable=unavailable,
        doom=DoomWatch(
            informers.get(NODES),
            informers.get(NODECLAIMS),
            lambda node: batcher.trigger_now(f"node/{node}"),
            clock=clock,
            fence=launch.learn_from_interruptions,
        ),
        publisher=AvoidedPublisher(
            CustomObjects(kube, f"api/v1/namespaces/{status_namespace}/configmaps"),
            settings.status_configmap,
            status_namespace,
            unavailable=unavailable,
            risk=capacity.risk,
            clock=clock,
        ),
        informers=informers,
    )
