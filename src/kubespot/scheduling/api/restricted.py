"""Which label keys a NodePool may set or require, and the Kubernetes name rules they must follow.

- Qualified names and label values: k8s.io/apimachinery ``pkg/util/validation``
  ``IsQualifiedName`` / ``IsValidLabelValue``.
- Restricted keys (kubernetes-sigs/karpenter ``pkg/apis/v1/labels.go`` ``IsRestrictedLabel``, with
  the AWS provider's additions in aws/karpenter-provider-aws ``pkg/apis/v1/labels.go``): the
  well-known labels are always allowed; ``kubernetes.io/hostname`` is not; the ``karpenter.sh`` and
  ``karpenter.k8s.aws`` domains (and their subdomains) are Karpenter's own, except the well-known
  labels of each. ``karpenter.sh/nodepool`` is Karpenter's to set, never the user's.
- Before v1.9 (core PR #2586) the whole ``kubernetes.io`` and ``k8s.io`` domains were restricted too,
  except ``node.kubernetes.io``, ``node-restriction.kubernetes.io`` and ``kops.k8s.io`` (and
  subdomains ending in them). v1.9 lifted that; kubespot follows v1.9 and later by default, so every
  manifest a user runs is accepted, and ``legacy_domains=True`` gives the v1.0 to v1.8 rule.
"""

from __future__ import annotations

import re

from ..labels import HOSTNAME, NODEPOOL, WELL_KNOWN

_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

#: The AWS provider's well-known labels (v1.0's set and those added up to v1.14).
AWS_WELL_KNOWN = frozenset(
    "karpenter.k8s.aws/" + name
    for name in (
        "instance-hypervisor",
        "instance-encryption-in-transit-supported",
        "instance-category",
        "instance-family",
        "instance-generation",
        "instance-size",
        "instance-local-nvme",
        "instance-cpu",
        "instance-cpu-manufacturer",
        "instance-cpu-sustained-clock-speed-mhz",
        "instance-memory",
        "instance-ebs-bandwidth",
        "instance-network-bandwidth",
        "instance-gpu-name",
        "instance-gpu-manufacturer",
        "instance-gpu-count",
        "instance-gpu-memory",
        "instance-accelerator-name",
        "instance-accelerator-manufacturer",
        "instance-accelerator-count",
        "instance-capability-flex",
        "instance-tenancy",
        "capacity-reservation-id",
        "capacity-reservation-type",
        "capacity-reservation-interruptible",
        "nitro-sandbox",
        "placement-group-id",
        "placement-group-partition",
        "ec2nodeclass",
    )
) | {"topology.k8s.aws/zone-id"}

#: Domains that are Karpenter's, with the keys of each that users may still use.
_OWN_DOMAINS = ("karpenter.sh", "karpenter.k8s.aws")
_LEGACY_DOMAINS = ("kubernetes.io", "k8s.io")
_LEGACY_EXCEPTIONS = ("node.kubernetes.io", "node-restriction.kubernetes.io", "kops.k8s.io")
#: The deprecated beta names of well-known labels, allowed by the pre-v1.9 rule as well.
_BETA_WELL_KNOWN = frozenset(
    {
        "beta.kubernetes.io/instance-type",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)


def domain(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def _in_domain(dom: str, parent: str) -> bool:
    return dom == parent or dom.endswith("." + parent)


def qualified_name_errors(key: str) -> list[str]:
    """Why ``key`` is not a qualified name (``[prefix/]name``); empty when it is."""
    prefix, _, name = key.rpartition("/")
    errors: list[str] = []
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        errors.append("prefix part must be a lowercase DNS subdomain of at most 253 characters")
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    elif not _NAME.fullmatch(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    """Why ``value`` is not a label value; empty when it is (the empty string is a value)."""
    if len(value) > 63:
        return ["must be no more than 63 characters"]
    if value and not _NAME.fullmatch(value):
        return [
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
            "or '.', and must start and end with an alphanumeric character"
        ]
    return []


def restricted_reason(key: str, *, legacy_domains: bool = False) -> str | None:
    """Why a NodePool may not use ``key`` as a label or requirement key; None when it may."""
    if key == NODEPOOL:
        return f"label {key} is restricted: Karpenter sets it on every node of the pool"
    if key in WELL_KNOWN or key in AWS_WELL_KNOWN:
        return None
    if key == HOSTNAME:
        return f"label {key} is restricted: the node's name is not known before it is launched"
    dom = domain(key)
    for own in _OWN_DOMAINS:
        if _in_domain(dom, own):
            return (
                f'label domain "{own}" is restricted (label {key}); use a well-known label or a custom domain'
            )
    if legacy_domains and key not in _BETA_WELL_KNOWN:
        if any(dom.endswith(exc) for exc in _LEGACY_EXCEPTIONS):
            return None
        for legacy in _LEGACY_DOMAINS:
            if dom.endswith(legacy):
                return (
                    f'label domain "{legacy}" is restricted before Karpenter v1.9 (label {key}); '
                    "use a well-known label or a custom domain"
                )
    return None
