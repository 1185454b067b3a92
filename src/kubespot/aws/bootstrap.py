"""``kubespot aws bootstrap``: the interruption queue, its dead-letter queue and the EventBridge rules.

An admin tool, run once per cluster by a human (or CI) with rights to create queues and rules; the
controller itself never runs it and its IAM policy (``kubespot.aws.iam``) allows none of these calls.

What it converges to, idempotently (every step compares what exists with what is wanted and only
then writes; a second run reports "up to date" and changes nothing):

* ``<name>-dlq``: the dead-letter queue, SSE, 14 days' retention, so a message the controller could
  not handle (malformed, or failing repeatedly) stays somewhere a human can read it.
* ``<name>`` (default ``<cluster>-kubespot-interruptions``): SSE (SQS-managed, or ``--kms-key``),
  retention 300 s, a redrive policy to the DLQ, and a queue policy that lets EventBridge send only
  from this cluster's rules (``aws:SourceArn``) and SQS only for this account (``aws:SourceAccount``).
* one EventBridge rule per interruption kind, ``<cluster>-kubespot-<kind>`` on the default bus (AWS
  service events go only there), each with the queue as its one kubespot target.

Only ``kubespot.aws`` imports the SDK, so the clients are built here from ``AwsSettings``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import boto3
import botocore.exceptions
from botocore.config import Config

from ..config.aws import AwsSettings
from . import iam

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.literals import QueueAttributeNameType

QUEUE_SUFFIX = "-kubespot-interruptions"
DLQ_SUFFIX = "-dlq"
#: 300 s, as aws-node-termination-handler's set-up recommends: a spot warning is worth nothing after
#: its 2 minutes, a rebalance recommendation or state change is stale within minutes, and an ASG
#: lifecycle hook times out on its own. A controller that was down longer than this should not act
#: on a backlog of instances that are already gone.
RETENTION_SECONDS = 300
#: The DLQ keeps messages for SQS's maximum, 14 days: it is read by humans, and a message moved to
#: a DLQ keeps its original enqueue time, so a DLQ retention no longer than the source's would
#: expire messages the moment they arrive.
DLQ_RETENTION_SECONDS = 1_209_600
#: Receives before a message moves to the DLQ. The controller deletes messages about instances that
#: are not its nodes after ``queue.foreign_max_receives`` (5) receives; 5 here means those are
#: deleted by their owner's peers rather than piling up in the DLQ, while a malformed message
#: (left for a human by ``queue.malformed_action=leave``) reaches the DLQ after 5 times the visibility
#: timeout (150 s at the controller's 30 s), inside the 300 s retention.
MAX_RECEIVE_COUNT = 5
TARGET_ID = "kubespot-queue"
TAG_KEY = "kubespot.io/cluster"
#: SQS queue names: 1-80 of [A-Za-z0-9_-]; EventBridge rule names: 1-64 of [.-_A-Za-z0-9].
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_MAX_QUEUE_NAME = 80
_MAX_RULE_NAME = 64
_KMS_KEY_ID = re.compile(r"(mrk-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


@dataclass(frozen=True, slots=True)
class RuleKind:
    """One kind of interruption event and the EventBridge pattern that selects it."""

    key: str  # rule name suffix and the --no-<key> flag
    title: str
    pattern: Mapping[str, Any]


#: The rules aws-node-termination-handler documents for its queue mode, with the same patterns, and
#: the interruptible Capacity Reservation warning (which Karpenter's set-up routes to its queue too).
RULE_KINDS: tuple[RuleKind, ...] = (
    RuleKind(
        "spot-interruption",
        "EC2 Spot Instance Interruption Warning",
        {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    ),
    RuleKind(
        # Short, so the longest rule name (and so the longest cluster name) is unchanged.
        "cr-interruption",
        "EC2 Capacity Reservation Instance Interruption Warning",
        {"source": ["aws.ec2"], "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"]},
    ),
    RuleKind(
        "rebalance",
        "EC2 Instance Rebalance Recommendation",
        {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    ),
    RuleKind(
        "state-change",
        "EC2 Instance State-change Notification",
        {
            "source": ["aws.ec2"],
            "detail-type": ["EC2 Instance State-change Notification"],
            # Only the states in which a node is going away; running/pending would be noise.
            "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]},
        },
    ),
    RuleKind(
        "asg-lifecycle",
        "EC2 Instance-terminate and -launch Lifecycle Actions",
        # Launch actions arrive only from groups with a launch hook: completed once the node is Ready.
        {
            "source": ["aws.autoscaling"],
            "detail-type": [
                "EC2 Instance-terminate Lifecycle Action",
                "EC2 Instance-launch Lifecycle Action",
            ],
        },
    ),
    RuleKind(
        "scheduled-change",
        "AWS Health Event (EC2 scheduled change)",
        {
            "source": ["aws.health"],
            "detail-type": ["AWS Health Event"],
            "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
        },
    ),
)
KIND_KEYS: tuple[str, ...] = tuple(k.key for k in RULE_KINDS)
_LONGEST_KIND = max(len(k) for k in KIND_KEYS)


def rule_name(cluster: str, kind: str) -> str:
    return f"{cluster}-kubespot-{kind}"


class BootstrapError(Exception):
    """The set-up cannot be done as asked (bad input, or AWS refused); the message says why."""


class InvalidRequest(BootstrapError):
    """The request itself is wrong (a name, a flag): nothing was asked of AWS."""


class Status(StrEnum):
    """What a step did (or, in a dry run, would do)."""

    CREATED = "created"
    UPDATED = "updated"
    UP_TO_DATE = "up to date"
    EXISTS = "exists"  # present and left alone on purpose (see the step's detail)
    WOULD_CREATE = "would create"
    WOULD_UPDATE = "would update"

    @property
    def changes(self) -> bool:
        return self in (Status.CREATED, Status.UPDATED)


@dataclass(frozen=True, slots=True)
class Step:
    """One resource looked at: what it is, its name, what was done, and details for a human."""

    resource: str
    name: str
    status: Status
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "resource": self.resource,
            "name": self.name,
            "status": self.status.value,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """What to set up for one cluster (validated on construction)."""

    cluster: str
    queue_name: str = ""  # "" -> <cluster>-kubespot-interruptions
    kinds: tuple[str, ...] = KIND_KEYS
    kms_key: str | None = None  # key ARN or key id; None -> SSE-SQS
    retention_seconds: int = RETENTION_SECONDS
    max_receive_count: int = MAX_RECEIVE_COUNT
    asg_arns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.cluster):
            raise InvalidRequest(f"cluster name {self.cluster!r}: use letters, digits, '-' and '_'")
        if len(rule_name(self.cluster, "x")) - 1 + _LONGEST_KIND > _MAX_RULE_NAME:
            limit = _MAX_RULE_NAME - len(rule_name("", "")) - _LONGEST_KIND
            raise InvalidRequest(
                f"cluster name {self.cluster!r} is too long for EventBridge rule names "
                f"(at most {limit} characters)"
            )
        if self.queue_name and not _NAME.fullmatch(self.queue_name):
            raise InvalidRequest(f"queue name {self.queue_name!r}: use letters, digits, '-' and '_'")
        if len(self.queue) + len(DLQ_SUFFIX) > _MAX_QUEUE_NAME:
            raise InvalidRequest(
                f"queue name {self.queue!r} is too long: with {DLQ_SUFFIX!r} it must fit SQS's "
                f"{_MAX_QUEUE_NAME} characters"
            )
        unknown = sorted(set(self.kinds) - set(KIND_KEYS))
        if unknown:
            raise InvalidRequest(f"unknown event kinds: {', '.join(unknown)} (known: {', '.join(KIND_KEYS)})")
        if self.kms_key is not None and not (
            _KMS_KEY_ID.fullmatch(self.kms_key)
            or (self.kms_key.startswith("arn:") and ":kms:" in self.kms_key and ":key/" in self.kms_key)
        ):
            # An alias would do for SQS, but the controller's IAM policy must name the key itself.
            raise InvalidRequest(f"--kms-key {self.kms_key!r}: give the key's ARN or id, not an alias")
        if not 60 <= self.retention_seconds <= DLQ_RETENTION_SECONDS:
            raise InvalidRequest("retention must be 60..1209600 seconds (SQS's limits)")
        if not 1 <= self.max_receive_count <= 1000:
            raise InvalidRequest("max receive count must be 1..1000 (SQS's limits)")
        for arn in self.asg_arns:
            if not arn.startswith("arn:") or ":autoscaling:" not in arn:
                raise InvalidRequest(f"--asg-arn {arn!r}: not an Auto Scaling group ARN")

    @property
    def queue(self) -> str:
        return self.queue_name or f"{self.cluster}{QUEUE_SUFFIX}"

    @property
    def dlq(self) -> str:
        return f"{self.queue}{DLQ_SUFFIX}"

    @property
    def rule_kinds(self) -> tuple[RuleKind, ...]:
        return tuple(k for k in RULE_KINDS if k.key in self.kinds)


@dataclass(slots=True, kw_only=True)
class Outcome:
    """Everything bootstrap found or did, and what the controller needs to be configured with."""

    cluster: str
    dry_run: bool
    region: str
    account: str
    partition: str
    queue_name: str
    queue_url: str | None  # None in a dry run when the queue does not exist yet
    queue_arn: str
    dlq_name: str
    dlq_url: str | None
    dlq_arn: str
    rules: dict[str, str]  # rule name -> ARN
    kms_key_arn: str | None
    policy: dict[str, Any]
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(s.status.changes for s in self.steps)

    def controller_env(self) -> dict[str, str]:
        """The ``kubespot controller`` settings for this queue (NTH's QUEUE_URL/AWS_REGION also work)."""
        return {
            "KUBESPOT_QUEUE_URL": self.queue_url or "(created on apply)",
            "KUBESPOT_AWS_REGION": self.region,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "dry_run": self.dry_run,
            "changed": self.changed,
            "region": self.region,
            "account": self.account,
            "queue": {"name": self.queue_name, "url": self.queue_url, "arn": self.queue_arn},
            "dead_letter_queue": {"name": self.dlq_name, "url": self.dlq_url, "arn": self.dlq_arn},
            "rules": dict(self.rules),
            "kms_key_arn": self.kms_key_arn,
            "steps": [s.to_dict() for s in self.steps],
            "notes": list(self.notes),
            "controller_settings": self.controller_env(),
            "iam_policy": self.policy,
        }


# --- clients ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Clients:
    sqs: SQSClient
    events: EventBridgeClient


def make_clients(settings: AwsSettings) -> Clients:
    """SQS and EventBridge clients for the settings' region and endpoint (the SDK's chain otherwise)."""
    config = Config(
        retries={"total_max_attempts": settings.max_attempts, "mode": "standard"},
        user_agent_extra="kubespot-aws-bootstrap",
    )
    try:
        session = boto3.session.Session(region_name=settings.region or None)
        endpoint = settings.endpoint_url or None
        return Clients(
            sqs=session.client("sqs", endpoint_url=endpoint, config=config),
            events=session.client("events", endpoint_url=endpoint, config=config),
        )
    except botocore.exceptions.NoRegionError:
        raise InvalidRequest("no AWS region: pass --region or set AWS_REGION") from None
    except botocore.exceptions.BotoCoreError as exc:
        raise BootstrapError(str(exc)) from None


# --- comparison helpers ----------------------------------------------------------------------------


def _canonical(value: Any) -> Any:
    """A policy in a comparable form: IAM treats ``"x"`` and ``["x"]`` alike, and list order is moot."""
    if isinstance(value, Mapping):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_canonical(v) for v in value]
        if len(items) == 1:
            return items[0]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    return value


