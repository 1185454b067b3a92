"""The controller's IAM policy: derived from the calls it makes, no more and no less.

Three guards keep the policy and the code in step: every operation in ``CALLS`` has a row in the
IAM table; the policy allows exactly the actions those operations need; and an AST scan of
``src/kubespot/aws`` finds every SDK operation named in the adapter's code (client methods, their
snake_case names as strings for paginators or ``getattr``, and API names passed to
``AwsClients.call``) and requires it to be in ``CALLS``. ``bootstrap.py`` is left out of the scan:
it is the admin tool a human runs with broader rights, and none of its calls are the controller's.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import botocore.session
import pytest
from botocore import xform_name

from kubespot.aws import CALL_GROUPS, CALLS, iam
from kubespot.aws.bootstrap import InvalidRequest, Request
from kubespot.cli import main

AWS_PACKAGE = Path(__file__).resolve().parents[3] / "src" / "kubespot" / "aws"
#: Not scanned: the admin tool (its own, broader calls) and the permission table (names, no calls).
NOT_CONTROLLER_CODE = {"bootstrap.py", "iam.py"}
#: Services whose operation names the scan knows: the adapter's three, and those it might plausibly
#: grow into (a call to any of them must show up in CALLS, and so in the policy).
SCANNED_SERVICES = ("sqs", "ec2", "autoscaling", "events", "sns", "sts", "kms", "elbv2", "elb", "iam")
QUEUE_ARN = "arn:aws:sqs:eu-west-1:123456789012:prod-kubespot-interruptions"
KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
ASG_ARN = "arn:aws:autoscaling:eu-west-1:123456789012:autoScalingGroup:*:autoScalingGroupName/ng-1"
TG_ARN = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/k8s-web/0123456789abcdef"
CLB_ARN = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/legacy-web"
TOPIC_ARN = "arn:aws:sns:eu-west-1:123456789012:kubespot-summaries"
BUS_ARN = "arn:aws:events:eu-west-1:123456789012:event-bus/ops"
NODE_ROLE_ARN = "arn:aws:iam::123456789012:role/KarpenterNodeRole-prod"
#: What the launch group needs: the cluster its tags name and the node role it may pass.
LAUNCH = {"cluster": "prod", "node_roles": [NODE_ROLE_ARN]}
QUEUE_ACTIONS = {
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "ec2:DescribeInstances",
    "autoscaling:CompleteLifecycleAction",
    "autoscaling:RecordLifecycleActionHeartbeat",
    "autoscaling:DescribeLifecycleHooks",
}


# --- the table and the policy --------------------------------------------------------------------


def test_calls_are_todays_operations_and_iam_uses_them() -> None:
    assert iam.CONTROLLER_CALLS is CALLS
    today = {
        ("sqs", "ReceiveMessage"),
        ("sqs", "DeleteMessageBatch"),
        ("sqs", "ChangeMessageVisibilityBatch"),
        ("ec2", "DescribeInstances"),
        ("autoscaling", "CompleteLifecycleAction"),
        ("autoscaling", "RecordLifecycleActionHeartbeat"),
    }
    assert today <= CALLS


def test_iam_table_covers_every_call() -> None:
    missing = sorted(CALLS - set(iam.IAM_ACTIONS))
    assert not missing, f"add these to kubespot.aws.iam.IAM_ACTIONS: {missing}"


def test_iam_table_names_real_operations() -> None:
    """A typo in the table would make a row that no call can ever match."""
    session = botocore.session.get_session()
    for service, operation in iam.IAM_ACTIONS:
        assert operation in session.get_service_model(service).operation_names, (service, operation)


def test_policy_allows_exactly_what_the_calls_need() -> None:
    """By default the queue processor's calls only (the policy as it was before issue 5)."""
    policy = iam.controller_policy(QUEUE_ARN)
    wanted = {iam.IAM_ACTIONS[c].action for c in CALL_GROUPS["queue"]}
    assert iam.policy_actions(policy) == wanted == QUEUE_ACTIONS
    assert [s["Sid"] for s in policy["Statement"]] == [
        "ConsumeInterruptionQueue",
        "DescribeAnyResource",
        "CompleteLifecycleActions",
    ]


