"""``kubespot aws``: AWS set-up for the controller.

``kubespot aws bootstrap --cluster NAME`` creates (or brings up to date) the interruption queue, its
dead-letter queue and the EventBridge rules, printing each step, then the queue URL, the settings
for ``kubespot controller`` and the IAM policy for the controller's role. ``kubespot aws policy``
prints only that policy, without calling AWS, for people who create the resources with Terraform or
CloudFormation. Exit codes: 0 done, 1 AWS refused or failed, 2 bad flags or settings.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import TextIO

from .aws import iam
from .aws.bootstrap import (
    DLQ_SUFFIX,
    KIND_KEYS,
    MAX_RECEIVE_COUNT,
    QUEUE_SUFFIX,
    RETENTION_SECONDS,
    RULE_KINDS,
    BootstrapError,
    InvalidRequest,
    Outcome,
    Request,
    Step,
    bootstrap,
    make_clients,
    queue_arn_for,
)
from .config import loader
from .config.aws import AwsSettings
from .config.loader import InvalidSetting
from .config.queue import MANAGED_TAG


@dataclasses.dataclass(frozen=True)
class AwsCommandSettings:
    """What `kubespot aws` is configured with: the AWS region and endpoint."""

    aws: AwsSettings = dataclasses.field(default_factory=AwsSettings)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kms-key",
        metavar="KEY",
        default=None,
        help="customer managed KMS key (ARN or key id) for the queues; default: SQS-managed SSE",
    )
    parser.add_argument(
        "--asg-arn",
        metavar="ARN",
        action="append",
        default=[],
        help="limit the lifecycle-hook permissions to this Auto Scaling group (repeatable; default: *)",
    )
    parser.add_argument(
        "--endpoint-url",
        metavar="URL",
        default=None,
        help="AWS endpoint override (a VPC endpoint, or moto in tests); same as --aws-endpoint-url",
    )
    loader.add_arguments(parser, AwsCommandSettings)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="aws_command", metavar="ACTION", required=True)

    boot = sub.add_parser(
        "bootstrap",
        help="create the interruption queue, its DLQ and the EventBridge rules (idempotent)",
        description=(
            "Create or bring up to date the SQS queue, its dead-letter queue and the EventBridge "
            "rules that feed it, then print the controller's settings and IAM policy. Running it "
            "again changes nothing."
        ),
    )
    boot.add_argument("--cluster", required=True, help="cluster name; prefixes every resource name")
    boot.add_argument(
        "--queue-name",
        default="",
        metavar="NAME",
        help=f"queue name (default: <cluster>{QUEUE_SUFFIX}; the DLQ is <name>{DLQ_SUFFIX})",
    )
    boot.add_argument(
        "--retention",
        type=int,
        default=RETENTION_SECONDS,
        metavar="SECONDS",
        help=f"message retention of the queue (default {RETENTION_SECONDS}: a stale interruption is useless)",
    )
    boot.add_argument(
        "--max-receive-count",
        type=int,
        default=MAX_RECEIVE_COUNT,
        metavar="N",
        help=f"receives before a message moves to the DLQ (default {MAX_RECEIVE_COUNT})",
    )
    for kind in RULE_KINDS:
        boot.add_argument(
            f"--no-{kind.key}",
            dest=f"skip_{kind.key.replace('-', '_')}",
            action="store_true",
            help=f"no rule for {kind.title}",
        )
    boot.add_argument(
        "--dry-run", action="store_true", help="print the plan (read-only calls); create nothing"
    )
    boot.add_argument("--output", "-o", choices=("text", "json"), default="text", help="result format")
    _common(boot)

    pol = sub.add_parser(
        "policy",
        help="print the controller's least-privilege IAM policy (no AWS calls)",
        description=(
            "Print the IAM policy the controller's role needs, as JSON. Name the queue by ARN, or by "
            "cluster (or queue name), account and region."
        ),
    )
    pol.add_argument("--queue-arn", metavar="ARN", default=None, help="the interruption queue's ARN")
    pol.add_argument(
        "--cluster",
        default=None,
        help=(
            f"cluster name (queue <cluster>{QUEUE_SUFFIX}); the launch group's tagging and "
            "termination are limited to its tags, so --actions launch needs it"
        ),
    )
    pol.add_argument(
        "--node-role",
        metavar="ARN|NAME",
        action="append",
        default=[],
        help=(
            "the node role the launch group may pass to EC2 (iam:PassRole; repeatable; a name needs "
            "--account-id and a role without a path); --actions launch needs it"
        ),
    )
    pol.add_argument("--queue-name", default="", metavar="NAME", help="queue name, if not the default")
    pol.add_argument("--account-id", metavar="ID", default=None, help="12-digit AWS account id")
    pol.add_argument("--partition", default="aws", help="ARN partition (aws, aws-cn, aws-us-gov)")
    pol.add_argument(
        "--actions",
        metavar="LIST",
        action="append",
        default=[],
        help=(
            "also grant these response actions (comma-separated, repeatable; 'all' for every one): "
            + ", ".join(iam.ACTION_GROUPS)
        ),
    )
    pol.add_argument(
        "--no-queue",
        action="store_true",
        help="the controller reads no queue (IMDS-only cluster): grant only --actions",
    )
    for flag, what in (
        ("--target-group-arn", "limit load balancer deregistration to this target group"),
        ("--load-balancer-arn", "limit Classic Load Balancer deregistration to this load balancer"),
        ("--sns-topic-arn", "limit publishing to this SNS topic"),
        ("--event-bus-arn", "limit PutEvents to this event bus"),
    ):
        pol.add_argument(
            flag, metavar="ARN", action="append", default=[], help=f"{what} (repeatable; default: *)"
        )
    pol.add_argument(
        "--managed-tag",
        metavar="KEY",
        default=MANAGED_TAG,
        help=(
            "the tag key (any value) the policy demands on the Auto Scaling group for lifecycle-hook "
            f"calls and on the instance for isolation (default {MANAGED_TAG})"
        ),
    )
    pol.add_argument(
        "--no-tag-conditions",
        action="store_true",
        help="leave the managed-tag conditions out (groups and instances not tagged)",
    )
    pol.add_argument(
        "--vpc-id",
        metavar="ID",
        action="append",
        default=[],
        help="limit isolation to network interfaces and security groups of this VPC (repeatable)",
    )
    _common(pol)


def _aws_settings(args: argparse.Namespace) -> AwsSettings:
    """Flags > environment (kubespot's and NTH's names) > ``--config`` file > defaults."""
    settings = loader.load(AwsCommandSettings, namespace=args).aws
    if args.endpoint_url:
        try:
            settings = dataclasses.replace(settings, endpoint_url=args.endpoint_url)
        except InvalidSetting as exc:
            raise loader.SettingsError(
                [
                    loader.Problem(
                        "aws.endpoint_url", "flag --endpoint-url", repr(args.endpoint_url), exc.reason
                    )
                ]
            ) from None
    return settings


def format_step(step: Step) -> str:
    detail = f"  ({step.detail})" if step.detail else ""
    return f"  {step.resource:<17} {step.name:<44} {step.status.value}{detail}"


def format_summary(outcome: Outcome) -> str:
    lines = [""]
    if outcome.dry_run:
        changes = sum(1 for s in outcome.steps if s.status.value.startswith("would"))
        lines.append(f"Dry run: {changes} change(s) planned, nothing created.")
    else:
        lines.append("Changed resources." if outcome.changed else "Everything was already up to date.")
    lines += [f"note: {n}" for n in outcome.notes]
    lines += [
        "",
        f"Queue URL: {outcome.queue_url or '(known once created)'}",
        f"Queue ARN: {outcome.queue_arn}",
        f"Dead-letter queue: {outcome.dlq_url or outcome.dlq_arn}",
        "",
        "Controller settings (env; NTH's names QUEUE_URL and AWS_REGION are accepted too):",
    ]
    lines += [f"  {k}={v}" for k, v in outcome.controller_env().items()]
    lines += [
        "",
        "IAM policy for the controller's role (IRSA); `kubespot aws policy` prints it alone:",
        json.dumps(outcome.policy, indent=2),
    ]
    return "\n".join(lines) + "\n"


def run_bootstrap(args: argparse.Namespace, *, out: TextIO) -> int:
    settings = _aws_settings(args)
    skipped = {k for k in KIND_KEYS if getattr(args, f"skip_{k.replace('-', '_')}")}
    request = Request(
        cluster=args.cluster,
        queue_name=args.queue_name,
        kinds=tuple(k for k in KIND_KEYS if k not in skipped),
        kms_key=args.kms_key,
        retention_seconds=args.retention,
        max_receive_count=args.max_receive_count,
        asg_arns=tuple(args.asg_arn),
    )
    clients = make_clients(settings)
    text = args.output == "text"
    if text:
        mode = " (dry run: read-only)" if args.dry_run else ""
        out.write(f"kubespot aws bootstrap: cluster {request.cluster}{mode}\n")
        out.flush()

    def on_step(step: Step) -> None:
        if text:
            out.write(format_step(step) + "\n")
            out.flush()

    outcome = bootstrap(request, clients, dry_run=args.dry_run, on_step=on_step)
    if text:
        out.write(format_summary(outcome))
    else:
        out.write(json.dumps(outcome.to_dict(), indent=2) + "\n")
    return 0


def _action_names(values: list[str]) -> list[str]:
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    return list(iam.ACTION_GROUPS) if "all" in names else names


def run_policy(args: argparse.Namespace, *, out: TextIO) -> int:
    actions = _action_names(args.actions)
    queue_arn: str | None
    if args.no_queue:
        # --cluster stays allowed: the launch group's conditions name it.
        if args.queue_arn or args.queue_name or args.kms_key:
            raise InvalidRequest("--no-queue leaves the queue out: do not name one (or its KMS key)")
        if not actions:
            raise InvalidRequest("--no-queue needs --actions: there would be nothing to allow")
        queue_arn = None
    elif args.queue_arn:
        queue_arn = args.queue_arn
    else:
        if not (args.cluster or args.queue_name) or not args.account_id:
            raise InvalidRequest("name the queue: --queue-arn, or --cluster/--queue-name with --account-id")
        settings = _aws_settings(args)
        name = args.queue_name or f"{args.cluster}{QUEUE_SUFFIX}"
        queue_arn = queue_arn_for(
            partition=args.partition, region=settings.region, account=args.account_id, name=name
        )
    kms_key = args.kms_key
    if kms_key is not None and queue_arn is not None and not kms_key.startswith("arn:"):
        # A bare key id lives in the queue's account and region.
        _, partition, _, region, account, _ = queue_arn.split(":", 5)
        kms_key = f"arn:{partition}:kms:{region}:{account}:key/{kms_key}"
    try:
        policy = iam.controller_policy(
            queue_arn,
            kms_key_arn=kms_key,
            asg_arns=args.asg_arn,
            actions=actions,
            target_group_arns=args.target_group_arn,
            load_balancer_arns=args.load_balancer_arn,
            sns_topic_arns=args.sns_topic_arn,
            event_bus_arns=args.event_bus_arn,
            managed_tag=None if args.no_tag_conditions else args.managed_tag,
            vpc_ids=args.vpc_id,
            partition=args.partition,
            cluster=args.cluster,
            node_roles=args.node_role,
            account_id=args.account_id,
        )
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None
    out.write(json.dumps(policy, indent=2) + "\n")
    return 0


def main(args: argparse.Namespace) -> int:
    command = f"kubespot aws {args.aws_command}"
    try:
        if args.aws_command == "bootstrap":
            return run_bootstrap(args, out=sys.stdout)
        return run_policy(args, out=sys.stdout)
    except loader.SettingsError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    except InvalidRequest as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    except BootstrapError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 1
