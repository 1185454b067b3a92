"""A ``karpenter.k8s.aws/v1`` EC2NodeClass parsed into a frozen spec with Karpenter's defaults.

Fields follow aws/karpenter-provider-aws ``pkg/apis/v1/ec2nodeclass.go`` as released from v1.0 to
v1.14 (the ``kubelet`` block typed, as it is in every release; main turns it into an open map).
Defaults: ``metadataOptions`` (endpoint enabled, IPv6 disabled, hop limit 1, tokens required), and
the AMI family inferred from an ``alias`` term when ``amiFamily`` is unset. Fields kubespot does not
model yet are kept as written in ``extra`` so nothing a user wrote is lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubespot.model.capacity import AMIFamily, KubeletConfig

from .fields import Fields, Obj, Parsed

NODECLASS_REASON = "NodeClassValidationFailed"
#: aws ``pkg/controllers/nodeclass/validation.go``'s reasons for the checks the controller makes.
TAG_REASON = "TagValidationFailed"
KUBELET_REASON = "InvalidKubeletConfiguration"

#: ``alias`` family (lower case) → the ``amiFamily`` it implies.
ALIAS_FAMILIES: dict[str, AMIFamily] = {
    "al2": AMIFamily.AL2,
    "al2023": AMIFamily.AL2023,
    "bottlerocket": AMIFamily.BOTTLEROCKET,
    "windows2019": AMIFamily.WINDOWS2019,
    "windows2022": AMIFamily.WINDOWS2022,
    "windows2025": AMIFamily.WINDOWS2025,
}

_MODELLED = frozenset(
    {
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
        "amiSelectorTerms",
        "amiFamily",
        "role",
        "instanceProfile",
        "userData",
        "tags",
        "metadataOptions",
        "blockDeviceMappings",
        "kubelet",
        "associatePublicIPAddress",
        "detailedMonitoring",
        "instanceStorePolicy",
        "context",
    }
)


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """One term of a subnet, security group or AMI selector (ORed with the others)."""

    tags: Mapping[str, str] | None = None
    id: str | None = None
    name: str | None = None
    owner: str | None = None
    alias: str | None = None
    ssm_parameter: str | None = None

    def fields(self) -> frozenset[str]:
        """The API names of the fields this term sets."""
        names = {
            "tags": self.tags,
            "id": self.id,
            "name": self.name,
            "owner": self.owner,
            "alias": self.alias,
            "ssmParameter": self.ssm_parameter,
        }
        return frozenset(k for k, v in names.items() if v is not None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.alias is not None:
            out["alias"] = self.alias
        if self.tags is not None:
            out["tags"] = dict(self.tags)
        if self.id is not None:
            out["id"] = self.id
        if self.name is not None:
            out["name"] = self.name
        if self.owner is not None:
            out["owner"] = self.owner
        if self.ssm_parameter is not None:
            out["ssmParameter"] = self.ssm_parameter
        return out


@dataclass(frozen=True, slots=True)
class MetadataOptions:
    http_endpoint: str = "enabled"
    http_protocol_ipv6: str = "disabled"
    http_put_response_hop_limit: int = 1
    http_tokens: str = "required"

    def to_dict(self) -> dict[str, Any]:
        return {
            "httpEndpoint": self.http_endpoint,
            "httpProtocolIPv6": self.http_protocol_ipv6,
            "httpPutResponseHopLimit": self.http_put_response_hop_limit,
            "httpTokens": self.http_tokens,
        }


@dataclass(frozen=True, slots=True)
class BlockDeviceMapping:
    device_name: str | None = None
    root_volume: bool = False
    #: The ``ebs`` block as written (volumeSize, volumeType, iops, throughput, encrypted, kmsKeyID,
    #: snapshotID, deleteOnTermination, volumeInitializationRate).
    ebs: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.device_name is not None:
            out["deviceName"] = self.device_name
        if self.root_volume:
            out["rootVolume"] = True
        if self.ebs:
            out["ebs"] = dict(self.ebs)
        return out


@dataclass(frozen=True, slots=True)
class Kubelet:
    """The typed ``kubelet`` block (v1.0 to v1.14); None: not set."""

    cluster_dns: tuple[str, ...] | None = None
    max_pods: int | None = None
    pods_per_core: int | None = None
    system_reserved: Mapping[str, str] = field(default_factory=dict)
    kube_reserved: Mapping[str, str] = field(default_factory=dict)
    eviction_hard: Mapping[str, str] = field(default_factory=dict)
    eviction_soft: Mapping[str, str] = field(default_factory=dict)
    eviction_soft_grace_period: Mapping[str, str] = field(default_factory=dict)
    eviction_max_pod_grace_period: int | None = None
    image_gc_high_threshold_percent: int | None = None
    image_gc_low_threshold_percent: int | None = None
    cpu_cfs_quota: bool | None = None

    def capacity(self) -> KubeletConfig:
        """The settings that shape what a node can hold (for allocatable)."""
        return KubeletConfig(
            max_pods=self.max_pods,
            pods_per_core=self.pods_per_core,
            kube_reserved=dict(self.kube_reserved),
            system_reserved=dict(self.system_reserved),
            eviction_hard=dict(self.eviction_hard),
        )

    def to_dict(self) -> dict[str, Any]:
        pairs: list[tuple[str, Any]] = [
            ("clusterDNS", list(self.cluster_dns) if self.cluster_dns is not None else None),
            ("maxPods", self.max_pods),
            ("podsPerCore", self.pods_per_core),
            ("systemReserved", dict(self.system_reserved) or None),
            ("kubeReserved", dict(self.kube_reserved) or None),
            ("evictionHard", dict(self.eviction_hard) or None),
            ("evictionSoft", dict(self.eviction_soft) or None),
            ("evictionSoftGracePeriod", dict(self.eviction_soft_grace_period) or None),
            ("evictionMaxPodGracePeriod", self.eviction_max_pod_grace_period),
            ("imageGCHighThresholdPercent", self.image_gc_high_threshold_percent),
            ("imageGCLowThresholdPercent", self.image_gc_low_threshold_percent),
            ("cpuCFSQuota", self.cpu_cfs_quota),
        ]
        return {k: v for k, v in pairs if v is not None}


@dataclass(frozen=True, slots=True)
class EC2NodeClassSpec:
    name: str
    subnet_selector_terms: tuple[SelectorTerm, ...] = ()
    security_group_selector_terms: tuple[SelectorTerm, ...] = ()
    ami_selector_terms: tuple[SelectorTerm, ...] = ()
    #: As written; ``family`` is what it means once an alias is taken into account.
    ami_family: str | None = None
    role: str | None = None
    instance_profile: str | None = None
    user_data: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    metadata_options: MetadataOptions = field(default_factory=MetadataOptions)
    block_device_mappings: tuple[BlockDeviceMapping, ...] = ()
    kubelet: Kubelet | None = None
    associate_public_ip_address: bool | None = None
    detailed_monitoring: bool | None = None
    instance_store_policy: str | None = None
    context: str | None = None
    #: Fields of later releases kubespot keeps but does not use (capacityReservationSelectorTerms …).
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def alias(self) -> str | None:
        return next((t.alias for t in self.ami_selector_terms if t.alias is not None), None)

    @property
    def family(self) -> AMIFamily | None:
        """The AMI family: ``amiFamily`` when set, else the alias's (None when neither says)."""
        if self.ami_family is not None:
            try:
                return AMIFamily(self.ami_family)
            except ValueError:
                return None
        if self.alias is not None:
            return ALIAS_FAMILIES.get(self.alias.split("@", 1)[0])
        return None


