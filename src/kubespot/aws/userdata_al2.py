"""AL2 user data: the user's parts first, then a shell part running ``/etc/eks/bootstrap.sh`` (pure).

As aws/karpenter-provider-aws ``pkg/providers/amifamily/bootstrap/eksbootstrap.go`` (``EKS.Script``,
``eksBootstrapScript``, ``mergeCustomUserData``, ``mimeify``) and the golden files
``pkg/providers/launchtemplate/testdata/al2_*``: a MIME archive (boundary ``//``); the user's
``spec.userData`` is kept part by part with all its headers when it is MIME, or becomes one
shell-script part; Karpenter's script comes last, its arguments without ``=`` because that is how
``bootstrap.sh`` parses them.
"""

from __future__ import annotations

import ipaddress

from .userdata_mime import SHELL_SCRIPT, Part, is_mime, parse_archive, serialize
from .userdata_options import BootstrapOptions, kubelet_extra_args

__all__ = ["is_ipv6", "render_al2"]


def is_ipv6(ip: str) -> bool:
    """Karpenter's ``isIPv6``: true unless Go's ``net.ParseIP(ip).To4()`` gives an IPv4 address."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return True  # ParseIP gives nil, whose To4 is nil
    if isinstance(addr, ipaddress.IPv6Address):
        return addr.ipv4_mapped is None
    return False


def bootstrap_script(opts: BootstrapOptions) -> str:
    c, k = opts.cluster, opts.kubelet
    ca = f"--b64-cluster-ca '{c.ca_bundle}'" if c.ca_bundle else ""
    lines = [
        "#!/bin/bash -xe\n",
        "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n",
        f"/etc/eks/bootstrap.sh '{c.name}' --apiserver-endpoint '{c.endpoint}' {ca}",
    ]
    dns = k.cluster_dns[0] if k.cluster_dns else None
    if dns is not None and is_ipv6(dns):
        lines.append(" \\\n--ip-family ipv6")
    if dns is not None:
        lines.append(f" \\\n--dns-cluster-ip '{dns}'")
    if k.max_pods is not None:
        # bootstrap.sh would otherwise compute max pods from the ENI limits and override ours.
        lines.append(" \\\n--use-max-pods false")
    if args := kubelet_extra_args(opts):
        lines.append(" \\\n--kubelet-extra-args '" + " ".join(args) + "'")
    if opts.instance_store_raid0:
        lines.append(" \\\n--local-disks raid0")
    return "".join(lines)


def render_al2(opts: BootstrapOptions) -> str:
    custom = opts.custom or ""
    if not custom:
        parts: list[Part] = []
    elif is_mime(custom):
        parts = parse_archive(custom)
    else:
        parts = [Part.of(SHELL_SCRIPT, custom)]
    parts.append(Part.of(SHELL_SCRIPT, bootstrap_script(opts)))
    return serialize(parts)
