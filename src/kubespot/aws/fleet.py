"""One NodeClaim's EC2 ``CreateFleet`` (type ``instant``): the request, and what its answer means (pure).

As aws/karpenter-provider-aws (docs/designs/launching-research.md §1):

- the request (``pkg/providers/instance/types.go`` ``CreateFleetInputBuilder.Build``,
  ``instance.go`` ``getLaunchTemplateConfigs`` / ``getOverrides``): one launch template config
  per launch template, whose overrides are the (type, zone) pools of the chosen capacity type, one
  subnet per zone (the one with most free addresses, ``subnet.go`` ``ZonalSubnetsForLaunch``),
  ``Priority`` = the offering's price; ``TotalTargetCapacity`` 1; spot asks for
  ``price-capacity-optimized``, on-demand for ``lowest-price``; the launch tags on the instance,
  its volumes and the fleet. kubespot adds ``ClientToken`` = the NodeClaim's UID plus a digest of
  the request (``client_token``; docs/designs/launching.md §3): EC2 answers the same token with the
  same parameters with the first fleet and with other parameters ``IdempotentParameterMismatch``,
  so only an identical retry may share a token;
- the answer: the instance launched (``Instances[0]``) and every error (``Errors[]``, one per
  override that failed, also when an instance did launch);
- errors (``pkg/errors/errors.go`` ``unfulfillableCapacityErrorCodes``, ``ToReasonMessage``;
  ``instance.go`` ``combineFleetErrors``, ``updateUnavailableOfferingsCache``): every
  insufficient-capacity error marks its pool unavailable, a missing spot service-linked role marks
  all of spot; when nothing launched and every error is insufficient capacity (or none came back)
  the launch fails with ``InsufficientCapacityError``, otherwise with a ``CreateError`` carrying
  Karpenter's reason.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubespot.cloud.candidates import Pool
from kubespot.cloud.errors import CreateError, FailedOffering, InsufficientCapacityError
from kubespot.cloud.unavailable import UnavailableOfferings
from kubespot.scheduling.labels import NODEPOOL, SPOT

from .instances import CLUSTER_NAME_TAG, NODECLAIM_TAG, NODECLASS_TAG, cluster_tag
from .subnets import SubnetInfo

__all__ = [
    "CLIENT_TOKEN_MAX",
    "IDEMPOTENT_MISMATCH",
    "INSUFFICIENT_ADDRESSES",
    "SPOT_SLR_NOT_PERMITTED",
    "UNFULFILLABLE_CAPACITY_CODES",
    "FleetAnswer",
    "FleetError",
    "Launched",
    "Override",
    "TemplateConfig",
    "client_token",
    "combine_fleet_errors",
    "fleet_request",
    "is_unfulfillable",
    "launch_tags",
    "mark_unavailable",
    "overrides",
    "parse_fleet_answer",
    "reason_message",
    "tag_list",
    "zonal_subnets",
]

#: ``unfulfillableCapacityErrorCodes``: capacity that cannot be had for now in that pool.
UNFULFILLABLE_CAPACITY_CODES: Final = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        "MaxFleetCountExceeded",
        "ReservationCapacityExceeded",
    }
)
#: Spot's service-linked role is missing and may not be created: no spot anywhere for now.
SPOT_SLR_NOT_PERMITTED: Final = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
INSUFFICIENT_ADDRESSES: Final = "InsufficientFreeAddressesInSubnet"
#: EC2's answer to a token reused with other parameters (only a token collision or an older
#: kubespot's bare-UID token can cause it now).
IDEMPOTENT_MISMATCH: Final = "IdempotentParameterMismatch"
#: EC2's limit on ``ClientToken``: at most 64 ASCII characters.
CLIENT_TOKEN_MAX: Final = 64

#: ``ToReasonMessage``, in its order: (substrings that must all appear, reason, message). The
#: insufficient-capacity codes come last so that a mix names the other cause.
_REASONS: Final[tuple[tuple[tuple[str, ...], str, str], ...]] = (
    (
        (SPOT_SLR_NOT_PERMITTED,),
        "SpotSLRCreationFailed",
        "User does not have sufficient permission to create the Spot ServiceLinkedRole to launch "
        "spot instances",
    ),
    (("InvalidParameter", "belong to different networks"), "SecurityGroupSubnetVPCMismatch",
     "Security groups and subnets must be in the same VPC."),
    (("iamInstanceProfile.name is invalid",), "InstanceProfileNameInvalid",
     "Instance profile name used from EC2NodeClass status does not exist"),
    (("InvalidLaunchTemplateId.NotFound",), "LaunchTemplateNotFound",
     "Launch template used for instance launch wasn't found"),
    (("InvalidLaunchTemplateName.NotFoundException",), "LaunchTemplateNotFound",
     "Launch template used for instance launch wasn't found"),
    (("User data is limited to",), "UserDataSizeLimitExceeded",
     "Rendered user data exceeds the EC2 user data size limit"),
    (("InvalidAMIID.Malformed",), "InvalidAMIID", "AMI used for instance launch is invalid"),
    (("InvalidAMIID.NotFound",), "AMINotFound",
     "AMI used for instance launch either does not exist or you don't have permissions to use it"),
    (("RequestLimitExceeded",), "RequestLimitExceeded", "Request limit exceeded"),
    (("InternalError",), "InternalError", "An internal error has occurred"),
    # kubespot's: Karpenter sends no ClientToken. A plain retry (CreateError) is right: the next
    # attempt finds the instance by its tag if the first request launched one.
    ((IDEMPOTENT_MISMATCH,), IDEMPOTENT_MISMATCH,
     "A launch with the same client token but other parameters was already made"),
    (("not eligible for Free Tier",), "FreeTierIneligible",
     "The specified instance type is not eligible for Free Tier"),
    (("MaxFleetCountExceeded",), "FleetQuotaExceeded",
     "A fleet launch was requested but this would exceed your fleet request quota"),
    (("PendingVerification",), "AccountPendingVerification",
     "An instance launch was requested but the request for launching resources in this region is "
     "still being verified"),
    (("MaxSpotInstanceCountExceeded",), "SpotQuotaExceeded",
     "A spot instance launch was requested but this would exceed your spot instance quota"),
    (("VcpuLimitExceeded",), "VCPULimitExceeded",
     "An instance was requested that would exceed your VCPU quota"),
    ((INSUFFICIENT_ADDRESSES,), INSUFFICIENT_ADDRESSES,
     "There are not enough free IP addresses to launch an instance in this subnet"),
)  # fmt: skip
_AUTH: Final = ("UnauthorizedOperation", "AccessDenied", "AuthFailure")
_NOT_AUTHORIZED: Final = "User is not authorized to perform this operation"


def reason_message(text: str) -> tuple[str, str]:
    """Karpenter's condition reason and message for an EC2 error's text (``ToReasonMessage``)."""
    if SPOT_SLR_NOT_PERMITTED in text:
        return _REASONS[0][1], _REASONS[0][2]
    if any(a in text for a in _AUTH):
        if "with an explicit deny in a permissions boundary" in text:
            return (
                "Unauthorized",
                "User is not authorized to perform this operation due to a permission boundary",
            )
        if "with an explicit deny in a service control policy" in text:
            return (
                "Unauthorized",
                "User is not authorized to perform this operation due to a service control policy",
            )
        if "Not authorized for images" in text:
            return "AMIAuthorizationFailure", "User is not authorized for AMI used in instance launch"
        return "Unauthorized", f"{_NOT_AUTHORIZED} because no identity-based policy allows it"
    for needles, reason, message in _REASONS[1:]:
        if all(n in text for n in needles):
            return reason, message
    return "LaunchFailed", "Instance launch failed"


def is_unfulfillable(code: str) -> bool:
    """``IsUnfulfillableCapacity``: the pool has no capacity for now."""
    return code in UNFULFILLABLE_CAPACITY_CODES


# -- tags --------------------------------------------------------------------------------------------


def launch_tags(
    *, cluster: str, nodepool: str, nodeclass: str, nodeclaim: str, custom: Mapping[str, str] = {}
) -> dict[str, str]:
    """The tags of a NodeClaim's instance, volumes and fleet: the EC2NodeClass's ``spec.tags``
    overlaid by Karpenter's (``utils.GetTags``) and the NodeClaim's name (kubespot's, at launch)."""
    tags = dict(custom)
    tags.update(
        {
            cluster_tag(cluster): "owned",
            NODEPOOL: nodepool,
            CLUSTER_NAME_TAG: cluster,
            NODECLASS_TAG: nodeclass,
            NODECLAIM_TAG: nodeclaim,
        }
    )
    return tags


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    """EC2's ``Tags`` shape, sorted by key (a stable request)."""
    return [{"Key": k, "Value": tags[k]} for k in sorted(tags)]


# -- the request ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Override:
    """One pool of a launch template config."""

    instance_type: str
    subnet_id: str
    zone: str
    image_id: str
    priority: float

    def request(self) -> dict[str, Any]:
        return {
            "InstanceType": self.instance_type,
            "SubnetId": self.subnet_id,
            # Redundant with the subnet, but it makes EC2 echo the zone in errors (Karpenter).
            "AvailabilityZone": self.zone,
            "ImageId": self.image_id,
            "Priority": self.priority,
        }


@dataclass(frozen=True, slots=True)
class TemplateConfig:
    """One launch template and the pools launched from it."""

    name: str
    overrides: tuple[Override, ...]

    def request(self) -> dict[str, Any]:
        return {
            "LaunchTemplateSpecification": {"LaunchTemplateName": self.name, "Version": "$Latest"},
            "Overrides": [o.request() for o in self.overrides],
        }


def zonal_subnets(subnets: Iterable[SubnetInfo], exclude: Iterable[str] = ()) -> dict[str, SubnetInfo]:
    """One subnet per zone, the one with most free addresses (ties: the lowest id): a fleet may not
    use two subnets of one zone. ``exclude``: subnets out of addresses a moment ago."""
    skip = set(exclude)
    best: dict[str, SubnetInfo] = {}
    for s in subnets:
        if s.id in skip or not s.zone:
            continue
        kept = best.get(s.zone)
        if kept is None or (s.available_ips, kept.id) > (kept.available_ips, s.id):
            best[s.zone] = s
    return best


def overrides(
    pools: Iterable[Pool], capacity_type: str, subnets: Mapping[str, SubnetInfo], image_id: str
) -> tuple[Override, ...]:
    """The overrides of ``pools`` of ``capacity_type`` in zones with a subnet, one per (type, zone),
    in the pools' order (cheapest first)."""
    seen: set[tuple[str, str]] = set()
    out: list[Override] = []
    for pool in pools:
        offer = pool.offering
        subnet = subnets.get(offer.zone)
        key = (pool.instance_type.name, offer.zone)
        if offer.capacity_type != capacity_type or subnet is None or key in seen:
            continue
        seen.add(key)
        out.append(Override(pool.instance_type.name, subnet.id, offer.zone, image_id, offer.price))
    return tuple(out)


def client_token(uid: str, request: Mapping[str, Any], answered: int = 0) -> str:
    """The ``ClientToken`` of ``request`` for the NodeClaim ``uid``: the UID, ``-`` and a SHA-256
    digest of the request's parameters (canonical JSON, any token left out), cut to EC2's 64
    characters. An identical retry reuses the token (EC2 answers with the first fleet); a changed
    request (fewer overrides after a mark, a new price, a rebuilt template) is a new one. A UID too
    long to leave 16 digest characters is hashed too. ``answered``: how many fleets of this claim
    already came back without an instance; it enters the digest, so an identical request after a
    failed fleet is a new request and not that failure replayed."""
    params: dict[str, Any] = {k: v for k, v in request.items() if k != "ClientToken"}
    if answered:
        params["kubespot:answered"] = answered
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()
    prefix = uid if len(uid) <= CLIENT_TOKEN_MAX - 17 else hashlib.sha256(uid.encode()).hexdigest()[:32]
    return f"{prefix}-{digest}"[:CLIENT_TOKEN_MAX]


def fleet_request(
    configs: Sequence[TemplateConfig],
    capacity_type: str,
    tags: Mapping[str, str],
    *,
    uid: str = "",
    answered: int = 0,
    context: str | None = None,
) -> dict[str, Any]:
    """CreateFleet's arguments for one instance of ``capacity_type``; with the NodeClaim's ``uid``,
    a ``ClientToken`` of it and the request (``client_token``)."""
    request: dict[str, Any] = {
        "Type": "instant",
        "LaunchTemplateConfigs": [c.request() for c in configs if c.overrides],
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": capacity_type},
        "TagSpecifications": [
            {"ResourceType": kind, "Tags": tag_list(tags)} for kind in ("instance", "volume", "fleet")
        ],
    }
    if capacity_type == SPOT:
        request["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    else:
        request["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
    if context:
        request["Context"] = context
    if uid:
        request["ClientToken"] = client_token(uid, request, answered)
    return request


# -- the answer ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Launched:
    """The instance a fleet launched (``NewInstanceFromFleet``)."""

    instance_id: str
    instance_type: str
    zone: str
    subnet_id: str
    image_id: str
    capacity_type: str


@dataclass(frozen=True, slots=True)
class FleetError:
    """One entry of ``Errors[]``: the pool, and the subnet EC2 names (for address exhaustion)."""

    offering: FailedOffering
    subnet_id: str = ""


@dataclass(frozen=True, slots=True)
class FleetAnswer:
    fleet_id: str
    launched: Launched | None
    errors: tuple[FleetError, ...]

    @property
    def failed_offerings(self) -> tuple[FailedOffering, ...]:
        return tuple(e.offering for e in self.errors)


def _override(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    return (entry.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}


def parse_fleet_answer(answer: Mapping[str, Any], capacity_type: str) -> FleetAnswer:
    """CreateFleet's answer: the first instance launched, if any, and every error. An error's
    capacity type is the request's (Karpenter's cache key), its zone the override's echo."""
    launched = None
    for entry in answer.get("Instances") or []:
        ids = entry.get("InstanceIds") or []
        if not ids:
            continue
        o = _override(entry)
        lifecycle = str(entry.get("Lifecycle") or capacity_type)
        launched = Launched(
            instance_id=str(ids[0]),
            instance_type=str(entry.get("InstanceType") or o.get("InstanceType") or ""),
            zone=str(o.get("AvailabilityZone") or ""),
            subnet_id=str(o.get("SubnetId") or ""),
            image_id=str(o.get("ImageId") or ""),
            capacity_type=SPOT if lifecycle == SPOT else lifecycle,
        )
        break
    errors = []
    for entry in answer.get("Errors") or []:
        o = _override(entry)
        offering = FailedOffering(
            capacity_type,
            str(o.get("InstanceType") or ""),
            str(o.get("AvailabilityZone") or ""),
            str(entry.get("ErrorCode") or ""),
            str(entry.get("ErrorMessage") or ""),
        )
        errors.append(FleetError(offering, str(o.get("SubnetId") or "")))
    return FleetAnswer(str(answer.get("FleetId") or ""), launched, tuple(errors))


def mark_unavailable(cache: UnavailableOfferings, errors: Iterable[FleetError], capacity_type: str) -> None:
    """``updateUnavailableOfferingsCache``: each insufficient-capacity error marks its pool; a missing
    spot service-linked role marks every spot pool."""
    for err in errors:
        o = err.offering
        if is_unfulfillable(o.code) and o.instance_type and o.zone:
            cache.mark(capacity_type, o.instance_type, o.zone, reason=o.code)
        if o.code == SPOT_SLR_NOT_PERMITTED:
            cache.mark_capacity_type(SPOT, reason=o.code)


def combine_fleet_errors(errors: Sequence[FleetError]) -> InsufficientCapacityError | CreateError:
    """The error of a fleet that launched nothing (``combineFleetErrors``): insufficient capacity
    when every error says so (or the spot role is missing; no error at all counts too), otherwise a
    ``CreateError`` with Karpenter's reason and message for the distinct ``code: message`` texts
    together (the texts themselves ride along as the exception's note, for the log)."""
    texts = list(dict.fromkeys(f"{e.offering.code}: {e.offering.message}" for e in errors))
    combined = "; ".join(texts)
    offerings = tuple(e.offering for e in errors)
    if all(is_unfulfillable(e.offering.code) or e.offering.code == SPOT_SLR_NOT_PERMITTED for e in errors):
        return InsufficientCapacityError(
            f"with fleet error(s), {combined or 'no instance launched'}", offerings
        )
    reason, message = reason_message(combined)
    err = CreateError(reason, message)
    err.add_note(combined)
    return err