def test_calls_are_the_union_of_the_groups() -> None:
    assert frozenset().union(*CALL_GROUPS.values()) == CALLS
    assert set(iam.ACTION_GROUPS) == set(CALL_GROUPS) - {"queue"}
    everything = iam.controller_policy(QUEUE_ARN, actions=iam.ACTION_GROUPS, **LAUNCH)  # type: ignore[arg-type]
    assert iam.policy_actions(everything) == iam.actions(CALLS)
    assert {iam.IAM_ACTIONS[c].action for c in CALLS} <= iam.actions(CALLS)


@pytest.mark.parametrize(
    ("action", "granted"),
    [
        (
            "loadbalancer",
            {
                "elasticloadbalancing:DescribeTargetGroups",
                "elasticloadbalancing:DescribeTags",
                "elasticloadbalancing:DescribeTargetHealth",
                "elasticloadbalancing:DeregisterTargets",
            },
        ),
        (
            "classic-loadbalancer",
            {
                "elasticloadbalancing:DescribeLoadBalancers",
                "elasticloadbalancing:DeregisterInstancesFromLoadBalancer",
            },
        ),
        (
            "isolate",
            {
                "ec2:DescribeInstances",  # the managed-tag check
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeSecurityGroups",
                "ec2:ModifyNetworkInterfaceAttribute",
            },
        ),
        ("sns", {"sns:Publish"}),
        ("eventbridge", {"events:PutEvents"}),
        (
            "catalog",
            {
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeSpotPriceHistory",
                "pricing:GetProducts",
            },
        ),
        # aws/karpenter-provider-aws pkg/providers/{subnet,securitygroup,amifamily,ssm}: the
        # EC2NodeClass's selector terms and AMI aliases.
        (
            "nodeclass",
            {"ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeImages", "ssm:GetParameter"},
        ),
        # aws/karpenter-provider-aws pkg/providers/instance/instance.go (CreateFleet, Get, List,
        # Delete) and pkg/providers/launchtemplate/launchtemplate.go (ensureLaunchTemplate,
        # DeleteAll, cachedEvictedFunc); CreateFleet is also authorized as RunInstances, CreateTags
        # and PassRole.
        (
            "launch",
            {
                "ec2:CreateFleet",
                "ec2:RunInstances",
                "ec2:CreateTags",
                "iam:PassRole",
                "ec2:DescribeLaunchTemplates",
                "ec2:CreateLaunchTemplate",
                "ec2:DeleteLaunchTemplate",
                "ec2:DescribeInstances",
                "ec2:TerminateInstances",
                "eks:DescribeCluster",
            },
        ),
    ],
)
def test_each_action_adds_only_its_calls(action: str, granted: set[str]) -> None:
    policy = iam.controller_policy(QUEUE_ARN, actions=[action], **LAUNCH)  # type: ignore[arg-type]
    assert iam.policy_actions(policy) == QUEUE_ACTIONS | granted
    alone = iam.controller_policy(None, actions=[action], **LAUNCH)  # type: ignore[arg-type]
    assert iam.policy_actions(alone) == granted
    assert not any(a.startswith("sqs:") for a in iam.policy_actions(alone))


