"""The kubelet's start-up check of ``--node-labels``: labels it may not set on its own Node.

k8s cmd/kubelet/app/options/options.go ``ValidateKubeletFlags`` refuses to start the kubelet when a
label is in the ``kubernetes.io`` or ``k8s.io`` domains (or a subdomain) and is not one the kubelet
may set (pkg/kubelet/apis/well_known_labels.go ``IsKubeletLabel``: the fixed set below, or a key in
a ``kubelet.kubernetes.io`` / ``node.kubernetes.io`` (sub)domain), or when a key or value is not a
valid label; the NodeRestriction admission plugin (plugin/pkg/admission/noderestriction
``getForbiddenLabels``) would refuse the same labels on the Node's creation. Pure.
"""

from __future__ import annotations

from kubespot.sim.kubesim.names import label_value_errors, qualified_name_errors

#: ``kubeletLabels``: the labels the kubelet sets or may be told to set.
KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    }
)
#: ``kubeletLabelNamespaces``: domains (and their subdomains) the kubelet may label in.
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _namespace(key: str) -> str:
    prefix, sep, _name = key.partition("/")
    return prefix if sep else ""


def _in_domain(namespace: str, domain: str) -> bool:
    return namespace == domain or namespace.endswith("." + domain)


def is_kubernetes_label(key: str) -> bool:
    """``isKubernetesLabel``: the key's prefix is kubernetes.io or k8s.io, or a subdomain of them."""
    ns = _namespace(key)
    return _in_domain(ns, "kubernetes.io") or _in_domain(ns, "k8s.io")


def is_kubelet_label(key: str) -> bool:
    """``IsKubeletLabel``."""
    ns = _namespace(key)
    return key in KUBELET_LABELS or any(_in_domain(ns, allowed) for allowed in KUBELET_LABEL_NAMESPACES)


def refusal(labels: dict[str, str]) -> str:
    """The kubelet's start-up error for these ``--node-labels``; empty when it starts."""
    unknown = sorted(k for k in labels if is_kubernetes_label(k) and not is_kubelet_label(k))
    if unknown:
        return (
            "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: "
            f"[{' '.join(unknown)}]\n"
            "--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix "
            f"({', '.join(KUBELET_LABEL_NAMESPACES)}) or be in the specifically allowed set "
            f"({', '.join(sorted(KUBELET_LABELS))})"
        )
    invalid = [
        f"'{k}' - {', '.join((*qualified_name_errors(k), *label_value_errors(v)))}"
        for k, v in sorted(labels.items())
        if qualified_name_errors(k) or label_value_errors(v)
    ]
    if invalid:
        return "invalid node labels: " + "; ".join(invalid)
    return ""
