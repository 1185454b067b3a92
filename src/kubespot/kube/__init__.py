"""The Kubernetes adapter: the only package that imports the client library (lightkube) and the
controller's HTTP stack (aiohttp, see ``transport``).

- ``connect(settings)`` builds a :class:`KubeClient` from a kubeconfig or the in-cluster service
  account; every call it makes is rate-limited (token bucket) and retried on transient failures.
- Typed operations return plain views (:class:`PodView`, :class:`NodeView`) so callers never touch
  lightkube models.
- :class:`EventRecorder` writes core/v1 Events and never raises into its caller.
- :class:`Leases` reads and compare-and-sets coordination.k8s.io Leases (leader election).
"""

from .client import KubeClient, KubeError, ObjectRef, connect, load_config
from .events import EventRecorder
from .leases import LeaseRecord, Leases, LeaseView
from .priority import fencing
from .ratelimit import TokenBucket
from .views import (
    MIRROR_ANNOTATION,
    EvictionOutcome,
    EvictionResult,
    NodeEvent,
    NodeList,
    NodeView,
    PodEvent,
    PodEventType,
    PodList,
    PodView,
    Taint,
)

__all__ = [
    "MIRROR_ANNOTATION",
    "EventRecorder",
    "EvictionOutcome",
    "EvictionResult",
    "KubeClient",
    "KubeError",
    "LeaseRecord",
    "LeaseView",
    "Leases",
    "NodeEvent",
    "NodeList",
    "NodeView",
    "ObjectRef",
    "PodEvent",
    "PodEventType",
    "PodList",
    "PodView",
    "Taint",
    "TokenBucket",
    "connect",
    "fencing",
    "load_config",
]
