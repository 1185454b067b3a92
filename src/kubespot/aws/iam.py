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
  the ``autoScalingGroup`` resource type, so they can be limited to the cluster's groups, and the
  ``autoscaling:ResourceTag/${TagKey}`` condition key: the policy demands the managed tag on the
  group (``Null: false``, any value), so the controller cannot complete another cluster's hooks.
* Reading an SSE-KMS queue needs only ``kms:Decrypt`` on its key; ``kms:GenerateDataKey`` is for
  senders (EventBridge, through the key policy), which the controller is not.
* Elastic Load Balancing's ``Describe*`` actions (both APIs share the ``elasticloadbalancing``
  prefix) support no resource-level permissions; ``DeregisterTargets`` takes the ``targetgroup``
  resource type and ``DeregisterInstancesFromLoadBalancer`` the ``loadbalancer`` one.
* ``ec2:DescribeNetworkInterfaces`` and ``ec2:DescribeSecurityGroups`` take ``*`` only.
  ``ec2:ModifyNetworkInterfaceAttribute`` authorizes a ``network-interface`` (required) and
  optionally ``instance``, ``security-group`` and ``subnet`` resources (Service Authorization
  Reference, "Actions, resources, and condition keys for Amazon EC2"). The interface, group and
  subnet types all support ``ec2:Vpc`` (the VPC's ARN): with ``vpc_ids`` given they are allowed
  only in those VPCs (``ArnLike``, any region and account: VPC ids are unique). The instance type
  supports ``ec2:ResourceTag/${TagKey}``: it is allowed only with the managed tag. Interfaces
  themselves are not tagged by the cluster (the VPC CNI tags its own), so no tag is asked of them.
* ``sns:Publish`` takes the topic; ``events:PutEvents`` the event bus.
* Launching (the ``launch`` group), scoped as Karpenter's ``KarpenterControllerPolicy``
  (aws/karpenter-provider-aws ``website/content/en/docs/getting-started/getting-started-with-karpenter/
  cloudformation.yaml``): ``ec2:CreateFleet`` is also checked as ``ec2:RunInstances`` on the
  instance, volumes, interfaces, image, subnet and groups, as ``ec2:CreateTags`` for the tags it
  sets and as ``iam:PassRole`` on the instance profile's role; ``CreateLaunchTemplate`` likewise
  tags. Tagging is allowed only at creation (``ec2:CreateAction``) and only with this cluster's
  tags in the request (``aws:RequestTag/kubernetes.io/cluster/<cluster>`` = owned,
  ``aws:RequestTag/eks:eks-cluster-name`` = the cluster, a ``karpenter.sh/nodepool`` tag:
  ``AllowScopedResourceCreationTagging``); ``iam:PassRole`` only on the node role(s), only to EC2
  (``AllowPassingInstanceRole``); ``ec2:TerminateInstances`` only on instances carrying
  ``kubernetes.io/cluster/<cluster>`` = owned and a ``karpenter.sh/nodepool`` tag
  (``AllowScopedDeletion``), so not another cluster's. The cluster and the node role(s) have no
  default: a policy with the launch group refuses to be made without them (``ValueError``) rather
  than fall back to ``*``.
* The ``instance-profile`` group (profiles made for ``spec.role``), as ``KarpenterControllerPolicy``'s
  ``AllowScopedInstanceProfile*Actions``: ``iam:CreateInstanceProfile`` (and ``iam:TagInstanceProfile``,
  which tagging at creation also needs) only with this cluster's tags in the request,
  ``iam:AddRoleToInstanceProfile``, ``RemoveRoleFromInstanceProfile`` and ``DeleteInstanceProfile``
  only on profiles carrying them, ``iam:GetInstanceProfile`` on any profile of the account;
  ``iam:GetRole`` (the dry run's check that ``spec.role`` exists; not in Karpenter's policy, whose
  controller has no dry run) on the node role(s) when named, else on any role of the account.

The response actions (issue 5) are opt-in: ``controller_policy(..., actions=["loadbalancer"])``
adds the calls of each group named (``kubespot.aws.CALL_GROUPS``), so a cluster that does not
isolate instances does not grant ``ec2:ModifyNetworkInterfaceAttribute``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kubespot.config.queue import MANAGED_TAG

from .session import CALL_GROUPS, CALLS

#: What an IAM action can be scoped to: the interruption queue, the cluster's Auto Scaling groups,
#: target groups, Classic Load Balancers, SNS topics or event buses (when given, else "*"), network
#: interfaces (always "*"), or nothing narrower than "*".
Scope = Literal[
    "queue",
    "any",
    "asg",
    "target-group",
    "classic-lb",
    "network-interface",
    "sns-topic",
    "event-bus",
    "launch",
    "launch-tagging",
    "nodeclaim-instance",
    "pass-role",
    "profile-read",
    "profile-create",
    "profile-owned",
    "role-read",
]


@dataclass(frozen=True, slots=True)
class Permission:
    """The IAM action that authorizes one API operation, and what it can be scoped to."""

    action: str
    scope: Scope
    #: KMS actions needed on the queue's key when the queue is encrypted with a customer key.
    kms: tuple[str, ...] = ()
    #: Further permissions the operation is checked against (CreateFleet runs instances, tags
    #: them and passes the instance profile's role).
    also: tuple[Permission, ...] = ()


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
    ("autoscaling", "DescribeLifecycleHooks"): Permission("autoscaling:DescribeLifecycleHooks", "any"),
    ("autoscaling", "DescribeAutoScalingInstances"): Permission(
        "autoscaling:DescribeAutoScalingInstances", "any"
    ),
    # Load balancers (ELBv2 and Classic share the elasticloadbalancing action prefix).
    ("elbv2", "DescribeTargetGroups"): Permission("elasticloadbalancing:DescribeTargetGroups", "any"),
    ("elbv2", "DescribeTags"): Permission("elasticloadbalancing:DescribeTags", "any"),
    ("elbv2", "DescribeTargetHealth"): Permission("elasticloadbalancing:DescribeTargetHealth", "any"),
    ("elbv2", "DeregisterTargets"): Permission("elasticloadbalancing:DeregisterTargets", "target-group"),
    ("elb", "DescribeLoadBalancers"): Permission("elasticloadbalancing:DescribeLoadBalancers", "any"),
    ("elb", "DeregisterInstancesFromLoadBalancer"): Permission(
        "elasticloadbalancing:DeregisterInstancesFromLoadBalancer", "classic-lb"
    ),
    # Isolation.
    ("ec2", "DescribeNetworkInterfaces"): Permission("ec2:DescribeNetworkInterfaces", "any"),
    ("ec2", "DescribeSecurityGroups"): Permission("ec2:DescribeSecurityGroups", "any"),
    ("ec2", "ModifyNetworkInterfaceAttribute"): Permission(
        "ec2:ModifyNetworkInterfaceAttribute", "network-interface"
    ),
    # The capacity catalog: EC2's Describe* and the Price List Service take no resource-level
    # permissions (Service Authorization Reference), so "*".
    ("ec2", "DescribeInstanceTypes"): Permission("ec2:DescribeInstanceTypes", "any"),
    ("ec2", "DescribeInstanceTypeOfferings"): Permission("ec2:DescribeInstanceTypeOfferings", "any"),
    ("ec2", "DescribeSpotPriceHistory"): Permission("ec2:DescribeSpotPriceHistory", "any"),
    ("pricing", "GetProducts"): Permission("pricing:GetProducts", "any"),
    # EC2NodeClass resolution: EC2's Describe* take "*" only. ssm:GetParameter is "*" too: besides
    # the public /aws/service/ parameters of the aliases, an amiSelectorTerm's ssmParameter may name
    # any parameter of the account.
    ("ec2", "DescribeSubnets"): Permission("ec2:DescribeSubnets", "any"),
    ("ec2", "DescribeImages"): Permission("ec2:DescribeImages", "any"),
    ("ssm", "GetParameter"): Permission("ssm:GetParameter", "any"),
    # Launching (aws/karpenter-provider-aws's CloudFormation policy, KarpenterControllerPolicy):
    # CreateFleet is authorized as itself and as RunInstances on every resource the launch touches,
    # CreateTags for the tags given at creation (only then: ec2:CreateAction), and iam:PassRole for
    # the instance profile's role, only towards EC2. Templates are named at run time: "*".
    # TerminateInstances only on instances carrying a NodePool tag.
    ("ec2", "CreateFleet"): Permission(
        "ec2:CreateFleet",
        "launch",
        also=(
            Permission("ec2:RunInstances", "launch"),
            Permission("ec2:CreateTags", "launch-tagging"),
            Permission("iam:PassRole", "pass-role"),
        ),
    ),
    ("ec2", "CreateLaunchTemplate"): Permission(
        "ec2:CreateLaunchTemplate", "launch", also=(Permission("ec2:CreateTags", "launch-tagging"),)
    ),
    ("ec2", "DescribeLaunchTemplates"): Permission("ec2:DescribeLaunchTemplates", "any"),
    ("ec2", "TerminateInstances"): Permission("ec2:TerminateInstances", "nodeclaim-instance"),
    # Launch templates carry the NodePool and cluster tags too: deleted under the same conditions
    # (KarpenterControllerPolicy's AllowScopedDeletion covers both).
    ("ec2", "DeleteLaunchTemplate"): Permission("ec2:DeleteLaunchTemplate", "nodeclaim-instance"),
    # The cluster's endpoint, CA and service CIDR when the launch settings leave them empty.
    ("eks", "DescribeCluster"): Permission("eks:DescribeCluster", "any"),
    # The instance profiles made for spec.role (KarpenterControllerPolicy's
    # AllowScopedInstanceProfile*Actions): read any profile of the account; create (and tag at
    # creation) only with this cluster's tags in the request; re-role and delete only profiles
    # carrying them.
    ("iam", "GetInstanceProfile"): Permission("iam:GetInstanceProfile", "profile-read"),
    # Listing takes no resource-level condition (AllowUnscopedInstanceProfileListAction): "*".
    ("iam", "ListInstanceProfiles"): Permission("iam:ListInstanceProfiles", "profile-read"),
    # The dry run's check that spec.role exists (a real run attaches it instead): the node role(s)
    # when named (the only roles a launch may pass), else any role of the account.
    ("iam", "GetRole"): Permission("iam:GetRole", "role-read"),
    ("iam", "CreateInstanceProfile"): Permission(
        "iam:CreateInstanceProfile",
        "profile-create",
        also=(Permission("iam:TagInstanceProfile", "profile-create"),),
    ),
    ("iam", "AddRoleToInstanceProfile"): Permission("iam:AddRoleToInstanceProfile", "profile-owned"),
    ("iam", "RemoveRoleFromInstanceProfile"): Permission(
        "iam:RemoveRoleFromInstanceProfile", "profile-owned"
    ),
    ("iam", "DeleteInstanceProfile"): Permission("iam:DeleteInstanceProfile", "profile-owned"),
    # The summary.
    ("sns", "Publish"): Permission("sns:Publish", "sns-topic"),
    ("events", "PutEvents"): Permission("events:PutEvents", "event-bus"),
}

