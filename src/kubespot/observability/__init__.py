"""What the agent tells the outside world about itself: Prometheus metrics, log lines, the health
probe, and the small HTTP server that exposes /metrics and the probe.

Settings come from ``kubespot.config.ObservabilitySettings``; this package imports only config,
model, the standard library, prometheus_client and orjson, because it runs in the per-node agent
(no web framework, no threads).
"""

from __future__ import annotations

from .health import Check, HealthReport, freshness, report, silence
from .logs import bind, configure, current_context, log_context, unbind
from .metrics import METRICS, NODE_PHASES, Metrics, MetricSpec, reference_markdown
from .server import EndpointServer, health_handler, metrics_handler

__all__ = [
    "METRICS",
    "NODE_PHASES",
    "Check",
    "EndpointServer",
    "HealthReport",
    "MetricSpec",
    "Metrics",
    "bind",
    "configure",
    "current_context",
    "freshness",
    "health_handler",
    "log_context",
    "metrics_handler",
    "reference_markdown",
    "report",
    "silence",
    "unbind",
]