def test_action_resources_are_scoped_when_given() -> None:
    policy = iam.controller_policy(
        QUEUE_ARN,
        actions=iam.ACTION_GROUPS,
        target_group_arns=[TG_ARN, TG_ARN],
        load_balancer_arns=[CLB_ARN],
        sns_topic_arns=[TOPIC_ARN],
        event_bus_arns=[BUS_ARN],
        **LAUNCH,  # type: ignore[arg-type]
    )
    by_action = {a: s["Resource"] for s in policy["Statement"] for a in s["Action"]}
    assert by_action["elasticloadbalancing:DeregisterTargets"] == [TG_ARN]
    assert by_action["elasticloadbalancing:DeregisterInstancesFromLoadBalancer"] == [CLB_ARN]
    assert by_action["sns:Publish"] == [TOPIC_ARN]
    assert by_action["events:PutEvents"] == [BUS_ARN]
    # No resource-level permissions exist for these (Describe*), or the resources are not known
    # in advance (the instance's network interfaces).
    for action in (
        "elasticloadbalancing:DescribeTargetGroups",
        "elasticloadbalancing:DescribeTargetHealth",
        "ec2:DescribeNetworkInterfaces",
    ):
        assert by_action[action] == "*"
    unscoped = iam.controller_policy(QUEUE_ARN, actions=["loadbalancer", "sns", "eventbridge"])
    by_action = {a: s["Resource"] for s in unscoped["Statement"] for a in s["Action"]}
    assert by_action["elasticloadbalancing:DeregisterTargets"] == "*"
    assert by_action["sns:Publish"] == "*"
    sids = [s["Sid"] for s in policy["Statement"]]
    assert len(sids) == len(set(sids))
    conditioned = {s["Sid"] for s in policy["Statement"] if "Condition" in s}
    assert conditioned == {
        "CompleteLifecycleActions",
        "QuarantineManagedInstances",
        "TagAtLaunch",
        "TerminateNodeClaimInstances",
        "PassNodeRoleToEc2",
        "CreateClusterInstanceProfiles",
        "ManageClusterInstanceProfiles",
    }
    assert all(s["Effect"] == "Allow" for s in policy["Statement"])


def test_action_policy_errors() -> None:
    with pytest.raises(ValueError, match="unknown action nope"):
        iam.controller_policy(QUEUE_ARN, actions=["sns", "nope"])
    with pytest.raises(ValueError, match="no calls to allow"):
        iam.controller_policy(None)
    with pytest.raises(ValueError, match="queue's ARN"):
        iam.controller_policy(None, calls=CALLS)
    for kwargs, message in (
        ({"target_group_arns": [CLB_ARN]}, "target group ARN"),
        ({"load_balancer_arns": [TG_ARN]}, "Classic Load Balancer ARN"),
        ({"sns_topic_arns": [BUS_ARN]}, "SNS topic ARN"),
        ({"event_bus_arns": [TOPIC_ARN]}, "event bus ARN"),
    ):
        with pytest.raises(ValueError, match=message):
            iam.controller_policy(QUEUE_ARN, actions=iam.ACTION_GROUPS, **LAUNCH, **kwargs)  # type: ignore[arg-type]


def test_batch_operations_use_the_singular_actions() -> None:
    """SQS has no sqs:*Batch IAM actions; the singular ones authorize the batch APIs."""
    assert iam.IAM_ACTIONS[("sqs", "DeleteMessageBatch")].action == "sqs:DeleteMessage"
    assert iam.IAM_ACTIONS[("sqs", "ChangeMessageVisibilityBatch")].action == "sqs:ChangeMessageVisibility"
    assert not any(a.endswith("Batch") for a in iam.policy_actions(iam.controller_policy(QUEUE_ARN)))


def test_launch_statements_are_limited_by_conditions() -> None:
    """The launch group as Karpenter's KarpenterControllerPolicy limits it
    (aws/karpenter-provider-aws website/content/en/docs/getting-started/getting-started-with-
    karpenter/cloudformation.yaml: AllowScopedResourceCreationTagging, AllowScopedDeletion,
    AllowPassingInstanceRole): tags only at creation and only with this cluster's tags in the
    request, termination only of this cluster's NodePool instances, only the node role passed,
    and only to EC2."""
    policy = iam.controller_policy(None, actions=["launch"], **LAUNCH)  # type: ignore[arg-type]
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert by_sid["LaunchNodeClaimInstances"]["Action"] == [
        "ec2:CreateFleet",
        "ec2:CreateLaunchTemplate",
        "ec2:RunInstances",
    ]
    tagging = by_sid["TagAtLaunch"]
    assert tagging["Action"] == ["ec2:CreateTags"]
    equals = tagging["Condition"]["StringEquals"]
    assert set(equals.pop("ec2:CreateAction")) == {"CreateFleet", "RunInstances", "CreateLaunchTemplate"}
    assert equals == {
        "aws:RequestTag/kubernetes.io/cluster/prod": "owned",
        "aws:RequestTag/eks:eks-cluster-name": "prod",
    }
    assert tagging["Condition"]["StringLike"] == {"aws:RequestTag/karpenter.sh/nodepool": "*"}
    terminate = by_sid["TerminateNodeClaimInstances"]
    # KarpenterControllerPolicy's AllowScopedDeletion: instances and launch templates alike.
    assert terminate["Action"] == ["ec2:DeleteLaunchTemplate", "ec2:TerminateInstances"]
    assert terminate["Resource"] == ["arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:*:*:launch-template/*"]
    assert terminate["Condition"] == {
        "StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/prod": "owned"},
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
    }
    passing = by_sid["PassNodeRoleToEc2"]
    assert passing["Resource"] == NODE_ROLE_ARN
    assert passing["Condition"] == {
        "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
    }
    assert "ec2:DescribeLaunchTemplates" in by_sid["DescribeAnyResource"]["Action"]


