"""The CreateFleet request of one NodeClaim, and what its answer means (``kubespot.aws.fleet``).

Sources: aws/karpenter-provider-aws ``pkg/providers/instance/types.go``
``CreateFleetInputBuilder.Build``; ``pkg/providers/instance/instance.go`` ``launchInstance``,
``getOverrides``, ``combineFleetErrors``, ``updateUnavailableOfferingsCache``;
``pkg/providers/subnet/subnet.go`` ``ZonalSubnetsForLaunch``; ``pkg/errors/errors.go``
``unfulfillableCapacityErrorCodes``, ``ToReasonMessage``; ``pkg/utils/utils.go`` ``GetTags``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from kubespot.aws import fleet
from kubespot.aws.subnets import SubnetInfo
from kubespot.cloud import CreateError, InsufficientCapacityError, UnavailableOfferings, fake_type
from kubespot.cloud.candidates import launch_pools
from kubespot.cloud.errors import FailedOffering
from kubespot.scheduling.api.nodeclaim import NodeClaimSpec
from kubespot.scheduling.labels import ON_DEMAND, SPOT
from support.clocks import ManualClock

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


def _subnets() -> list[SubnetInfo]:
    return [
        SubnetInfo("subnet-a-small", "us-east-1a", "use1-az1", 10),
        SubnetInfo("subnet-a-large", "us-east-1a", "use1-az1", 4000),
        SubnetInfo("subnet-b", "us-east-1b", "use1-az2", 200),
        # no subnet in us-east-1c
    ]


def test_one_subnet_per_zone_the_one_with_most_free_addresses() -> None:
    """``ZonalSubnetsForLaunch``: a fleet may not use two subnets of one zone; the one with the
    most available addresses wins, and a subnet out of addresses is skipped for a while."""
    chosen = fleet.zonal_subnets(_subnets())
    assert {z: s.id for z, s in chosen.items()} == {"us-east-1a": "subnet-a-large", "us-east-1b": "subnet-b"}
    without = fleet.zonal_subnets(_subnets(), exclude=["subnet-a-large"])
    assert without["us-east-1a"].id == "subnet-a-small"


def test_overrides_at_most_60_types_cheapest_first_priced_only_where_a_subnet_is() -> None:
    """``getOverrides`` over ``launch_pools``: at most 60 types (``maxInstanceTypes``), each
    offering of the launch's capacity type in a zone with a subnet, ``Priority`` = its price, the
    zone echoed; no duplicate (type, zone)."""
    types = [fake_type(f"t{i:02d}.large", 2, 4, 1.0 + i / 100, 0.3 + i / 100, zones=ZONES) for i in range(70)]
    pools = launch_pools(NodeClaimSpec("c"), types)
    subnets = fleet.zonal_subnets(_subnets())
    spot = fleet.overrides(pools, SPOT, subnets, "ami-1")
    assert len({o.instance_type for o in spot}) == 60
    assert len(spot) == 120  # 60 types x the two zones with a subnet
    assert {o.zone for o in spot} == {"us-east-1a", "us-east-1b"}
    assert spot[0] == fleet.Override("t00.large", "subnet-a-large", "us-east-1a", "ami-1", 0.3)
    assert [o.priority for o in spot] == sorted(o.priority for o in spot)
    assert spot[0].request() == {
        "InstanceType": "t00.large",
        "SubnetId": "subnet-a-large",
        "AvailabilityZone": "us-east-1a",
        "ImageId": "ami-1",
        "Priority": 0.3,
    }
    assert "t60.large" not in {o.instance_type for o in spot}
    on_demand = fleet.overrides(pools, ON_DEMAND, subnets, "ami-1")
    # filterUnwantedSpot keeps on-demand pools too; their priority is the on-demand price.
    assert on_demand and all(o.priority >= 1.0 for o in on_demand)


def test_request_strategies_per_capacity_type_tags_token_and_context() -> None:
    """``Build``: instant, one instance, the capacity type as default; spot asks
    price-capacity-optimized, on-demand lowest-price (only one option block); tags on instance,
    volume and fleet. kubespot adds a ClientToken made of the NodeClaim's UID."""
    config = fleet.TemplateConfig(
        "kubespot.io/abc", (fleet.Override("m5.large", "subnet-1", "us-east-1a", "ami-1", 0.05),)
    )
    tags = {"b": "2", "a": "1"}
    spot = fleet.fleet_request([config], SPOT, tags, uid="uid-1", context="ctx")
    assert spot["Type"] == "instant"
    assert spot["TargetCapacitySpecification"] == {
        "TotalTargetCapacity": 1,
        "DefaultTargetCapacityType": "spot",
    }
    assert spot["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert "OnDemandOptions" not in spot
    assert spot["ClientToken"].startswith("uid-1-") and spot["Context"] == "ctx"
    assert spot["LaunchTemplateConfigs"] == [
        {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "kubespot.io/abc", "Version": "$Latest"},
            "Overrides": [config.overrides[0].request()],
        }
    ]
    assert [t["ResourceType"] for t in spot["TagSpecifications"]] == ["instance", "volume", "fleet"]
    assert all(
        t["Tags"] == [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]
        for t in spot["TagSpecifications"]
    )
    od = fleet.fleet_request([config], ON_DEMAND, tags)
    assert od["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert "SpotOptions" not in od and "ClientToken" not in od and "Context" not in od


def test_client_token_is_the_uid_and_a_digest_of_the_request() -> None:
    """EC2 idempotency (AWS EC2 API reference "Ensuring idempotency", ``CreateFleet``
    ``ClientToken``: up to 64 ASCII characters; the same token with the same parameters answers
    the first request, with other parameters ``IdempotentParameterMismatch``). Karpenter sends no
    token (aws ``pkg/providers/instance/types.go`` ``CreateFleetInputBuilder.Build``); kubespot's
    is the UID plus a digest of the parameters, so an identical retry is idempotent and a changed
    request (a pool marked out, a new price) is a new one instead of a mismatch."""
    uid = "0b7c1c1e-5d2a-4c52-9d0e-1f2a3b4c5d6e"
    a = fleet.Override("c5.large", "subnet-1", "us-east-1a", "ami-1", 0.031)
    b = fleet.Override("m5.large", "subnet-1", "us-east-1a", "ami-1", 0.035)
    tags = {"karpenter.sh/nodeclaim": "general-aaaaa"}
    first = fleet.fleet_request([fleet.TemplateConfig("kubespot.io/x", (a, b))], SPOT, tags, uid=uid)
    again = fleet.fleet_request([fleet.TemplateConfig("kubespot.io/x", (a, b))], SPOT, dict(tags), uid=uid)
    narrowed = fleet.fleet_request([fleet.TemplateConfig("kubespot.io/x", (b,))], SPOT, tags, uid=uid)
    repriced = fleet.fleet_request(
        [fleet.TemplateConfig("kubespot.io/x", (a, replace(b, priority=0.036)))], SPOT, tags, uid=uid
    )
    assert first["ClientToken"] == again["ClientToken"]
    tokens = {first["ClientToken"], narrowed["ClientToken"], repriced["ClientToken"]}
    assert len(tokens) == 3
    assert all(t.startswith(uid + "-") and len(t) <= 64 and t.isascii() for t in tokens)
    assert first["ClientToken"] == fleet.client_token(uid, first)
    long_uid = "x" * 80
    token = fleet.client_token(long_uid, first)
    assert len(token) <= 64 and token != fleet.client_token("y" * 80, first)


def test_idempotent_parameter_mismatch_is_a_retried_create_error() -> None:
    """A token reused with other parameters (a collision, or a bare-UID token from an older
    kubespot) is not "Instance launch failed": it gets its own reason, and as a ``CreateError``
    it is retried, the next attempt finding by its tag any instance the first request launched
    (kubespot's; Karpenter's ``pkg/errors/errors.go`` ``ToReasonMessage`` has no such case as it
    sends no token)."""
    reason, message = fleet.reason_message("IdempotentParameterMismatch: token reused")
    assert reason == "IdempotentParameterMismatch" and "client token" in message


def test_launch_tags_overlay_the_class_tags() -> None:
    """``GetTags``: the EC2NodeClass's tags overlaid by the cluster, NodePool, EKS cluster name and
    EC2NodeClass tags (a class cannot override them); kubespot adds the NodeClaim's name."""
    tags = fleet.launch_tags(
        cluster="prod",
        nodepool="general",
        nodeclass="default",
        nodeclaim="general-x7k2p",
        custom={"team": "a", "karpenter.sh/nodepool": "spoofed", "eks:eks-cluster-name": "other"},
    )
    assert tags == {
        "team": "a",
        "kubernetes.io/cluster/prod": "owned",
        "karpenter.sh/nodepool": "general",
        "eks:eks-cluster-name": "prod",
        "karpenter.k8s.aws/ec2nodeclass": "default",
        "karpenter.sh/nodeclaim": "general-x7k2p",
    }


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        "MaxFleetCountExceeded",
        "ReservationCapacityExceeded",
    ],
)
def test_every_insufficient_capacity_code_marks_its_pool_and_fails_as_ice(code: str) -> None:
    """``IsUnfulfillableCapacity`` for each code of ``unfulfillableCapacityErrorCodes``: the pool
    (the request's capacity type, the override's type and zone) is marked, and a fleet that
    launched nothing with only such errors is an ``InsufficientCapacityError``."""
    assert fleet.is_unfulfillable(code)
    answer = {
        "FleetId": "fleet-1",
        "Instances": [],
        "Errors": [
            {
                "ErrorCode": code,
                "ErrorMessage": "no",
                "Lifecycle": "spot",
                "LaunchTemplateAndOverrides": {
                    "LaunchTemplateSpecification": {"LaunchTemplateName": "kubespot.io/abc"},
                    "Overrides": {
                        "InstanceType": "m5.large",
                        "AvailabilityZone": "us-east-1b",
                        "SubnetId": "s-1",
                    },
                },
            }
        ],
    }
    parsed = fleet.parse_fleet_answer(answer, SPOT)
    assert parsed.launched is None and parsed.fleet_id == "fleet-1"
    assert parsed.failed_offerings == (FailedOffering(SPOT, "m5.large", "us-east-1b", code, "no"),)
    cache = UnavailableOfferings(ManualClock(datetime(2026, 1, 1, tzinfo=UTC)), ttl=180)
    fleet.mark_unavailable(cache, parsed.errors, SPOT)
    assert cache.is_unavailable(SPOT, "m5.large", "us-east-1b")
    assert not cache.is_unavailable(SPOT, "m5.large", "us-east-1a")
    assert not cache.is_unavailable(ON_DEMAND, "m5.large", "us-east-1b")
    err = fleet.combine_fleet_errors(parsed.errors)
    assert isinstance(err, InsufficientCapacityError) and code in str(err)
    assert err.offerings == parsed.failed_offerings


