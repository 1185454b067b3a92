"""The controllers a cluster runs, simulated in-process on the store's event stream.

Each controller subscribes to store events (synchronously, so it must only note work) and does its
work in asyncio tasks; it writes through the same ``Store`` the HTTP API uses, so clients see every
change as ordinary watch events. The work loops share the event loop with the HTTP server and yield
to it as the manager's ``Pacer`` says (``pacing.py``): API requests are served first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, ClassVar

from ..resources import ResourceType
from ..store import Store, WatchEvent
from .pacing import DEFAULT_MIN_SHARE, Pacer

log = logging.getLogger("kubespot.sim.kubesim.controllers")


@dataclass(frozen=True)
class ControllerConfig:
    """Timings of the simulated cluster. The node lifecycle, PodGC and registration timings default to
    upstream's (docs/simulators/kubesim.md); tests and the sandbox pass faster ones."""

    #: Seconds from binding until a pod runs and is Ready, unless its annotation says otherwise.
    pod_start_seconds: float = 1.0
    #: Seconds between node lease renewals (the kubelet heartbeat; upstream default 10 s).
    lease_renew_seconds: float = 10.0
    #: Seconds from a Node's creation through the API (its kubelet registering) until its kubelet
    #: reports Ready: before, Ready is False (KubeletNotReady, the CNI plugin not initialized yet).
    #: Nodes loaded at start-up are already running.
    node_ready_seconds: float = 10.0
    #: Seconds the simulated cloud node controller takes to initialize a Node registered by a kubelet
    #: with an external cloud provider (its cloud API calls), then removing the uninitialized taint.
    cloud_node_init_seconds: float = 1.0
    #: Seconds between node status heartbeats (upstream: 10 s when changed, else every 5 min).
    node_status_seconds: float = 60.0
    #: Seconds without a heartbeat before a node's Ready turns Unknown (kube-controller-manager's
    #: --node-monitor-grace-period: 50 s since 1.32, kubernetes/kubernetes#126287; 40 s before).
    node_monitor_grace_seconds: float = 50.0
    #: Nodes a second the node lifecycle controller taints NoExecute (not-ready/unreachable) per zone
    #: (--node-eviction-rate, 0.1).
    node_eviction_rate: float = 0.1
    #: The same in a partially disrupted zone larger than ``large_cluster_size_threshold``
    #: (--secondary-node-eviction-rate, 0.01); a smaller partially disrupted zone is not tainted.
    secondary_node_eviction_rate: float = 0.01
    #: Nodes a zone needs for the secondary rate to apply (--large-cluster-size-threshold, 50).
    large_cluster_size_threshold: int = 50
    #: Share of a zone's nodes (more than 2) not Ready that makes it partially disrupted
    #: (--unhealthy-zone-threshold, 0.55).
    unhealthy_zone_threshold: float = 0.55
    #: Seconds between PodGC sweeps (upstream's ``gcCheckPeriod``, 20 s).
    pod_gc_check_seconds: float = 20.0
    #: Seconds PodGC waits after first seeing a pod's node missing before it checks the node through
    #: the API and deletes the pod (upstream's ``quarantineTime``, 40 s).
    pod_gc_quarantine_seconds: float = 40.0
    #: Terminated pods kept before PodGC deletes the oldest (kube-controller-manager's
    #: --terminated-pod-gc-threshold, 12500); 0 keeps them all.
    terminated_pod_gc_threshold: int = 12500
    #: Seconds a workload/PDB controller waits to batch the events of a burst into one sync per
    #: object (one eviction alone produces about seven events on its ReplicaSet's pods).
    sync_batch_seconds: float = 0.02
    #: Run the scheduler (bind pending pods to nodes that fit).
    scheduler: bool = True
    #: Run the kubelets (pod start, graceful termination, node heartbeat).
    kubelet: bool = True
    #: Run workload controllers (ReplicaSet, Deployment, DaemonSet, StatefulSet) and the GC.
    workloads: bool = True
    #: Serve API requests ahead of the simulated control plane. A real API server does not share a
    #: CPU with the controllers, scheduler and kubelets; here they share one event loop, and without
    #: this a request waits behind a 20 ms slice of every busy controller. On: while requests come,
    #: the controllers' work loops yield after 1 ms and stay away while they are over their share
    #: (``control_plane_share``); their work queues coalesce meanwhile, as a real one does under load.
    api_first: bool = True
    #: The least share of wall time (0-1] the control plane keeps while ``api_first`` lets requests go
    #: first, measured over a ~50 ms window; 0.4 keeps it from falling far behind in a burst (its
    #: work per eviction is several times the API's) while leaving most of the CPU to the requests.
    #: 1.0 means the control plane never waits for the API (the same as ``api_first=False``).
    control_plane_share: float = DEFAULT_MIN_SHARE


class Controller:
    """Base class: holds the store and config, and owns the tasks it starts."""

    name = "controller"
    #: The ``(group, plural)`` keys whose events ``on_event`` needs; None means every event.
    watches: ClassVar[tuple[tuple[str, str], ...] | None] = None

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        self.store = store
        self.config = config
        #: When the work loops yield to API requests; the manager gives all its controllers one.
        self.pacer = pacer_for(config)
        self._tasks: set[asyncio.Task[Any]] = set()

    def rt(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self.store.registry.lookup(group, version, plural)
        assert rt is not None, (group, version, plural)
        return rt

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: task failed", self.name, exc_info=task.exception())

    def on_event(self, ev: WatchEvent) -> None:
        """Called synchronously for every store event; override to note work."""

    def start(self) -> None:
        """Subscribe and start background loops; override and call super()."""
        self.store.add_listener(self.on_event, self.watches)

    async def stop(self) -> None:
        self.store.remove_listener(self.on_event)
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class ControllerManager:
    """Starts and stops the enabled controllers, which share one ``Pacer`` with the HTTP server."""

    def __init__(self, store: Store, config: ControllerConfig) -> None:
        self.store = store
        self.config = config
        self.pacer = pacer_for(config)
        self.controllers: list[Controller] = []

    def start(self) -> None:
        for cls in _enabled(self.config):
            ctrl = cls(self.store, self.config)
            ctrl.pacer = self.pacer
            ctrl.start()
            self.controllers.append(ctrl)

    async def stop(self) -> None:
        for ctrl in reversed(self.controllers):
            await ctrl.stop()
        self.controllers.clear()


def pacer_for(config: ControllerConfig) -> Pacer:
    return Pacer(enabled=config.api_first, min_share=config.control_plane_share)


def _enabled(config: ControllerConfig) -> list[type[Controller]]:
    # Imported here so each controller module can import this package's base class.
    from . import registry

    return registry.enabled(config)
