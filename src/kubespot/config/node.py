"""What the agent does to its own Node when an interruption is signalled: taints, labels, cordon.

Read by ``kubespot.actions.node`` and the response policy; the loader composes this group with the
others. Names and defaults follow aws-node-termination-handler, whose names are accepted as aliases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .base import setting
from .loader import InvalidSetting

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeActionSettings:
    """How the node is taken out of service, and when a rebalance cordon is undone."""

    dry_run: bool = setting(
        False,
        doc=(
            "Log and emit Kubernetes events for what would be done and change nothing, in the "
            "cluster or in AWS. Applies to every action: on an interrupted node taint, cordon, "
            "evict (the drain), webhook and the controller's AWS response actions; Node clean-up; "
            "and, with provisioning.enabled, provisioning: pending pods are batched and simulated, "
            "each NodeClaim that would be created is logged and told as a DryRun event on its "
            "NodePool (counted in kubespot_nodeclaims_created_total with reason dry_run), and no "
            "NodeClaim is created, no instance launched or terminated (no NodeClaim lifecycle; "
            "garbage collection only logs), no EC2NodeClass finalizer added and instance profiles "
            "only read. Default false, as in the reference handler."
        ),
        env="KUBESPOT_NODE_ACTIONS_DRY_RUN",
        nth="DRY_RUN",
        flag="--dry-run",
    )
    cordon_only: bool = setting(
        False,
        doc=(
            "Taint and cordon the node but evict nothing: for clusters where something else (an "
            "operator, the workload itself) moves pods. Default false, as in the reference handler."
        ),
        env="KUBESPOT_NODE_ACTIONS_CORDON_ONLY",
        nth="CORDON_ONLY",
        flag="--cordon-only",
    )
    taint_node: bool = setting(
        False,
        doc=(
            "Also apply the reference handler's taints (aws-node-termination-handler/spot-itn, "
            "/scheduled-maintenance, /asg-lifecycle-termination, /rebalance-recommendation; value = "
            "event id cut to 63 characters), so tolerations and alerts written for it keep matching. "
            "kubespot's own kubespot.io/ taint is applied whatever this says: the taint is what stops "
            "new pods landing on a doomed node between cordon and drain. Default false, as in the "
            "reference handler."
        ),
        env="KUBESPOT_NODE_ACTIONS_TAINT_NODE",
        nth="TAINT_NODE",
    )
    taint_effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = setting(
        "NoSchedule",
        doc=(
            "Effect of the interruption taints: NoSchedule, PreferNoSchedule or NoExecute. NoExecute "
            "makes the kubelet evict every pod not tolerating it at once, bypassing "
            "PodDisruptionBudgets and the deadline-aware drain; keep the default NoSchedule unless "
            "that is what you want. Matched case-insensitively."
        ),
        env="KUBESPOT_NODE_ACTIONS_TAINT_EFFECT",
        nth="TAINT_EFFECT",
    )
    enable_out_of_service_taint: bool = setting(
        False,
        doc=(
            "After the drain, taint the node node.kubernetes.io/out-of-service=nodeshutdown:NoExecute "
            "so Kubernetes force-detaches its volumes and StatefulSet pods restart elsewhere without "
            "waiting for the node to be declared lost. Only for nodes that really stop; default false, "
            "as in the reference handler."
        ),
        env="KUBESPOT_NODE_ACTIONS_ENABLE_OUT_OF_SERVICE_TAINT",
        nth="ENABLE_OUT_OF_SERVICE_TAINT",
    )
    exclude_from_load_balancers: bool = setting(
        False,
        doc=(
            "Label the node node.kubernetes.io/exclude-from-external-load-balancers before draining, "
            "so the cloud controller deregisters it from Service load balancers while its pods still "
            "answer (evicting first is how the reference handler's users get 5xx). Default false, as "
            "in the reference handler."
        ),
        env="KUBESPOT_NODE_ACTIONS_EXCLUDE_FROM_LOAD_BALANCERS",
        nth="EXCLUDE_FROM_LOAD_BALANCERS",
    )
    rebalance_undo_after: float = setting(
        1800.0,
        doc=(
            "Undo the cordon and taints put on for a rebalance recommendation when no interruption "
            "has followed within this time. The reference handler leaves such nodes cordoned for "
            "ever, slowly shrinking the cluster; 30 min is well past the gap usually seen between a "
            "recommendation and the interruption it warns of. 0 never undoes (the reference "
            "handler's behaviour)."
        ),
        env="KUBESPOT_NODE_ACTIONS_REBALANCE_UNDO_AFTER",
        unit="seconds",
    )

    def __post_init__(self) -> None:
        if self.taint_effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise InvalidSetting("taint_effect", "must be NoSchedule, PreferNoSchedule or NoExecute")
        if self.rebalance_undo_after < 0:
            raise InvalidSetting("rebalance_undo_after", "must be 0 (never) or a positive number of seconds")