def _terms(f: Fields, parent: Obj, key: str) -> tuple[SelectorTerm, ...]:
    out: list[SelectorTerm] = []
    for p, t in f.objs(parent, key, f"spec.{key}"):
        out.append(
            SelectorTerm(
                tags=f.str_map(t, "tags", f"{p}.tags") if f.has(t, "tags") else None,
                id=f.text(t, "id", f"{p}.id"),
                name=f.text(t, "name", f"{p}.name"),
                owner=f.text(t, "owner", f"{p}.owner"),
                alias=f.text(t, "alias", f"{p}.alias"),
                ssm_parameter=f.text(t, "ssmParameter", f"{p}.ssmParameter"),
            )
        )
    return tuple(out)


def _kubelet(f: Fields, spec: Obj) -> Kubelet | None:
    if not f.has(spec, "kubelet"):
        return None
    k = f.obj(spec, "kubelet", "spec.kubelet")
    p = "spec.kubelet"
    return Kubelet(
        cluster_dns=f.texts(k, "clusterDNS", f"{p}.clusterDNS"),
        max_pods=f.integer(k, "maxPods", f"{p}.maxPods"),
        pods_per_core=f.integer(k, "podsPerCore", f"{p}.podsPerCore"),
        system_reserved=f.quantities(k, "systemReserved", f"{p}.systemReserved"),
        kube_reserved=f.quantities(k, "kubeReserved", f"{p}.kubeReserved"),
        eviction_hard=f.str_map(k, "evictionHard", f"{p}.evictionHard"),
        eviction_soft=f.str_map(k, "evictionSoft", f"{p}.evictionSoft"),
        eviction_soft_grace_period=f.str_map(k, "evictionSoftGracePeriod", f"{p}.evictionSoftGracePeriod"),
        eviction_max_pod_grace_period=f.integer(
            k, "evictionMaxPodGracePeriod", f"{p}.evictionMaxPodGracePeriod"
        ),
        image_gc_high_threshold_percent=f.integer(
            k, "imageGCHighThresholdPercent", f"{p}.imageGCHighThresholdPercent"
        ),
        image_gc_low_threshold_percent=f.integer(
            k, "imageGCLowThresholdPercent", f"{p}.imageGCLowThresholdPercent"
        ),
        cpu_cfs_quota=f.flag(k, "cpuCFSQuota", f"{p}.cpuCFSQuota"),
    )


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def parse_nodeclass(obj: Obj) -> Parsed[EC2NodeClassSpec]:
    f = Fields(NODECLASS_REASON)
    if not isinstance(obj, Mapping):
        f.problem(f"an EC2NodeClass is an object, got {type(obj).__name__}")
        return Parsed(EC2NodeClassSpec(name=""), tuple(f.problems))
    meta = f.obj(obj, "metadata", "metadata")
    spec = f.obj(obj, "spec", "spec")
    md = f.obj(spec, "metadataOptions", "spec.metadataOptions")
    defaults = MetadataOptions()
    mp = "spec.metadataOptions"
    devices = [
        BlockDeviceMapping(
            device_name=f.text(b, "deviceName", f"{p}.deviceName"),
            root_volume=bool(f.flag(b, "rootVolume", f"{p}.rootVolume")),
            ebs=dict(f.obj(b, "ebs", f"{p}.ebs")),
        )
        for p, b in f.objs(spec, "blockDeviceMappings", "spec.blockDeviceMappings")
    ]
    parsed = EC2NodeClassSpec(
        name=f.text(meta, "name", "metadata.name") or "",
        subnet_selector_terms=_terms(f, spec, "subnetSelectorTerms"),
        security_group_selector_terms=_terms(f, spec, "securityGroupSelectorTerms"),
        ami_selector_terms=_terms(f, spec, "amiSelectorTerms"),
        ami_family=f.text(spec, "amiFamily", "spec.amiFamily"),
        role=f.text(spec, "role", "spec.role"),
        instance_profile=f.text(spec, "instanceProfile", "spec.instanceProfile"),
        user_data=f.text(spec, "userData", "spec.userData"),
        tags=f.str_map(spec, "tags", "spec.tags"),
        metadata_options=MetadataOptions(
            http_endpoint=f.text(md, "httpEndpoint", f"{mp}.httpEndpoint") or defaults.http_endpoint,
            http_protocol_ipv6=f.text(md, "httpProtocolIPv6", f"{mp}.httpProtocolIPv6")
            or defaults.http_protocol_ipv6,
            http_put_response_hop_limit=_or(
                f.integer(md, "httpPutResponseHopLimit", f"{mp}.httpPutResponseHopLimit"),
                defaults.http_put_response_hop_limit,
            ),
            http_tokens=f.text(md, "httpTokens", f"{mp}.httpTokens") or defaults.http_tokens,
        ),
        block_device_mappings=tuple(devices),
        kubelet=_kubelet(f, spec),
        associate_public_ip_address=f.flag(spec, "associatePublicIPAddress", "spec.associatePublicIPAddress"),
        detailed_monitoring=f.flag(spec, "detailedMonitoring", "spec.detailedMonitoring"),
        instance_store_policy=f.text(spec, "instanceStorePolicy", "spec.instanceStorePolicy"),
        context=f.text(spec, "context", "spec.context"),
        extra={k: v for k, v in spec.items() if k not in _MODELLED},
    )
    return Parsed(parsed, tuple(f.problems))


