"""The controller's least-privilege IAM policy, derived from the AWS calls it makes.

The policy is not written by hand: ``controller_policy`` takes the (service, operation) pairs the
controller calls (``CONTROLLER_CALLS``, the adapter's ``CALLS``) and maps each through
``IAM_ACTIONS`` to the IAM action that authorizes it and the resource that action can be scoped
to. An operation missing from the table is an error, so a new call cannot ship without someone
deciding its permission; and the policy grants nothing the controller does not call. Unit tests
check both directions, and an AST test checks that every SDK operation named in ``kubespot/aws``
(the admin-only bootstrap excepted) is in the calls.

Facts the table relies on (AWS docs, checked):

* SQS batch operations have no IAM actions of their own: ``sqs:DeleteMessage`` and
  ``sqs:ChangeMessageVisibility`` also authorize ``DeleteMessageBatch`` and
  ``ChangeMessageVisibilityBatch`` (SQS Developer Guide, "Amazon SQS batch actions").
* ``ec2:DescribeInstances`` supports no resource-level permissions: its resource must be ``*``.
* ``autoscaling:CompleteLifecycleAction`` and ``autoscaling:RecordLifecycleActionHeartbeat`` take
  the ``autoScalingGroup`` resource type, so they can be limited to the cluster's groups.
* Reading an SSE-KMS queue needs only ``kms:Decrypt`` on its key; ``kms:GenerateDataKey`` is for
  senders (EventBridge, through the key policy), which the controller is not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .session import CALLS

#: What an IAM action can be scoped to: the interruption queue, the cluster's Auto Scaling groups
#: (when given), or nothing narrower than "*".
Scope = Literal["queue", "asg", "any"]


@dataclass(frozen=True, slots=True)
class Permission:
    """The IAM action that authorizes one API operation, and what it can be scoped to."""

    action: str
    scope: Scope
    #: KMS actions needed on the queue's key when the queue is encrypted with a customer key.
    kms: tuple[str, ...] = ()


#: (service, OperationName) -> the permission it needs. Add a row when the controller starts making
#: a new call; the operation names are the API's (as in botocore's service models).
IAM_ACTIONS: Mapping[tuple[str, str], Permission] = {
    ("sqs", "ReceiveMessage"): Permission("sqs:ReceiveMessage", "queue", kms=("kms:Decrypt",)),
    ("sqs", "DeleteMessage"): Permission("sqs:DeleteMessage", "queue"),
    # Batch APIs are authorized by the singular action (no sqs:DeleteMessageBatch action exists).
    ("sqs", "DeleteMessageBatch"): Permission("sqs:DeleteMessage", "queue"),
    ("sqs", "ChangeMessageVisibility"): Permission("sqs:ChangeMessageVisibility", "queue"),
    ("sqs", "ChangeMessageVisibilityBatch"): Permission("sqs:ChangeMessageVisibility", "queue"),
    ("sqs", "GetQueueAttributes"): Permission("sqs:GetQueueAttributes", "queue"),
    ("sqs", "GetQueueUrl"): Permission("sqs:GetQueueUrl", "queue"),
    ("ec2", "DescribeInstances"): Permission("ec2:DescribeInstances", "any"),
    ("autoscaling", "CompleteLifecycleAction"): Permission("autoscaling:CompleteLifecycleAction", "asg"),
    ("autoscaling", "RecordLifecycleActionHeartbeat"): Permission(
        "autoscaling:RecordLifecycleActionHeartbeat", "asg"
    ),
    # Describe* of Auto Scaling has no resource-level permissions.
    ("autoscaling", "DescribeAutoScalingInstances"): Permission(
        "autoscaling:DescribeAutoScalingInstances", "any"
    ),
}

# The calls the controller makes: the adapter's own list (``kubespot.aws.session.CALLS``), which
# ``AwsClients.call`` enforces at run time. This import is the one place the policy learns them.
CONTROLLER_CALLS: frozenset[tuple[str, str]] = CALLS

POLICY_VERSION = "2012-10-17"
_SIDS: Mapping[Scope, str] = {
    "queue": "ConsumeInterruptionQueue",
    "any": "DescribeAnyResource",
    "asg": "CompleteLifecycleActions",
}


class UnknownOperation(LookupError):
    """A call the controller makes has no row in ``IAM_ACTIONS``: its permission is undecided."""

    def __init__(self, missing: Iterable[tuple[str, str]]) -> None:
        self.missing = tuple(sorted(missing))
        names = ", ".join(f"{service}:{op}" for service, op in self.missing)
        super().__init__(f"no IAM action known for {names}; add it to kubespot.aws.iam.IAM_ACTIONS")


def permissions(calls: Iterable[tuple[str, str]] = CONTROLLER_CALLS) -> list[Permission]:
    """The permission of every call, in a stable order; ``UnknownOperation`` if one has none."""
    calls = sorted(set(calls))
    missing = [c for c in calls if c not in IAM_ACTIONS]
    if missing:
        raise UnknownOperation(missing)
    return [IAM_ACTIONS[c] for c in calls]


def actions(calls: Iterable[tuple[str, str]] = CONTROLLER_CALLS) -> frozenset[str]:
    """Every IAM action the calls need (without KMS)."""
    return frozenset(p.action for p in permissions(calls))


def controller_policy(
    queue_arn: str,
    *,
    kms_key_arn: str | None = None,
    asg_arns: Iterable[str] = (),
    calls: Iterable[tuple[str, str]] = CONTROLLER_CALLS,
) -> dict[str, Any]:
    """The IAM policy document for the controller's role (IRSA or node role).

    ``queue_arn`` scopes the SQS actions; ``asg_arns`` (optional) the lifecycle-hook actions, which
    otherwise apply to ``*`` because the groups are often created after the policy; ``kms_key_arn``
    adds the KMS actions the queue's customer managed key needs (none for SSE-SQS).
    """
    if not queue_arn.startswith("arn:") or ":sqs:" not in queue_arn:
        raise ValueError(f"not an SQS queue ARN: {queue_arn!r}")
    asg = tuple(dict.fromkeys(asg_arns))
    for arn in asg:
        if not arn.startswith("arn:") or ":autoscaling:" not in arn:
            raise ValueError(f"not an Auto Scaling group ARN: {arn!r}")
    if kms_key_arn is not None and (not kms_key_arn.startswith("arn:") or ":kms:" not in kms_key_arn):
        raise ValueError(f"not a KMS key ARN: {kms_key_arn!r} (IAM needs the key's ARN, not an alias)")

    by_scope: dict[Scope, set[str]] = {}
    kms: set[str] = set()
    for perm in permissions(calls):
        by_scope.setdefault(perm.scope, set()).add(perm.action)
        kms.update(perm.kms)
    resources: dict[Scope, str | list[str]] = {
        "queue": queue_arn,
        "any": "*",
        "asg": list(asg) if asg else "*",
    }
    statements: list[dict[str, Any]] = [
        {
            "Sid": _SIDS[scope],
            "Effect": "Allow",
            "Action": sorted(by_scope[scope]),
            "Resource": resources[scope],
        }
        for scope in ("queue", "any", "asg")
        if scope in by_scope
    ]
    if kms_key_arn is not None and kms:
        statements.append(
            {
                "Sid": "DecryptInterruptionQueue",
                "Effect": "Allow",
                "Action": sorted(kms),
                "Resource": kms_key_arn,
            }
        )
    return {"Version": POLICY_VERSION, "Statement": statements}


def policy_actions(policy: Mapping[str, Any]) -> frozenset[str]:
    """Every action a policy document allows (for checks and tests)."""
    out: set[str] = set()
    for statement in policy["Statement"]:
        action = statement["Action"]
        out.update([action] if isinstance(action, str) else action)
    return frozenset(out)
