"""Label keys the capacity model knows: well-known, normalised and restricted ones.

Facts from Karpenter's ``pkg/apis/v1/labels.go`` (core) and the AWS provider's well-known labels;
the names are the Kubernetes and Karpenter API's, so they are shared with users' manifests.
"""

from __future__ import annotations

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
WINDOWS_BUILD = "node.kubernetes.io/windows-build"
NODEPOOL = "karpenter.sh/nodepool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"

SPOT = "spot"
ON_DEMAND = "on-demand"
RESERVED = "reserved"
CAPACITY_TYPES = frozenset({SPOT, ON_DEMAND, RESERVED})

#: The AWS provider's labels of an instance type that ``instance_types.type_labels`` sets on every
#: type (the provider registers them, and more, as well-known: aws ``pkg/apis/v1/labels.go``).
INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
AWS_INSTANCE_LABELS = frozenset(
    {
        "karpenter.k8s.aws/instance-category",
        INSTANCE_FAMILY,
        "karpenter.k8s.aws/instance-generation",
        "karpenter.k8s.aws/instance-size",
        "karpenter.k8s.aws/instance-cpu",
        "karpenter.k8s.aws/instance-memory",
    }
)

#: Labels every instance type or offering defines, so a pod may ask for them although a NodePool
#: does not mention them (Karpenter's ``WellKnownLabels``, with the AWS provider's above: a pod's
#: ``karpenter.k8s.aws/instance-family: c5`` is met by the c5 types of any pool that allows them).
WELL_KNOWN = frozenset(
    {NODEPOOL, ZONE, REGION, INSTANCE_TYPE, ARCH, OS, CAPACITY_TYPE, WINDOWS_BUILD} | AWS_INSTANCE_LABELS
)

#: Deprecated keys read as their stable names (Karpenter's ``NormalizedLabels``).
NORMALIZED_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
    # The EBS CSI driver's zone key on older PersistentVolumes: the AWS provider adds it
    # (aws/karpenter-provider-aws pkg/operator/operator.go init), so such volumes pin a zone.
    "topology.ebs.csi.aws.com/zone": ZONE,
}
