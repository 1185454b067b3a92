"""Plain, immutable views of the Kubernetes objects kubespot reads.

The rest of the product sees these instead of the client library's models, so only ``kubespot.kube``
depends on lightkube and callers (and their tests) can build them by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TypedDict

#: Annotation the kubelet puts on the API mirror of a static pod; deleting the mirror does nothing.
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
#: Kubernetes' default terminationGracePeriodSeconds.
DEFAULT_GRACE_SECONDS = 30


@dataclass(frozen=True, slots=True)
class PodView:
    """What the drain engine needs to know about a pod."""

    namespace: str
    name: str
    uid: str
    node_name: str | None = None
    phase: str | None = None
    #: Kind of the owner reference with ``controller: true`` (ReplicaSet, DaemonSet...), None for a bare pod.
    controller_kind: str | None = None
    controller_name: str | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    grace_period_seconds: int = DEFAULT_GRACE_SECONDS
    deletion_timestamp: datetime | None = None
    has_empty_dir: bool = False
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: ``status.podIP`` (None until the kubelet assigned one): what an ``ip`` target group holds.
    ip: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def is_mirror(self) -> bool:
        return MIRROR_ANNOTATION in self.annotations

    @property
    def is_finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def is_terminating(self) -> bool:
        return self.deletion_timestamp is not None


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str | None = None

    def to_dict(self) -> dict[str, str]:
        d = {"key": self.key, "effect": self.effect}
        if self.value is not None:
            d["value"] = self.value
        return d


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node's identity and the fields kubespot writes."""

    name: str
    uid: str = ""
    resource_version: str = ""
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: ``spec.providerID``, e.g. ``aws:///us-east-1a/i-0abc...`` ("" when the cloud has not set it).
    provider_id: str = ""
    #: The Ready condition: True, False, or None when unknown (no status yet, or Unknown).
    ready: bool | None = None
    #: When the Ready condition last changed status (its ``lastTransitionTime``); None without one.
    ready_since: datetime | None = None
    #: The ``InternalIP`` in ``status.addresses`` (None until the kubelet reported it).
    internal_ip: str | None = None

    @property
    def instance_id(self) -> str | None:
        """The EC2 instance id in the providerID, if it is an AWS one."""
        if not self.provider_id.startswith("aws://"):
            return None
        last = self.provider_id.rsplit("/", 1)[-1]
        return last if last.startswith("i-") else None

    def has_taint(self, key: str, effect: str | None = None) -> bool:
        return any(t.key == key and (effect is None or t.effect == effect) for t in self.taints)


@dataclass(frozen=True, slots=True)
class PodList:
    """Pods and the resourceVersion to start a watch from, so no change between the two is missed."""

    pods: tuple[PodView, ...]
    resource_version: str


@dataclass(frozen=True, slots=True)
class NodeList:
    """Nodes and the resourceVersion to start a watch from."""

    nodes: tuple[NodeView, ...]
    resource_version: str


class PodEventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    #: The watch was restarted from a fresh list: ``pods`` is the complete current set, and anything
    #: not in it is gone (a deletion may have happened while the watch was down).
    RESYNC = "RESYNC"


@dataclass(frozen=True, slots=True)
class PodEvent:
    type: PodEventType
    pod: PodView | None = None
    pods: tuple[PodView, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """A change to a node; ``RESYNC`` carries the complete current set in ``nodes``."""

    type: PodEventType
    node: NodeView | None = None
    nodes: tuple[NodeView, ...] = ()


class EvictionOutcome(StrEnum):
    EVICTED = "evicted"
    #: 429 from the eviction itself: a PodDisruptionBudget refuses it now; try again later.
    BLOCKED = "blocked"
    #: 429 from the API server's throttling (API Priority and Fairness, max-in-flight): the eviction
    #: was not looked at; try again after ``retry_after``. Says nothing about any budget.
    THROTTLED = "throttled"
    #: The pod (with that uid) no longer exists.
    NOT_FOUND = "not-found"
    ERROR = "error"


class PodCallOptions(TypedDict, total=False):
    """The options ``evict_pod`` and ``delete_pod`` take alike (``KubeClient`` spells them out, to
    build no dict per call): the pod's uid as a precondition, its grace period, a dry run."""

    uid: str | None
    grace_period_seconds: int | None
    dry_run: bool


@dataclass(frozen=True, slots=True)
class EvictionResult:
    outcome: EvictionOutcome
    code: int = 0
    message: str = ""
    #: Seconds the server suggested waiting (Retry-After), if it did.
    retry_after: float | None = None
