"""Network isolation, a response action of the controller (docs/designs/response-actions.md).

Read by ``kubespot.controllers.response.isolate_step``, which builds the action from it; the loader
composes this group with the others.
Off by default: swapping an instance's security groups cuts every connection it has, which a
cluster opts into (forensics, compliance) with a quarantine group it prepared.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubespot.model import Kind

from .base import setting
from .loader import InvalidSetting

#: The kinds whose instance does not come back: a scheduled reboot or a stop (state change, a spot
#: stop or hibernation) returns the instance with its interfaces still on the quarantine group, and
#: nothing restores them by itself.
GONE_KINDS = frozenset({Kind.SPOT_INTERRUPTION, Kind.ASG_LIFECYCLE})


@dataclass(frozen=True, slots=True, kw_only=True)
class IsolationSettings:
    """Moving an interrupted instance onto a quarantine security group once it is drained."""

    enabled: bool = setting(
        False,
        doc=(
            "After the drain (the node's state says drained, or its deadline passed, or the node "
            "was deleted), put every network interface of the instance on quarantine_group alone. "
            "Done once per event by the controller's elected replica, and recorded (with the groups "
            "replaced) in the node's kubespot.io/actions annotation. The instance is the one in the "
            "Node's providerID (never an id written in an annotation), and only an instance carrying "
            "queue.managed_tag is isolated. Needs the IAM actions of `kubespot aws policy --actions "
            "isolate` (give --vpc-id to limit them to the cluster's VPC)."
        ),
        env="KUBESPOT_ISOLATION_ENABLED",
    )
    quarantine_group: str = setting(
        "",
        doc=(
            "The quarantine security group: an sg- id, or a group name looked up in the instance's "
            "VPC. Required when enabled; checked at start-up (a group that exists nowhere stops the "
            "controller) and again in each instance's VPC before anything changes."
        ),
        env="KUBESPOT_ISOLATION_QUARANTINE_GROUP",
    )
    kinds: frozenset[Kind] = setting(
        GONE_KINDS,
        doc=(
            "Event kinds whose instance is isolated. By default only those whose instance is gone "
            "for good (spot-itn, asg-lifecycle-termination): after a scheduled reboot, or a stop "
            "(state-change), the instance comes back still on the quarantine group, and nothing "
            "restores its groups by itself."
        ),
        env="KUBESPOT_ISOLATION_KINDS",
    )

    def __post_init__(self) -> None:
        group = self.quarantine_group.strip()
        if self.enabled and not group:
            raise InvalidSetting(
                "quarantine_group", "required when isolation.enabled: an sg- id or a security group name"
            )
        if group != self.quarantine_group:
            raise InvalidSetting("quarantine_group", "must not start or end with spaces")
        if self.enabled and not self.kinds:
            raise InvalidSetting("kinds", "name at least one event kind, or set isolation.enabled false")