# The calls the controller makes: the adapter's own list (``kubespot.aws.session.CALLS``), which
# ``AwsClients.call`` enforces at run time. This import is the one place the policy learns them.
CONTROLLER_CALLS: frozenset[tuple[str, str]] = CALLS

#: The response actions a policy can grant, by the names ``kubespot aws policy --actions`` takes.
ACTION_GROUPS: tuple[str, ...] = tuple(name for name in CALL_GROUPS if name != "queue")

POLICY_VERSION = "2012-10-17"
#: Statement ids, in the order statements appear.
_SIDS: Mapping[Scope, str] = {
    "queue": "ConsumeInterruptionQueue",
    "any": "DescribeAnyResource",
    "asg": "CompleteLifecycleActions",
    "target-group": "DeregisterLoadBalancerTargets",
    "classic-lb": "DeregisterFromClassicLoadBalancers",
    "network-interface": "QuarantineNetworkInterfaces",
    "sns-topic": "PublishSummaryToSns",
    "event-bus": "PutSummaryEvents",
    "launch": "LaunchNodeClaimInstances",
    "launch-tagging": "TagAtLaunch",
    "nodeclaim-instance": "TerminateNodeClaimInstances",
    "pass-role": "PassNodeRoleToEc2",
    "profile-read": "ReadInstanceProfiles",
    "profile-create": "CreateClusterInstanceProfiles",
    "profile-owned": "ManageClusterInstanceProfiles",
    "role-read": "ReadNodeRoles",
}
#: The launch path's statements with conditions (their resources are not known in advance).
_CONDITIONED: tuple[Scope, ...] = (
    "launch-tagging",
    "nodeclaim-instance",
    "pass-role",
    "profile-create",
    "profile-owned",
)
#: The services a node role may be passed to (both partitions' names, as Karpenter lists them).
_EC2_SERVICES = ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]
_NODEPOOL_TAG = "karpenter.sh/nodepool"


