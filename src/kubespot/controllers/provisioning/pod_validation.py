"""Pods whose node requirements no NodeClaim may carry: left out of the plan, with the reason.

As Karpenter's ``Validate`` (kubernetes-sigs/karpenter ``pkg/controllers/provisioning/
provisioner.go``: ``validateNodeSelector``, ``validateAffinity``, ``validateNodeSelectorTerm``, each
key through ``v1.ValidateRequirement`` and ``IsRestrictedLabel``): a pod selecting on
``kubernetes.io/hostname`` or on a key of Karpenter's own domains (``karpenter.sh``,
``karpenter.k8s.aws``) that is not well-known is not provisioned for, since the NodeClaim made for
it would carry that requirement and the CRD refuses it; planned with others, it would strand them
too. The rule is the NodePool's (``scheduling.api.restricted``), except that a pod may select on
``karpenter.sh/nodepool`` (a well-known label to Karpenter).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubespot.scheduling.api.restricted import restricted_reason
from kubespot.scheduling.labels import NODEPOOL, NORMALIZED_LABELS

__all__ = ["invalid_reason"]


def _term_keys(term: Any) -> Iterator[str]:
    if not isinstance(term, Mapping):
        return
    for expr in term.get("matchExpressions") or ():
        if isinstance(expr, Mapping) and isinstance(expr.get("key"), str):
            yield expr["key"]


def _keys(pod: Mapping[str, Any]) -> Iterator[str]:
    """The label keys the pod's node selector and node affinity (required and preferred) use."""
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector")
    if isinstance(selector, Mapping):
        yield from (str(k) for k in selector)
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity")) or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or ():
        yield from _term_keys(term)
    for preferred in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
        if isinstance(preferred, Mapping):
            yield from _term_keys(preferred.get("preference"))


def invalid_reason(pod: Mapping[str, Any]) -> str | None:
    """Why no NodeClaim can be made for ``pod`` (a restricted key it selects on), else None."""
    for key in _keys(pod):
        key = NORMALIZED_LABELS.get(key, key)
        if key == NODEPOOL:
            continue
        why = restricted_reason(key)
        if why is not None:
            return f"ignoring pod: {why}"
    return None
