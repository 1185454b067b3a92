"""``AwsCloud``: the ``cloud.CloudProvider`` of EC2, over ``catalog.Catalog``.

``instance_types(nodepool, nodeclass)`` is Karpenter's AWS ``GetInstanceTypes``
(aws/karpenter-provider-aws ``pkg/cloudprovider/cloudprovider.go``, ``pkg/providers/instancetype``):
the catalog's types with the allocatable of the class's AMI family and kubelet block, offered in the
zones of the class's resolved subnets (``set_resolved``, kept by the EC2NodeClass controller). Until
they are known every zone of the region is offered: Karpenter refuses ("no subnets found"), but
``kubespot plan`` reads classes no controller has resolved and must still plan.

The NodeClaim calls are Karpenter's ``Create``, ``Delete``, ``Get`` and ``List``
(``cloudprovider.go``, ``pkg/providers/instance/instance.go``), with kubespot's idempotence
(docs/designs/launching.md §3):

- ``create``: an instance already tagged for the claim (a launch whose status write was lost) is
  returned as it is. Otherwise the claim's pools (``cloud.candidates.launch_pools`` over the
  class's types, the ``UnavailableOfferings`` cache left out, spot pools ordered by price weighed
  with their reclaim risk, ``PoolRisk``), spot while any spot pool is left;
  launch templates per (AMI, max pods) made sure of; one CreateFleet with ``ClientToken`` = the
  claim's UID plus a digest of the request (``fleet.client_token``: a retry of the same request is
  idempotent, a changed one is new, and so is one after a fleet that answered without an instance;
  the tag lookup above is what survives a restart); every
  insufficient-capacity error marks its pool (and address exhaustion its subnet, for the cache's
  TTL). Raises ``NodeClassNotReadyError`` (class not resolved, no subnet/AMI/...),
  ``InsufficientCapacityError`` (no pool left, or every pool failed) or ``CreateError``.
- ``delete``: TerminateInstances (none while it is shutting down); ``NodeClaimNotFound`` only once
  the instance is terminated or unknown.
- ``get`` / ``list``: the live instances of this cluster's NodePools.
"""

from __future__ import annotations

import base64
import builtins
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from kubespot.cloud.candidates import Pool, launch_capacity_type, launch_pools
from kubespot.cloud.errors import (
    CreateError,
    FailedOffering,
    InsufficientCapacityError,
    NodeClaimNotFound,
    NodeClassNotReadyError,
)
from kubespot.cloud.pool_risk import PoolRisk
from kubespot.cloud.provider import CloudNodeClaim
from kubespot.cloud.unavailable import UnavailableOfferings
from kubespot.config.launch import LaunchSettings
from kubespot.model import Clock, SystemClock
from kubespot.model.capacity import AMIFamily, KubeletConfig
from kubespot.model.quantity import quantity_text
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec
from kubespot.scheduling.instance_types import InstanceType
from kubespot.scheduling.labels import CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL, SPOT, ZONE
from kubespot.scheduling.nodepool import NodePool

from . import fleet
from .eks import ClusterFacts, describe_cluster
from .instances import NODECLASS_TAG, Instance, Instances
from .launch_templates import LaunchGroup, LaunchTemplates, UserDataRenderer, launch_groups
from .resolved import ResolvedNodeClass
from .session import AwsClients, AwsError
from .userdata import USER_DATA_MAX_BYTES, USER_DATA_WARN_BYTES, ClusterInfo, UserDataError, render_user_data

__all__ = ["AwsCloud", "TypeCatalog"]

log = logging.getLogger("kubespot.aws.cloud")
#: Seconds between DescribeCluster attempts after one failed (not found, denied).
_EKS_RETRY = 300.0
_NOT_LAUNCHING = "AwsCloud was built without AWS clients and launch settings: it only plans"
_LT_NOT_FOUND = "InvalidLaunchTemplateName.NotFoundException"
#: At most this many NodeClaims' failed-fleet counts are kept (``AwsCloud._failed_fleets``).
_FAILED_FLEETS_KEPT = 10_000


class TypeCatalog(Protocol):
    """What ``AwsCloud`` reads of ``catalog.Catalog``."""

    async def refresh_if_due(self) -> object: ...

    def instance_types(
        self,
        zones: Iterable[str] | None = None,
        *,
        family: AMIFamily = AMIFamily.AL2023,
        kubelet: KubeletConfig | None = None,
    ) -> list[InstanceType]: ...


