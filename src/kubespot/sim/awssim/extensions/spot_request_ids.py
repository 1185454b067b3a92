"""Every spot instance carries its ``SpotInstanceRequestId``, as DescribeInstances shows on EC2.

Stock moto 5.2.5 creates a spot request for RequestSpotInstances and for CreateFleet's spot
launches but never links the instance back to it, and RunInstances with
``InstanceMarketOptions.MarketType=spot`` makes no request at all; DescribeInstances then lacks
``SpotInstanceRequestId``. Karpenter reads an instance's capacity type from that field
(aws:``pkg/providers/instance/types.go`` ``capacityTypeFromInstance``; research note §2.2), so
without it every spot instance reads back as on-demand.

- an instance launched by a moto ``SpotInstanceRequest`` (RequestSpotInstances, CreateFleet) gets
  that request's id;
- a RunInstances spot instance gets a fresh ``sir-`` id (EC2 creates a one-time request for it;
  that request is not listed by DescribeSpotInstanceRequests here: a known gap).
"""

from __future__ import annotations

from typing import Any

from moto.ec2.models.instances import InstanceBackend
from moto.ec2.models.spot_requests import SpotInstanceRequest
from moto.ec2.utils import random_spot_request_id

__all__ = ["install"]

_MARK = "_kubespot_spot_request_ids"


def _make_launch_instance(original: Any) -> Any:
    def launch_instance(self: Any) -> Any:
        instance = original(self)
        instance.spot_instance_request_id = self.id
        return instance

    return launch_instance


def _make_run_instances(original: Any) -> Any:
    def run_instances(
        self: Any, image_id: str, count: int, user_data: Any, security_group_names: list[str], **kwargs: Any
    ) -> Any:
        reservation = original(self, image_id, count, user_data, security_group_names, **kwargs)
        if kwargs.get("instance_market_options"):
            for instance in reservation.instances:
                if instance.lifecycle == "spot" and not getattr(instance, "spot_instance_request_id", None):
                    instance.spot_instance_request_id = random_spot_request_id()
        return reservation

    return run_instances


def install() -> None:
    """Patch moto's spot request and instance launch (once)."""
    cls: Any = SpotInstanceRequest
    if getattr(cls, _MARK, False):
        return
    cls.launch_instance = _make_launch_instance(cls.launch_instance)
    backend_cls: Any = InstanceBackend
    backend_cls.run_instances = _make_run_instances(backend_cls.run_instances)
    setattr(cls, _MARK, True)