def _err(
    code: str, message: str = "m", itype: str = "m5.large", zone: str = "us-east-1a"
) -> fleet.FleetError:
    return fleet.FleetError(FailedOffering(SPOT, itype, zone, code, message))


def test_missing_spot_role_is_ice_and_marks_all_spot() -> None:
    """``updateUnavailableOfferingsCache``: ``AuthFailure.ServiceLinkedRoleCreationNotPermitted``
    marks the whole spot capacity type; ``combineFleetErrors`` counts it as insufficient capacity."""
    cache = UnavailableOfferings(ManualClock(datetime(2026, 1, 1, tzinfo=UTC)), ttl=180)
    errors = [_err(fleet.SPOT_SLR_NOT_PERMITTED)]
    fleet.mark_unavailable(cache, errors, SPOT)
    assert cache.is_unavailable(SPOT, "c5.xlarge", "us-east-1c")
    assert not cache.is_unavailable(ON_DEMAND, "c5.xlarge", "us-east-1c")
    assert isinstance(fleet.combine_fleet_errors(errors), InsufficientCapacityError)
    assert isinstance(fleet.combine_fleet_errors([]), InsufficientCapacityError)  # nothing said


@pytest.mark.parametrize(
    ("codes", "reason"),
    [
        (["InsufficientInstanceCapacity", "UnauthorizedOperation"], "Unauthorized"),
        (["InsufficientInstanceCapacity", "InvalidAMIID.NotFound"], "AMINotFound"),
        (["InvalidAMIID.Malformed"], "InvalidAMIID"),
        (["InsufficientInstanceCapacity", "RequestLimitExceeded"], "RequestLimitExceeded"),
        (["InternalError", "MaxSpotInstanceCountExceeded"], "InternalError"),
        (["InvalidParameterValue", "MaxSpotInstanceCountExceeded"], "SpotQuotaExceeded"),
        (["InvalidParameterValue", "VcpuLimitExceeded"], "VCPULimitExceeded"),
        (["InvalidParameterValue", "MaxFleetCountExceeded"], "FleetQuotaExceeded"),
        (["InvalidParameterValue", "InsufficientFreeAddressesInSubnet"], "InsufficientFreeAddressesInSubnet"),
        (["InvalidLaunchTemplateId.NotFound"], "LaunchTemplateNotFound"),
        (["PendingVerification"], "AccountPendingVerification"),
        (["InvalidParameterValue"], "LaunchFailed"),
    ],
)
def test_mixed_errors_are_a_create_error_with_karpenters_reason(codes: list[str], reason: str) -> None:
    """``combineFleetErrors``: not every error is insufficient capacity → ``CreateError`` whose
    reason and message are ``ToReasonMessage``'s for all the texts (ICE codes looked at last)."""
    err = fleet.combine_fleet_errors([_err(c, f"{c} said") for c in codes])
    assert isinstance(err, CreateError)
    assert err.reason == reason
    assert err.message == fleet.reason_message("; ".join(f"{c}: {c} said" for c in codes))[1]
    assert all(c in " ".join(err.__notes__) for c in codes)  # the EC2 texts kept for the log