def _launch_conditions(scope: Scope, cluster: str) -> dict[str, Any]:
    """The conditions of a launch statement for ``cluster`` (``KarpenterControllerPolicy``)."""
    owned = f"kubernetes.io/cluster/{cluster}"
    if scope == "launch-tagging":
        return {
            "StringEquals": {
                f"aws:RequestTag/{owned}": "owned",
                "aws:RequestTag/eks:eks-cluster-name": cluster,
                "ec2:CreateAction": ["CreateFleet", "RunInstances", "CreateLaunchTemplate"],
            },
            "StringLike": {f"aws:RequestTag/{_NODEPOOL_TAG}": "*"},
        }
    if scope == "nodeclaim-instance":
        return {
            "StringEquals": {f"aws:ResourceTag/{owned}": "owned"},
            "StringLike": {f"aws:ResourceTag/{_NODEPOOL_TAG}": "*"},
        }
    if scope in ("profile-create", "profile-owned"):
        # Karpenter also pins topology.kubernetes.io/region; kubespot's policy has no region.
        key = "aws:RequestTag" if scope == "profile-create" else "aws:ResourceTag"
        return {
            "StringEquals": {f"{key}/{owned}": "owned", f"{key}/eks:eks-cluster-name": cluster},
            "StringLike": {f"{key}/karpenter.k8s.aws/ec2nodeclass": "*"},
        }
    return {"StringEquals": {"iam:PassedToService": _EC2_SERVICES}}


