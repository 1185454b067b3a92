"""Launch templates: one per (AMI, max pods) group of a NodeClaim's types, named by a hash of their
content, created once and found again by name after a restart.

The pure half follows aws/karpenter-provider-aws ``pkg/providers/amifamily/resolver.go``
(``Resolve``: types mapped to the first compatible AMI, grouped by AMI and max pods;
``resolveLaunchTemplates``: the family's default block devices when the class has none),
``pkg/providers/launchtemplate/launchtemplate.go`` (``CreateAMIOptions``: the NodeClaim's labels
plus its capacity type, its taints then startup taints, handed to ``aws.userdata``, which adds
the rest; ``blockDeviceMappings``, ``volumeSize``) and ``types.go``
(``CreateLaunchTemplateInputBuilder.Build``: ImageId, UserData, IamInstanceProfile,
SecurityGroupIds, BlockDeviceMappings, MetadataOptions with instance tags disabled, Monitoring, tag
specifications for network interfaces and, for spot, spot requests; the template itself tagged).
Names are ``kubespot.io/<hash>`` (Karpenter's are ``karpenter.k8s.aws/<hash>``), and the
NodeClaim's own tag is left out of them so claims of one NodePool share templates.

``LaunchTemplates.ensure`` is the AWS half (``ensureLaunchTemplate``): known names are not asked
again; otherwise DescribeLaunchTemplates by name, CreateLaunchTemplate when EC2 does not know it;
concurrent callers for one name share one check. A template carries the launch tags but the
NodeClaim's, so ``eks:eks-cluster-name`` and ``karpenter.k8s.aws/ec2nodeclass`` say whose it is:

- ``delete_all`` (``DeleteAll``, called by the EC2NodeClass termination finalizer) deletes the
  templates of one class of this cluster;
- ``collect`` does what Karpenter's template cache does on eviction (``hydrateCache``,
  ``cachedEvictedFunc``: every template of the cluster is known from the first look, and one not
  used for ``IDLE_TTL``, Karpenter's ``DefaultTTL`` of one minute, is deleted), so the templates of
  an old hash (a changed class, AMI or security group) go within a minute of their last launch.

Both delete only what is named ``kubespot.io/…`` and tagged with this cluster's name (the filter
asked of EC2, and checked again on the answer): a Karpenter beside kubespot, or another cluster in
the account, keeps its templates. A template deleted while a launch uses it is made again
(``forget``; the fleet is retried once).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from kubespot.model import Clock, SystemClock
from kubespot.model.capacity import AMIFamily
from kubespot.model.quantity import quantity
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.api.nodeclass import BlockDeviceMapping, EC2NodeClassSpec, Kubelet
from kubespot.scheduling.instance_types import InstanceType
from kubespot.scheduling.labels import CAPACITY_TYPE, SPOT
from kubespot.scheduling.requirements import Requirement, Requirements
from kubespot.scheduling.taints import Taint

from .amis import AmiInfo
from .fleet import tag_list
from .instances import CLUSTER_NAME_TAG, NODECLAIM_TAG, NODECLASS_TAG
from .session import AwsClients, AwsError
from .userdata import ClusterInfo

__all__ = [
    "IDLE_TTL",
    "PREFIX",
    "LaunchGroup",
    "LaunchTemplate",
    "LaunchTemplates",
    "UserDataRenderer",
    "block_device_mappings",
    "launch_groups",
    "node_labels",
    "node_taints",
]

PREFIX: Final = "kubespot.io"
_NOT_FOUND: Final = "InvalidLaunchTemplateName.NotFoundException"
_EXISTS: Final = "InvalidLaunchTemplateName.AlreadyExistsException"
_GONE: Final = frozenset(
    {_NOT_FOUND, "InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateId.Malformed"}
)
#: A template not used for this long is deleted (Karpenter's launch template cache: ``DefaultTTL``).
IDLE_TTL: Final = 60.0
#: DescribeLaunchTemplates pages at most 200 (``MaxResults``).
_PAGE: Final = 200
_GIB: Final = 2**30
#: ``DefaultEBS``: encrypted gp3, 20 GiB.
_EBS: Final = {"Encrypted": True, "VolumeType": "gp3", "VolumeSize": 20}
#: The EBS fields of a block device mapping as the class writes them → EC2's names.
_EBS_FIELDS: Final = {
    "deleteOnTermination": "DeleteOnTermination",
    "encrypted": "Encrypted",
    "volumeType": "VolumeType",
    "iops": "Iops",
    "throughput": "Throughput",
    "kmsKeyID": "KmsKeyId",
    "snapshotID": "SnapshotId",
    "volumeInitializationRate": "VolumeInitializationRate",
}


class UserDataRenderer(Protocol):
    """``kubespot.aws.userdata.render_user_data``'s signature."""

    def __call__(
        self,
        family: AMIFamily,
        custom: str | None,
        cluster: ClusterInfo,
        kubelet: Kubelet | None,
        labels: Mapping[str, str],
        taints: Sequence[Taint],
        max_pods: int | None,
        instance_store_raid0: bool = False,
    ) -> str: ...