@pytest.mark.parametrize(
    ("text", "reason", "message_part"),
    [
        (
            "AuthFailure.ServiceLinkedRoleCreationNotPermitted: x",
            "SpotSLRCreationFailed",
            "ServiceLinkedRole",
        ),
        (
            "UnauthorizedOperation: with an explicit deny in a permissions boundary",
            "Unauthorized",
            "boundary",
        ),
        (
            "AccessDenied: with an explicit deny in a service control policy",
            "Unauthorized",
            "service control",
        ),
        ("AuthFailure: Not authorized for images: [ami-1]", "AMIAuthorizationFailure", "AMI"),
        ("UnauthorizedOperation: You are not authorized", "Unauthorized", "identity-based policy"),
        (
            "InvalidParameter: groups belong to different networks",
            "SecurityGroupSubnetVPCMismatch",
            "same VPC",
        ),
        (
            "InvalidParameterValue: iamInstanceProfile.name is invalid",
            "InstanceProfileNameInvalid",
            "profile",
        ),
        (
            "InvalidUserData.Malformed: User data is limited to 16384 bytes",
            "UserDataSizeLimitExceeded",
            "size",
        ),
        ("InvalidParameterValue: not eligible for Free Tier", "FreeTierIneligible", "Free Tier"),
        ("Something: else", "LaunchFailed", "Instance launch failed"),
    ],
)
def test_reason_message(text: str, reason: str, message_part: str) -> None:
    """``ToReasonMessage``: the condition reason and message for an EC2 error's text."""
    got_reason, got_message = fleet.reason_message(text)
    assert got_reason == reason and message_part in got_message


