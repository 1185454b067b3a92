"""The AWS adapter: the only package that imports the AWS SDK (boto3).

The SDK is synchronous; calls run on a bounded thread pool so the asyncio product code awaits them.
Typed helpers return plain data, so callers never touch boto3 objects.

``session``: clients, the thread pool, ``AwsError`` and ``CALLS`` (every operation the adapter
makes, for the IAM policy, grouped by feature in ``CALL_GROUPS``). ``sqs``: the queue (receive,
batched delete and visibility changes). ``ec2``: instance facts, coalesced and cached.
``autoscaling``: lifecycle action completion and heartbeats. For the response actions:
``elbv2`` and ``classic_elb`` (which load balancers hold a target; deregistration), ``isolation``
(quarantine security group), ``publish`` (SNS and EventBridge); ``snapshot`` is the shared
TTL-and-single-flight index they rebuild. For the provisioner: ``catalog`` (instance types and
prices), ``subnets``, ``security_groups`` and ``amis`` (an EC2NodeClass resolved), ``cloud``
(``AwsCloud``) with ``fleet``, ``launch_templates`` and ``instances`` (NodeClaims launched).
"""

from kubespot.aws.autoscaling import LifecycleActionGone, LifecycleActions, LifecycleResult
from kubespot.aws.classic_elb import ClassicLoadBalancers, ClassicRegistration
from kubespot.aws.ec2 import InstanceDirectory, InstanceInfo
from kubespot.aws.elbv2 import DeregisterOutcome, Registration, TargetDirectory, TargetState
from kubespot.aws.isolation import (
    GroupRef,
    InterfaceChange,
    IsolationOutcome,
    NetworkIsolation,
    QuarantineGroupError,
)
from kubespot.aws.publish import EventBridgePublisher, PublishError, SnsPublisher
from kubespot.aws.session import CALL_GROUPS, CALLS, AwsClients, AwsError
from kubespot.aws.sqs import Queue, QueueMessage, region_of

__all__ = [
    "CALLS",
    "CALL_GROUPS",
    "AwsClients",
    "AwsError",
    "ClassicLoadBalancers",
    "ClassicRegistration",
    "DeregisterOutcome",
    "EventBridgePublisher",
    "GroupRef",
    "InstanceDirectory",
    "InstanceInfo",
    "InterfaceChange",
    "IsolationOutcome",
    "LifecycleActionGone",
    "LifecycleActions",
    "LifecycleResult",
    "NetworkIsolation",
    "PublishError",
    "QuarantineGroupError",
    "Queue",
    "QueueMessage",
    "Registration",
    "SnsPublisher",
    "TargetDirectory",
    "TargetState",
    "region_of",
]