# -- the pure half -------------------------------------------------------------------------------------


def _default_block_devices(family: AMIFamily) -> list[dict[str, Any]]:
    """Each family's ``DefaultBlockDeviceMappings`` (Custom: none, the AMI's own)."""
    if family == AMIFamily.CUSTOM:
        return []
    if family == AMIFamily.BOTTLEROCKET:
        return [
            {"DeviceName": "/dev/xvda", "Ebs": {**_EBS, "VolumeSize": 4}},
            {"DeviceName": "/dev/xvdb", "Ebs": dict(_EBS)},
        ]
    if family.is_windows:
        return [{"DeviceName": "/dev/sda1", "Ebs": {**_EBS, "VolumeSize": 50}}]
    return [{"DeviceName": "/dev/xvda", "Ebs": dict(_EBS)}]


def block_device_mappings(spec: EC2NodeClassSpec) -> list[dict[str, Any]]:
    """The class's block devices in EC2's shape (sizes rounded up to whole GiB), or the family's."""
    if not spec.block_device_mappings:
        return _default_block_devices(spec.family or AMIFamily.AL2023)
    return [_block_device(b) for b in spec.block_device_mappings]


def _block_device(bdm: BlockDeviceMapping) -> dict[str, Any]:
    ebs: dict[str, Any] = {}
    for key, value in bdm.ebs.items():
        if key == "volumeSize":
            ebs["VolumeSize"] = math.ceil(quantity(value) / _GIB)
        elif key in _EBS_FIELDS and value is not None:
            ebs[_EBS_FIELDS[key]] = value
    out: dict[str, Any] = {"Ebs": ebs}
    if bdm.device_name is not None:
        out["DeviceName"] = bdm.device_name
    return out


def node_labels(claim: NodeClaimSpec, capacity_type: str) -> dict[str, str]:
    """The labels handed to the user data: the NodeClaim's and its capacity type (``EnsureAll``);
    ``render_user_data`` drops those kubelet may not set and adds do-not-sync-taints."""
    return {**claim.labels, CAPACITY_TYPE: capacity_type}


def node_taints(claim: NodeClaimSpec) -> tuple[Taint, ...]:
    """The taints handed to the user data: the NodeClaim's taints, then its startup taints;
    ``render_user_data`` adds the unregistered taint."""
    return tuple(dict.fromkeys((*claim.template.taints, *claim.template.startup_taints)))


@dataclass(frozen=True, slots=True)
class LaunchTemplate:
    """A launch template's content; ``name`` is derived from it."""

    data: Mapping[str, Any]
    tags: Mapping[str, str]

    @property
    def name(self) -> str:
        body = json.dumps({"data": self.data, "tags": self.tags}, sort_keys=True, separators=(",", ":"))
        return f"{PREFIX}/{hashlib.sha256(body.encode()).hexdigest()[:20]}"

    def request(self) -> dict[str, Any]:
        """CreateLaunchTemplate's arguments."""
        return {
            "LaunchTemplateName": self.name,
            "LaunchTemplateData": dict(self.data),
            "TagSpecifications": [{"ResourceType": "launch-template", "Tags": tag_list(self.tags)}],
        }


@dataclass(frozen=True, slots=True)
class LaunchGroup:
    """The types one launch template serves."""

    template: LaunchTemplate
    image_id: str
    max_pods: int
    types: tuple[str, ...]


def _ami_for(t: InstanceType, amis: Sequence[AmiInfo]) -> AmiInfo | None:
    """The first (newest) image whose requirements the type meets (``MapToInstanceTypes``); a key
    the type does not define counts as absent (Karpenter's types define DoesNotExist for it)."""
    for ami in amis:
        reqs = Requirements(Requirement.of(k, op, values) for k, op, values in ami.requirements)
        if t.requirements.is_compatible(reqs):
            return ami
    return None