def test_an_answer_with_an_instance_and_errors() -> None:
    """EC2 reports the pools it tried and could not use next to the instance it launched; those
    are cached too (``updateUnavailableOfferingsCache`` runs before the instance is read)."""
    answer = {
        "FleetId": "fleet-2",
        "Errors": [
            {
                "ErrorCode": "InsufficientInstanceCapacity",
                "ErrorMessage": "We currently do not have sufficient c5.large capacity",
                "LaunchTemplateAndOverrides": {
                    "Overrides": {"InstanceType": "c5.large", "AvailabilityZone": "us-east-1a"}
                },
            }
        ],
        "Instances": [
            {
                "InstanceIds": ["i-0123456789abcdef0"],
                "InstanceType": "m5.large",
                "Lifecycle": "spot",
                "LaunchTemplateAndOverrides": {
                    "Overrides": {
                        "InstanceType": "m5.large",
                        "AvailabilityZone": "us-east-1b",
                        "SubnetId": "subnet-b",
                        "ImageId": "ami-1",
                    }
                },
            }
        ],
    }
    parsed = fleet.parse_fleet_answer(answer, SPOT)
    assert parsed.launched == fleet.Launched(
        "i-0123456789abcdef0", "m5.large", "us-east-1b", "subnet-b", "ami-1", SPOT
    )
    assert [o.instance_type for o in parsed.failed_offerings] == ["c5.large"]