def _same_attribute(name: str, want: str, have: str | None) -> bool:
    if have is None:
        return False
    if name in ("Policy", "RedrivePolicy"):
        try:
            w, h = json.loads(want), json.loads(have)
        except json.JSONDecodeError:
            return False
        if name == "RedrivePolicy":
            # SQS may answer maxReceiveCount as a string or a number.
            return bool(
                w.get("deadLetterTargetArn") == h.get("deadLetterTargetArn")
                and str(w.get("maxReceiveCount")) == str(h.get("maxReceiveCount"))
            )
        return bool(_canonical(w) == _canonical(h))
    return want == have


def _human(name: str, value: str) -> str:
    if name == "MessageRetentionPeriod":
        return f"retention {value} s"
    if name == "SqsManagedSseEnabled":
        return "SSE-SQS" if value == "true" else "SSE-SQS off"
    if name == "KmsMasterKeyId":
        return f"SSE-KMS {value}"
    if name == "RedrivePolicy":
        rp = json.loads(value)
        dlq = rp["deadLetterTargetArn"].rsplit(":", 1)[-1]
        return f"redrive to {dlq} after {rp['maxReceiveCount']} receives"
    return name


# --- the work --------------------------------------------------------------------------------------


class _Bootstrap:
    def __init__(
        self, request: Request, clients: Clients, *, dry_run: bool, on_step: Callable[[Step], None] | None
    ) -> None:
        self.req = request
        self.sqs = clients.sqs
        self.events = clients.events
        self.dry_run = dry_run
        self.on_step = on_step
        self.steps: list[Step] = []
        self.notes: list[str] = []

    def step(self, resource: str, name: str, status: Status, detail: str = "") -> None:
        s = Step(resource, name, status, detail)
        self.steps.append(s)
        if self.on_step is not None:
            self.on_step(s)

    def created(self) -> Status:
        return Status.WOULD_CREATE if self.dry_run else Status.CREATED

    def updated(self) -> Status:
        return Status.WOULD_UPDATE if self.dry_run else Status.UPDATED

    # -- SQS

    def find_queue(self, name: str) -> tuple[str, dict[str, str]] | None:
        try:
            url = self.sqs.get_queue_url(QueueName=name)["QueueUrl"]
        except self.sqs.exceptions.QueueDoesNotExist:
            return None
        attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]).get("Attributes", {})
        return url, {str(k): v for k, v in attrs.items()}

    def ensure_queue(
        self,
        resource: str,
        name: str,
        found: tuple[str, dict[str, str]] | None,
        want: dict[QueueAttributeNameType, str],
    ) -> str | None:
        """Create the queue with ``want``, or set the attributes that differ; its URL (None: dry run)."""
        summary = ", ".join(_human(k, v) if k != "Policy" else "queue policy" for k, v in want.items())
        if found is None:
            if self.dry_run:
                self.step(resource, name, Status.WOULD_CREATE, summary)
                return None
            url = self.sqs.create_queue(QueueName=name, Attributes=want, tags={TAG_KEY: self.req.cluster})[
                "QueueUrl"
            ]
            self.step(resource, name, Status.CREATED, summary)
            return url
        url, have = found
        diff = {k: v for k, v in want.items() if not _same_attribute(k, v, have.get(k))}
        if not diff:
            self.step(resource, name, Status.UP_TO_DATE, summary)
            return url
        changed = ", ".join(_human(k, v) for k, v in diff.items() if k != "Policy")
        if "Policy" in diff:
            changed = ", ".join(filter(None, [changed, "queue policy"]))
        if not self.dry_run:
            self.sqs.set_queue_attributes(QueueUrl=url, Attributes=diff)
        self.step(resource, name, self.updated(), f"set {changed}")
        return url

    def encryption(self, name: str, have: Mapping[str, str]) -> dict[QueueAttributeNameType, str]:
        """SSE attributes to converge to. A customer key already on the queue is never removed."""
        if self.req.kms_key is not None:
            return {"KmsMasterKeyId": self.req.kms_key, "SqsManagedSseEnabled": "false"}
        existing = have.get("KmsMasterKeyId")
        if existing:
            # Switching a queue from a customer key to SSE-SQS weakens someone's deliberate choice
            # (key policy, audit trail): keep it and say so, and grant the controller its key.
            self.notes.append(
                f"queue {name} is encrypted with customer key {existing}; kept (pass "
                f"--kms-key {existing} to manage it here, or change the queue's encryption by hand)"
            )
            return {}
        return {"SqsManagedSseEnabled": "true"}

    def queue_policy(self, queue_arn: str, account: str, rule_arns: Iterable[str]) -> str:
        statements: list[dict[str, Any]] = []
        rule_arns = sorted(rule_arns)
        if rule_arns:
            statements.append(
                {
                    "Sid": "EventBridgeRules",
                    "Effect": "Allow",
                    "Principal": {"Service": "events.amazonaws.com"},
                    "Action": "sqs:SendMessage",
                    "Resource": queue_arn,
                    # Only this cluster's rules: another rule in the account (or another account's
                    # rule) cannot inject "interruptions" that drain nodes.
                    "Condition": {"ArnEquals": {"aws:SourceArn": rule_arns}},
                }
            )
        statements.append(
            {
                "Sid": "SqsServiceSameAccount",
                "Effect": "Allow",
                "Principal": {"Service": "sqs.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"StringEquals": {"aws:SourceAccount": account}},
            }
        )
        return json.dumps({"Version": iam.POLICY_VERSION, "Statement": statements}, sort_keys=True)

    # -- EventBridge

    def ensure_rule(self, kind: RuleKind, queue_arn: str) -> None:
        name = rule_name(self.req.cluster, kind.key)
        description = f"kubespot ({self.req.cluster}): {kind.title} -> {self.req.queue}"
        pattern = json.dumps(kind.pattern, sort_keys=True)
        try:
            have: Mapping[str, Any] | None = self.events.describe_rule(Name=name)
        except self.events.exceptions.ResourceNotFoundException:
            have = None
        if have is None:
            if not self.dry_run:
                self.events.put_rule(
                    Name=name,
                    EventPattern=pattern,
                    State="ENABLED",
                    Description=description,
                    Tags=[{"Key": TAG_KEY, "Value": self.req.cluster}],
                )
            self.step("rule", name, self.created(), kind.title)
        else:
            diffs = []
            try:
                same_pattern = json.loads(have.get("EventPattern") or "null") == kind.pattern
            except json.JSONDecodeError:
                same_pattern = False
            if not same_pattern:
                diffs.append("event pattern")
            if have.get("State") != "ENABLED":
                diffs.append("state ENABLED")
            if have.get("Description", "") != description:
                diffs.append("description")
            if diffs:
                if not self.dry_run:
                    # PutRule updates in place and keeps the rule's targets and tags.
                    self.events.put_rule(
                        Name=name, EventPattern=pattern, State="ENABLED", Description=description
                    )
                self.step("rule", name, self.updated(), "set " + ", ".join(diffs))
            else:
                self.step("rule", name, Status.UP_TO_DATE, kind.title)
        self.ensure_target(name, queue_arn, rule_exists=have is not None)

    def ensure_target(self, rule: str, queue_arn: str, *, rule_exists: bool) -> None:
        label = rule
        targets = self.events.list_targets_by_rule(Rule=rule)["Targets"] if rule_exists else []
        ours = next((t for t in targets if t["Id"] == TARGET_ID), None)
        others = [t["Id"] for t in targets if t["Id"] != TARGET_ID]
        if others:
            # Not ours to remove: say so, since they receive the same events.
            self.notes.append(f"rule {rule} has other targets, left alone: {', '.join(others)}")
        # Any input shaping would change the body the controller parses: it must get the event as is.
        reshaped = ours is not None and any(
            k in ours for k in ("Input", "InputPath", "InputTransformer", "SqsParameters")
        )
        if ours is not None and ours["Arn"] == queue_arn and not reshaped:
            self.step("target", label, Status.UP_TO_DATE, f"-> {self.req.queue}")
            return
        if not self.dry_run:
            # No RoleArn: EventBridge delivers to SQS under the queue policy (a role breaks SSE-KMS).
            result = self.events.put_targets(Rule=rule, Targets=[{"Id": TARGET_ID, "Arn": queue_arn}])
            if result.get("FailedEntryCount"):
                failed = result.get("FailedEntries", [{}])[0]
                raise BootstrapError(
                    f"PutTargets on {rule} failed: {failed.get('ErrorCode')} {failed.get('ErrorMessage')}"
                )
        self.step("target", label, self.created() if ours is None else self.updated(), f"-> {self.req.queue}")

    def note_skipped(self, kind: RuleKind) -> None:
        name = rule_name(self.req.cluster, kind.key)
        try:
            self.events.describe_rule(Name=name)
        except self.events.exceptions.ResourceNotFoundException:
            return
        # Deleting is left to a human: the rule may have been kept on purpose. The queue policy no
        # longer allows it, so its deliveries to the queue are refused from now on.
        self.step(
            "rule",
            name,
            Status.EXISTS,
            f"skipped by --no-{kind.key}; left in place (delete it by hand if unwanted); "
            "the queue policy no longer allows it to send",
        )

    # -- everything

    def run(self) -> Outcome:
        req = self.req
        # The default bus's ARN names the partition, region and account, with no extra service
        # (STS) and therefore no extra permission for whoever runs this.
        bus_arn = self.events.describe_event_bus(Name="default")["Arn"]
        _, partition, _, region, account, _ = bus_arn.split(":", 5)

        def sqs_arn(name: str) -> str:
            return f"arn:{partition}:sqs:{region}:{account}:{name}"

        def events_arn(name: str) -> str:
            return f"arn:{partition}:events:{region}:{account}:rule/{name}"

        kms_key_arn = None
        if req.kms_key is not None:
            kms_key_arn = (
                req.kms_key
                if req.kms_key.startswith("arn:")
                else f"arn:{partition}:kms:{region}:{account}:key/{req.kms_key}"
            )

        dlq_found = self.find_queue(req.dlq)
        dlq_arn = sqs_arn(req.dlq)
        dlq_want: dict[QueueAttributeNameType, str] = {
            "MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS),
            **self.encryption(req.dlq, dlq_found[1] if dlq_found else {}),
        }
        dlq_url = self.ensure_queue("dead-letter queue", req.dlq, dlq_found, dlq_want)

        queue_found = self.find_queue(req.queue)
        queue_have = queue_found[1] if queue_found else {}
        queue_arn = sqs_arn(req.queue)
        rules = {
            rule_name(req.cluster, k.key): events_arn(rule_name(req.cluster, k.key)) for k in req.rule_kinds
        }
        encryption = self.encryption(req.queue, queue_have)
        if kms_key_arn is None and queue_have.get("KmsMasterKeyId"):
            existing = queue_have["KmsMasterKeyId"]
            if existing.startswith("arn:") and ":key/" in existing:
                kms_key_arn = existing
            elif _KMS_KEY_ID.fullmatch(existing):
                kms_key_arn = f"arn:{partition}:kms:{region}:{account}:key/{existing}"
            else:
                self.notes.append(
                    f"the queue's key {existing} is not a key ARN: add kms:Decrypt on that key's ARN "
                    "to the controller's policy by hand"
                )
        queue_want: dict[QueueAttributeNameType, str] = {
            "MessageRetentionPeriod": str(req.retention_seconds),
            **encryption,
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": req.max_receive_count}, sort_keys=True
            ),
            # Set before the rules exist, so no delivery is ever refused in between.
            "Policy": self.queue_policy(queue_arn, account, rules.values()),
        }
        queue_url = self.ensure_queue("queue", req.queue, queue_found, queue_want)

        for kind in RULE_KINDS:
            if kind.key in req.kinds:
                self.ensure_rule(kind, queue_arn)
            else:
                self.note_skipped(kind)

        if kms_key_arn is not None:
            self.notes.append(
                f"the key policy of {kms_key_arn} must let events.amazonaws.com use kms:GenerateDataKey "
                "and kms:Decrypt, or EventBridge cannot deliver to the encrypted queue (see docs/aws.md)"
            )
        policy = iam.controller_policy(queue_arn, kms_key_arn=kms_key_arn, asg_arns=req.asg_arns)
        return Outcome(
            cluster=req.cluster,
            dry_run=self.dry_run,
            region=region,
            account=account,
            partition=partition,
            queue_name=req.queue,
            queue_url=queue_url,
            queue_arn=queue_arn,
            dlq_name=req.dlq,
            dlq_url=dlq_url,
            dlq_arn=dlq_arn,
            rules=rules,
            kms_key_arn=kms_key_arn,
            policy=policy,
            steps=self.steps,
            notes=self.notes,
        )