def _template_data(
    spec: EC2NodeClassSpec,
    image_id: str,
    user_data: str,
    security_groups: Sequence[str],
    capacity_type: str,
    tags: Mapping[str, str],
) -> dict[str, Any]:
    md = spec.metadata_options
    data: dict[str, Any] = {
        "ImageId": image_id,
        "UserData": base64.b64encode(user_data.encode()).decode(),
        "IamInstanceProfile": {"Name": spec.instance_profile or ""},
        "MetadataOptions": {
            "HttpEndpoint": md.http_endpoint,
            "HttpProtocolIpv6": md.http_protocol_ipv6,
            "HttpPutResponseHopLimit": md.http_put_response_hop_limit,
            "HttpTokens": md.http_tokens,
            # Always off: the launch tags' keys (kubernetes.io/cluster/...) are not valid there.
            "InstanceMetadataTags": "disabled",
        },
        "Monitoring": {"Enabled": bool(spec.detailed_monitoring)},
    }
    bdms = block_device_mappings(spec)
    if bdms:
        data["BlockDeviceMappings"] = bdms
    if spec.associate_public_ip_address is not None:
        # The groups move into the interface when one is declared (``generateNetworkInterfaces``).
        data["NetworkInterfaces"] = [
            {
                "AssociatePublicIpAddress": spec.associate_public_ip_address,
                "DeviceIndex": 0,
                "Groups": list(security_groups),
            }
        ]
    else:
        data["SecurityGroupIds"] = list(security_groups)
    kinds = ["network-interface"] + (["spot-instances-request"] if capacity_type == SPOT else [])
    data["TagSpecifications"] = [{"ResourceType": k, "Tags": tag_list(tags)} for k in kinds]
    return data


def launch_groups(
    spec: EC2NodeClassSpec,
    claim: NodeClaimSpec,
    types: Iterable[InstanceType],
    *,
    amis: Sequence[AmiInfo],
    security_groups: Sequence[str],
    capacity_type: str,
    cluster: ClusterInfo,
    tags: Mapping[str, str],
    render: UserDataRenderer,
) -> list[LaunchGroup]:
    """The launch templates of ``types`` (in order; a type no image serves is left out), one per
    (image, max pods). ``tags`` are the launch tags; the NodeClaim's own is dropped here. Raises
    what ``render`` raises (``UserDataError``, ``NodeClassNotReadyError``)."""
    family = spec.family or AMIFamily.AL2023
    labels = node_labels(claim, capacity_type)
    taints = node_taints(claim)
    lt_tags = {k: v for k, v in tags.items() if k != NODECLAIM_TAG}
    pinned = spec.kubelet.max_pods if spec.kubelet else None
    grouped: dict[tuple[str, int], list[str]] = {}
    for t in types:
        ami = _ami_for(t, amis)
        if ami is None:
            continue
        max_pods = pinned or int(t.resources.capacity.get("pods", 0))
        grouped.setdefault((ami.id, max_pods), []).append(t.name)
    out = []
    for (image_id, max_pods), names in grouped.items():
        user_data = render(
            family,
            spec.user_data,
            cluster,
            spec.kubelet,
            labels,
            taints,
            max_pods,
            instance_store_raid0=spec.instance_store_policy == "RAID0",
        )
        data = _template_data(spec, image_id, user_data, security_groups, capacity_type, lt_tags)
        out.append(LaunchGroup(LaunchTemplate(data, lt_tags), image_id, max_pods, tuple(names)))
    return out


# -- the AWS half ----------------------------------------------------------------------------------------