class AwsCloud:
    """EC2 as a ``CloudProvider``: the catalog's instance types, and NodeClaims as instances."""

    name = "aws"

    def __init__(
        self,
        catalog: TypeCatalog,
        clients: AwsClients | None = None,
        *,
        launch: LaunchSettings | None = None,
        unavailable: UnavailableOfferings | None = None,
        risk: PoolRisk | None = None,
        render: UserDataRenderer = render_user_data,
        clock: Clock | None = None,
    ) -> None:
        self.catalog = catalog
        self._clients = clients
        #: EKS's answer for what the launch settings leave empty (read once, on the first launch).
        self._eks: ClusterFacts | None = None
        self._eks_failed_at: float | None = None
        self._launch = launch or LaunchSettings()
        self._clock = clock or SystemClock()
        #: Shared with the interruption handler and the provisioner (docs/designs/launching.md §2).
        # ``is None``, not ``or``: an empty cache has len 0 and is falsy, and the shared one must be
        # kept even while it is empty.
        self.unavailable = (
            unavailable
            if unavailable is not None
            else UnavailableOfferings(self._clock, self._launch.unavailable_offerings_ttl)
        )
        #: Reclaim risk per spot pool (``cloud.pool_risk``): orders and thins the spot pools.
        self.risk = risk
        self._render = render
        self._resolved: dict[str, ResolvedNodeClass] = {}
        #: Per NodeClaim UID, the fleets that came back without an instance: a new ClientToken for
        #: the next one, so EC2 does not replay the failed fleet (``fleet.client_token``). Memory
        #: only: after a restart one identical request may replay it once more.
        self._failed_fleets: dict[str, int] = {}
        #: Subnets that answered InsufficientFreeAddressesInSubnet → until when they are skipped.
        self._full_subnets: dict[str, float] = {}
        self.instances = Instances(clients, self._launch.cluster_name) if clients is not None else None
        self.templates = (
            LaunchTemplates(clients, cluster=self._launch.cluster_name, clock=self._clock)
            if clients is not None
            else None
        )

    # -- the EC2NodeClasses ---------------------------------------------------------------------------

    def set_resolved(self, nodeclass: str, resolved: ResolvedNodeClass | None) -> None:
        """What ``nodeclass`` resolved to (None: deleted or invalid: every zone, no launch); parts
        left None keep their last value."""
        if resolved is None:
            self._resolved.pop(nodeclass, None)
        else:
            self._resolved[nodeclass] = resolved.merged(self._resolved.get(nodeclass))

    def resolved(self, nodeclass: str) -> ResolvedNodeClass | None:
        return self._resolved.get(nodeclass)

    def _zones(self, nodeclass: str) -> frozenset[str] | None:
        resolved = self._resolved.get(nodeclass)
        return resolved.zones if resolved is not None else None

    async def instance_types(self, nodepool: NodePool, nodeclass: EC2NodeClassSpec) -> list[InstanceType]:
        return await self._types(nodeclass)

    async def _types(self, nodeclass: EC2NodeClassSpec) -> list[InstanceType]:
        await self.catalog.refresh_if_due()
        kubelet = nodeclass.kubelet.capacity() if nodeclass.kubelet is not None else None
        types = self.catalog.instance_types(
            self._zones(nodeclass.name),
            family=nodeclass.family or AMIFamily.AL2023,
            kubelet=kubelet,
        )
        full = self._full_zones(nodeclass.name)
        if not full:
            return types
        return [_unavailable_in(t, full) for t in types]

    def _full_zones(self, nodeclass: str) -> frozenset[str]:
        """The zones every subnet of ``nodeclass`` of which is out of addresses: their offerings are
        unavailable (``UnavailableOfferings.IsUnavailable`` with the zone's subnet ids), so plans
        and the capacity-type choice go elsewhere, not only the fleet."""
        resolved = self._resolved.get(nodeclass)
        if resolved is None or not resolved.subnets:
            return frozenset()
        out = set(self._subnets_out())
        by_zone: dict[str, set[str]] = {}
        for s in resolved.subnets:
            if s.zone:
                by_zone.setdefault(s.zone, set()).add(s.id)
        return frozenset(zone for zone, ids in by_zone.items() if ids <= out)

    # -- launch ------------------------------------------------------------------------------------

    async def create(self, claim: NodeClaimSpec) -> CloudNodeClaim:
        instances, templates = self.instances, self.templates
        if instances is None or templates is None:
            raise CreateError("LaunchFailed", _NOT_LAUNCHING)
        class_name = claim.template.node_class_ref.name
        resolved = self._resolved.get(class_name)
        why = resolved.not_ready() if resolved is not None else f"EC2NodeClass {class_name!r} not resolved"
        if resolved is None or resolved.spec is None or why is not None:
            raise NodeClassNotReadyError(f"EC2NodeClass {class_name!r} is not ready: {why}")
        spec = resolved.launch_spec or resolved.spec  # with the profile made for spec.role
        try:
            if claim.name:
                existing = await instances.for_nodeclaim(claim.name)
                if existing:
                    return self._to_claim(existing[0], claim.name, type_=await self._type_of(existing[0]))
        except AwsError as err:
            raise _create_error(err, "Error looking for the NodeClaim's instance") from err
        types = await self._types(spec)
        by_name = {t.name: t for t in types}
        pools = launch_pools(claim, types, self.unavailable, risk=self.risk)
        capacity_type = launch_capacity_type(pools)
        if capacity_type is None:
            raise InsufficientCapacityError(f"no offering left for NodeClaim {claim.name}")
        tags = fleet.launch_tags(
            cluster=self._launch.cluster_name,
            nodepool=claim.labels.get(NODEPOOL, ""),
            nodeclass=class_name,
            nodeclaim=claim.name,
            custom=spec.tags,
        )
        cluster = await self._cluster()
        groups = self._launch_groups(
            claim, resolved, spec, [by_name[n] for n in _type_names(pools)], capacity_type, tags, cluster
        )
        subnets = fleet.zonal_subnets(resolved.subnets or (), self._subnets_out())
        configs = []
        for group in groups:
            members = set(group.types)
            overrides = fleet.overrides(
                (p for p in pools if p.instance_type.name in members), capacity_type, subnets, group.image_id
            )
            if overrides:
                configs.append(fleet.TemplateConfig(group.template.name, overrides))
        if not configs:
            # Nothing to retry without: a CreateError (retried), not ICE (which would re-plan the
            # same pools at once), as Karpenter's "no capacity offerings are currently available".
            raise CreateError(
                "LaunchFailed",
                f"no pool of NodeClaim {claim.name} has a subnet and an AMI for {capacity_type}",
            )
        request = fleet.fleet_request(
            configs,
            capacity_type,
            tags,
            uid=claim.uid,
            answered=self._failed_fleets.get(claim.uid, 0),
            context=spec.context,
        )
        try:
            answer = await self._create_fleet(request, groups)
        except CreateError as err:
            cause = err.__cause__
            if isinstance(cause, AwsError) and cause.code == fleet.IDEMPOTENT_MISMATCH:
                self._fleet_failed(claim.uid)
            raise
        parsed = fleet.parse_fleet_answer(answer, capacity_type)
        fleet.mark_unavailable(self.unavailable, parsed.errors, capacity_type)
        self._mark_subnets(parsed.errors)
        if parsed.launched is None:
            self._fleet_failed(claim.uid)
            raise fleet.combine_fleet_errors(parsed.errors)
        self._failed_fleets.pop(claim.uid, None)
        got = parsed.launched
        if self.risk is not None and got.capacity_type == SPOT:
            self.risk.launched(got.instance_type, got.zone)
        launched = Instance(
            id=got.instance_id,
            instance_type=got.instance_type,
            zone=got.zone,
            state="pending",
            capacity_type=got.capacity_type,
            image_id=got.image_id,
            subnet_id=got.subnet_id,
            tags=tags,
            launched_at=self._clock.now().timestamp(),
        )
        return self._to_claim(
            launched, claim.name, failed=parsed.failed_offerings, type_=by_name.get(got.instance_type)
        )

    def _fleet_failed(self, uid: str) -> None:
        """One more fleet of ``uid`` answered without an instance (or refused its token)."""
        if not uid:
            return
        if uid not in self._failed_fleets and len(self._failed_fleets) >= _FAILED_FLEETS_KEPT:
            # Claims given up on leave their count behind: the oldest is forgotten.
            del self._failed_fleets[next(iter(self._failed_fleets))]
        self._failed_fleets[uid] = self._failed_fleets.get(uid, 0) + 1

    def _launch_groups(
        self,
        claim: NodeClaimSpec,
        resolved: ResolvedNodeClass,
        spec: EC2NodeClassSpec,
        types: list[InstanceType],
        capacity_type: str,
        tags: dict[str, str],
        cluster: ClusterInfo,
    ) -> list[LaunchGroup]:
        """The launch templates of ``types``; malformed user data is Karpenter's CreateError
        LaunchFailed, and user data near EC2's limit is logged."""
        try:
            groups = launch_groups(
                spec,
                claim,
                types,
                amis=resolved.amis or (),
                security_groups=[g.id for g in resolved.security_groups or ()],
                capacity_type=capacity_type,
                cluster=cluster,
                tags=tags,
                render=self._render,
            )
        except UserDataError as err:
            raise CreateError("LaunchFailed", f"Error getting launch template configs: {err}") from err
        for group in groups:
            size = len(base64.b64decode(group.template.data["UserData"]))
            if size > USER_DATA_WARN_BYTES:
                log.warning(
                    "EC2NodeClass %s: user data of %d bytes, EC2 refuses more than %d",
                    spec.name,
                    size,
                    USER_DATA_MAX_BYTES,
                )
        return groups

    async def _create_fleet(self, request: dict[str, Any], groups: Sequence[LaunchGroup]) -> dict[str, Any]:
        clients, templates = self._clients, self.templates
        assert clients is not None and templates is not None
        for attempt in (0, 1):
            try:
                for group in groups:
                    await templates.ensure(group.template)
            except AwsError as err:
                raise _create_error(err, "Error getting launch template configs") from err
            try:
                return await clients.call("ec2", "CreateFleet", **request)
            except AwsError as err:
                if err.code == _LT_NOT_FOUND and attempt == 0:
                    # Deleted behind our back: made again, once (Karpenter retries once too).
                    templates.forget(g.template.name for g in groups)
                    continue
                raise _create_error(err, "Error creating fleet request") from err
        raise AssertionError("unreachable")

    async def _cluster(self) -> ClusterInfo:
        """The cluster nodes join: the launch settings, with what they leave empty read once from
        EKS (``DescribeCluster``, as Karpenter does); a failed read is tried again at most every
        ``_EKS_RETRY`` seconds, so a cluster EKS does not know costs no call per launch."""
        s = self._launch
        info = ClusterInfo(s.cluster_name, s.cluster_endpoint, s.cluster_ca_bundle, s.cluster_cidr)
        if info.endpoint and info.ca_bundle and info.cidr:
            return info
        now = self._clock.monotonic()
        due = self._eks_failed_at is None or now - self._eks_failed_at >= _EKS_RETRY
        if self._eks is None and self._clients is not None and s.cluster_name and due:
            try:
                self._eks = await describe_cluster(self._clients, s.cluster_name)
                self._eks_failed_at = None
            except AwsError as err:
                self._eks_failed_at = now
                log.warning("cannot describe EKS cluster %s: %s: %s", s.cluster_name, err.code, err.message)
        facts = self._eks
        if facts is None:
            return info
        return ClusterInfo(
            info.name,
            info.endpoint or facts.endpoint,
            info.ca_bundle or facts.ca_bundle,
            info.cidr or facts.cidr,
        )

    def _subnets_out(self) -> list[str]:
        now = self._clock.monotonic()
        for subnet in [s for s, until in self._full_subnets.items() if until <= now]:
            del self._full_subnets[subnet]
        return list(self._full_subnets)

    def _mark_subnets(self, errors: Iterable[fleet.FleetError]) -> None:
        """``MarkSubnetUnavailable``: a subnet out of addresses is skipped for the cache's TTL."""
        for err in errors:
            if err.offering.code == fleet.INSUFFICIENT_ADDRESSES and err.subnet_id:
                self._full_subnets[err.subnet_id] = self._clock.monotonic() + self.unavailable.ttl

    def _to_claim(
        self,
        instance: Instance,
        name: str = "",
        failed: tuple[FailedOffering, ...] = (),
        type_: InstanceType | None = None,
    ) -> CloudNodeClaim:
        labels = _type_labels(type_)
        labels |= {
            INSTANCE_TYPE: instance.instance_type,
            ZONE: instance.zone,
            CAPACITY_TYPE: instance.capacity_type,
        }
        if instance.nodepool:
            labels[NODEPOOL] = instance.nodepool
        return CloudNodeClaim(
            name or instance.nodeclaim,
            instance.provider_id,
            instance.instance_type,
            instance.zone,
            instance.capacity_type,
            labels,
            image_id=instance.image_id,
            nodepool=instance.nodepool,
            nodeclass=instance.tags.get(NODECLASS_TAG, ""),
            launched_at=instance.launched_at,
            state=instance.state,
            failed_offerings=failed,
            # The NodeClaim's status.capacity / allocatable, as Karpenter's instanceToNodeClaim
            # fills them from the instance type.
            capacity=_quantities(type_.resources.capacity) if type_ is not None else {},
            allocatable=_quantities(type_.allocatable) if type_ is not None else {},
        )

    # -- the other NodeClaim calls --------------------------------------------------------------------------

    def _ready(self) -> Instances:
        if self.instances is None:
            raise CreateError("LaunchFailed", _NOT_LAUNCHING)
        return self.instances

    async def delete(self, provider_id: str) -> None:
        await self._ready().terminate(_instance_id(provider_id))

    async def get(self, provider_id: str) -> CloudNodeClaim:
        instance = await self._ready().get(_instance_id(provider_id))
        return self._to_claim(instance, type_=await self._type_of(instance))

    async def list(self) -> builtins.list[CloudNodeClaim]:
        found = await self._ready().list()
        types: dict[str, dict[str, InstanceType]] = {}
        return [self._to_claim(i, type_=await self._type_of(i, types)) for i in found]

    async def _type_of(
        self, instance: Instance, known: dict[str, dict[str, InstanceType]] | None = None
    ) -> InstanceType | None:
        """The catalog's type of ``instance`` under its EC2NodeClass (its labels, capacity and
        allocatable, as Karpenter's ``instanceToNodeClaim`` resolves them for Get and List too);
        None when the class or the type is unknown. ``known``: per class, for a list."""
        class_name = instance.tags.get(NODECLASS_TAG, "")
        by_name = known.get(class_name) if known is not None else None
        if by_name is None:
            resolved = self._resolved.get(class_name)
            if resolved is None or resolved.spec is None:
                return None
            try:
                by_name = {t.name: t for t in await self._types(resolved.spec)}
            except Exception as err:  # the catalog unreadable: the instance without its type's facts
                log.warning("aws cloud: no instance types for %s: %s", class_name, err)
                return None
            if known is not None:
                known[class_name] = by_name
        return by_name.get(instance.instance_type)


