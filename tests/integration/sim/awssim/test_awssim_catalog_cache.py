"""The ``catalog_cache`` extension: moto's DescribeInstanceTypes / DescribeInstanceTypeOfferings
answers kept per request and paged as EC2 pages them.

Source: the EC2 API reference (DescribeInstanceTypes: ``MaxResults`` 5-100, ``NextToken`` while
more results follow, ``InvalidNextToken`` for a token it did not issue; the answers depend only on
the region and the request: instance types are AWS's static catalog, so a replay is the answer).
The requests here name a dozen types: the whole catalog takes seconds to parse on the client.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto.ec2.exceptions import EC2ClientError

from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import catalog_cache

TYPES = [f"m5.{s}" for s in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge")] + [
    f"c5.{s}" for s in ("large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "12xlarge")
]


def test_a_repeated_request_is_replayed_and_others_answered_afresh(aws: MotoServer) -> None:
    ec2 = aws.client("ec2")
    # Not cleared: the session's other tests keep their answers.
    before = len(catalog_cache._answers)
    first = ec2.describe_instance_types(InstanceTypes=TYPES)["InstanceTypes"]
    kept = len(catalog_cache._answers)
    assert kept in (before, before + 1)  # new, unless an earlier test asked the same
    again = ec2.describe_instance_types(InstanceTypes=TYPES)["InstanceTypes"]
    assert again == first and len(first) == len(TYPES)
    assert len(catalog_cache._answers) == kept  # replayed, not serialised again
    (one,) = ec2.describe_instance_types(InstanceTypes=["m5.large"])["InstanceTypes"]
    assert one["VCpuInfo"]["DefaultVCpus"] == 2
    zones = ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["m5.large"]}]
    )["InstanceTypeOfferings"]
    assert {o["InstanceType"] for o in zones} == {"m5.large"} and len(zones) >= 3


def test_max_results_pages_the_answer_as_ec2_does(aws: MotoServer) -> None:
    ec2 = aws.client("ec2")
    everything = [
        t["InstanceType"] for t in ec2.describe_instance_types(InstanceTypes=TYPES)["InstanceTypes"]
    ]
    pages, token = [], None
    while True:
        extra = {"NextToken": token} if token else {}
        page = ec2.describe_instance_types(InstanceTypes=TYPES, MaxResults=5, **extra)  # type: ignore[arg-type]
        pages.append([t["InstanceType"] for t in page["InstanceTypes"]])
        token = page.get("NextToken")
        if not token:
            break
    assert [len(p) for p in pages] == [5, 5, 2]
    assert [t for p in pages for t in p] == everything
    try:
        ec2.describe_instance_types(InstanceTypes=TYPES, MaxResults=5, NextToken="not-a-token")
    except ec2.exceptions.ClientError as err:
        assert err.response["Error"]["Code"] == "InvalidNextToken"
    else:
        raise AssertionError("an unknown token was accepted")


def _error_code(call: Any) -> str:
    try:
        call()
    except ClientError as err:
        return str(err.response["Error"]["Code"])
    raise AssertionError("accepted")


def test_max_results_outside_the_operations_range_is_invalid(aws: MotoServer) -> None:
    """EC2 API reference, DescribeInstanceTypes MaxResults 5-100, DescribeInstanceTypeOfferings
    5-1000 (botocore's ec2 service model carries the same ranges, and its client checks only the
    minimum): a larger page is InvalidParameterValue, not answered."""
    ec2 = aws.client("ec2")
    assert _error_code(lambda: ec2.describe_instance_types(InstanceTypes=TYPES, MaxResults=101)) == (
        "InvalidParameterValue"
    )
    assert len(ec2.describe_instance_types(InstanceTypes=TYPES, MaxResults=100)["InstanceTypes"]) == len(
        TYPES
    )
    offerings = ec2.describe_instance_type_offerings(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": ["m5.large"]}],
        MaxResults=1000,
    )
    assert offerings["InstanceTypeOfferings"]
    with pytest.raises(EC2ClientError):  # below the minimum, which boto3 never sends
        catalog_cache._size("DescribeInstanceTypes", "2")


def test_only_a_token_issued_for_the_same_request_continues_it(aws: MotoServer) -> None:
    """EC2 API reference (Pagination): NextToken continues the request it came from; a token it
    did not hand out, even a well-formed one, or one from another request is InvalidNextToken."""
    ec2 = aws.client("ec2")
    issued = ec2.describe_instance_types(InstanceTypes=TYPES, MaxResults=5)["NextToken"]
    assert ec2.describe_instance_types(InstanceTypes=TYPES, MaxResults=5, NextToken=issued)["InstanceTypes"]
    forged = catalog_cache._token(3)  # the right shape, never handed out
    assert _error_code(
        lambda: ec2.describe_instance_types(InstanceTypes=TYPES, MaxResults=5, NextToken=forged)
    ) == ("InvalidNextToken")
    other = TYPES[:8]
    assert _error_code(
        lambda: ec2.describe_instance_types(InstanceTypes=other, MaxResults=5, NextToken=issued)
    ) == ("InvalidNextToken")
