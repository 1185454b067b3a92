"""In queue mode a webhook template gets the Node's labels, providerID and pods, and what EC2 says of
the interrupted instance (issue 10: NTH's fields must not print empty in the controller's messages)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubespot.aws.ec2 import InstanceInfo
from kubespot.controllers.interruption.template_context import QueueTemplateContext
from kubespot.kube import KubeError, NodeView, PodView
from kubespot.model import InterruptionEvent, Kind, Source
from support.fake_kube import FakeKube

NOW = datetime(2026, 11, 25, tzinfo=UTC)


def cluster(node: str, **faults: KubeError) -> FakeKube:
    view = NodeView(node, labels={"team": "web"}, provider_id="aws:///us-east-1a/i-0abc")
    return FakeKube(view, pods=[PodView("default", "web-1", "u1", node_name=node)], faults=faults)


class Instances:
    async def lookup(self, instance_ids: list[str]) -> dict[str, Any]:
        return {
            "i-0abc": InstanceInfo(
                "i-0abc", "ip-10-0-0-1.ec2.internal", "us-east-1a", "running", lifecycle="spot"
            )
        }


def event() -> InterruptionEvent:
    return InterruptionEvent("e", Kind.SPOT_INTERRUPTION, "i-0abc", Source.SQS, NOW, NOW, NOW)


async def test_the_node_and_instance_facts_are_filled() -> None:
    kube = cluster("ip-10-0-0-1.ec2.internal")
    context = QueueTemplateContext(kube, Instances(), "us-east-1")  # type: ignore[arg-type]
    facts = await context(event(), "ip-10-0-0-1.ec2.internal")
    assert facts["NodeLabels"] == {"team": "web"} and facts["Pods"] == ["web-1"]
    assert facts["ProviderID"] == "aws:///us-east-1a/i-0abc"
    assert facts["AvailabilityZone"] == "us-east-1a" and facts["InstanceLifeCycle"] == "spot"
    assert facts["Region"] == "us-east-1" and facts["LocalHostname"] == "ip-10-0-0-1.ec2.internal"


async def test_a_part_that_cannot_be_read_is_left_out() -> None:
    unlisted = cluster("n", list_pods_on_node=KubeError(503, "apiserver restarting"))
    context = QueueTemplateContext(unlisted, Instances(), "")  # type: ignore[arg-type]
    facts = await context(event(), "n")
    assert "Pods" not in facts and facts["NodeLabels"] == {"team": "web"} and "Region" not in facts
