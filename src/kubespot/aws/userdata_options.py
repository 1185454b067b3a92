"""What every family's user data is rendered from, and the pieces the families share (pure).

``BootstrapOptions`` is Karpenter's ``bootstrap.Options`` once the launch-template resolver has done
its part (aws/karpenter-provider-aws ``pkg/providers/amifamily/resolver.go``
``resolveLaunchTemplates``): taints with the unregistered taint, labels kubelet may set, the kubelet
block with ``maxPods`` and ``clusterDNS`` filled in. The shared renderings follow
``pkg/providers/amifamily/bootstrap/bootstrap.go`` (``kubeletExtraArgs``, ``nodeLabelArg``,
``nodeTaintArg``), used by AL2 and Windows; AL2023 and Bottlerocket take the same values in their
own shapes. Go's ``metav1.Duration`` is re-printed as Go prints it (``90s`` becomes ``1m30s``),
because that is what kubelet receives from Karpenter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from kubespot.scheduling.api.nodeclass import Kubelet
from kubespot.scheduling.taints import Taint

__all__ = [
    "BootstrapOptions",
    "ClusterInfo",
    "UserDataError",
    "go_duration",
    "go_quote",
    "kubelet_extra_args",
    "node_labels_arg",
]


class UserDataError(ValueError):
    """The EC2NodeClass's ``spec.userData`` (or a value rendered into it) cannot be used.

    Karpenter fails the launch-template resolution with it ("invalid UserData", "parsing custom
    UserData"), which the launch reports as a ``CreateError`` (reason ``LaunchFailed``); the caller
    may as well surface it on the EC2NodeClass.
    """


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """The cluster a node joins, as EKS ``DescribeCluster`` describes it."""

    name: str
    #: The API server's https URL.
    endpoint: str
    #: The cluster CA, base64 PEM as DescribeCluster returns it ("" when unknown).
    ca_bundle: str
    #: The service CIDR, e.g. ``10.100.0.0/16`` ("" when unknown: AL2023 cannot bootstrap then).
    cidr: str
    #: The cluster DNS service IP; the first of ``kubelet.clusterDNS`` wins when that is set.
    dns_ip: str | None = None


@dataclass(frozen=True, slots=True)
class BootstrapOptions:
    """The resolved inputs of one launch template's user data."""

    cluster: ClusterInfo
    #: The NodeClass kubelet block with ``maxPods`` and ``clusterDNS`` defaulted (``resolver.go``).
    kubelet: Kubelet
    #: Only labels kubelet may set on its own Node, sorted by key.
    labels: Mapping[str, str]
    #: NodeClaim taints, then startup taints, then ``karpenter.sh/unregistered:NoExecute``.
    taints: tuple[Taint, ...]
    #: ``spec.userData`` as written (None or "" when unset).
    custom: str | None
    instance_store_raid0: bool = False


def go_quote(text: str) -> str:
    """A string as Go's ``%q`` prints it (for the ASCII of labels and taints, JSON's escaping is the same)."""
    return json.dumps(text, ensure_ascii=False)


def node_labels_arg(labels: Mapping[str, str]) -> str:
    """``--node-labels="k=v,…"`` sorted by key; "" without labels (``nodeLabelArg``)."""
    if not labels:
        return ""
    return "--node-labels=" + go_quote(",".join(f"{k}={labels[k]}" for k in sorted(labels)))


def _taints_arg(taints: Sequence[Taint]) -> str:
    # Always given, even empty (nodeTaintArg); the families that use it always have the
    # unregistered taint anyway.
    return "--register-with-taints=" + go_quote(",".join(str(t) for t in taints))


def _map_arg(name: str, values: Mapping[str, str], sep: str) -> str:
    # Karpenter walks a Go map (random order); sorted here so the same options render the same
    # text and so the same launch-template hash.
    if not values:
        return ""
    return f"{name}=" + go_quote(",".join(f"{k}{sep}{values[k]}" for k in sorted(values)))


def kubelet_extra_args(opts: BootstrapOptions) -> list[str]:
    """The kubelet flags AL2's ``bootstrap.sh`` and Windows' ``Start-EKSBootstrap.ps1`` pass on, in
    Karpenter's order (``Options.kubeletExtraArgs``)."""
    k = opts.kubelet
    args = [
        node_labels_arg(opts.labels),
        _taints_arg(opts.taints),
        f"--max-pods={k.max_pods}" if k.max_pods is not None else "",
        f"--pods-per-core={k.pods_per_core}" if k.pods_per_core is not None else "",
        _map_arg("--system-reserved", k.system_reserved, "="),
        _map_arg("--kube-reserved", k.kube_reserved, "="),
        _map_arg("--eviction-hard", k.eviction_hard, "<"),
        _map_arg("--eviction-soft", k.eviction_soft, "<"),
        _map_arg("--eviction-soft-grace-period", grace_periods(k), "="),
    ]
    if k.eviction_max_pod_grace_period is not None:
        args.append(f"--eviction-max-pod-grace-period={k.eviction_max_pod_grace_period}")
    if k.image_gc_high_threshold_percent is not None:
        args.append(f"--image-gc-high-threshold={k.image_gc_high_threshold_percent}")
    if k.image_gc_low_threshold_percent is not None:
        args.append(f"--image-gc-low-threshold={k.image_gc_low_threshold_percent}")
    if k.cpu_cfs_quota is not None:
        args.append(f"--cpu-cfs-quota={'true' if k.cpu_cfs_quota else 'false'}")
    return [a for a in args if a]


def grace_periods(k: Kubelet) -> dict[str, str]:
    """``evictionSoftGracePeriod`` with each value printed as Go prints a ``time.Duration``."""
    return {signal: go_duration(value) for signal, value in k.eviction_soft_grace_period.items()}


# --- Go durations ------------------------------------------------------------------------------

_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5
    "μs": 1_000,  # U+03BC
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_PART = re.compile(r"(\d*\.?\d*)(ns|us|µs|μs|ms|s|m|h)")
_SECOND = 1_000_000_000


def _parse_go_duration(text: str) -> int:
    """Nanoseconds of a Go duration string (``time.ParseDuration``)."""
    s = text
    sign = 1
    if s[:1] in "+-":
        sign, s = (-1 if s[0] == "-" else 1), s[1:]
    if s == "0":
        return 0
    if not s:
        raise UserDataError(f"invalid duration {text!r}")
    total = Fraction(0)
    pos = 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None or m.group(1) in ("", "."):
            raise UserDataError(f"invalid duration {text!r}")
        total += Fraction(m.group(1)) * _UNITS_NS[m.group(2)]
        pos = m.end()
    return sign * int(total)


def _fraction(value: int, digits: int) -> str:
    # value / 10**digits with the trailing zeros of the fraction dropped (Go's fmtFrac).
    whole, frac = divmod(value, 10**digits)
    text = f"{frac:0{digits}d}".rstrip("0")
    return f"{whole}.{text}" if text else str(whole)


def go_duration(text: str) -> str:
    """A duration string re-printed as Go's ``time.Duration.String`` does (``90s`` -> ``1m30s``)."""
    ns = _parse_go_duration(text.strip())
    if ns == 0:
        return "0s"
    sign, u = ("-" if ns < 0 else ""), abs(ns)
    if u < _SECOND:
        if u < 1_000:
            return f"{sign}{u}ns"
        if u < 1_000_000:
            return f"{sign}{_fraction(u, 3)}µs"
        return f"{sign}{_fraction(u, 6)}ms"
    seconds = _fraction(u % (60 * _SECOND), 9) + "s"
    minutes, hours = (u // (60 * _SECOND)) % 60, u // (3600 * _SECOND)
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}"
    if u >= 60 * _SECOND:
        return f"{sign}{minutes}m{seconds}"
    return f"{sign}{seconds}"
