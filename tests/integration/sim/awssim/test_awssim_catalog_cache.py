"""The ``catalog_cache`` extension: moto's DescribeInstanceTypes / DescribeInstanceTypeOfferings
answers replayed per request, the same bytes on the wire, other requests answered afresh.

Source: the EC2 API reference (DescribeInstanceTypes, DescribeInstanceTypeOfferings): the answers
depend only on the region and the request (instance types are AWS's static catalog), so a replay is
the answer AWS would give.
"""

from __future__ import annotations

import time

from kubespot.sim.awssim import MotoServer

HVM = [{"Name": "supported-virtualization-type", "Values": ["hvm"]}]


def test_a_repeated_request_gets_the_same_answer_fast_and_others_their_own(aws: MotoServer) -> None:
    ec2 = aws.client("ec2")
    first = ec2.describe_instance_types(Filters=HVM)["InstanceTypes"]  # may be the session's first: kept
    started = time.perf_counter()
    again = ec2.describe_instance_types(Filters=HVM)["InstanceTypes"]
    replay = time.perf_counter() - started
    assert again == first and len(first) > 400
    # moto's own answer takes ~4 s on this machine; a replay costs the client's parse (~1.5 s).
    assert replay < 3.0
    (one,) = ec2.describe_instance_types(InstanceTypes=["m5.large"])["InstanceTypes"]
    assert one["VCpuInfo"]["DefaultVCpus"] == 2
    zones = ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["m5.large"]}]
    )["InstanceTypeOfferings"]
    assert {o["InstanceType"] for o in zones} == {"m5.large"} and len(zones) >= 3