def test_resources_are_as_narrow_as_iam_allows() -> None:
    policy = iam.controller_policy(QUEUE_ARN)
    by_action = {a: s["Resource"] for s in policy["Statement"] for a in s["Action"]}
    assert by_action["sqs:ReceiveMessage"] == QUEUE_ARN
    assert by_action["sqs:DeleteMessage"] == QUEUE_ARN
    assert by_action["sqs:ChangeMessageVisibility"] == QUEUE_ARN
    assert by_action["ec2:DescribeInstances"] == "*"  # no resource-level permissions exist
    assert by_action["autoscaling:CompleteLifecycleAction"] == "*"
    assert [s["Sid"] for s in policy["Statement"] if "Condition" in s] == ["CompleteLifecycleActions"]
    assert not any(a.startswith("kms:") for a in iam.policy_actions(policy))

    scoped = iam.controller_policy(QUEUE_ARN, asg_arns=[ASG_ARN, ASG_ARN])
    asg = [s for s in scoped["Statement"] if "autoscaling:CompleteLifecycleAction" in s["Action"]]
    assert [s["Resource"] for s in asg] == [[ASG_ARN]]


def test_kms_only_with_a_customer_key_and_only_decrypt() -> None:
    """The controller only receives: kms:Decrypt on the key; GenerateDataKey is for the sender."""
    policy = iam.controller_policy(QUEUE_ARN, kms_key_arn=KEY_ARN)
    kms = [s for s in policy["Statement"] if any(a.startswith("kms:") for a in s["Action"])]
    assert kms == [
        {"Sid": "DecryptInterruptionQueue", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": KEY_ARN}
    ]


def test_unknown_operation_is_an_error() -> None:
    with pytest.raises(iam.UnknownOperation, match="sqs:SendMessage"):
        iam.controller_policy(QUEUE_ARN, calls={*CALLS, ("sqs", "SendMessage")})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"queue_arn": "https://sqs.eu-west-1.amazonaws.com/1/q"}, "SQS queue ARN"),
        ({"asg_arns": ["ng-1"]}, "Auto Scaling group ARN"),
        ({"kms_key_arn": "alias/mine"}, "KMS key ARN"),
    ],
)
def test_bad_arns_are_refused(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"queue_arn": QUEUE_ARN, **kwargs}
    queue_arn = str(args.pop("queue_arn"))
    with pytest.raises(ValueError, match=message):
        iam.controller_policy(queue_arn, **args)  # type: ignore[arg-type]


# --- `kubespot aws policy` -----------------------------------------------------------------------


def test_policy_command_prints_only_the_policy(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["aws", "policy", "--queue-arn", QUEUE_ARN])
    out = capsys.readouterr().out
    assert code == 0
    policy = json.loads(out)  # nothing but JSON on stdout
    assert policy == iam.controller_policy(QUEUE_ARN)
    assert iam.policy_actions(policy) == {iam.IAM_ACTIONS[c].action for c in CALL_GROUPS["queue"]}


