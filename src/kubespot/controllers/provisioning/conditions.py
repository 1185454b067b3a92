"""The condition sets the provisioning status writers use: ``kubespot.scheduling.api.condition_set``
(moved there so the NodeClaim lifecycle controller shares the one implementation; this name stays
for the modules and tests that import it)."""

from kubespot.scheduling.api.condition_set import READY, merge_conditions, rfc3339

__all__ = ["READY", "merge_conditions", "rfc3339"]