class LaunchTemplates:
    """Makes sure launch templates exist, asking EC2 once per name per process, and deletes those of
    this cluster that a class lost or nobody used for ``IDLE_TTL``."""

    def __init__(self, clients: AwsClients, *, cluster: str = "", clock: Clock | None = None) -> None:
        self._clients = clients
        self._cluster = cluster
        self._clock = clock or SystemClock()
        self._known: set[str] = set()
        self._inflight: dict[str, asyncio.Future[None]] = {}
        #: Template name -> when a launch last used it (or ``collect`` first saw it).
        self._used: dict[str, float] = {}
        #: Templates this process created (tests check "created once").
        self.created: list[str] = []
        #: Templates this process deleted (class deletion and idle collection).
        self.deleted: list[str] = []

    def forget(self, names: Iterable[str]) -> None:
        """EC2 said a template is gone (deleted by hand): check again next time."""
        self._known.difference_update(names)

    async def ensure(self, template: LaunchTemplate) -> str:
        """The template's name, once EC2 has it. Raises ``AwsError``."""
        name = template.name
        self._used[name] = self._clock.monotonic()
        if name in self._known:
            return name
        running = self._inflight.get(name)
        if running is not None:
            await asyncio.shield(running)
            return name
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._inflight[name] = fut
        try:
            await self._ensure(template)
            self._known.add(name)
            fut.set_result(None)
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except Exception as err:
            fut.set_exception(err)
            fut.exception()  # marked retrieved: the waiters re-raise it, nobody else need be told
            raise
        finally:
            del self._inflight[name]
        return name

    async def _ensure(self, template: LaunchTemplate) -> None:
        try:
            await self._clients.call("ec2", "DescribeLaunchTemplates", LaunchTemplateNames=[template.name])
            return
        except AwsError as err:
            if err.code != _NOT_FOUND:
                raise
        try:
            await self._clients.call("ec2", "CreateLaunchTemplate", **template.request())
            self.created.append(template.name)
        except AwsError as err:
            if err.code != _EXISTS:  # another replica made it meanwhile: as good
                raise

    # -- deletion ------------------------------------------------------------------------------------

    def _ours(self, template: Mapping[str, Any]) -> bool:
        """Named by kubespot and tagged for this cluster (the filter is checked again here)."""
        tags = {t.get("Key"): t.get("Value") for t in template.get("Tags") or []}
        name = str(template.get("LaunchTemplateName") or "")
        return (
            bool(self._cluster)
            and name.startswith(f"{PREFIX}/")
            and tags.get(CLUSTER_NAME_TAG) == self._cluster
        )

    async def _list(self, nodeclass: str | None = None) -> list[str]:
        """The names of this cluster's kubespot templates (of ``nodeclass`` when given)."""
        filters = [{"Name": f"tag:{CLUSTER_NAME_TAG}", "Values": [self._cluster]}]
        if nodeclass is not None:
            filters.append({"Name": f"tag:{NODECLASS_TAG}", "Values": [nodeclass]})
        request: dict[str, Any] = {"Filters": filters, "MaxResults": _PAGE}
        out: list[str] = []
        while True:
            page = await self._clients.call("ec2", "DescribeLaunchTemplates", **request)
            for found in page.get("LaunchTemplates") or []:
                tags = {t.get("Key"): t.get("Value") for t in found.get("Tags") or []}
                if self._ours(found) and (nodeclass is None or tags.get(NODECLASS_TAG) == nodeclass):
                    out.append(str(found["LaunchTemplateName"]))
            token = page.get("NextToken")
            if not token:
                return out
            request["NextToken"] = token

    async def _delete(self, name: str) -> None:
        try:
            await self._clients.call("ec2", "DeleteLaunchTemplate", LaunchTemplateName=name)
        except AwsError as err:
            if err.code not in _GONE:
                raise
        self._known.discard(name)
        self._used.pop(name, None)
        self.deleted.append(name)

    async def delete_all(self, nodeclass: str) -> list[str]:
        """Delete every template of ``nodeclass`` in this cluster (``DeleteAll``); their names.
        Raises ``AwsError`` (the finalizer retries) after trying them all."""
        if not self._cluster:
            return []
        names = await self._list(nodeclass)
        failed: AwsError | None = None
        for name in names:
            try:
                await self._delete(name)
            except AwsError as err:
                failed = err
        if failed is not None:
            raise failed
        return names

    async def collect(self) -> list[str]:
        """Delete this cluster's templates no launch used for ``IDLE_TTL`` (one seen for the first
        time counts as used now, as Karpenter's cache hydrated at start); their names."""
        if not self._cluster:
            return []
        now = self._clock.monotonic()
        names = await self._list()
        gone: list[str] = []
        for name in names:
            used = self._used.setdefault(name, now)
            if now - used >= IDLE_TTL and name not in self._inflight:
                await self._delete(name)
                gone.append(name)
        # Deleted by someone else: nothing to remember.
        for name in set(self._used) - set(names) - set(self._inflight):
            if now - self._used[name] >= IDLE_TTL:
                del self._used[name]
        return gone