def bootstrap(
    request: Request,
    clients: Clients,
    *,
    dry_run: bool = False,
    on_step: Callable[[Step], None] | None = None,
) -> Outcome:
    """Converge the queue, DLQ and rules for ``request``; ``dry_run`` only reads. ``on_step`` sees each step.

    AWS errors come back as ``BootstrapError`` with the operation and AWS's message.
    """
    try:
        return _Bootstrap(request, clients, dry_run=dry_run, on_step=on_step).run()
    except botocore.exceptions.ClientError as exc:
        err = exc.response.get("Error", {})
        raise BootstrapError(
            f"{exc.operation_name}: {err.get('Code', 'error')}: {err.get('Message', str(exc))}"
        ) from None
    except botocore.exceptions.BotoCoreError as exc:
        raise BootstrapError(str(exc)) from None


def queue_arn_for(*, partition: str = "aws", region: str, account: str, name: str) -> str:
    """The ARN of a queue from its parts (for ``kubespot aws policy`` without AWS access)."""
    if not re.fullmatch(r"\d{12}", account):
        raise InvalidRequest(f"account id {account!r}: expected 12 digits")
    if not region:
        raise InvalidRequest("no region: pass --region (or set AWS_REGION)")
    return f"arn:{partition}:sqs:{region}:{account}:{name}"
