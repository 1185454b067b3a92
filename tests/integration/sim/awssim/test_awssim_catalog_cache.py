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
from moto.ec2.models.instance_types import InstanceType, InstanceTypeBackend

from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import catalog_cache, spot_prices, xml_writer

TYPES = [f"m5.{s}" for s in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge")] + [
    f"c5.{s}" for s in ("large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "12xlarge")
]


def test_a_repeated_request_reuses_the_fragments_and_others_are_answered(aws: MotoServer) -> None:
    ec2 = aws.client("ec2")
    first = ec2.describe_instance_types(InstanceTypes=TYPES)["InstanceTypes"]
    kept = len(catalog_cache._fragments)
    assert kept >= len(TYPES)  # one fragment per entry (others' tests may have added theirs)
    again = ec2.describe_instance_types(InstanceTypes=TYPES)["InstanceTypes"]
    assert again == first and len(first) == len(TYPES)
    assert len(catalog_cache._fragments) == kept  # replayed, not rendered again
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


def _pages(ec2: Any, operation: str, **request: Any) -> list[bytes]:
    """Every page's raw answer (the bytes moto sent), following NextToken to the end."""
    bodies: list[bytes] = []

    def keep(http_response: Any, **_: Any) -> None:
        bodies.append(http_response.content)

    ec2.meta.events.register("after-call.ec2.*", keep)
    try:
        token = None
        while True:
            extra = {"NextToken": token} if token else {}
            token = getattr(ec2, operation)(**request, **extra).get("NextToken")
            if not token:
                return bodies
    finally:
        ec2.meta.events.unregister("after-call.ec2.*", keep)


FILTERED = {
    "describe_instance_types": {
        "Filters": [{"Name": "instance-type", "Values": TYPES}],
        "MaxResults": 5,
    },
    "describe_instance_type_offerings": {
        "LocationType": "availability-zone",
        "Filters": [{"Name": "instance-type", "Values": ["m5.large", "c5.large", "r5.large"]}],
        "MaxResults": 5,
    },
}


@pytest.mark.parametrize("operation", sorted(FILTERED))
def test_the_fast_answer_is_byte_for_byte_moto_s_own(
    aws: MotoServer, operation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EC2 API reference, DescribeInstanceTypes / DescribeInstanceTypeOfferings (Filters,
    MaxResults, NextToken): every page of a filtered request, written by the fragment writer, is
    the answer moto's own serialiser gives (moto/core/serialize.py EC2Serializer), byte for byte."""
    ec2 = aws.client("ec2")
    fast = _pages(ec2, operation, **FILTERED[operation])
    assert len(fast) >= 3  # several pages, so the tokens and the last page are compared too
    op = "".join(w.title() for w in operation.split("_"))
    field = catalog_cache._RESULT_KEYS[op]
    xml_writer.disable(op, field)  # moto serialises everything
    try:
        assert _pages(ec2, operation, **FILTERED[operation]) == fast
    finally:
        xml_writer.enable(op, field)


def test_a_change_of_moto_s_catalog_is_answered_not_masked(
    aws: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catalog is moto's data (moto/ec2/models/instance_types.py InstanceTypeBackend): a type
    whose data changes, a type added and a type removed show in the next answer, not a kept one."""
    ec2 = aws.client("ec2")
    request = {"Filters": [{"Name": "instance-type", "Values": ["m5.large", "m5.xlarge"]}]}
    before = ec2.describe_instance_types(**request)["InstanceTypes"]  # type: ignore[arg-type]
    assert sorted(t["InstanceType"] for t in before) == ["m5.large", "m5.xlarge"]
    catalog = list(InstanceTypeBackend.instance_types)
    large = next(t for t in catalog if t["InstanceType"] == "m5.large")
    bigger = InstanceType("m5.large")
    bigger["MemoryInfo"] = {"SizeInMiB": 12345}
    changed = [bigger if t is large else t for t in catalog if t["InstanceType"] != "m5.xlarge"]
    monkeypatch.setattr(InstanceTypeBackend, "instance_types", changed)
    (after,) = ec2.describe_instance_types(**request)["InstanceTypes"]  # type: ignore[arg-type]
    assert after["InstanceType"] == "m5.large" and after["MemoryInfo"]["SizeInMiB"] == 12345
    monkeypatch.undo()
    again = ec2.describe_instance_types(**request)["InstanceTypes"]  # type: ignore[arg-type]
    assert again == before


def test_the_spot_price_history_is_byte_for_byte_moto_s_own(aws: MotoServer) -> None:
    """EC2 API reference, DescribeSpotPriceHistory (MaxResults, NextToken): the pages written by
    ``xml_writer`` (timestamps included) are moto's serialiser's (moto/core/serialize.py
    EC2Serializer, TimestampSerializer iso8601_zeroed), byte for byte."""
    ec2 = aws.client("ec2")
    request = {
        "InstanceTypes": ["m5.large", "c5.large", "r5.large"],
        "ProductDescriptions": [spot_prices.PRODUCT_DESCRIPTION],
        "MaxResults": 5,
    }
    fast = _pages(ec2, "describe_spot_price_history", **request)
    assert len(fast) >= 2 and b"<timestamp>" in fast[0]
    xml_writer.disable("DescribeSpotPriceHistory", "SpotPriceHistory")
    try:
        assert _pages(ec2, "describe_spot_price_history", **request) == fast
    finally:
        xml_writer.enable("DescribeSpotPriceHistory", "SpotPriceHistory")