def test_policy_command_with_actions(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "aws",
        "policy",
        "--queue-arn",
        QUEUE_ARN,
        "--actions",
        "loadbalancer,isolate",
        "--actions",
        "sns",
    ]
    assert main([*argv, "--target-group-arn", TG_ARN, "--sns-topic-arn", TOPIC_ARN]) == 0
    policy = json.loads(capsys.readouterr().out)
    assert policy == iam.controller_policy(
        QUEUE_ARN,
        actions=["loadbalancer", "isolate", "sns"],
        target_group_arns=[TG_ARN],
        sns_topic_arns=[TOPIC_ARN],
    )
    assert "events:PutEvents" not in iam.policy_actions(policy)

    launch = ["--cluster", "prod", "--node-role", NODE_ROLE_ARN]
    assert main(["aws", "policy", "--no-queue", "--actions", "all", "--event-bus-arn", BUS_ARN, *launch]) == 0
    policy = json.loads(capsys.readouterr().out)
    assert policy == iam.controller_policy(
        None,
        actions=iam.ACTION_GROUPS,
        event_bus_arns=[BUS_ARN],
        **LAUNCH,  # type: ignore[arg-type]
    )
    assert not any(a.startswith(("sqs:", "autoscaling:")) for a in iam.policy_actions(policy))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--queue-arn", QUEUE_ARN, "--actions", "loadbalancer,teleport"], "unknown action teleport"),
        (["--no-queue"], "--no-queue needs --actions"),
        (["--no-queue", "--queue-arn", QUEUE_ARN, "--actions", "sns"], "--no-queue leaves the queue out"),
        (["--queue-arn", QUEUE_ARN, "--actions", "sns", "--sns-topic-arn", "topic"], "SNS topic ARN"),
        (["--queue-arn", QUEUE_ARN, "--actions", "launch", "--node-role", "r"], "name the cluster"),
        (["--queue-arn", QUEUE_ARN, "--actions", "launch", "--cluster", "prod"], "limited to the node role"),
        (
            ["--queue-arn", QUEUE_ARN, "--actions", "launch", "--cluster", "prod", "--node-role", "r"],
            "give its ARN, or the 12-digit account id",
        ),
    ],
)
def test_policy_command_action_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["aws", "policy", *argv]) == 2
    assert message in capsys.readouterr().err


def test_policy_command_from_cluster_account_and_region(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["aws", "policy", "--cluster", "prod", "--account-id", "123456789012", "--region", "eu-west-1"]
    code = main([*argv, "--kms-key", "1234abcd-12ab-34cd-56ef-1234567890ab", "--asg-arn", ASG_ARN])
    assert code == 0
    policy = json.loads(capsys.readouterr().out)
    assert policy == iam.controller_policy(QUEUE_ARN, kms_key_arn=KEY_ARN, asg_arns=[ASG_ARN])


def test_launch_policy_command_names_the_cluster_and_node_role(capsys: pytest.CaptureFixture[str]) -> None:
    """``AllowPassingInstanceRole`` passes only the node role (``${KarpenterNodeRole.Arn}``), and
    ``AllowScopedDeletion`` names ``kubernetes.io/cluster/${ClusterName}`` (aws/karpenter-provider-aws
    website/content/en/docs/getting-started/getting-started-with-karpenter/cloudformation.yaml): a
    role given by name is made an ARN in the account; two roles are both passable."""
    argv = ["aws", "policy", "--no-queue", "--actions", "launch", "--cluster", "prod"]
    roles = [
        "--node-role",
        "KarpenterNodeRole-prod",
        "--node-role",
        "arn:aws:iam::123456789012:role/nodes/gpu",
    ]
    assert main([*argv, *roles, "--account-id", "123456789012"]) == 0
    policy = json.loads(capsys.readouterr().out)
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert by_sid["PassNodeRoleToEc2"]["Resource"] == [
        NODE_ROLE_ARN,
        "arn:aws:iam::123456789012:role/nodes/gpu",
    ]
    condition = by_sid["TerminateNodeClaimInstances"]["Condition"]["StringEquals"]
    assert condition == {"aws:ResourceTag/kubernetes.io/cluster/prod": "owned"}
    with pytest.raises(ValueError, match="not an IAM role ARN"):
        iam.controller_policy(None, actions=["launch"], cluster="prod", node_roles=["arn:aws:iam::1:user/x"])


def test_policy_command_needs_the_queue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["aws", "policy", "--cluster", "prod"]) == 2
    assert "--queue-arn" in capsys.readouterr().err