_ROLE_ARN = re.compile(r"^arn:[a-z-]+:iam::\d{12}:role/[\w+=,.@/-]+$")
_ROLE_NAME = re.compile(r"^[\w+=,.@-]{1,64}$")
_CLUSTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")


def _role_arns(roles: Iterable[str], account_id: str | None, partition: str) -> list[str]:
    """The node roles as ARNs: an ARN as given, a name in ``account_id`` (without a path)."""
    out: list[str] = []
    for role in dict.fromkeys(roles):
        if role.startswith("arn:"):
            if not _ROLE_ARN.match(role):
                raise ValueError(f"not an IAM role ARN: {role!r}")
            out.append(role)
        elif not _ROLE_NAME.match(role):
            raise ValueError(f"not an IAM role name: {role!r}")
        elif account_id is None or not re.fullmatch(r"\d{12}", account_id):
            raise ValueError(f"the node role {role!r} is a name: give its ARN, or the 12-digit account id")
        else:
            out.append(f"arn:{partition}:iam::{account_id}:role/{role}")
    return out


#: What an ARN given for each scope must look like: (service part, resource prefix, what it is).
_ARN_SHAPES: Mapping[Scope, tuple[str, str, str]] = {
    "asg": ("autoscaling", "autoScalingGroup:", "an Auto Scaling group"),
    "target-group": ("elasticloadbalancing", "targetgroup/", "a target group"),
    "classic-lb": ("elasticloadbalancing", "loadbalancer/", "a Classic Load Balancer"),
    "sns-topic": ("sns", "", "an SNS topic"),
    "event-bus": ("events", "event-bus/", "an EventBridge event bus"),
}


#: The resource types ``ec2:ModifyNetworkInterfaceAttribute`` authorizes that have ``ec2:Vpc``.
_IN_VPC_TYPES = ("network-interface", "security-group", "subnet")
_VPC_ID = re.compile(r"^vpc-[0-9a-f]{8,17}$")


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
    return frozenset(a.action for p in permissions(calls) for a in (p, *p.also))


def calls_for(actions: Iterable[str] = (), *, queue: bool = True) -> frozenset[tuple[str, str]]:
    """The calls of the queue processor (when ``queue``) and of each response action named.

    ``ValueError`` for a name not in ``ACTION_GROUPS``.
    """
    names = list(dict.fromkeys(actions))
    unknown = [n for n in names if n not in ACTION_GROUPS]
    if unknown:
        raise ValueError(f"unknown action {', '.join(unknown)}; known: {', '.join(ACTION_GROUPS)}")
    groups = (["queue"] if queue else []) + names
    return frozenset().union(*(CALL_GROUPS[g] for g in groups))