def nodeclass_dict(spec: EC2NodeClassSpec) -> dict[str, Any]:
    """The EC2NodeClass as the API server stores it after defaulting."""
    body: dict[str, Any] = {}
    if spec.ami_family is not None:
        body["amiFamily"] = spec.ami_family
    body["subnetSelectorTerms"] = [t.to_dict() for t in spec.subnet_selector_terms]
    body["securityGroupSelectorTerms"] = [t.to_dict() for t in spec.security_group_selector_terms]
    body["amiSelectorTerms"] = [t.to_dict() for t in spec.ami_selector_terms]
    if spec.role is not None:
        body["role"] = spec.role
    if spec.instance_profile is not None:
        body["instanceProfile"] = spec.instance_profile
    if spec.kubelet is not None:
        body["kubelet"] = spec.kubelet.to_dict()
    if spec.block_device_mappings:
        body["blockDeviceMappings"] = [b.to_dict() for b in spec.block_device_mappings]
    body["metadataOptions"] = spec.metadata_options.to_dict()
    if spec.tags:
        body["tags"] = dict(spec.tags)
    if spec.user_data is not None:
        body["userData"] = spec.user_data
    for key, value in (
        ("associatePublicIPAddress", spec.associate_public_ip_address),
        ("detailedMonitoring", spec.detailed_monitoring),
        ("instanceStorePolicy", spec.instance_store_policy),
        ("context", spec.context),
    ):
        if value is not None:
            body[key] = value
    body.update(spec.extra)
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": spec.name},
        "spec": body,
    }
