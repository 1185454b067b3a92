"""An EC2NodeClass's status from what its selector terms resolved to (pure).

As aws/karpenter-provider-aws ``pkg/controllers/nodeclass/`` writes it: ``subnet.go``
(``status.subnets`` {id, zone, zoneID}, most free IPs first; none: ``SubnetsReady`` False
``SubnetsNotFound``), ``securitygroup.go`` (``status.securityGroups`` {id, name} by id; none while
terms exist: ``SecurityGroupsNotFound``), ``ami.go`` (``status.amis`` {id, name, requirements,
deprecated}; none: ``AMINotFound``; an alias without images at this Kubernetes version:
``UnsupportedAlias``, with ``status.amis`` left as it was), ``instanceprofile.go``
(``spec.instanceProfile`` copied to ``status.instanceProfile``, ``InstanceProfileReady`` True),
``validation.go``
(``ValidationSucceeded``) and the root ``Ready`` of ``pkg/apis/v1/ec2nodeclass_status.go``'s
condition set. A part whose resolution failed this time (AWS throttled or answered 5xx) keeps what
the status said: the last good answer stays until a better one comes.

With ``spec.role`` the profile made for the role (``kubespot.aws.instance_profiles``) is
``status.instanceProfile``; until one is made (no cluster name configured, or IAM failed with no
earlier profile in the status) ``InstanceProfileReady`` is Unknown with reason
``InstanceProfileNotCreated`` and ``Ready`` stays Unknown (never True on a profile nobody made).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubespot.aws.amis import AmiInfo
from kubespot.aws.security_groups import SecurityGroupInfo
from kubespot.aws.subnets import SubnetInfo
from kubespot.scheduling.api.conditions import VALIDATION_SUCCEEDED, Condition
from kubespot.scheduling.api.nodeclass import EC2NodeClassSpec

from .conditions import merge_conditions

__all__ = ["NODECLASS_CONDITIONS", "Resolution", "nodeclass_status"]

SUBNETS_READY = "SubnetsReady"
SECURITY_GROUPS_READY = "SecurityGroupsReady"
AMIS_READY = "AMIsReady"
INSTANCE_PROFILE_READY = "InstanceProfileReady"
#: The dependents of ``Ready`` that kubespot writes (Karpenter v1.0's set plus ValidationSucceeded).
NODECLASS_CONDITIONS = (
    AMIS_READY,
    SUBNETS_READY,
    SECURITY_GROUPS_READY,
    INSTANCE_PROFILE_READY,
    VALIDATION_SUCCEEDED,
)

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Resolution:
    """What one pass resolved; None for a part that failed (its last status is kept)."""

    subnets: Sequence[SubnetInfo] | None = None
    security_groups: Sequence[SecurityGroupInfo] | None = None
    amis: Sequence[AmiInfo] | None = None
    #: Set when the AMI terms name an alias without images at this Kubernetes version.
    unsupported_alias: str | None = None
    #: The profile made for ``spec.role`` (None: none made this pass).
    instance_profile: str | None = None
    #: Under dry run, the profile a real run would make for ``spec.role`` (not made).
    would_create: str | None = None
    #: Why no profile came this pass (the AWS error), said in the condition's message.
    profile_error: str | None = None
    #: Under dry run, ``spec.role`` does not exist (``profile_error`` says so): the class is not
    #: ready on it, whatever profile its status names (a real run could not attach the role).
    role_missing: bool = False


def _subnets(status: Obj, found: Sequence[SubnetInfo]) -> Condition:
    if not found:
        status.pop("subnets", None)
        return Condition(
            SUBNETS_READY, "False", "SubnetsNotFound", "SubnetSelector did not match any Subnets"
        )
    status["subnets"] = [s.status() for s in found]
    return Condition(SUBNETS_READY, "True", SUBNETS_READY)


def _security_groups(status: Obj, found: Sequence[SecurityGroupInfo], terms: int) -> Condition:
    if not found and terms:
        status.pop("securityGroups", None)
        return Condition(
            SECURITY_GROUPS_READY,
            "False",
            "SecurityGroupsNotFound",
            "SecurityGroupSelector did not match any SecurityGroups",
        )
    status["securityGroups"] = [g.status() for g in found]
    return Condition(SECURITY_GROUPS_READY, "True", SECURITY_GROUPS_READY)


def _amis(status: Obj, found: Sequence[AmiInfo]) -> Condition:
    if not found:
        status.pop("amis", None)
        return Condition(AMIS_READY, "False", "AMINotFound", "AMISelector did not match any AMIs")
    status["amis"] = [a.status() for a in found]
    return Condition(AMIS_READY, "True", AMIS_READY)


def _instance_profile(
    status: Obj,
    spec: EC2NodeClassSpec,
    made: str | None,
    would: str | None = None,
    error: str | None = None,
    role_missing: bool = False,
) -> Condition:
    profile = spec.instance_profile or made
    if profile:
        status["instanceProfile"] = profile
        return Condition(INSTANCE_PROFILE_READY, "True", INSTANCE_PROFILE_READY)
    if role_missing:
        # Dry run, spec.role missing: a real run would fail to attach it, so the class is not
        # ready whatever profile its status names (kept: the dry run writes no false name, and
        # that profile, of the old role, still exists).
        return Condition(
            INSTANCE_PROFILE_READY,
            "Unknown",
            "InstanceProfileNotCreated",
            f"the instance profile for role {spec.role!r} is not created yet: {error}",
        )
    if would:
        # Under dry run a profile is only rehearsed: it does not exist, so the class is not ready
        # on it (Karpenter's instanceprofile.go ``Reconcile`` sets the condition only once
        # ``Create`` succeeded) and the status keeps what it named before (no false name).
        return Condition(
            INSTANCE_PROFILE_READY,
            "Unknown",
            "InstanceProfileNotCreated",
            f"dry run: would create instance profile {would} for role {spec.role!r}",
        )
    if spec.role and status.get("instanceProfile"):
        # IAM failed this pass: the profile made earlier stays (the last good answer).
        return Condition(INSTANCE_PROFILE_READY, "True", INSTANCE_PROFILE_READY)
    status.pop("instanceProfile", None)
    return Condition(
        INSTANCE_PROFILE_READY,
        "Unknown",
        "InstanceProfileNotCreated",
        f"the instance profile for role {spec.role!r} is not created yet" + (f": {error}" if error else ""),
    )


def nodeclass_status(
    old: Mapping[str, Any] | None,
    spec: EC2NodeClassSpec,
    validation: Condition,
    resolution: Resolution | None,
    *,
    generation: int,
    now: datetime,
    created: str | None = None,
    deleting: bool = False,
) -> Obj:
    """The status to write: ``old`` updated with ``resolution`` (None: not resolved, the object is
    invalid: only ``ValidationSucceeded`` changes)."""
    status: Obj = dict(old or {})
    conditions = [validation]
    if resolution is not None:
        if resolution.subnets is not None:
            conditions.append(_subnets(status, resolution.subnets))
        if resolution.security_groups is not None:
            conditions.append(
                _security_groups(status, resolution.security_groups, len(spec.security_group_selector_terms))
            )
        if resolution.unsupported_alias is not None:
            # ami.go sets only the condition here: status.amis stays as it was.
            conditions.append(
                Condition(AMIS_READY, "False", "UnsupportedAlias", resolution.unsupported_alias)
            )
        elif resolution.amis is not None:
            conditions.append(_amis(status, resolution.amis))
        conditions.append(
            _instance_profile(
                status,
                spec,
                resolution.instance_profile,
                resolution.would_create,
                resolution.profile_error,
                resolution.role_missing,
            )
        )
    status["conditions"] = merge_conditions(
        (old or {}).get("conditions"),
        conditions,
        dependents=NODECLASS_CONDITIONS,
        generation=generation,
        now=now,
        created=created,
        deleting=deleting,
    )
    return status