def _arns(scope: Scope, arns: Iterable[str]) -> tuple[str, ...]:
    service, prefix, what = _ARN_SHAPES[scope]
    unique = tuple(dict.fromkeys(arns))
    for arn in unique:
        parts = arn.split(":", 5)
        if len(parts) < 6 or parts[0] != "arn" or parts[2] != service or not parts[5].startswith(prefix):
            raise ValueError(f"not {what} ARN: {arn!r}")
    return unique


def controller_policy(
    queue_arn: str | None,
    *,
    kms_key_arn: str | None = None,
    asg_arns: Iterable[str] = (),
    actions: Iterable[str] = (),
    target_group_arns: Iterable[str] = (),
    load_balancer_arns: Iterable[str] = (),
    sns_topic_arns: Iterable[str] = (),
    event_bus_arns: Iterable[str] = (),
    managed_tag: str | None = MANAGED_TAG,
    vpc_ids: Iterable[str] = (),
    partition: str = "aws",
    calls: Iterable[tuple[str, str]] | None = None,
    cluster: str | None = None,
    node_roles: Iterable[str] = (),
    account_id: str | None = None,
) -> dict[str, Any]:
    """The IAM policy document for the controller's role (IRSA or node role).

    ``queue_arn`` scopes the SQS actions (None: a controller that reads no queue, IMDS-only
    clusters; only ``actions`` are granted then); ``asg_arns`` (optional) the lifecycle-hook
    actions, which otherwise apply to ``*`` because the groups are often created after the policy;
    ``kms_key_arn`` adds the KMS actions the queue's customer managed key needs (none for SSE-SQS).

    ``actions`` names the response actions enabled (``ACTION_GROUPS``: ``loadbalancer``,
    ``classic-loadbalancer``, ``isolate``, ``sns``, ``eventbridge``); their write actions are scoped
    to ``target_group_arns``, ``load_balancer_arns`` (Classic), ``sns_topic_arns`` and
    ``event_bus_arns`` when given, else ``*``. ``calls`` replaces the derived call list entirely.

    ``managed_tag`` (None: no condition) must be on the Auto Scaling group for the lifecycle-hook
    actions and on the instance for ``ec2:ModifyNetworkInterfaceAttribute``; ``vpc_ids`` limit that
    action to interfaces, groups and subnets of those VPCs. ``partition`` is the ARN partition of the
    EC2 resource patterns.

    The ``launch`` group needs ``cluster`` (its tags scope tagging and termination) and
    ``node_roles`` (ARNs, or names in ``account_id``: the only roles ``iam:PassRole`` may pass);
    without them ``ValueError``.
    """
    if calls is None:
        calls = calls_for(actions, queue=queue_arn is not None)
    node_roles = tuple(node_roles)  # read twice: PassRole's and GetRole's resources
    if queue_arn is not None and (not queue_arn.startswith("arn:") or ":sqs:" not in queue_arn):
        raise ValueError(f"not an SQS queue ARN: {queue_arn!r}")
    vpcs = tuple(dict.fromkeys(vpc_ids))
    bad_vpcs = [v for v in vpcs if not _VPC_ID.match(v)]
    if bad_vpcs:
        raise ValueError(f"not a VPC id: {bad_vpcs[0]!r} (vpc-...)")
    if managed_tag is not None and not managed_tag.strip():
        raise ValueError("the managed tag is empty: name it, or leave the tag conditions out")
    if kms_key_arn is not None and (not kms_key_arn.startswith("arn:") or ":kms:" not in kms_key_arn):
        raise ValueError(f"not a KMS key ARN: {kms_key_arn!r} (IAM needs the key's ARN, not an alias)")
    scoped: dict[Scope, tuple[str, ...]] = {
        "asg": _arns("asg", asg_arns),
        "target-group": _arns("target-group", target_group_arns),
        "classic-lb": _arns("classic-lb", load_balancer_arns),
        "sns-topic": _arns("sns-topic", sns_topic_arns),
        "event-bus": _arns("event-bus", event_bus_arns),
    }

    by_scope: dict[Scope, set[str]] = {}
    kms: set[str] = set()
    for perm in permissions(calls):
        for granted in (perm, *perm.also):
            by_scope.setdefault(granted.scope, set()).add(granted.action)
        kms.update(perm.kms)
    if not by_scope:
        raise ValueError("no calls to allow: name the queue or at least one action")
    if "queue" in by_scope and queue_arn is None:
        raise ValueError("the queue's calls need the queue's ARN")
    resources: dict[Scope, str | list[str]] = {
        scope: list(arns) if arns else "*" for scope, arns in scoped.items()
    }
    resources.update({"queue": queue_arn or "", "any": "*"})
    resources.update({scope: "*" for scope in _CONDITIONED})
    resources["launch"] = "*"
    if any(scope in by_scope for scope in _CONDITIONED):
        if cluster is None or not _CLUSTER.match(cluster):
            raise ValueError(
                f"the launch calls are scoped to the cluster's tags: name the cluster (got {cluster!r})"
            )
        resources["nodeclaim-instance"] = f"arn:{partition}:ec2:*:*:instance/*"
        if "ec2:DeleteLaunchTemplate" in by_scope.get("nodeclaim-instance", ()):
            resources["nodeclaim-instance"] = [
                f"arn:{partition}:ec2:*:*:instance/*",
                f"arn:{partition}:ec2:*:*:launch-template/*",
            ]
    account = account_id if account_id and re.fullmatch(r"\d{12}", account_id) else "*"
    for scope in ("profile-read", "profile-create", "profile-owned"):
        resources[scope] = f"arn:{partition}:iam::{account}:instance-profile/*"
    named = _role_arns(node_roles, account_id, partition) if "role-read" in by_scope else []
    any_role = f"arn:{partition}:iam::{account}:role/*"
    resources["role-read"] = named if len(named) > 1 else named[0] if named else any_role
    if "pass-role" in by_scope:
        roles = _role_arns(node_roles, account_id, partition)
        if not roles:
            raise ValueError(
                "iam:PassRole is limited to the node role(s): name them (ARN, or name and account)"
            )
        resources["pass-role"] = roles if len(roles) > 1 else roles[0]
    statements: list[dict[str, Any]] = []
    for scope in _SIDS:
        if scope not in by_scope:
            continue
        if scope == "network-interface":
            statements.extend(_quarantine_statements(sorted(by_scope[scope]), managed_tag, vpcs, partition))
            continue
        statement: dict[str, Any] = {
            "Sid": _SIDS[scope],
            "Effect": "Allow",
            "Action": sorted(by_scope[scope]),
            "Resource": resources[scope],
        }
        if scope == "asg" and managed_tag is not None:
            statement["Condition"] = {"Null": {f"autoscaling:ResourceTag/{managed_tag}": "false"}}
        if scope in _CONDITIONED:
            assert cluster is not None
            statement["Condition"] = _launch_conditions(scope, cluster)
        statements.append(statement)
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