def _unavailable_in(t: InstanceType, zones: frozenset[str]) -> InstanceType:
    """``t`` with its offerings in ``zones`` unavailable (kept, as Karpenter keeps them)."""
    if not any(o.zone in zones and o.available for o in t.offerings):
        return t
    offers = tuple(replace(o, available=False) if o.zone in zones else o for o in t.offerings)
    return replace(t, offerings=offers)


def _type_names(pools: Iterable[Pool]) -> list[str]:
    """The pools' types, each once, in the pools' order (cheapest first)."""
    return list(dict.fromkeys(p.instance_type.name for p in pools))


def _instance_id(provider_id: str) -> str:
    """``aws:///<zone>/<id>`` → the id; ``NodeClaimNotFound`` for anything else."""
    if not provider_id.startswith("aws:///") or "/i-" not in provider_id:
        raise NodeClaimNotFound(provider_id)
    return provider_id.rsplit("/", 1)[1]


def _create_error(err: AwsError, what: str) -> CreateError:
    reason, message = fleet.reason_message(f"{err.code}: {err.message}")
    out = CreateError(reason, f"{what}: {message}")
    out.add_note(str(err))
    return out


def _type_labels(t: InstanceType | None) -> dict[str, str]:
    """The single-valued labels of a type (``instanceToNodeClaim``); zone and capacity type come
    from the instance."""
    if t is None:
        return {}
    out = {}
    for key, req in t.requirements.items():
        if key not in (ZONE, CAPACITY_TYPE) and req.operator == "In" and len(req.values) == 1:
            out[key] = next(iter(req.values))
    return out


def _quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    return {name: quantity_text(name, amount) for name, amount in sorted(amounts.items())}
