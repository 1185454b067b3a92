"""The cloud behind the provisioner, as Karpenter's ``cloudprovider.CloudProvider`` (pure).

``provider``: the ``CloudProvider`` protocol (instance types with offerings for a NodePool and its
EC2NodeClass; the NodeClaim calls issue 14 fills) and ``CloudNodeClaim``, what a launch returns.
``fake``: ``FakeCloud``, a configurable in-memory cloud for tests, and ``fake_type``, an instance
type with exact allocatable. The AWS implementation is ``kubespot.aws.cloud.AwsCloud``.
"""

from .fake import FakeCloud, fake_type
from .provider import CloudNodeClaim, CloudProvider, NodeClaimNotFound

__all__ = ["CloudNodeClaim", "CloudProvider", "FakeCloud", "NodeClaimNotFound", "fake_type"]
