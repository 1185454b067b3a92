"""The joiner's reads of EC2 (boto3, over the wire): the cluster's instances, user data, types.

Instances are the cluster's when tagged ``kubernetes.io/cluster/<name>=owned`` (what Karpenter
v1.0 and eksctl tag) or ``eks:eks-cluster-name=<name>`` (Karpenter since v1.1); one
DescribeInstances per filter, merged by instance id. Instance types are read once each
(DescribeInstanceTypes) and kept. The size of the volume the kubelet's filesystem lives on comes
from DescribeVolumes (the instance's block device mapping for that device), else from the AMI's
mapping (DescribeImages). boto3 is blocking: every call runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from .capacity import InstanceTypeFacts

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.literals import InstanceTypeType
    from mypy_boto3_ec2.type_defs import FilterTypeDef

#: Instance states the joiner reads: every one EC2 has.
STATES = ("pending", "running", "stopping", "stopped", "shutting-down", "terminated")


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
    image_id: str = ""
    root_device: str = ""  # RootDeviceName
    #: (device name, EBS volume id) of each attached volume (BlockDeviceMappings)
    volumes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_ec2(cls, item: dict[str, Any]) -> Instance:
        launched = item.get("LaunchTime")
        volumes = tuple(
            (str(m.get("DeviceName") or ""), str((m.get("Ebs") or {}).get("VolumeId") or ""))
            for m in item.get("BlockDeviceMappings") or []
            if isinstance(m, dict)
        )
        return cls(
            id=str(item["InstanceId"]),
            state=str((item.get("State") or {}).get("Name") or ""),
            type=str(item.get("InstanceType") or ""),
            zone=str((item.get("Placement") or {}).get("AvailabilityZone") or ""),
            private_dns=str(item.get("PrivateDnsName") or ""),
            private_ip=str(item.get("PrivateIpAddress") or ""),
            launch_time=launched.timestamp() if isinstance(launched, datetime) else 0.0,
            image_id=str(item.get("ImageId") or ""),
            root_device=str(item.get("RootDeviceName") or ""),
            volumes=volumes,
        )


def _unless_not_found(call: Callable[[], Any]) -> Any:
    """``call()``, or None when EC2 answers that the volume or image does not exist (deleted,
    deregistered, or an id it never had): the caller falls back instead of retrying forever."""
    try:
        return call()
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code.endswith((".NotFound", ".Malformed")):
            return None
        raise


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

    async def volume_gib(self, instance: Instance, device: str) -> int | None:
        """Size in GiB of the volume at ``device``: the attached volume's (DescribeVolumes), else the
        size the instance's AMI maps to that device (DescribeImages); None when neither says."""
        return await asyncio.to_thread(self._volume_gib, instance, device)

    def _volume_gib(self, instance: Instance, device: str) -> int | None:
        volume_id = next((v for d, v in instance.volumes if d == device and v), "")
        if volume_id:
            found = _unless_not_found(lambda: self._client.describe_volumes(VolumeIds=[volume_id]))
            volumes = (found or {}).get("Volumes") or []
            if volumes and volumes[0].get("Size"):
                return int(volumes[0]["Size"])
        if instance.image_id:
            answer = _unless_not_found(lambda: self._client.describe_images(ImageIds=[instance.image_id]))
            images = (answer or {}).get("Images") or []
            for mapping in (images[0].get("BlockDeviceMappings") or []) if images else []:
                size = (mapping.get("Ebs") or {}).get("VolumeSize")
                if mapping.get("DeviceName") == device and size:
                    return int(size)
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
