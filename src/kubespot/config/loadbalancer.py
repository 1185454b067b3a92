"""Load-balancer deregistration, a response action of the controller (docs/designs/response-actions.md).

Read by ``kubespot.controllers.response.loadbalancer_step``, which builds the action from it; the loader
composes this group with the others.
Off by default: it needs IAM rights over the account's target groups (``kubespot aws policy
--actions loadbalancer``), which a cluster grants deliberately.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubespot.model import Kind

from .base import setting
from .loader import InvalidSetting

#: The kinds whose node goes away: a rebalance recommendation's node is not drained by default, so
#: taking it out of its load balancers would cost capacity for nothing.
LEAVING_KINDS = frozenset(
    {Kind.SPOT_INTERRUPTION, Kind.ASG_LIFECYCLE, Kind.SCHEDULED_MAINTENANCE, Kind.STATE_CHANGE}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadBalancerSettings:
    """Deregistering an interrupted node and its pods from ALB/NLB target groups before the drain."""

    enabled: bool = setting(
        False,
        doc=(
            "Deregister the node (instance targets, and its InternalIP) and its pods (IP targets, as "
            "the AWS Load Balancer Controller registers them) from every ELBv2 target group before "
            "they are evicted. The controller's elected replica does it when a node's state "
            "annotation names an event of one of `kinds`, whichever process fenced the node, and "
            "records it in the node's kubespot.io/actions annotation, which the drain reads to hold "
            "the target pods until their load balancer stopped routing to them. Needs the IAM "
            "actions of `kubespot aws policy --actions loadbalancer`."
        ),
        env="KUBESPOT_LOADBALANCER_ENABLED",
    )
    kinds: frozenset[Kind] = setting(
        LEAVING_KINDS,
        doc=(
            "Event kinds whose node is deregistered. Not rebalance-recommendation by default: that "
            "node is not drained unless asked, and keeps serving."
        ),
        env="KUBESPOT_LOADBALANCER_KINDS",
    )
    target_group_tag_key: str | None = setting(
        None,
        doc=(
            "Consider only target groups carrying this tag (e.g. elbv2.k8s.aws/cluster, which the AWS "
            "Load Balancer Controller sets): fewer DescribeTargetHealth calls per index rebuild, and "
            "other clusters' groups left alone. Unset: every instance and ip target group of the "
            "region."
        ),
        env="KUBESPOT_LOADBALANCER_TARGET_GROUP_TAG_KEY",
    )
    target_group_tag_value: str | None = setting(
        None,
        doc="With target_group_tag_key: the tag's value must be this (e.g. the cluster's name). Unset: any.",
        env="KUBESPOT_LOADBALANCER_TARGET_GROUP_TAG_VALUE",
    )
    classic: bool = setting(
        False,
        doc=(
            "Also deregister the instance from Classic Load Balancers (one DescribeLoadBalancers per "
            "400 load balancers per index rebuild; `--actions classic-loadbalancer` in the policy)."
        ),
        env="KUBESPOT_LOADBALANCER_CLASSIC",
    )
    settle: float = setting(
        5.0,
        doc=(
            "Seconds the drain still holds a target pod after its deregistration started: ALB and "
            "NLB take a few seconds to stop sending new requests to a draining target. Written into "
            "the record, so the drain uses the controller's value wherever it runs."
        ),
        env="KUBESPOT_LOADBALANCER_SETTLE",
        unit="seconds",
    )
    max_delay: float = setting(
        30.0,
        doc=(
            "Longest the deregistration waits for the targets to report draining (and so the "
            "longest the drain holds target pods for it); past it, or past the deadline, the drain "
            "goes ahead and the record says why."
        ),
        env="KUBESPOT_LOADBALANCER_MAX_DELAY",
        unit="seconds",
    )
    index_ttl: float = setting(
        45.0,
        doc=(
            "How long the index of which target groups hold which instance or IP is trusted before "
            "a rebuild (1 DescribeTargetGroups per 400 groups + 1 DescribeTargetHealth per group). "
            "It is built at start-up and kept warm, so a deregistration needs no rebuild; a lookup "
            "that finds nothing rebuilds an index older than 5 s once, to catch new pods."
        ),
        env="KUBESPOT_LOADBALANCER_INDEX_TTL",
        unit="seconds",
    )

    def __post_init__(self) -> None:
        if self.enabled and not self.kinds:
            raise InvalidSetting("kinds", "name at least one event kind, or set loadbalancer.enabled false")
        if self.target_group_tag_value is not None and not self.target_group_tag_key:
            raise InvalidSetting("target_group_tag_value", "needs loadbalancer.target_group_tag_key")
        if self.target_group_tag_key is not None and not self.target_group_tag_key.strip():
            raise InvalidSetting("target_group_tag_key", "must not be blank")
        if self.settle < 0:
            raise InvalidSetting("settle", "must not be negative")
        if self.max_delay < 0:
            raise InvalidSetting("max_delay", "must not be negative")
        if self.index_ttl <= 0:
            raise InvalidSetting("index_ttl", "must be positive")


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadBalancerWaitSettings:
    """The drain waiting for the controller's load-balancer deregistration before evicting target pods."""

    enabled: bool = setting(
        False,
        doc=(
            "The controller deregisters this node's load-balancer targets (its loadbalancer.enabled): "
            "after the fence, the drain waits for the controller's record on the Node "
            "(kubespot.io/actions), evicts at once the pods that are no target, and holds the target "
            "pods until their deregistration started plus its settle time. Bounded by max_delay and "
            "the deadline; past either the drain goes ahead, and says so (log, metric, event). In the "
            "controller, loadbalancer.enabled turns it on by itself."
        ),
        env="KUBESPOT_LOADBALANCER_WAIT_ENABLED",
    )
    max_delay: float = setting(
        30.0,
        doc=(
            "Longest the drain holds pods for deregistration, counted from the fence (waiting for "
            "the record included); also never more than half the time left before the deadline, nor "
            "so long that less than the safety margin plus 30 s would be left for the drain. 30 s is "
            "the controller's own loadbalancer.max_delay."
        ),
        env="KUBESPOT_LOADBALANCER_WAIT_MAX_DELAY",
        unit="seconds",
    )
    kinds: frozenset[Kind] = setting(
        LEAVING_KINDS,
        doc=(
            "Event kinds whose drain waits: those the controller deregisters (its loadbalancer.kinds). "
            "In the controller, with loadbalancer.enabled and this group off, loadbalancer.kinds is used."
        ),
        env="KUBESPOT_LOADBALANCER_WAIT_KINDS",
    )

    def __post_init__(self) -> None:
        if self.max_delay < 0:
            raise InvalidSetting("max_delay", "must not be negative")
        if self.enabled and not self.kinds:
            raise InvalidSetting(
                "kinds", "name at least one event kind, or set loadbalancer_wait.enabled false"
            )

    def applies(self, kind: Kind) -> bool:
        """Whether the drain of an event of ``kind`` waits for deregistration."""
        return self.enabled and kind in self.kinds
