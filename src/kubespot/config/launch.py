"""How the provisioner launches capacity (issue 14, docs/designs/launching.md): the cluster the
nodes join, the batching of pending pods, the insufficient-capacity cache and the NodeClaim
lifecycle's timeouts.

Read by ``kubespot.controllers.provisioning`` (batching, NodeClaims), ``kubespot.controllers.nodeclaim``
(lifecycle, garbage collection) and ``kubespot.aws.cloud`` (CreateFleet, launch templates, user
data, the cluster's tags). Karpenter's names for the same knobs (``CLUSTER_NAME``, ``CLUSTER_ENDPOINT``,
``BATCH_IDLE_DURATION``, ``BATCH_MAX_DURATION``) are accepted as aliases with Karpenter's meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import setting
from .loader import InvalidSetting


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchSettings:
    """The cluster new nodes join, and the pace of launching."""

    cluster_name: str = setting(
        "",
        doc=(
            "The EKS cluster's name: tagged on every instance, launch template and volume "
            "(`kubernetes.io/cluster/<name>=owned`, `eks:eks-cluster-name`), used to find this "
            "cluster's instances again after a restart, and written into each node's bootstrap "
            "configuration. Required when provisioning.enabled launches capacity."
        ),
        env="KUBESPOT_CLUSTER_NAME",
        nth="CLUSTER_NAME",
    )
    cluster_endpoint: str = setting(
        "",
        doc=(
            "The API server URL nodes register with. Empty: the endpoint EKS's DescribeCluster "
            "gives for cluster_name, read once at the first launch (IAM eks:DescribeCluster, in "
            "the `launch` group), as Karpenter does."
        ),
        env="KUBESPOT_CLUSTER_ENDPOINT",
        nth="CLUSTER_ENDPOINT",
    )
    cluster_ca_bundle: str = setting(
        "",
        doc=(
            "The cluster's certificate authority, base64 PEM, as EKS's DescribeCluster returns "
            "it, written into the nodes' bootstrap configuration. Empty: DescribeCluster's."
        ),
        env="KUBESPOT_CLUSTER_CA_BUNDLE",
    )
    cluster_cidr: str = setting(
        "",
        doc=(
            "The cluster's service CIDR (e.g. `10.100.0.0/16`). AL2023 nodes need it "
            "(nodeadm's `spec.cluster.cidr`). Empty: DescribeCluster's "
            "kubernetesNetworkConfig; when neither says, an AL2023 launch fails as "
            "NodeClassNotReady, as in Karpenter."
        ),
        env="KUBESPOT_CLUSTER_CIDR",
    )
    batch_idle_duration: float = setting(
        1.0,
        doc=(
            "Pending pods are gathered into one scheduling decision until none has arrived for "
            "this long (Karpenter's BATCH_IDLE_DURATION), so a Deployment scaled by 100 gets one "
            "plan, not 100."
        ),
        env="KUBESPOT_LAUNCH_BATCH_IDLE_DURATION",
        nth="BATCH_IDLE_DURATION",
        unit="seconds",
    )
    batch_max_duration: float = setting(
        10.0,
        doc=(
            "The longest a batch of pending pods waits however often new ones arrive "
            "(Karpenter's BATCH_MAX_DURATION)."
        ),
        env="KUBESPOT_LAUNCH_BATCH_MAX_DURATION",
        nth="BATCH_MAX_DURATION",
        unit="seconds",
    )
    unavailable_offerings_ttl: float = setting(
        180.0,
        doc=(
            "How long a pool (capacity type, instance type, zone) that answered with "
            "insufficient capacity, or whose spot instance got an interruption warning, is left "
            "out of launches. Karpenter's fixed 3 minutes; a setting here because its users ask "
            "for one (aws/karpenter-provider-aws PR #8013)."
        ),
        env="KUBESPOT_LAUNCH_UNAVAILABLE_OFFERINGS_TTL",
        unit="seconds",
    )
    spot_risk_half_life: float = setting(
        3600.0,
        doc=(
            "How fast kubespot forgives a spot pool (instance type, zone) for a reclaim: a pool's "
            "risk score (1 per interruption warning, 0.5 per rebalance recommendation, plus a "
            "quarter of its zone's) halves every this many seconds. Karpenter forgets after 3 "
            "minutes; pools being reclaimed stay risky for longer than that (aws/karpenter-"
            "provider-aws #6425). See docs/designs/launching.md §2."
        ),
        env="KUBESPOT_LAUNCH_SPOT_RISK_HALF_LIFE",
        unit="seconds",
    )
    spot_risk_weight: float = setting(
        0.25,
        doc=(
            "How much dearer one unit of risk makes a spot pool look when launches choose pools: "
            "its price is multiplied by 1 + weight x risk (at most 3 x); a pool whose factor reaches "
            "1.5 is left out while a calmer spot pool remains. 0: order spot pools by price alone "
            "(unavailable pools are still skipped)."
        ),
        env="KUBESPOT_LAUNCH_SPOT_RISK_WEIGHT",
    )
    learn_from_interruptions: bool = setting(
        True,
        doc=(
            "The interruption handler tells the provisioner what it learns (a spot interruption "
            "warning marks its pool unavailable and raises its risk; a rebalance recommendation "
            "raises the risk), and a node fenced by kubespot counts as going away, so its pods get "
            "a replacement before the drain (pre-spin). Off: the two halves share nothing, as "
            "Karpenter and the AWS Node Termination Handler run side by side (only the launches' "
            "own insufficient-capacity errors and NodeClaim deletions are learnt from); the "
            'sandbox\'s "shares nothing" run. See docs/designs/launching.md §2 and §7.'
        ),
        env="KUBESPOT_LAUNCH_LEARN_FROM_INTERRUPTIONS",
    )
    launch_timeout: float = setting(
        300.0,
        doc=(
            "A NodeClaim that has not launched this long after its Launched condition last "
            "changed status (from its first reconcile, while launches fail) is deleted, and its "
            "pods are planned again (Karpenter's 5 minutes, core v1.7+)."
        ),
        env="KUBESPOT_LAUNCH_LAUNCH_TIMEOUT",
        unit="seconds",
    )
    registration_timeout: float = setting(
        900.0,
        doc=(
            "A NodeClaim whose node has not registered this long after its Registered condition "
            "was first set (its first reconcile, as Karpenter counts) is deleted with its "
            "instance (Karpenter's 15 minutes): a node that cannot join (bad user data, no route "
            "to the API server) costs money and serves nothing."
        ),
        env="KUBESPOT_LAUNCH_REGISTRATION_TIMEOUT",
        unit="seconds",
    )
    garbage_collection_interval: float = setting(
        10.0,
        doc=(
            "How often the NodeClaim garbage collector looks for instances without a NodeClaim "
            "and NodeClaims without an instance during its first 20 passes, then every 12 times "
            "as long (aws/karpenter-provider-aws: 10 s, then 2 minutes)."
        ),
        env="KUBESPOT_LAUNCH_GARBAGE_COLLECTION_INTERVAL",
        unit="seconds",
    )
    garbage_collection_min_age: float = setting(
        30.0,
        doc=(
            "An instance of this cluster's NodePools that no NodeClaim names is terminated only "
            "once it was launched this long ago (Karpenter's 30 s), so a launch whose NodeClaim "
            "status is still being written is not taken for an orphan."
        ),
        env="KUBESPOT_LAUNCH_GARBAGE_COLLECTION_MIN_AGE",
        unit="seconds",
    )

    def __post_init__(self) -> None:
        for name in (
            "garbage_collection_interval",
            "batch_idle_duration",
            "batch_max_duration",
            "unavailable_offerings_ttl",
            "launch_timeout",
            "registration_timeout",
            "spot_risk_half_life",
        ):
            if not getattr(self, name) > 0:
                raise InvalidSetting(name, "must be positive")
        if self.garbage_collection_min_age < 0:
            raise InvalidSetting("garbage_collection_min_age", "must not be negative")
        if self.spot_risk_weight < 0:
            raise InvalidSetting("spot_risk_weight", "must not be negative")
        if self.batch_max_duration < self.batch_idle_duration:
            raise InvalidSetting("batch_max_duration", "must be at least batch_idle_duration")