# --- bootstrap request validation (no AWS) -------------------------------------------------------


def test_request_names_and_limits() -> None:
    req = Request(cluster="prod")
    assert (req.queue, req.dlq) == ("prod-kubespot-interruptions", "prod-kubespot-interruptions-dlq")
    assert Request(cluster="prod", queue_name="q").dlq == "q-dlq"
    longest_ok = "c" * (64 - len("-kubespot-spot-interruption"))
    assert Request(cluster=longest_ok).cluster == longest_ok
    for bad in (
        {"cluster": longest_ok + "c"},
        {"cluster": "has space"},
        {"cluster": "c", "queue_name": "q" * 77},
        {"cluster": "c", "kinds": ("spot-interruption", "nope")},
        {"cluster": "c", "kms_key": "alias/mine"},
        {"cluster": "c", "retention_seconds": 59},
        {"cluster": "c", "max_receive_count": 0},
        {"cluster": "c", "asg_arns": ("ng-1",)},
    ):
        with pytest.raises(InvalidRequest):
            Request(**bad)  # type: ignore[arg-type]


# --- the AST guard: the adapter calls nothing the policy does not allow --------------------------


@cache
def _operations() -> tuple[dict[str, set[tuple[str, str]]], dict[str, set[tuple[str, str]]]]:
    """(snake_case method name -> operations, API name -> operations) for the scanned services."""
    session = botocore.session.get_session()
    snake: dict[str, set[tuple[str, str]]] = {}
    api: dict[str, set[tuple[str, str]]] = {}
    for service in SCANNED_SERVICES:
        for op in session.get_service_model(service).operation_names:
            snake.setdefault(xform_name(op), set()).add((service, op))
            api.setdefault(op, set()).add((service, op))
    return snake, api


def _operations_named(source: str) -> Iterator[tuple[int, str, set[tuple[str, str]]]]:
    """Every place ``source`` names an SDK operation: (line, what, candidate operations).

    Attribute access (``client.receive_message(...)``, or passed as ``functools.partial(client.x)``),
    snake_case string constants (``get_paginator("describe_instances")``, ``getattr(c, "x")``) and
    API-name string constants (``clients.call("sqs", "ReceiveMessage")``).
    """
    snake, api = _operations()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in snake:
            yield node.lineno, f".{node.attr}", snake[node.attr]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in snake:
                yield node.lineno, repr(node.value), snake[node.value]
            if node.value in api:
                yield node.lineno, repr(node.value), api[node.value]


def test_scan_finds_calls_in_every_form() -> None:
    """The scanner itself: each way of naming an operation is found (and a plain name is not)."""
    source = (
        "client.send_message(QueueUrl=u)\n"
        "partial(client.purge_queue, QueueUrl=u)\n"
        "client.get_paginator('describe_spot_price_history')\n"
        "await clients.call('sqs', 'DeleteQueue')\n"
        "x.close(); y.run(); 'Throttling'\n"
    )
    found = {what: ops for _, what, ops in _operations_named(source)}
    assert found == {
        ".send_message": {("sqs", "SendMessage")},
        ".purge_queue": {("sqs", "PurgeQueue")},
        "'describe_spot_price_history'": {("ec2", "DescribeSpotPriceHistory")},
        "'DeleteQueue'": {("sqs", "DeleteQueue")},
    }


def test_adapter_calls_only_what_calls_lists() -> None:
    """Every SDK operation the controller's adapter names is in CALLS, so the policy allows it."""
    scanned, bad = [], []
    for path in sorted(AWS_PACKAGE.glob("*.py")):
        if path.name in NOT_CONTROLLER_CODE:
            continue
        scanned.append(path.name)
        for line, what, candidates in _operations_named(path.read_text()):
            if not candidates & CALLS:
                names = ", ".join(f"{s}:{o}" for s, o in sorted(candidates))
                bad.append(f"{path.name}:{line}: {what} ({names}) is not in kubespot.aws.CALLS")
    assert "__init__.py" in scanned
    assert not bad, "\n".join(bad)


