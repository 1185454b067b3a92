"""Which controller classes run for a given configuration."""

from __future__ import annotations

from . import Controller, ControllerConfig
from .cloudnode import CloudNodeController
from .daemonset import DaemonSetController
from .deployment import DeploymentController
from .disruption import DisruptionController
from .garbagecollector import GarbageCollector
from .kubelet import KubeletController
from .namespaces import NamespaceController
from .nodelifecycle import NodeLifecycleController
from .podgc import PodGCController
from .replicaset import ReplicaSetController
from .scheduler import SchedulerController
from .statefulset import StatefulSetController


def enabled(config: ControllerConfig) -> list[type[Controller]]:
    out: list[type[Controller]] = [
        NamespaceController,
        NodeLifecycleController,
        PodGCController,
        CloudNodeController,
        GarbageCollector,
        DisruptionController,
    ]
    if config.workloads:
        out += [DeploymentController, ReplicaSetController, DaemonSetController, StatefulSetController]
    if config.scheduler:
        out.append(SchedulerController)
    if config.kubelet:
        out.append(KubeletController)
    return out
