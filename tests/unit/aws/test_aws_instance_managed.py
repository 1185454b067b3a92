"""Which instances the queue processor handles with ``queue.check_tag_before_draining`` on: NTH's
managed tag (aws-node-termination-handler ``pkg/monitor/sqsevent`` ``isInstanceManaged``), or an
instance kubespot's provisioner launched for this cluster, as Karpenter's interruption controller
handles its own NodeClaims' instances (aws/karpenter-provider-aws ``pkg/controllers/interruption``:
the instance is looked up among the cluster's NodeClaims, no tag needed)."""

from __future__ import annotations

from kubespot.aws.ec2 import InstanceInfo

MANAGED = "aws-node-termination-handler/managed"


def info(**tags: str) -> InstanceInfo:
    return InstanceInfo("i-0abc", "ip-10-0-0-1.ec2.internal", "us-east-1a", "running", tags)


def test_nths_tag_or_the_provisioners_tags_for_this_cluster() -> None:
    assert info(**{MANAGED: ""}).is_managed(MANAGED)
    ours = {"karpenter.sh/nodepool": "general", "eks:eks-cluster-name": "prod"}
    assert info(**ours).is_managed(MANAGED, "prod")
    assert not info(**ours).is_managed(MANAGED, "staging"), "another cluster's instance"
    assert not info(**ours).is_managed(MANAGED), "not launching: only NTH's tag counts"
    legacy = {"karpenter.sh/nodepool": "general", "kubernetes.io/cluster/prod": "owned"}
    assert info(**legacy).is_managed(MANAGED, "prod")
    assert not info(**{"eks:eks-cluster-name": "prod"}).is_managed(MANAGED, "prod"), "not a NodePool's"
