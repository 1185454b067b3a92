"""``Instances.terminate`` / ``AwsCloud.delete`` against the instance's state.

Source: aws/karpenter-provider-aws ``pkg/providers/instance/instance.go`` ``Delete`` (no
TerminateInstances while the instance is ``shutting-down``, and no error: it still exists) and
``Get`` (terminated or unknown is NotFound); kubernetes-sigs/karpenter
``pkg/controllers/node/termination/controller.go`` ``awaitInstanceTermination`` requeues until
then.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubespot.aws.instances import Instances
from kubespot.cloud.errors import NodeClaimNotFound


class _Ec2:
    """DescribeInstances answers one instance in ``state`` (terminated: filtered out, as EC2's
    ``instance-state-name`` filter does); every call is recorded."""

    def __init__(self, state: str) -> None:
        self.state = state
        self.calls: list[str] = []

    async def call(self, service: str, operation: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(operation)
        if operation == "DescribeInstances":
            if self.state == "terminated":
                return {"Reservations": []}
            raw = {
                "InstanceId": "i-1",
                "InstanceType": "m5.large",
                "State": {"Name": self.state},
                "Placement": {"AvailabilityZone": "us-east-1a"},
            }
            return {"Reservations": [{"Instances": [raw]}]}
        return {}


async def test_shutting_down_returns_without_a_call_until_terminated() -> None:
    """``Delete``: a running instance is terminated; one already shutting down gets no second
    TerminateInstances and no NotFound (the caller keeps waiting); once terminated, NotFound."""
    ec2 = _Ec2("running")
    instances = Instances(ec2, "prod")  # type: ignore[arg-type]
    await instances.terminate("i-1")
    assert ec2.calls == ["DescribeInstances", "TerminateInstances"]

    ec2.state, ec2.calls = "shutting-down", []
    got = await instances.terminate("i-1")
    assert got.state == "shutting-down"
    assert ec2.calls == ["DescribeInstances"]

    ec2.state = "terminated"
    with pytest.raises(NodeClaimNotFound):
        await instances.terminate("i-1")
    assert "TerminateInstances" not in ec2.calls
