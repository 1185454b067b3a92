"""The Price List Service's GetProducts for EC2, served by awssim's ``pricing`` extension (moto has none).

Shapes follow the AWS Price List Service API reference (``GetProducts``: ``ServiceCode``,
``Filters`` of ``TERM_MATCH`` …, ``MaxResults`` ≤ 100, ``NextToken``; the answer's ``PriceList``
of JSON strings with ``product.attributes`` and ``terms.OnDemand.*.priceDimensions.*.pricePerUnit``)
and the query Karpenter's pricing provider makes (aws/karpenter-provider-aws
``pkg/providers/pricing/pricing.go`` ``fetchOnDemandPricing`` / ``onDemandPage``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from kubespot.sim.awssim import MotoServer
from kubespot.sim.awssim.extensions import pricing
from kubespot.sim.awssim.price_data import ONDEMAND_PRICES


def _filters(**terms: str) -> list[dict[str, str]]:
    return [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in terms.items()]


LINUX_USED = _filters(
    regionCode="us-east-1",
    operatingSystem="Linux",
    preInstalledSw="NA",
    capacitystatus="Used",
    marketoption="OnDemand",
)


def _price(item: str) -> tuple[str, float]:
    data: dict[str, Any] = json.loads(item)
    (term,) = data["terms"]["OnDemand"].values()
    (dimension,) = term["priceDimensions"].values()
    return data["product"]["attributes"]["instanceType"], float(dimension["pricePerUnit"]["USD"])


@pytest.fixture
def clean_faults() -> Iterator[None]:
    yield
    pricing.clear_faults()


def test_boto3_pricing_client_reads_the_shared_prices_page_by_page(aws: MotoServer) -> None:
    """Karpenter's two queries (shared Compute Instance, dedicated bare metal), paged by 100, give
    every type of the shared table at its price (pricing.go fetchOnDemandPricing)."""
    client = aws.client("pricing")
    prices: dict[str, float] = {}
    pages = 0
    for family, tenancy in (("Compute Instance", "Shared"), ("Compute Instance (bare metal)", "Dedicated")):
        query = [*LINUX_USED, *_filters(productFamily=family, tenancy=tenancy)]
        paginator = client.get_paginator("get_products")
        for page in paginator.paginate(ServiceCode="AmazonEC2", Filters=query, MaxResults=100):
            assert len(page["PriceList"]) <= 100
            assert page["FormatVersion"] == "aws_v1"
            prices.update(_price(item) for item in page["PriceList"])
            pages += 1
    assert pages > 10
    assert prices == ONDEMAND_PRICES["us-east-1"]


def test_product_shape_and_term_match_filters(aws: MotoServer) -> None:
    """One PriceList entry: a JSON string with product attributes and the on-demand term; each
    TERM_MATCH filter narrows (capacitystatus has three values, as in the real price list)."""
    client = aws.client("pricing")
    every = client.get_products(ServiceCode="AmazonEC2", Filters=_filters(instanceType="m5.large"))
    statuses = {json.loads(i)["product"]["attributes"]["capacitystatus"] for i in every["PriceList"]}
    assert statuses == {"Used", "UnusedCapacityReservation", "AllocatedCapacityReservation"}
    (item,) = client.get_products(
        ServiceCode="AmazonEC2",
        Filters=[*LINUX_USED, *_filters(instanceType="m5.large", location="US East (N. Virginia)")],
    )["PriceList"]
    assert isinstance(item, str)
    data = json.loads(item)
    attrs = data["product"]["attributes"]
    assert attrs["tenancy"] == "Shared" and attrs["vcpu"] == "2" and attrs["memory"] == "8 GiB"
    assert data["product"]["productFamily"] == "Compute Instance"
    assert data["serviceCode"] == "AmazonEC2"
    assert _price(item) == ("m5.large", ONDEMAND_PRICES["us-east-1"]["m5.large"])
    none = client.get_products(ServiceCode="AmazonEC2", Filters=_filters(operatingSystem="Windows"))
    assert none["PriceList"] == []
    other = client.get_products(
        ServiceCode="AmazonEC2",
        Filters=[{"Type": "ANY_OF", "Field": "instanceType", "Value": "m5.large,c5.large"}, *LINUX_USED],
    )
    assert sorted(_price(i)[0] for i in other["PriceList"]) == ["c5.large", "m5.large"]


def test_bad_next_token_and_injected_faults(aws: MotoServer, clean_faults: None) -> None:
    """A token of another query is InvalidNextTokenException; injected ThrottlingException comes
    back as the SDK's error code (the API reference's errors of GetProducts)."""
    client = aws.client("pricing")
    first = client.get_products(ServiceCode="AmazonEC2", Filters=LINUX_USED, MaxResults=5)
    with pytest.raises(ClientError) as bad:
        client.get_products(ServiceCode="AmazonEC2", NextToken=first["NextToken"], MaxResults=5)
    assert bad.value.response["Error"]["Code"] == "InvalidNextTokenException"
    second = client.get_products(
        ServiceCode="AmazonEC2", Filters=LINUX_USED, NextToken=first["NextToken"], MaxResults=5
    )
    assert not set(second["PriceList"]) & set(first["PriceList"])
    pricing.inject_fault("ThrottlingException", times=2)  # the client retries throttling once
    with pytest.raises(ClientError) as throttled:
        client.get_products(ServiceCode="AmazonEC2", Filters=LINUX_USED, MaxResults=1)
    assert throttled.value.response["Error"]["Code"] == "ThrottlingException"
    assert client.get_products(ServiceCode="AmazonEC2", Filters=LINUX_USED, MaxResults=1)["PriceList"]
