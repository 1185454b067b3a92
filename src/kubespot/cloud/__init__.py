"""The cloud behind the provisioner, as Karpenter's ``cloudprovider.CloudProvider`` (pure).

``provider``: the ``CloudProvider`` protocol (instance types with offerings for a NodePool and its
EC2NodeClass; the NodeClaim calls: create, delete, get, list) and ``CloudNodeClaim``, what a launch
returns. ``errors``: what a launch fails with. ``unavailable``: the pools not to launch into for a
while (``UnavailableOfferings``, fed by launch errors and interruption warnings). ``candidates``:
the pools a NodeClaim may use, cheapest first. ``fake``: ``FakeCloud``, a configurable in-memory
cloud for tests, and ``fake_type``, an instance type with exact allocatable. The AWS
implementation is ``kubespot.aws.cloud.AwsCloud``.
"""

from .errors import (
    CreateError,
    FailedOffering,
    InsufficientCapacityError,
    NodeClaimNotFound,
    NodeClassNotReadyError,
)
from .fake import FakeCloud, fake_type
from .provider import CloudNodeClaim, CloudProvider
from .unavailable import UnavailableOfferings

__all__ = [
    "CloudNodeClaim",
    "CloudProvider",
    "CreateError",
    "FailedOffering",
    "FakeCloud",
    "InsufficientCapacityError",
    "NodeClaimNotFound",
    "NodeClassNotReadyError",
    "UnavailableOfferings",
    "fake_type",
]
