"""Publishing the interruption summary to SNS and EventBridge, a response action of the controller.

Read by ``kubespot.controllers.response.publish_step``, which builds the action from it; the loader
composes this group with the others.
On when a target is set (an SNS topic, an event bus, or both): there is nothing to switch on
without one.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubespot.model import Kind

from .base import setting
from .loadbalancer import LEAVING_KINDS
from .loader import InvalidSetting

#: kubespot.aws.publish's defaults (config sits below the AWS adapter and cannot import it).
DEFAULT_SOURCE = "kubespot"
DEFAULT_DETAIL_TYPE = "kubespot Interruption Summary"


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishSettings:
    """Where the summary of each interruption goes once it is handled: SNS, EventBridge."""

    sns_topic_arn: str | None = setting(
        None,
        doc=(
            "SNS topic the summary (InterruptionSummary as JSON, schema_version 1) is published to "
            "once the node is drained (or its deadline passed, or the handling was withdrawn), with "
            "message attributes kind, source, node and outcome to filter subscriptions on. Once per "
            "event, recorded in the node's kubespot.io/actions annotation. Needs `kubespot aws "
            "policy --actions sns`."
        ),
        env="KUBESPOT_PUBLISH_SNS_TOPIC_ARN",
    )
    event_bus: str | None = setting(
        None,
        doc=(
            "EventBridge bus (name, ARN, or default) the summary is put on as the detail of one "
            "event (source and detail_type below). Needs `kubespot aws policy --actions eventbridge`."
        ),
        env="KUBESPOT_PUBLISH_EVENT_BUS",
    )
    kinds: frozenset[Kind] = setting(
        LEAVING_KINDS,
        doc=("Event kinds whose summary is published. Add rebalance-recommendation to hear about those too."),
        env="KUBESPOT_PUBLISH_KINDS",
    )
    source: str = setting(
        DEFAULT_SOURCE,
        doc="The EventBridge event's source (not starting with aws., which AWS reserves).",
        env="KUBESPOT_PUBLISH_SOURCE",
    )
    detail_type: str = setting(
        DEFAULT_DETAIL_TYPE,
        doc="The EventBridge event's detail-type, what rules usually match on.",
        env="KUBESPOT_PUBLISH_DETAIL_TYPE",
    )

    def __post_init__(self) -> None:
        arn = self.sns_topic_arn
        if arn is not None and (not arn.startswith("arn:") or arn.split(":")[2:3] != ["sns"]):
            raise InvalidSetting(
                "sns_topic_arn", "expected an SNS topic ARN (arn:aws:sns:<region>:<account>:<name>)"
            )
        if self.event_bus is not None and not self.event_bus.strip():
            raise InvalidSetting("event_bus", "must not be blank (unset it to publish no event)")
        if not self.source.strip() or self.source.startswith("aws."):
            raise InvalidSetting("source", "must be set and must not start with aws. (reserved by AWS)")
        if not self.detail_type.strip():
            raise InvalidSetting("detail_type", "must not be empty")
        if self.enabled and not self.kinds:
            raise InvalidSetting("kinds", "name at least one event kind, or unset the publish targets")

    @property
    def enabled(self) -> bool:
        """Whether any target is set."""
        return bool(self.sns_topic_arn or self.event_bus)