# --- conditions (issue 10: the controller may touch only the cluster's groups and instances) ---------
# Condition keys checked against the Service Authorization Reference ("Actions, resources, and
# condition keys for Amazon EC2" and "... for Amazon EC2 Auto Scaling"):
# ec2:ModifyNetworkInterfaceAttribute authorizes network-interface (required), instance,
# security-group and subnet; ec2:Vpc (an ARN) exists on network-interface, security-group and subnet,
# ec2:ResourceTag/${TagKey} on instance. autoscaling:CompleteLifecycleAction and
# RecordLifecycleActionHeartbeat authorize autoScalingGroup, with autoscaling:ResourceTag/${TagKey}.

VPC = "vpc-0123456789abcdef0"
TAG = "aws-node-termination-handler/managed"


def _statements(policy: dict[str, object], action: str) -> list[dict[str, object]]:
    return [s for s in policy["Statement"] if action in s["Action"]]  # type: ignore[attr-defined]


def test_lifecycle_calls_need_the_managed_tag_on_the_group() -> None:
    (statement,) = _statements(iam.controller_policy(QUEUE_ARN), "autoscaling:CompleteLifecycleAction")
    assert statement["Action"] == [
        "autoscaling:CompleteLifecycleAction",
        "autoscaling:RecordLifecycleActionHeartbeat",
    ]
    # Null false: the tag key is present, with any value (as the queue processor's own check).
    assert statement["Condition"] == {"Null": {f"autoscaling:ResourceTag/{TAG}": "false"}}
    (own,) = _statements(
        iam.controller_policy(QUEUE_ARN, managed_tag="team/kubespot"), "autoscaling:CompleteLifecycleAction"
    )
    assert own["Condition"] == {"Null": {"autoscaling:ResourceTag/team/kubespot": "false"}}
    (bare,) = _statements(
        iam.controller_policy(QUEUE_ARN, managed_tag=None), "autoscaling:CompleteLifecycleAction"
    )
    assert "Condition" not in bare


def test_modify_network_interface_is_limited_to_the_vpc_and_managed_instances() -> None:
    policy = iam.controller_policy(None, actions=["isolate"], vpc_ids=[VPC, VPC], partition="aws-cn")
    in_vpc, instance = _statements(policy, "ec2:ModifyNetworkInterfaceAttribute")
    # Every resource type the action authorizes is covered (none refused for want of a statement).
    assert in_vpc["Resource"] == [
        "arn:aws-cn:ec2:*:*:network-interface/*",
        "arn:aws-cn:ec2:*:*:security-group/*",
        "arn:aws-cn:ec2:*:*:subnet/*",
    ]
    assert in_vpc["Condition"] == {"ArnLike": {"ec2:Vpc": [f"arn:aws-cn:ec2:*:*:vpc/{VPC}"]}}
    assert instance["Resource"] == "arn:aws-cn:ec2:*:*:instance/*"
    assert instance["Condition"] == {"Null": {f"ec2:ResourceTag/{TAG}": "false"}}
    assert all(s["Resource"] != "*" for s in (in_vpc, instance))
    # Without a VPC the interfaces are not limited by one; the instance still needs the tag.
    in_any, tagged = _statements(
        iam.controller_policy(None, actions=["isolate"]), "ec2:ModifyNetworkInterfaceAttribute"
    )
    assert "Condition" not in in_any and tagged["Condition"] == instance["Condition"]
    with pytest.raises(ValueError, match="not a VPC id"):
        iam.controller_policy(None, actions=["isolate"], vpc_ids=["default"])
    with pytest.raises(ValueError, match="managed tag is empty"):
        iam.controller_policy(QUEUE_ARN, managed_tag=" ")


