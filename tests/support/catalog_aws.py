"""A stand-in for the AWS clients the catalog calls (``Catalog(clients, ...)``): canned answers for
one instance type (``M5``), the calls counted, and EC2 throttled while ``fail`` is set. For unit
tests of the catalog's refresh; integration tests go through moto instead."""

from __future__ import annotations

import asyncio
from typing import Any

from kubespot.aws.session import AwsError

#: DescribeInstanceTypes' entry for m5.large: what the catalog reads of it.
M5: dict[str, Any] = {
    "InstanceType": "m5.large",
    "VCpuInfo": {"DefaultVCpus": 2},
    "MemoryInfo": {"SizeInMiB": 8192},
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
    "NetworkInfo": {
        "DefaultNetworkCardIndex": 0,
        "MaximumNetworkInterfaces": 3,
        "Ipv4AddressesPerInterface": 10,
        "NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 3}],
    },
    "SupportedUsageClasses": ["on-demand"],
}


class CatalogAws:
    """Answers the catalog's calls; while ``fail`` is set, EC2 answers throttled (Pricing still works)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.calls: list[str] = []
        self.fail = fail

    def count(self, operation: str) -> int:
        return self.calls.count(operation)

    async def call(self, service: str, operation: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(operation)
        await asyncio.sleep(0)
        if self.fail and service == "ec2":
            raise AwsError("RequestLimitExceeded", "Request limit exceeded.", throttled=True)
        if operation == "DescribeInstanceTypes":
            return {"InstanceTypes": [M5]}
        if operation == "DescribeInstanceTypeOfferings":
            return {"InstanceTypeOfferings": [{"InstanceType": "m5.large", "Location": "us-east-1a"}]}
        if operation == "DescribeSpotPriceHistory":
            return {"SpotPriceHistory": []}
        return {"PriceList": []}