def _quarantine_statements(
    actions: list[str], managed_tag: str | None, vpcs: tuple[str, ...], partition: str
) -> list[dict[str, Any]]:
    """``ec2:ModifyNetworkInterfaceAttribute``: one statement for the resource types that have
    ``ec2:Vpc``, one for the instance (the managed tag). Every type the action may authorize is
    covered, so a request naming an optional one is not refused for lack of a statement."""
    in_vpc: dict[str, Any] = {
        "Sid": _SIDS["network-interface"],
        "Effect": "Allow",
        "Action": actions,
        "Resource": [f"arn:{partition}:ec2:*:*:{kind}/*" for kind in _IN_VPC_TYPES],
    }
    if vpcs:
        in_vpc["Condition"] = {"ArnLike": {"ec2:Vpc": [f"arn:{partition}:ec2:*:*:vpc/{v}" for v in vpcs]}}
    instance: dict[str, Any] = {
        "Sid": "QuarantineManagedInstances",
        "Effect": "Allow",
        "Action": actions,
        "Resource": f"arn:{partition}:ec2:*:*:instance/*",
    }
    if managed_tag is not None:
        instance["Condition"] = {"Null": {f"ec2:ResourceTag/{managed_tag}": "false"}}
    return [in_vpc, instance]


def policy_actions(policy: Mapping[str, Any]) -> frozenset[str]:
    """Every action a policy document allows (for checks and tests)."""
    out: set[str] = set()
    for statement in policy["Statement"]:
        action = statement["Action"]
        out.update([action] if isinstance(action, str) else action)
    return frozenset(out)