def test_policy_command_conditions(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["aws", "policy", "--queue-arn", QUEUE_ARN, "--actions", "isolate", "--vpc-id", VPC]
    assert main([*argv, "--managed-tag", "team/kubespot"]) == 0
    policy = json.loads(capsys.readouterr().out)
    assert policy == iam.controller_policy(
        QUEUE_ARN, actions=["isolate"], vpc_ids=[VPC], managed_tag="team/kubespot"
    )
    assert main([*argv, "--no-tag-conditions", "--partition", "aws-us-gov"]) == 0
    policy = json.loads(capsys.readouterr().out)
    assert policy == iam.controller_policy(
        QUEUE_ARN, actions=["isolate"], vpc_ids=[VPC], managed_tag=None, partition="aws-us-gov"
    )
    assert not any("ResourceTag" in json.dumps(s) for s in policy["Statement"])


def test_instance_profile_actions_are_scoped_to_the_cluster_tags() -> None:
    """As aws/karpenter-provider-aws's ``KarpenterControllerPolicy`` (getting-started
    ``cloudformation.yaml``: ``AllowScopedInstanceProfileCreationActions``,
    ``AllowScopedInstanceProfileTagActions``, ``AllowScopedInstanceProfileActions``,
    ``AllowInstanceProfileReadActions``): creating (and tagging at creation) only with this
    cluster's tags in the request, re-roling and deleting only profiles carrying them, reading any
    profile of the account; the profile actions need the cluster named."""
    policy = iam.controller_policy(
        None, actions=["instance-profile"], cluster="prod", account_id="123456789012"
    )
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    arn = "arn:aws:iam::123456789012:instance-profile/*"
    create = by_sid["CreateClusterInstanceProfiles"]
    assert set(create["Action"]) == {"iam:CreateInstanceProfile", "iam:TagInstanceProfile"}
    assert create["Resource"] == arn
    assert create["Condition"]["StringEquals"] == {
        "aws:RequestTag/kubernetes.io/cluster/prod": "owned",
        "aws:RequestTag/eks:eks-cluster-name": "prod",
    }
    assert create["Condition"]["StringLike"] == {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"}
    owned = by_sid["ManageClusterInstanceProfiles"]
    assert set(owned["Action"]) == {
        "iam:AddRoleToInstanceProfile",
        "iam:RemoveRoleFromInstanceProfile",
        "iam:DeleteInstanceProfile",
    }
    assert owned["Condition"]["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/prod"] == "owned"
    assert by_sid["ReadInstanceProfiles"] == {
        "Sid": "ReadInstanceProfiles",
        "Effect": "Allow",
        # ListInstanceProfiles (the garbage collector's ListProfiles by path) reads too.
        "Action": ["iam:GetInstanceProfile", "iam:ListInstanceProfiles"],
        "Resource": arn,
    }
    with pytest.raises(ValueError, match="name the cluster"):
        iam.controller_policy(None, actions=["instance-profile"])


def test_the_dry_runs_role_check_reads_only_the_node_roles() -> None:
    """Review 16 #4: the dry run's ``iam:GetRole`` (kubespot.aws.instance_profiles, in the
    ``instance-profile`` group: it stands in for aws/karpenter-provider-aws ``ensureRole``'s
    ``AddRoleToInstanceProfile``, which a dry run does not make) is granted on the node role(s)
    when they are named, the only roles a launch may pass anyway, else on the account's roles;
    Karpenter's ``KarpenterControllerPolicy`` has no such statement (its controller has no dry run)."""
    assert ("iam", "GetRole") in iam.CONTROLLER_CALLS
    alone = iam.controller_policy(
        None, actions=["instance-profile"], cluster="prod", account_id="123456789012"
    )
    by_sid = {s["Sid"]: s for s in alone["Statement"]}
    assert by_sid["ReadNodeRoles"] == {
        "Sid": "ReadNodeRoles",
        "Effect": "Allow",
        "Action": ["iam:GetRole"],
        "Resource": "arn:aws:iam::123456789012:role/*",
    }
    named = iam.controller_policy(
        None,
        actions=["instance-profile"],
        cluster="prod",
        account_id="123456789012",
        node_roles=["KarpenterNodeRole-prod"],
    )
    (read,) = [s for s in named["Statement"] if s["Sid"] == "ReadNodeRoles"]
    assert read["Resource"] == "arn:aws:iam::123456789012:role/KarpenterNodeRole-prod"
    assert "iam:GetRole" not in iam.policy_actions(iam.controller_policy("arn:aws:sqs:us-east-1:1:q"))
