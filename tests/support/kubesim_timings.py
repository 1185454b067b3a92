"""kubesim's controllers on sub-second timings (scheduler, kubelets, node lifecycle and PodGC running,
workload controllers off), for tests that watch those controllers act through the API."""

from __future__ import annotations

from kubespot.sim.kubesim.controllers import ControllerConfig

FAST_CONTROLLERS = ControllerConfig(
    pod_start_seconds=0.05,
    lease_renew_seconds=0.1,
    node_status_seconds=0.2,
    node_ready_seconds=0.05,
    node_monitor_grace_seconds=0.6,
    pod_gc_check_seconds=0.1,
    pod_gc_quarantine_seconds=0.4,
    node_eviction_rate=20.0,
    secondary_node_eviction_rate=2.0,
    workloads=False,
)
