"""The joiner's reads of EC2 (boto3, over the wire): the cluster's instances, user data, types.

Instances are the cluster's when tagged ``kubernetes.io/cluster/<name>=owned`` (what Karpenter
v1.0 and eksctl tag) or ``eks:eks-cluster-name=<name>`` (Karpenter since v1.1); one
DescribeInstances per filter, merged by instance id. Instance types are read once each
(DescribeInstanceTypes) and kept. boto3 is blocking: every call runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import os
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import boto3
from botocore.config import Config

from .capacity import InstanceTypeFacts

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.literals import InstanceTypeType
    from mypy_boto3_ec2.type_defs import FilterTypeDef

#: Instance states the joiner reads; ``stopping``/``stopped`` are left out (not simulated).
STATES = ("pending", "running", "shutting-down", "terminated")


@dataclass(frozen=True, slots=True)
class Instance:
    """What the joiner needs of one instance."""

    id: str
    state: str
    type: str
    zone: str
    private_dns: str
    private_ip: str
    launch_time: float  # epoch seconds, as EC2 reports it (to the second)

    @classmethod
    def from_ec2(cls, item: dict[str, Any]) -> Instance:
        launched = item.get("LaunchTime")
        return cls(
            id=str(item["InstanceId"]),
            state=str((item.get("State") or {}).get("Name") or ""),
            type=str(item.get("InstanceType") or ""),
            zone=str((item.get("Placement") or {}).get("AvailabilityZone") or ""),
            private_dns=str(item.get("PrivateDnsName") or ""),
            private_ip=str(item.get("PrivateIpAddress") or ""),
            launch_time=launched.timestamp() if isinstance(launched, datetime) else 0.0,
        )


@functools.cache
def _session() -> boto3.session.Session:
    """One boto3 session per process: each new one loads the EC2 service model again (~0.5 s)."""
    return boto3.session.Session()


class Ec2Reader:
    """DescribeInstances, DescribeInstanceAttribute ``userData`` and DescribeInstanceTypes."""

    def __init__(
        self, endpoint_url: str, cluster: str, *, region: str = "us-east-1", timeout: float = 5.0
    ) -> None:
        self.cluster = cluster
        # A simulator's endpoint takes any credentials; real ones in the environment win.
        fake = None if os.environ.get("AWS_ACCESS_KEY_ID") else "testing"
        self._client: EC2Client = _session().client(
            "ec2",
            endpoint_url=endpoint_url,
            region_name=region,
            config=Config(
                connect_timeout=timeout,
                read_timeout=timeout,
                retries={"max_attempts": 1, "mode": "standard"},  # the loop retries next tick
            ),
            aws_access_key_id=fake,
            aws_secret_access_key=fake,
        )
        self._types: dict[str, InstanceTypeFacts] = {}

    async def instances(self) -> dict[str, Instance]:
        """The cluster's instances by id (any error propagates: the caller skips the tick)."""
        return await asyncio.to_thread(self._instances)

    def _instances(self) -> dict[str, Instance]:
        found: dict[str, Instance] = {}
        state: FilterTypeDef = {"Name": "instance-state-name", "Values": list(STATES)}
        tags: tuple[FilterTypeDef, ...] = (
            {"Name": f"tag:kubernetes.io/cluster/{self.cluster}", "Values": ["owned"]},
            {"Name": "tag:eks:eks-cluster-name", "Values": [self.cluster]},
        )
        for tag in tags:
            for page in self._client.get_paginator("describe_instances").paginate(Filters=[tag, state]):
                for reservation in page.get("Reservations", []):
                    for item in reservation.get("Instances", []):
                        instance = Instance.from_ec2(dict(item))
                        found[instance.id] = instance
        return found

    async def user_data(self, instance_id: str) -> bytes | None:
        """The instance's user data, decoded; None when it has none or it is not base64."""
        answer = await asyncio.to_thread(
            self._client.describe_instance_attribute, InstanceId=instance_id, Attribute="userData"
        )
        value = (answer.get("UserData") or {}).get("Value")
        if not value:
            return None
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return None

    async def instance_type(self, name: str) -> InstanceTypeFacts:
        facts = self._types.get(name)
        if facts is None:
            answer = await asyncio.to_thread(
                self._client.describe_instance_types, InstanceTypes=[cast("InstanceTypeType", name)]
            )
            infos = answer.get("InstanceTypes") or []
            if not infos:
                raise LookupError(f"EC2 does not know instance type {name!r}")
            facts = self._types[name] = InstanceTypeFacts.from_ec2(dict(infos[0]))
        return facts
