"""The AWS adapter: the only package that imports the AWS SDK (boto3).

The SDK is synchronous; calls run on a bounded thread pool so the asyncio product code awaits them.
Typed helpers return plain data, so callers never touch boto3 objects.

``session``: clients, the thread pool, ``AwsError`` and ``CALLS`` (every operation the adapter
makes, for the IAM policy). ``sqs``: the queue (receive, batched delete and visibility changes).
``ec2``: instance facts, coalesced and cached. ``autoscaling``: lifecycle action completion and
heartbeats.
"""

from kubespot.aws.autoscaling import LifecycleActionGone, LifecycleActions, LifecycleResult
from kubespot.aws.ec2 import InstanceDirectory, InstanceInfo
from kubespot.aws.session import CALLS, AwsClients, AwsError
from kubespot.aws.sqs import Queue, QueueMessage, region_of

__all__ = [
    "CALLS",
    "AwsClients",
    "AwsError",
    "InstanceDirectory",
    "InstanceInfo",
    "LifecycleActionGone",
    "LifecycleActions",
    "LifecycleResult",
    "Queue",
    "QueueMessage",
    "region_of",
]
