"""Launch templates deleted with their EC2NodeClass and collected when idle, through moto's EC2.

Sources: aws/karpenter-provider-aws ``pkg/providers/launchtemplate/launchtemplate.go``
``DeleteAll`` (the templates tagged ``eks:eks-cluster-name`` = this cluster and
``karpenter.k8s.aws/ec2nodeclass`` = the class, called from ``pkg/controllers/nodeclass/controller.go``
``finalize``), ``hydrateCache`` (every template of the cluster known from the start) and
``cachedEvictedFunc`` (a template not used for ``DefaultTTL``, one minute, is deleted on eviction).
"""

from __future__ import annotations

from datetime import UTC, datetime

from tests.support.clocks import StillClock

from kubespot.aws import AwsClients
from kubespot.aws.launch_templates import IDLE_TTL, LaunchTemplate, LaunchTemplates
from kubespot.sim.awssim import MotoServer

AMI = "ami-12c6146b"


def _template(nodeclass: str, cluster: str = "prod", image: str = AMI) -> LaunchTemplate:
    tags = {
        f"kubernetes.io/cluster/{cluster}": "owned",
        "eks:eks-cluster-name": cluster,
        "karpenter.k8s.aws/ec2nodeclass": nodeclass,
        "karpenter.sh/nodepool": "general",
    }
    return LaunchTemplate({"ImageId": image, "InstanceType": "m5.large"}, tags)


def _names(aws: MotoServer) -> set[str]:
    found = aws.client("ec2").describe_launch_templates()["LaunchTemplates"]
    return {t["LaunchTemplateName"] for t in found}


async def test_a_deleted_class_takes_its_own_templates_only(clients: AwsClients, aws_env: MotoServer) -> None:
    """``DeleteAll``: the class's templates in this cluster go; another class's, another cluster's
    of the same class name, and a template not named by kubespot (a Karpenter beside it) stay.
    A template deleted is made again by the next launch (``ensure`` asks EC2 again)."""
    ec2 = aws_env.client("ec2")
    templates = LaunchTemplates(clients, cluster="prod")
    mine = [
        await templates.ensure(_template("default")),
        await templates.ensure(_template("default", image="ami-2")),
    ]
    other_class = await templates.ensure(_template("gpu"))
    other_cluster = await LaunchTemplates(clients, cluster="staging").ensure(_template("default", "staging"))
    tags = [
        {"Key": "eks:eks-cluster-name", "Value": "prod"},
        {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": "default"},
    ]
    ec2.create_launch_template(
        LaunchTemplateName="karpenter.k8s.aws/123",
        LaunchTemplateData={"ImageId": AMI},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}],
    )
    assert sorted(await templates.delete_all("default")) == sorted(mine)
    assert _names(aws_env) == {other_class, other_cluster, "karpenter.k8s.aws/123"}
    assert await templates.delete_all("default") == []
    assert await templates.ensure(_template("default")) == mine[0]
    assert mine[0] in _names(aws_env)
    # No cluster name: nothing to scope a deletion by, nothing deleted.
    assert await LaunchTemplates(clients).delete_all("gpu") == []
    assert other_class in _names(aws_env)


async def test_templates_unused_for_a_minute_are_collected(clients: AwsClients, aws_env: MotoServer) -> None:
    """``hydrateCache`` + ``cachedEvictedFunc``: a template of the cluster this process never used
    (an old hash, left before a restart) counts from when it is first seen; one not used for
    ``IDLE_TTL`` is deleted, one a launch used meanwhile stays; another cluster's is never touched."""
    clock = StillClock(datetime(2026, 1, 1, tzinfo=UTC))
    old = await LaunchTemplates(clients, cluster="prod").ensure(_template("default", image="ami-old"))
    other = await LaunchTemplates(clients, cluster="staging").ensure(_template("default", "staging"))
    templates = LaunchTemplates(clients, cluster="prod", clock=clock)
    used = await templates.ensure(_template("default"))
    assert await templates.collect() == []  # the old one is seen now: not idle yet
    clock.mono += IDLE_TTL / 2
    await templates.ensure(_template("default"))  # a launch uses it
    clock.mono += IDLE_TTL / 2
    assert await templates.collect() == [old]
    assert _names(aws_env) == {used, other}
    clock.mono += IDLE_TTL
    assert await templates.collect() == [used]
    assert _names(aws_env) == {other}
    # The next launch makes it again.
    assert await templates.ensure(_template("default")) == used and used in _names(aws_env)
