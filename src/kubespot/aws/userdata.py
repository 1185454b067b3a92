"""The user data of a launch template, per AMI family (pure): ``render_user_data``.

What aws/karpenter-provider-aws does between a NodeClaim and the ``UserData`` of its launch
template: ``pkg/providers/launchtemplate/launchtemplate.go`` (``CreateAMIOptions``,
``InjectDoNotSyncTaintsLabel``) and ``pkg/providers/amifamily/resolver.go``
(``resolveLaunchTemplates``, ``defaultClusterDNS``, ``RejectForbiddenLabels``) resolve the inputs
here; each family's module renders them (``userdata_al2023``, ``userdata_al2``,
``userdata_bottlerocket``, ``userdata_windows``); Custom passes ``spec.userData`` through untouched.

The text returned is what the node reads; the caller base64-encodes it for EC2. Errors:
``UserDataError`` for a ``spec.userData`` that cannot be merged (bad TOML, broken MIME) or a CA
bundle that is not base64; ``kubespot.cloud.errors.NodeClassNotReadyError`` when AL2023 has no
service CIDR, as Karpenter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from kubespot.model.capacity import AMIFamily
from kubespot.scheduling.api.nodeclass import Kubelet
from kubespot.scheduling.api.restricted import domain
from kubespot.scheduling.taints import Taint

from .userdata_al2 import render_al2
from .userdata_al2023 import render_al2023
from .userdata_bottlerocket import render_bottlerocket
from .userdata_options import BootstrapOptions, ClusterInfo, UserDataError
from .userdata_windows import render_windows

__all__ = [
    "DO_NOT_SYNC_TAINTS",
    "UNREGISTERED_TAINT",
    "USER_DATA_MAX_BYTES",
    "USER_DATA_WARN_BYTES",
    "ClusterInfo",
    "UserDataError",
    "kubelet_labels",
    "render_user_data",
    "user_data_taints",
]

#: ``ec2:CreateLaunchTemplate`` refuses user data larger than this (raw bytes, before base64:
#: ``InvalidUserData.Malformed`` "User data is limited to 16384 bytes", Karpenter's reason
#: ``UserDataSizeLimitExceeded``). Karpenter never gates on it, only logs past 90 % and exports
#: ``karpenter_ec2nodeclasses_userdata_bytes`` (``pkg/providers/launchtemplate/metrics.go``).
USER_DATA_MAX_BYTES = 16384
USER_DATA_WARN_BYTES = USER_DATA_MAX_BYTES * 9 // 10

#: Karpenter's ``UnregisteredNoExecuteTaint``: kubelet registers with it and Karpenter removes it
#: once it has synced the NodeClaim onto the Node, so nothing runs before that.
UNREGISTERED_TAINT = Taint("karpenter.sh/unregistered", "NoExecute")
#: Tells Karpenter's registration not to copy the NodeClaim's taints onto the Node: kubelet
#: registered with them already, and copying again would bring back a startup taint a daemon
#: removed in between (kubernetes-sigs/karpenter issue 1772).
DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"

#: Label domains kept out of kubelet's ``--node-labels``: kubelet refuses to start with one it does
#: not know (kubernetes ``cmd/kubelet/app/options/options.go`` ``ValidateKubeletFlags``), the
#: NodeRestriction admission plugin refuses others, and Karpenter drops them all
#: (``RejectForbiddenLabels``); the well-known ones (zone, instance type, arch…) kubelet sets itself.
_FORBIDDEN_DOMAINS = ("node-restriction.kubernetes.io", "kubernetes.io", "k8s.io")

_RENDERERS: Mapping[AMIFamily, Callable[[BootstrapOptions], str]] = {
    AMIFamily.AL2023: render_al2023,
    AMIFamily.AL2: render_al2,
    AMIFamily.BOTTLEROCKET: render_bottlerocket,
    AMIFamily.WINDOWS2019: render_windows,
    AMIFamily.WINDOWS2022: render_windows,
    AMIFamily.WINDOWS2025: render_windows,
}


def kubelet_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """``labels`` without the ``kubernetes.io`` and ``k8s.io`` domains (``RejectForbiddenLabels``)."""
    out: dict[str, str] = {}
    for key, value in labels.items():
        dom = domain(key)
        if any(dom == d or dom.endswith("." + d) for d in _FORBIDDEN_DOMAINS):
            continue
        out[key] = value
    return out


def user_data_taints(taints: Sequence[Taint]) -> tuple[Taint, ...]:
    """``taints`` with the unregistered taint appended unless one matches it on key and effect."""
    if any(t.key == UNREGISTERED_TAINT.key and t.effect == UNREGISTERED_TAINT.effect for t in taints):
        return tuple(taints)
    return (*taints, UNREGISTERED_TAINT)


def _kubelet(kubelet: Kubelet | None, cluster: ClusterInfo, max_pods: int | None) -> Kubelet:
    k = kubelet if kubelet is not None else Kubelet()
    if k.max_pods is None and max_pods is not None:
        k = replace(k, max_pods=max_pods)
    if not k.cluster_dns and cluster.dns_ip:
        k = replace(k, cluster_dns=(cluster.dns_ip,))
    return k


def render_user_data(
    family: AMIFamily,
    custom: str | None,
    cluster: ClusterInfo,
    kubelet: Kubelet | None,
    labels: Mapping[str, str],
    taints: Sequence[Taint],
    max_pods: int | None,
    instance_store_raid0: bool = False,
) -> str:
    """The user data of one launch template.

    ``labels`` are the NodeClaim's labels plus ``karpenter.sh/capacity-type`` (as Karpenter's
    ``EnsureAll`` passes them); the forbidden domains are dropped here and
    ``karpenter.sh/do-not-sync-taints=true`` added. ``taints`` are the NodeClaim's taints then its
    startup taints. ``max_pods`` is the launch group's pod capacity, used when the kubelet block sets
    none; ``cluster.dns_ip`` is used when it sets no ``clusterDNS``.
    """
    if family is AMIFamily.CUSTOM:
        return custom or ""
    opts = BootstrapOptions(
        cluster=cluster,
        kubelet=_kubelet(kubelet, cluster, max_pods),
        labels=kubelet_labels({**labels, DO_NOT_SYNC_TAINTS: "true"}),
        taints=user_data_taints(taints),
        custom=custom,
        instance_store_raid0=instance_store_raid0,
    )
    return _RENDERERS[family](opts)
